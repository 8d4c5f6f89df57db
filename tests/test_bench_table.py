"""The benchmark's one result table, its JSON, the docs block and the chart.

``scripts/bench.py`` prints every group's rows as one table, writes them as JSON with
``--json`` and regenerates the table of docs/performance.md with ``--update-docs``; these
tests keep that plumbing honest (the docs table must be in exactly the format the script
writes) and never look at a time.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO

SCRIPTS = str(REPO / "scripts")


def _import(name: str) -> ModuleType:
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def benchlib() -> ModuleType:
    return _import("benchlib")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _import("bench")


def _sample_rows(benchlib: ModuleType) -> list[Any]:
    report = benchlib.Report("store")
    report.value("restore log", "10126 events, 50.2 MB")
    report.ratio("durable throughput ÷ group commit", 21.0, 30.0, ">= 0.7x")
    report.ratio("restore ÷ orjson line loop", 1.0, 2.0, ">= 0.65x", baseline_name="a | b")
    report.ratio("Session.append / orjson.dumps", 6.0, 2.0, "<= 2.5x")
    report.ratio("same ÷ linger", 1.0, 3.0, "")
    report.ratio("model work / orjson.dumps", 3.0, 2.0, "append with encoding free")
    report.skipped("live append: DSH ÷ ours", "DSH append", ">= 1.0x", "npm not found on PATH")
    rows: list[Any] = report.rows
    return rows


def _as_shown(rows: list[Any]) -> list[Any]:
    """The rows as a table shows them: ratio values to their two printed decimals."""
    return [replace(row, value=None if row.value is None else round(row.value, 2)) for row in rows]


def test_ratio_rows_name_their_baseline_and_judge_their_target(benchlib: ModuleType) -> None:
    rows = _sample_rows(benchlib)
    by_name = {row.name: row for row in rows}
    durable = by_name["durable throughput ÷ group commit"]
    assert (durable.text, durable.baseline, durable.status) == ("0.70x", "group commit", "met")
    assert by_name["restore ÷ orjson line loop"].status == "not met"
    assert by_name["restore ÷ orjson line loop"].baseline == "a | b"
    append = by_name["Session.append / orjson.dumps"]
    assert (append.baseline, append.status) == ("orjson.dumps", "not met")
    assert by_name["same ÷ linger"].status == "reported"
    assert by_name["model work / orjson.dumps"].status == "reported"
    skipped = by_name["live append: DSH ÷ ours"]
    assert (skipped.kind, skipped.status) == ("skipped", "skipped")
    assert skipped.text == "skipped: npm not found on PATH"
    assert by_name["restore log"].status == ""


def test_targets_are_judged_on_the_value_as_shown(benchlib: ModuleType) -> None:
    # 0.699 is printed as 0.70x: a table must never show "0.70x" beside ">= 0.7x: not met".
    assert benchlib.judge(0.699, ">= 0.7x") == "met"
    assert benchlib.judge(0.694, ">= 0.7x") == "not met"
    assert benchlib.judge(2.5, "≤ 2.5×") == "met"
    assert benchlib.judge(2.51, "<= 2.5x") == "not met"
    assert benchlib.judge(1.0, "target >= 0.5") == "met"
    assert benchlib.judge(1.0, "cost of keeping each line") == "reported"


def test_markdown_table_round_trips(benchlib: ModuleType) -> None:
    rows = _sample_rows(benchlib)
    text = benchlib.render_markdown(rows)
    assert benchlib.parse_markdown(text) == _as_shown(rows)
    assert "| store | durable throughput ÷ group commit | group commit | **0.70x** |" in text
    with pytest.raises(ValueError, match="header"):
        benchlib.parse_markdown("| a | b |\n|---|---|\n")
    with pytest.raises(ValueError, match="cells"):
        benchlib.parse_markdown(text + "| store | two cells |\n")
    with pytest.raises(ValueError, match="status"):
        benchlib.parse_markdown(text.replace("| not met |", "| nearly |", 1))


def test_the_docs_table_is_in_the_format_the_script_writes(
    benchlib: ModuleType, bench: ModuleType
) -> None:
    docs = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    table = bench.extract_docs_table(docs)
    rows = benchlib.parse_markdown(table)
    assert benchlib.render_markdown(rows) == table
    # Regenerating the block from its own rows changes nothing but the note line.
    start = docs.index(bench.TABLE_BEGIN)
    end = docs.index(bench.TABLE_END)
    note = docs[start:end].split("\n")[2]
    assert bench.replace_docs_table(docs, bench.docs_table(rows, note)) == docs
    # Every ratio shown is judged, and every judged ratio shows its baseline.
    for row in rows:
        if row.kind == "ratio" and row.status in {"met", "not met"}:
            assert row.baseline and row.target, row


def test_text_table_has_one_line_per_row_and_aligned_columns(benchlib: ModuleType) -> None:
    rows = _sample_rows(benchlib)
    lines = benchlib.render_text(rows).split("\n")
    assert len(lines) == len(rows) + 2  # header and rule
    assert lines[0].split() == list(benchlib.TABLE_COLUMNS)
    result_ends = {len(line.split("  ")[0]) for line in lines}  # the group column
    assert len(result_ends) == 1


def test_rows_and_series_travel_through_the_rows_file(
    benchlib: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "rows.jsonl"
    monkeypatch.setenv(benchlib.ROWS_ENV, str(target))
    report = benchlib.Report("chart")
    report.ratio("x ÷ y", 1.0, 2.0, ">= 0.5x")
    report.chart("restore-size", "read_log", [(5.0, 0.1), (50.0, 0.6)])
    report.print()  # emits instead of printing when run under bench.py
    rows, series = benchlib.read_emitted(target)
    assert rows == report.rows and series == report.series
    assert benchlib.Row.from_json(rows[0].to_json()) == rows[0]


def test_chart_is_well_formed_svg_with_one_line_per_series(benchlib: ModuleType) -> None:
    series = [
        benchlib.Series("throughput-window", "ours", ((0.0, 20.0), (5.0, 25.5), (50.0, 30.0))),
        benchlib.Series("throughput-window", "limits <naive> & co", ((0.0, 35.0), (50.0, 45.0))),
        benchlib.Series("restore-size", "read_log", ((5.0, 0.06), (50.0, 0.6))),
    ]
    svg = benchlib.render_svg(series)
    root = ElementTree.fromstring(svg)
    namespace = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{namespace}svg"
    assert len(root.findall(f"{namespace}polyline")) == 3
    texts = [element.text for element in root.iter(f"{namespace}text")]
    assert "limits <naive> & co" in texts
    assert "Restore time against log size" in texts


def test_bench_json_and_docs_update_from_a_real_group_run(
    bench: ModuleType, benchlib: ModuleType, tmp_path: Path
) -> None:
    # The dsh group without npm on PATH and with an empty install cache: its peer rows are
    # recorded as skipped, with the installer's one-line reason, and the run still succeeds.
    docs = tmp_path / "performance.md"
    docs.write_text(f"# P\n\n{bench.TABLE_BEGIN}\n\nold\n\n{bench.TABLE_END}\n\ntail\n")
    env = {
        **os.environ,
        "PATH": str(Path(sys.executable).parent),
        "DSH_STORE_UPSTREAM_CACHE": str(tmp_path / "cache"),
        "DSH_BENCH_DOCS": str(docs),
    }
    script = str(REPO / "scripts" / "bench.py")
    done = subprocess.run(
        [sys.executable, script, "dsh", "--quick", "--json", str(tmp_path / "run.json"), "-U"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "skipped: npm not found on PATH" in done.stdout
    document = benchlib.orjson.loads((tmp_path / "run.json").read_bytes())
    statuses = {row["status"] for row in document["rows"]}
    assert statuses == {"skipped"} and len(document["rows"]) == 2
    text = docs.read_text()
    assert text.startswith("# P\n\n") and text.endswith("\n\ntail\n") and "old" not in text
    rows = benchlib.parse_markdown(bench.extract_docs_table(text))
    assert rows == _as_shown([benchlib.Row.from_json(row) for row in document["rows"]])
    # A saved run publishes the same table again without measuring anything.
    again = tmp_path / "again.md"
    again.write_text(f"{bench.TABLE_BEGIN}\n{bench.TABLE_END}\n")
    replay = [sys.executable, script, "all", "--from-json", str(tmp_path / "run.json"), "-U"]
    replayed = subprocess.run(replay, env={**env, "DSH_BENCH_DOCS": str(again)}, check=False)
    assert replayed.returncode == 0
    assert bench.extract_docs_table(again.read_text()) == bench.extract_docs_table(text)
