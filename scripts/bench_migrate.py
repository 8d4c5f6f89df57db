"""Migration benchmark: v0 -> v4 throughput against plain parse + dump, and peak RSS.

Group ``migrate`` of ``scripts/bench.py`` (``run(quick)``); also runnable alone:
``python scripts/bench_migrate.py [--quick] [--peer-only]``. The input is a generated,
valid format-0 log (complete turns with streamed answers of 40 chunks each, tens of MB;
quick mode is smaller). The baseline is the cheapest possible rewrite of the same file in
the same run: ``orjson.loads`` + ``orjson.dumps`` per line. The migration is the real publish path
(scan, four edges, per-event v4 validation and every model rule, temp write, fsync,
read-back by digest, link). The source scan is also timed alone: it bounds what the edges
can gain; so is a full v4 re-parse of the written log, which a raw publish no longer pays
(a zstd one does). Its peak RSS is measured in a child process.

The peer rows (``bench_peer``) time ``read_log``, ``verify_path`` and ``migrate_file`` of a
format-0 log written by DSH rc.8's own backend against DSH's own ``load`` of the same file,
in the same run; each of ours runs in a fresh child process that reports its time and its
peak RSS (``VmHWM``). They are marked skipped when the upstream cannot be installed.
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
    """Only a full streaming re-parse of a published v4 log (``verify_published``)."""
    from dsh_store.migrate import verify_published

    verify_published(target)


def child_peak_rss(source: Path, target: Path) -> int:
    """Peak RSS in bytes of a child process that runs one migration."""
    if target.exists():
        target.unlink()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", _CHILD, str(source), str(target)], check=True, env=env)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux


PEER_TURNS = 1100  # about 57 MB, 1.2 M events
QUICK_PEER_TURNS = 150

_TIMED_CHILD = """
import sys, time
from pathlib import Path
op, source, target = sys.argv[1:4]
if op == "read_log":
    from dsh_store.restore import read_log
    start = time.perf_counter()
    read_log(source)
elif op == "verify":
    from dsh_store.verify import verify_path
    start = time.perf_counter()
    [report] = verify_path(source)
    assert report.events, report
else:
    from dsh_store.migrate import migrate_file
    Path(target).unlink(missing_ok=True)
    start = time.perf_counter()
    migrate_file(source, output=target)
elapsed = time.perf_counter() - start
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(elapsed, int(hwm.split()[1]) * 1024)
"""


def timed_child(op: str, source: Path, target: Path) -> tuple[float, int]:
    """Seconds of one ``op`` of ours in a fresh interpreter, and that process's peak RSS."""
    done = subprocess.run(
        [sys.executable, "-c", _TIMED_CHILD, op, str(source), str(target)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        capture_output=True,
        text=True,
    )
    seconds, peak = done.stdout.split()[-2:]
    return float(seconds), int(peak)


def run_peer(report: Report, quick: bool, scratch: Path) -> None:
    """The peer rows: ours against DSH rc.8's ``load`` of a log DSH wrote, same run."""
    import statistics

    import bench_peer

    try:
        upstream, log = bench_peer.peer_log(QUICK_PEER_TURNS if quick else PEER_TURNS)
    except bench_peer.UpstreamUnavailable as error:
        report.value("peer rows (DSH rc.8 load)", "skipped", error.reason)
        return
    repeats = 1 if quick else 3
    size = log.path.stat().st_size
    report.value("DSH-written format-0 log", f"{size / 1e6:.1f} MB")
    # Each of ours alternates with one DSH load in a fresh node process (theirs, ours,
    # theirs, ours, ...), so both sides see the same machine load; medians of each side.
    for op in ("read_log", "verify", "migrate_file"):
        theirs: list[float] = []
        ours: list[tuple[float, int]] = []
        their_peak = events = 0
        for _ in range(repeats):
            seconds, events, peak = bench_peer.dsh_load(upstream, log, 1)
            theirs.append(seconds[0])
            their_peak = max(their_peak, peak)
            ours.append(timed_child(op, log.path, scratch / "peer.v4.jsonl"))
        load = statistics.median(theirs)
        mine = statistics.median(seconds for seconds, _ in ours)
        peak = max(peak for _, peak in ours)
        report.value(
            f"  DSH rc.8 load ({events} events)",
            f"{load:.2f} s",
            f"peak RSS {their_peak / 2**20:.0f} MiB",
        )
        report.value(f"  {op}", f"{mine:.2f} s", f"peak RSS {peak / 2**20:.0f} MiB")
        report.ratio(f"{op} speed ÷ DSH load", load, mine, "target >= 1.0x")


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
        # What no edge can speed up: reading the source under the committed-region rule;
        # and, for scale, the full v4 re-parse of the written log a raw publish now skips.
        scan = median_seconds(lambda: scan_source(source), repeats=repeats)
        verify = median_seconds(lambda: verify_written(directory / "out.v4.jsonl"), repeats)
        report.value("  source scan alone", f"{scan * 1e3:.0f} ms", f"{scan / ours:.0%} of it")
        report.value(
            "  full v4 re-parse (not in it)", f"{verify * 1e3:.0f} ms", f"{verify / ours:.0%} of it"
        )
        peak = child_peak_rss(source, directory / "rss.v4.jsonl")
        report.value("migration peak RSS", f"{peak / 1e6:.1f} MB", f"file is {size / 1e6:.1f} MB")
        run_peer(report, quick, directory)
    report.print()


def run_peer_only(quick: bool) -> None:
    """Only the peer rows (``python scripts/bench_migrate.py --peer-only [--quick]``)."""
    report = Report("migrate (peer rows)")
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as scratch:
        run_peer(report, quick, Path(scratch))
    report.print()


if __name__ == "__main__":
    if "--peer-only" in sys.argv[1:]:
        run_peer_only(quick="--quick" in sys.argv[1:])
    else:
        run(quick="--quick" in sys.argv[1:])
