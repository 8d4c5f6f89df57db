"""Shared helpers for scripts/bench.py groups: the event mix, timing and ratio rows."""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

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


@dataclass
class Report:
    """Rows of ``name, value, unit, target`` printed as one table per group."""

    group: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def ratio(self, name: str, ours: float, baseline: float, target: str) -> float:
        """Record ``ours / baseline`` (both in the same unit) with its target."""
        value = ours / baseline
        self.rows.append((name, f"{value:.2f}x", target))
        return value

    def value(self, name: str, text: str, target: str = "") -> None:
        """Record a plain measured value."""
        self.rows.append((name, text, target))

    def print(self) -> None:
        """Print the table."""
        width = max((len(name) for name, _, _ in self.rows), default=10)
        print(f"\n## {self.group}")
        for name, value, target in self.rows:
            print(f"{name:<{width}}  {value:>12}  {target}")
