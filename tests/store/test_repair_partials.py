"""A repair's ``<log>.torn-<offset>.partial`` scratch copy: removed when the repair fails,
reported by verify and deleted by repair (age and lock rules of leftover temps) otherwise.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_store.bulk import repair_paths
from dsh_store.cli import main
from dsh_store.errors import SessionLockedError
from dsh_store.jsonl import layout
from dsh_store.jsonl.repair import sidecar_path
from dsh_store.repair import TEMP_GRACE_S, repair_file
from dsh_store.store import JsonlStore
from dsh_store.verify import counts_as_failure, orphan_temp_finding, verify_paths, verify_tree
from tests.cli.conftest import record_session

REPO = Path(__file__).resolve().parents[2]
HOUR = 3600.0
TORN = b'{"type":"turn/start","seq":11,"time":1,"data":{"tu'


def _crashed_log(tmp_path: Path, tail: bytes = TORN) -> tuple[Path, int]:
    """A store log with complete turns and a torn last line; returns it and the cut offset."""
    log = record_session(tmp_path / "store", "s", turns=2)
    offset = log.stat().st_size
    with open(log, "ab") as handle:
        handle.write(tail)
    return log, offset


def _leave_partial(log: Path, offset: int, *, age_s: float) -> Path:
    """What a repair killed while copying the tail leaves: a prefix of it under the scratch name."""
    partial = sidecar_path(log, offset).with_name(sidecar_path(log, offset).name + ".partial")
    partial.write_bytes(log.read_bytes()[offset : offset + 10])
    then = time.time() - age_s
    os.utime(partial, (then, then))
    return partial


def test_the_partial_name_is_a_leftover_of_its_log() -> None:
    assert layout.is_repair_partial("session.v4.jsonl.torn-812.partial")
    assert layout.temp_final_name("session.v4.jsonl.torn-812.partial") == "session.v4.jsonl"
    assert not layout.is_repair_partial("session.v4.jsonl.torn-812")
    assert not layout.is_repair_partial("session.v4.jsonl.torn-x.partial")


def test_verify_reports_a_leftover_partial_and_repair_deletes_it(tmp_path: Path) -> None:
    log, offset = _crashed_log(tmp_path)
    # Left at another offset: a repair cutting at the same one reuses (and removes) the name.
    partial = _leave_partial(log, offset - 5, age_s=3 * HOUR)
    (report,) = verify_paths([log])
    assert report.classification == "torn-tail"
    (finding,) = [f for f in report.findings if f.rule == "leftover-temp"]
    assert finding.message.startswith(f"{partial.name}: 10 bytes left 3 h ago by a repair")
    assert "still in the log, or already in its sidecar); dsh-store repair deletes it" in (
        finding.message
    )
    plan = repair_file(log)
    assert plan.applied and plan.stale_temps == (partial,)
    assert not partial.exists()
    assert sidecar_path(log, offset).read_bytes() == TORN  # the repair itself went through
    (again,) = verify_paths([log])
    assert not counts_as_failure(again)
    assert [f.rule for f in again.findings] == []


def test_a_recent_partial_is_kept_and_a_locked_session_keeps_it(tmp_path: Path) -> None:
    log, offset = _crashed_log(tmp_path)
    # From an earlier cut at another offset (a cut at this one reuses the scratch name).
    partial = _leave_partial(log, offset - 5, age_s=5)
    (report,) = verify_paths([log])
    (finding,) = [f for f in report.findings if f.rule == "leftover-temp"]
    assert "perhaps a repair still running; dsh-store repair deletes it once it is" in (
        finding.message
    )
    plan = repair_file(log)
    assert plan.fresh_temps == (partial,) and partial.exists()

    os.utime(partial, (time.time() - HOUR, time.time() - HOUR))
    store = JsonlStore(tmp_path / "store")
    with store.open("s"):  # a writer holds the session: repair refuses, the partial stays
        with pytest.raises(SessionLockedError):
            repair_file(log)
        (result,) = [outcome.to_json() for outcome in repair_paths([log])]
        assert result["status"] == "refused"
        assert partial.exists()
    assert repair_file(log, temp_grace_s=TEMP_GRACE_S).stale_temps == (partial,)
    assert not partial.exists()


def test_an_orphan_partial_is_reported_and_deleted(tmp_path: Path) -> None:
    """A partial whose log is gone belongs to no log: an orphan, deleted by the same rules."""
    directory = tmp_path / "loose"
    directory.mkdir()
    partial = directory / "gone.jsonl.torn-40.partial"
    partial.write_bytes(b"x" * 7)
    os.utime(partial, (time.time() - 2 * HOUR, time.time() - 2 * HOUR))
    (other := directory / "other.jsonl").write_bytes(b"")
    (orphan,) = verify_tree([directory]).orphans
    assert orphan.path == str(partial)
    assert orphan_temp_finding(orphan).message == (
        f"{partial.name}: 7 bytes left 2 h ago by a repair of gone.jsonl stopped while saving a "
        "torn tail; gone.jsonl no longer exists; dsh-store repair deletes it"
    )
    shown = CliRunner().invoke(main, ["repair", str(directory), "--dry-run"])
    assert f"{partial}: would delete repair scratch copy (a torn tail's copy; its log is gone)" in (
        shown.stdout.splitlines()
    )
    results = [outcome.to_json() for outcome in repair_paths([directory], dry_run=True)]
    assert any(r["path"] == str(partial) and r["status"] == "would-repair" for r in results)
    repair_paths([directory])
    assert not partial.exists() and other.exists()


REPAIR_CHILD = """
import resource, signal, sys
from dsh_store.errors import StorageError
from dsh_store.repair import repair_file
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    repair_file(sys.argv[1])
except StorageError as error:
    print(error.errno, error.operation)
    sys.exit(3)
"""


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_repair_whose_tail_copy_fails_leaves_no_partial(tmp_path: Path) -> None:
    """A real write failure (EFBIG past RLIMIT_FSIZE) while the tail is copied."""
    tail = b'{"type":"turn/start","seq":11,"data":"' + b"y" * 300_000
    log, _ = _crashed_log(tmp_path, tail)
    before = log.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", REPAIR_CHILD, str(log), str(100_000)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.split()[0] == "27"  # EFBIG
    assert log.read_bytes() == before  # nothing cut
    assert sorted(p.name for p in log.parent.iterdir()) == [
        "session.lock",
        "session.v4.jsonl",
        "session.v4.jsonl.durable",
    ]
