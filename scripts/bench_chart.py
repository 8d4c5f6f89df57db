"""Benchmark group ``chart``: the series behind the charts of docs/performance.md.

- durable throughput at saturation against the batch window: ours (``JsonlStore`` with
  ``window_s``, one producer appending for a fixed time, then a flush) and limits.py's
  linger writer with the same window, each pair run alternately;
- restore time against log size: ``read_log`` and the bare ``orjson.loads`` line loop on
  limits.py logs of several sizes behind a v4 header, each pair run alternately.

Run with ``python scripts/bench.py chart [--update-docs]``; nothing here asserts a time.
"""

from __future__ import annotations

import functools
import gc
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store
from benchlib import REPO, Report, load_limits, write_v4_log

WINDOWS_MS = (0.0, 1.0, 5.0, 20.0, 50.0, 100.0)
SIZES_MB = (5, 10, 25, 50, 100)
QUICK_SIZES_MB = (2, 5, 10, 20)


def run(quick: bool) -> None:
    """Measure both charts' series and record them (and their end points as values)."""
    limits = load_limits()
    runs = 3 if quick else 5
    seconds = 0.3 if quick else 1.0
    report = Report("chart")
    events = limits.make_mix(100)
    # The store group's long mix: an idle machine must not exhaust it within a run.
    long_mix = limits.make_mix((bench_store.QUICK if quick else bench_store.FULL).saturation_turns)
    ours: list[tuple[float, float]] = []
    linger: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-chart-", dir=REPO) as name:
        scratch = Path(name)
        gc.freeze()  # as in the store group: the static mixes stay out of the collector
        try:
            for window in WINDOWS_MS:
                mine, theirs = bench_store._paired_medians(
                    runs,
                    functools.partial(
                        bench_store.store_saturation,
                        long_mix,
                        scratch / f"sat-{window}",
                        seconds=seconds,
                        window_s=window / 1e3,
                    ),
                    functools.partial(
                        bench_store.baseline_linger,
                        limits,
                        events,
                        scratch / f"linger-{window}.log",
                        seconds,
                        window / 1e3,
                    ),
                )
                ours.append((window, mine / 1e3))
                linger.append((window, theirs / 1e3))
        finally:
            gc.unfreeze()
        report.chart("throughput-window", "dsh-store JsonlStore(window_s)", ours)
        report.chart("throughput-window", "limits.py linger writer (naive)", linger)
        restore: list[tuple[float, float]] = []
        loads: list[tuple[float, float]] = []
        for size in QUICK_SIZES_MB if quick else SIZES_MB:
            log = scratch / f"restore-{size}" / "session.v4.jsonl"
            log.parent.mkdir()
            _, actual = write_v4_log(log, size * 1_000_000, "bench-chart")
            mine, theirs = bench_store._paired_medians(
                runs,
                functools.partial(bench_store.store_restore, log),
                functools.partial(bench_store.baseline_load_lines, log),
            )
            restore.append((actual / 1e6, mine))
            loads.append((actual / 1e6, theirs))
            log.unlink()
        report.chart("restore-size", "dsh-store read_log", restore)
        report.chart("restore-size", "orjson.loads line loop (naive)", loads)
    for (window, mine), (_, theirs) in zip(ours, linger, strict=True):
        report.value(
            f"throughput, {window:g} ms window: ours / linger",
            f"{mine:.1f}k / {theirs:.1f}k ev/s",
        )
    for (megabytes, mine), (_, theirs) in zip(restore, loads, strict=True):
        report.value(
            f"restore {megabytes:.0f} MB: read_log / orjson loop", f"{mine:.2f} / {theirs:.2f} s"
        )
    report.print()


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
