"""Migration benchmark: v0 -> v4 throughput against plain parse + dump, and peak RSS.

Group ``migrate`` of ``scripts/bench.py`` (``run(quick)``); also runnable alone:
``python scripts/bench_migrate.py [--quick]``. The input is a generated, valid format-0
log (complete turns with streamed answers of 40 chunks each, tens of MB; quick mode is
smaller). The baseline is the cheapest possible rewrite of the same file in the same run:
``orjson.loads`` + ``orjson.dumps`` per line. The migration is the real publish path
(scan, four edges, per-event v4 validation, temp write, fsync, full streaming
re-verification, link). The source scan and the re-verification are also timed alone:
they bound what the edges can gain. Its peak RSS is measured in a child process.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, Report, median_seconds

sys.path.insert(0, str(REPO))

from tests.migrations import bigv0

FULL_BYTES = 40_000_000
QUICK_BYTES = 8_000_000

_CHILD = (
    "import sys\n"
    "from dsh_store.migrate import migrate_file\n"
    "migrate_file(sys.argv[1], output=sys.argv[2])\n"
)


def parse_and_dump(source: Path, target: Path) -> None:
    """The baseline: read every line, ``orjson.loads`` it, ``orjson.dumps`` it, write it."""
    loads, dumps = orjson.loads, orjson.dumps
    with open(source, "rb") as lines, open(target, "wb") as out:
        for line in lines:
            out.write(dumps(loads(line)) + b"\n")


def migrate_once(source: Path, target: Path) -> None:
    """One real migration to ``target`` (removed first so every run publishes)."""
    from dsh_store.migrate import migrate_file

    if target.exists():
        target.unlink()
    migrate_file(source, output=target)


def scan_source(source: Path) -> None:
    """Only the committed-region scan of the source, as the migration does it."""
    from dsh_store.jsonl.scan import LogScanner

    LogScanner(source, chunk_size=1 << 18).exhaust()


def verify_written(target: Path) -> None:
    """Only the streaming re-verification of a published v4 log."""
    from dsh_store.migrate import verify_published

    verify_published(target)


def child_peak_rss(source: Path, target: Path) -> int:
    """Peak RSS in bytes of a child process that runs one migration."""
    if target.exists():
        target.unlink()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", _CHILD, str(source), str(target)], check=True, env=env)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux


def run(quick: bool) -> None:
    """Measure and print the migrate group table."""
    report = Report("migrate")
    repeats = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as scratch:
        directory = Path(scratch)
        source = bigv0.write(directory / "session.jsonl", QUICK_BYTES if quick else FULL_BYTES)
        size = source.stat().st_size
        baseline = median_seconds(
            lambda: parse_and_dump(source, directory / "dump.jsonl"), repeats=repeats
        )
        start = time.perf_counter()
        migrate_once(source, directory / "out.v4.jsonl")
        first = time.perf_counter() - start
        ours = (
            first
            if quick
            else median_seconds(lambda: migrate_once(source, directory / "out.v4.jsonl"), 2)
        )
        with open(directory / "out.v4.jsonl", "rb") as written:
            events = sum(1 for _ in written) - 1
        report.value("v0 log size", f"{size / 1e6:.1f} MB")
        report.value("v4 events written", f"{events}")
        report.value("parse+dump throughput", f"{size / baseline / 1e6:.1f} MB/s")
        report.value("migration throughput", f"{size / ours / 1e6:.1f} MB/s")
        report.ratio("migration / parse+dump speed", baseline, ours, "target >= 0.5")
        # Two parts of the migration that no edge can speed up: reading the source under the
        # committed-region rule, and reading the written log back through the v4 model.
        scan = median_seconds(lambda: scan_source(source), repeats=repeats)
        verify = median_seconds(lambda: verify_written(directory / "out.v4.jsonl"), repeats)
        report.value("  source scan alone", f"{scan * 1e3:.0f} ms", f"{scan / ours:.0%} of it")
        report.value(
            "  re-verification alone", f"{verify * 1e3:.0f} ms", f"{verify / ours:.0%} of it"
        )
        peak = child_peak_rss(source, directory / "rss.v4.jsonl")
        report.value("migration peak RSS", f"{peak / 1e6:.1f} MB", f"file is {size / 1e6:.1f} MB")
    report.print()


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
