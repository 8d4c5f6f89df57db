"""Read-path benchmark: LogScanner throughput against a raw orjson line loop, and its RSS.

Called by the store benchmark group (``run(quick)``); also runnable alone:
``python scripts/bench_scan.py [--quick]``. The log is the 50 MB event mix of
``bench/limits.py`` (``write_log``) behind a v4 header line; both loops read the same file
warm from the page cache and discard what they parse.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, Report, median_seconds, peak_rss_kib, write_v4_log

LOG_BYTES = 50_000_000

_IMPORT_ONLY = "import sys\nfrom dsh_store.jsonl.scan import LogScanner"
_SCAN = _IMPORT_ONLY + "\nfor _ in LogScanner(sys.argv[1]).rows():\n    pass"


def write_bench_log(directory: Path) -> Path:
    """Write the 50 MB mix behind a v4 header line; return its path."""
    path = directory / "session.v4.jsonl"
    write_v4_log(path, LOG_BYTES, "bench-scan")
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
