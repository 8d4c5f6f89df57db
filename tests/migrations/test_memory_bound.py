"""Peak memory of ``verify`` and ``migrate_file`` of a large format-0 log is about one turn.

A 60 MB format-0 log of bounded turns (2,000 streamed deltas each, in DSH's packed rows)
is verified and migrated in fresh child processes, which report their peak RSS
(``VmHWM``). Both stream (scan, chain, check, write one event at a time), so the peak
must stay far below the file: under 150 MiB, where holding the log's events would take
several times the file size.

``read_log`` keeps every upgraded event, so its peak follows the log; it must hold the
events' lines (about 45 MB here) and not the encoder's buffers they were written into
(several times each line: 224 MiB measured when the events kept them, 65 MiB since).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import bigv0

REPO = Path(__file__).resolve().parents[2]
LOG_BYTES = 60_000_000
BOUND = 150 * 2**20

_CHILD = """
import sys
from pathlib import Path
if sys.argv[1] == "verify":
    from dsh_store.verify import verify_path
    [report] = verify_path(sys.argv[2])
    assert report.classification == "needs-migration", report
elif sys.argv[1] == "read_log":
    from dsh_store.restore import read_log
    restored = read_log(sys.argv[2])
    assert restored.source_version == 0 and restored.events
else:
    from dsh_store.migrate import migrate_file
    assert migrate_file(sys.argv[2], output=sys.argv[3]).status == "migrated"
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(int(hwm.split()[1]) * 1024)
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc"),
]


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("big")
    return bigv0.write(directory / "session.jsonl", LOG_BYTES, chunks=2000, packed=True)


def _peak(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


def test_verify_peaks_at_about_one_turn(big_log: Path) -> None:
    assert big_log.stat().st_size >= LOG_BYTES
    assert _peak("verify", str(big_log)) < BOUND


def test_migrate_file_peaks_at_about_one_turn(big_log: Path) -> None:
    target = big_log.with_name("out.v4.jsonl")
    assert _peak("migrate", str(big_log), str(target)) < BOUND
    assert target.stat().st_size > 0


def test_read_log_holds_the_upgraded_lines_not_the_encoders_buffers(big_log: Path) -> None:
    assert _peak("read_log", str(big_log)) < BOUND
