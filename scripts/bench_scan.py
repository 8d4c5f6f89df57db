"""Read-path benchmark: LogScanner throughput against a raw orjson line loop, and its RSS.

Called by the store benchmark group (``run(quick)``); also runnable alone:
``python scripts/bench_scan.py [--quick]``. The log is the 50 MB event mix of
``bench/limits.py`` (``write_log``) behind a v4 header line; both loops read the same file
warm from the page cache and discard what they parse.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, Report, load_limits, median_seconds

LOG_BYTES = 50_000_000

_HEADER = {
    "type": "session",
    "version": 4,
    "id": "bench-scan",
    "createdAt": 1_760_000_000_000,
    "isSeeded": False,
    "delegationDepth": 0,
}

_RSS_CHILD = """
import resource, sys
{work}
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
_IMPORT_ONLY = "from dsh_store.jsonl.scan import LogScanner"
_SCAN = _IMPORT_ONLY + "\nfor _ in LogScanner(sys.argv[1]).rows():\n    pass"


def write_bench_log(directory: Path) -> Path:
    """Write the 50 MB mix behind a v4 header line; return its path."""
    body = directory / "body.jsonl"
    load_limits().write_log(str(body), LOG_BYTES)
    path = directory / "session.v4.jsonl"
    with open(path, "wb") as out, open(body, "rb") as source:
        out.write(orjson.dumps(_HEADER) + b"\n")
        while block := source.read(1 << 20):
            out.write(block)
    body.unlink()
    return path


def raw_line_loop(path: Path) -> None:
    """The baseline: ``for line in file: orjson.loads(line)``."""
    loads = orjson.loads
    with open(path, "rb") as source:
        for line in source:
            loads(line)


def scanner_loop(path: Path) -> None:
    """Our restore's physical layer: every committed row, discarded."""
    from dsh_store.jsonl.scan import LogScanner

    for _ in LogScanner(path).rows():
        pass


def peak_rss_kib(work: str, path: Path) -> int:
    """Peak RSS (KiB, Linux ``ru_maxrss``) of a fresh interpreter running ``work``."""
    result = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD.format(work=work), str(path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        capture_output=True,
        text=True,
    )
    return int(result.stdout.split()[-1])


def run(quick: bool) -> None:
    """Measure and print the scan table (no timing is asserted anywhere)."""
    report = Report("scan (read path)")
    repeats = 1 if quick else 5
    with tempfile.TemporaryDirectory(dir=REPO) as scratch:
        path = write_bench_log(Path(scratch))
        size = path.stat().st_size
        raw = median_seconds(lambda: raw_line_loop(path), repeats)
        ours = median_seconds(lambda: scanner_loop(path), repeats)
        report.value("log size", f"{size / 1e6:.1f} MB")
        report.value("orjson line loop", f"{size / raw / 1e6:.0f} MB/s")
        report.value("LogScanner.rows()", f"{size / ours / 1e6:.0f} MB/s")
        report.ratio("scan ÷ raw orjson line loop", size / ours, size / raw, ">= 0.70x")
        base = peak_rss_kib(_IMPORT_ONLY, path)
        scanned = peak_rss_kib(_SCAN, path)
        report.value("peak RSS, import only", f"{base / 1024:.1f} MiB")
        report.value("peak RSS, full scan", f"{scanned / 1024:.1f} MiB")
        report.value(
            "scan RSS growth ÷ file size", f"{(scanned - base) * 1024 / size:.3f}", "far below 1"
        )
    report.print()


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
