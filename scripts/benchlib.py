"""Shared helpers for scripts/bench.py groups: the event mix, timing and ratio rows."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from xml.sax.saxutils import escape

import orjson

REPO = Path(__file__).resolve().parent.parent
LIMITS_PATH = REPO.parent / "shared" / "bench" / "limits.py"


def load_limits() -> ModuleType:
    """Import ``../shared/bench/limits.py`` (the baselines and the realistic event mix)."""
    spec = importlib.util.spec_from_file_location("dsh_bench_limits", LIMITS_PATH)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {LIMITS_PATH}; run from a checkout beside shared/")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def event_mix(turns: int = 100, seed: int = 1) -> list[dict[str, Any]]:
    """The realistic v4 event mix of limits.py (100 turns ~ 2,000 events, ~5 KB average)."""
    mix: list[dict[str, Any]] = load_limits().make_mix(turns, seed)
    return mix


def median_seconds(run: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of ``repeats`` calls of ``run`` (one warm-up call first)."""
    run()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def alternating_medians(works: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median wall time of each work, all run in turn ``repeats`` times (one warm-up round).

    Round-robin order keeps load drift on a shared machine out of the ratios between them.
    """
    for work in works.values():
        work()
    samples: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(repeats):
        for name, work in works.items():
            start = time.perf_counter()
            work()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def append_mix_event(target: Any, event: dict[str, Any]) -> Any:
    """Append one mix event to a LiveSession or a bare Session; return the SessionEvent."""
    return target.append(
        event["type"],
        event["data"],
        surface_op=event.get("surfaceOp"),
        source_event_seqs=event.get("sourceEventSeqs"),
    )


def saturation_run(
    live: Any, events: Sequence[dict[str, Any]], seconds: float | None
) -> tuple[int, float]:
    """``(events appended, seconds)`` of one producer appending to ``live`` as fast as it can
    for ``seconds`` (None: no limit) or until ``events`` run out, then one flush: the clock
    stops when every event is durable. Closes ``live``."""
    count = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds if seconds is not None else float("inf")
        for event in events:
            append_mix_event(live, event)
            count += 1
            if count % 64 == 0 and time.perf_counter() >= deadline:
                break
        live.flush()
        elapsed = time.perf_counter() - start
    finally:
        live.close()
    return count, elapsed


def flush_each_rate(live: Any, events: Sequence[dict[str, Any]], seconds: float) -> float:
    """Events/s of append + flush per event on ``live`` (each durable before the next).

    Stops after ``seconds`` or at the end of ``events``, whichever comes first; closes ``live``.
    """
    count = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        for event in events:
            append_mix_event(live, event)
            live.flush()
            count += 1
            now = time.perf_counter()
            if now >= deadline:
                break
    finally:
        live.close()
    return count / (now - start)


def write_v4_log(path: Path, target_bytes: int, session_id: str) -> tuple[int, int]:
    """Write limits.py's ``write_log`` output behind a v4 header line; return (events, bytes).

    ``write_log`` emits events from seq 0 without a header line, so on its own the file is
    not a session; with the header it is a valid v4 log (callers check that).
    """
    header = {
        "type": "session",
        "version": 4,
        "id": session_id,
        "createdAt": 1_760_000_000_000,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    body = path.with_name(path.name + ".body")
    count, _ = load_limits().write_log(str(body), target_bytes)
    with open(path, "wb") as out, open(body, "rb") as source:
        out.write(orjson.dumps(header) + b"\n")
        while block := source.read(1 << 20):
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    body.unlink()
    return count, path.stat().st_size


# A fresh interpreter runs ``work`` in a grandchild and reports that grandchild's peak RSS
# through RUSAGE_CHILDREN, so nothing else the measuring process spawned can leak in.
_RSS_PARENT = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_rss_kib(work: str, path: Path) -> int:
    """Peak RSS (KiB, Linux ``ru_maxrss``) of a fresh interpreter running the code ``work``
    with ``path`` as ``sys.argv[1]``."""
    result = subprocess.run(
        [sys.executable, "-c", _RSS_PARENT, work, str(path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        capture_output=True,
        text=True,
    )
    return int(result.stdout.split()[-1])


# -- the result table ----------------------------------------------------------------------
# Every group records its rows in a Report. Run through ``scripts/bench.py`` (which sets
# ROWS_ENV), a group's rows are written as JSON for the parent, which prints them as the
# one table of the run, writes ``--json`` and regenerates docs/performance.md; run alone,
# a group prints its own rows in the same table format.

ROWS_ENV = "DSH_BENCH_ROWS"
"""Set by scripts/bench.py: the JSON file a group's :meth:`Report.emit` appends to."""

_TARGET = re.compile(r"(>=|<=|≥|≤)\s*([0-9]+(?:\.[0-9]+)?)")
STATUSES = ("met", "not met", "reported", "skipped", "")


def parse_target(target: str) -> tuple[str, float] | None:
    """``(">=" or "<=", bound)`` of a target such as ``">= 0.7x"``; None when it has none."""
    match = _TARGET.search(target)
    if match is None:
        return None
    op = {"≥": ">=", "≤": "<="}.get(match.group(1), match.group(1))
    return op, float(match.group(2))


def judge(value: float, target: str) -> str:
    """``met``/``not met`` against ``target`` (on the value as shown), else ``reported``."""
    bound = parse_target(target)
    if bound is None:
        return "reported"
    shown = round(value, 2)
    return "met" if (shown >= bound[1] if bound[0] == ">=" else shown <= bound[1]) else "not met"


@dataclass(frozen=True)
class Row:
    """One line of the result table.

    ``kind`` is ``ratio`` (``value`` holds ours ÷ ``baseline``), ``value`` (a measurement
    shown as ``text``) or ``skipped`` (``text`` says why). ``status`` is ``met``,
    ``not met`` or ``reported`` for a ratio, ``skipped`` for a skipped one, empty for a value.
    """

    group: str
    name: str
    kind: str
    text: str
    baseline: str = ""
    target: str = ""
    status: str = ""
    value: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object (the ``--json`` file holds a list of them)."""
        return {
            "group": self.group,
            "name": self.name,
            "kind": self.kind,
            "text": self.text,
            "baseline": self.baseline,
            "target": self.target,
            "status": self.status,
            "value": self.value,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Row:
        """The row written by :meth:`to_json`."""
        return cls(**{name: obj[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Series:
    """One line of a chart: ``(x, y)`` points of a measurement against a parameter."""

    chart: str  # which chart it belongs to, e.g. "throughput-window"
    label: str
    points: tuple[tuple[float, float], ...]

    def to_json(self) -> dict[str, Any]:
        """The series as a JSON object."""
        return {"chart": self.chart, "label": self.label, "points": [list(p) for p in self.points]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Series:
        """The series written by :meth:`to_json`."""
        points = tuple((float(x), float(y)) for x, y in obj["points"])
        return cls(obj["chart"], obj["label"], points)


@dataclass
class Report:
    """The rows (and chart series) of one benchmark group.

    A module plugs a row in with one call: :meth:`ratio` for a ratio with its baseline
    and target, :meth:`value` for a measurement, :meth:`skipped` for a row that could not
    run here (e.g. a peer row without npm). :meth:`print` ends the group.
    """

    group: str
    rows: list[Row] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)

    def ratio(
        self, name: str, ours: float, baseline: float, target: str, *, baseline_name: str = ""
    ) -> float:
        """Record ``ours / baseline`` (both in the same unit, larger meaning what the target
        means) with its target (``">= 0.7x"``, ``"<= 2.5x"``, or any text: reported).

        ``baseline_name`` names the baseline; by default the part of ``name`` after its
        ``÷`` or ``/``.
        """
        value = ours / baseline
        if not baseline_name:
            for mark in (" ÷ ", " / "):
                if mark in name:
                    baseline_name = name.split(mark, 1)[1].strip()
                    break
        status = judge(value, target)
        text = f"{value:.2f}x"
        self.rows.append(
            Row(self.group, name.strip(), "ratio", text, baseline_name, target, status, value)
        )
        return value

    def value(self, name: str, text: str, target: str = "") -> None:
        """Record a plain measured value (``target`` is shown beside it, not judged)."""
        self.rows.append(Row(self.group, name.strip(), "value", text, target=target))

    def skipped(self, name: str, baseline_name: str, target: str, reason: str) -> None:
        """Record a ratio that could not be measured here, with the one-line reason."""
        self.rows.append(
            Row(self.group, name, "skipped", f"skipped: {reason}", baseline_name, target, "skipped")
        )

    def chart(self, chart: str, label: str, points: list[tuple[float, float]]) -> None:
        """Record one line of a chart of docs/performance.md."""
        self.series.append(Series(chart, label, tuple(points)))

    def emit(self) -> bool:
        """Append the rows and series to the file named by ``$DSH_BENCH_ROWS``, if set."""
        target = os.environ.get(ROWS_ENV)
        if not target:
            return False
        with open(target, "ab") as out:
            for row in self.rows:
                out.write(orjson.dumps({"row": row.to_json()}, option=orjson.OPT_APPEND_NEWLINE))
            for line in self.series:
                out.write(
                    orjson.dumps({"series": line.to_json()}, option=orjson.OPT_APPEND_NEWLINE)
                )
        return True

    def print(self) -> None:
        """Hand the rows to scripts/bench.py, or print them when the group runs alone."""
        if not self.emit():
            print(render_text(self.rows))


def read_emitted(path: Path) -> tuple[list[Row], list[Series]]:
    """The rows and series that groups emitted to ``path``."""
    rows: list[Row] = []
    series: list[Series] = []
    with open(path, "rb") as source:
        for line in source:
            obj = orjson.loads(line)
            if "row" in obj:
                rows.append(Row.from_json(obj["row"]))
            else:
                series.append(Series.from_json(obj["series"]))
    return rows, series


TABLE_COLUMNS = ("group", "measurement", "baseline", "result", "target", "status")


def _cells(row: Row) -> tuple[str, str, str, str, str, str]:
    return (row.group, row.name, row.baseline, row.text, row.target, row.status)


def render_text(rows: list[Row]) -> str:
    """The plain-text table printed at the end of a run."""
    table = [TABLE_COLUMNS, *(_cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(TABLE_COLUMNS))]
    out = []
    for index, line in enumerate(table):
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=True)]
        cells[3] = line[3].rjust(widths[3])
        out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def render_markdown(rows: list[Row]) -> str:
    """The same table in Markdown, as docs/performance.md shows it."""
    out = [
        "| " + " | ".join(TABLE_COLUMNS) + " |",
        "|---|---|---|---:|---|---|",
    ]
    for row in rows:
        cells = [_escape(cell) for cell in _cells(row)]
        if row.kind == "ratio":
            cells[3] = f"**{cells[3]}**"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def parse_markdown(text: str) -> list[Row]:
    """The rows of a table written by :func:`render_markdown` (kind and text restored)."""
    lines = text.strip("\n").split("\n")
    if len(lines) < 2 or lines[0] != "| " + " | ".join(TABLE_COLUMNS) + " |":
        raise ValueError("not a benchmark table: the header line differs")
    rows = []
    for line in lines[2:]:
        if not (line.startswith("| ") and line.endswith(" |")):
            raise ValueError(f"not a table row: {line!r}")
        cells = [cell.replace("\\|", "|") for cell in re.split(r"(?<!\\) \| ", line[2:-2])]
        if len(cells) != len(TABLE_COLUMNS):
            raise ValueError(f"row has {len(cells)} cells, not {len(TABLE_COLUMNS)}: {line!r}")
        group, name, baseline, text, target, status = cells
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}: {line!r}")
        kind, value = "value", None
        if text.startswith("**") and text.endswith("x**"):
            kind, text = "ratio", text[2:-2]
            value = float(text[:-1])
        elif status == "skipped":
            kind = "skipped"
        rows.append(Row(group, name, kind, text, baseline, target, status, value))
    return rows


# -- the chart -----------------------------------------------------------------------------

CHARTS: dict[str, tuple[str, str, str]] = {
    "throughput-window": (
        "Durable throughput against batch window",
        "batch window (ms)",
        "k events/s",
    ),
    "restore-size": ("Restore time against log size", "log size (MB)", "seconds"),
}
"""The charts of docs/performance.md: id -> (title, x axis, y axis)."""

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
_PANEL_W, _PANEL_H, _MARGIN = 420, 300, 56


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _fmt(value: float) -> str:
    return f"{value:g}" if value < 1000 else f"{value:,.0f}"


def _panel(index: int, chart: str, lines: list[Series]) -> list[str]:
    title, x_label, y_label = CHARTS.get(chart, (chart, "x", "y"))
    left = index * (_PANEL_W + _MARGIN) + _MARGIN
    top, width, height = 40, _PANEL_W - _MARGIN, _PANEL_H - 90
    xs = [x for line in lines for x, _ in line.points] or [1.0]
    ys = [y for line in lines for _, y in line.points] or [1.0]
    x_max, y_max = _nice_max(max(xs)), _nice_max(max(ys))

    def px(x: float) -> float:
        return left + width * x / x_max

    def py(y: float) -> float:
        return top + height - height * y / y_max

    out = [
        f'<text x="{left + width / 2:.0f}" y="22" text-anchor="middle" '
        f'font-weight="bold">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#888"/>',
    ]
    for tick in range(5):
        x_value, y_value = x_max * tick / 4, y_max * tick / 4
        out.append(
            f'<text x="{px(x_value):.1f}" y="{top + height + 16}" text-anchor="middle">'
            f"{_fmt(x_value)}</text>"
        )
        out.append(
            f'<text x="{left - 6}" y="{py(y_value) + 4:.1f}" text-anchor="end">'
            f"{_fmt(y_value)}</text>"
        )
        if 0 < tick < 4:
            out.append(
                f'<line x1="{left}" x2="{left + width}" y1="{py(y_value):.1f}" '
                f'y2="{py(y_value):.1f}" stroke="#ddd"/>'
            )
    out.append(
        f'<text x="{left + width / 2:.0f}" y="{top + height + 34}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    out.append(
        f'<text transform="translate({left - 42},{top + height / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for number, line in enumerate(lines):
        colour = _COLOURS[number % len(_COLOURS)]
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line.points)
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.extend(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>'
            for x, y in line.points
        )
        legend_y = top + height + 52 + 16 * number
        out.append(
            f'<line x1="{left}" x2="{left + 18}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + 24}" y="{legend_y}">{escape(line.label)}</text>')
    return out


def render_svg(series: list[Series]) -> str:
    """A self-contained SVG of every chart in ``series``, side by side (no plotting library)."""
    charts = list(dict.fromkeys(line.chart for line in series))
    legend_rows = max((sum(1 for s in series if s.chart == c) for c in charts), default=0)
    width = len(charts) * (_PANEL_W + _MARGIN) + _MARGIN
    height = _PANEL_H - 90 + 40 + 44 + 16 * legend_rows + 8  # plot, title, axis, legend
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for index, chart in enumerate(charts):
        body.extend(_panel(index, chart, [line for line in series if line.chart == chart]))
    body.append("</svg>")
    return "\n".join(body) + "\n"
