"""A 0-byte log never wedges its session id: ``new`` says what to do, ``repair`` removes it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_store.bulk import repair_paths
from dsh_store.cli import main
from dsh_store.errors import NotASessionError, SessionExistsError, SessionLockedError
from dsh_store.jsonl.lock import SessionLock
from dsh_store.repair import repair_file
from dsh_store.restore import read_log
from dsh_store.store import JsonlStore

from .helpers import CWD, complete_turn, make_store

HOUR = 3600.0


def _emptied(store: JsonlStore, session_id: str, *, age_s: float) -> Path:
    """A session whose log became a 0-byte file ``age_s`` ago."""
    with store.new(session_id, cwd=CWD) as live:
        complete_turn(live, 1, first=True)
    log = store.locate(session_id)
    log.write_bytes(b"")
    then = time.time() - age_s
    os.utime(log, (then, then))
    return log


def test_new_on_an_empty_log_says_how_to_free_the_id(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    log = _emptied(store, "s", age_s=HOUR)
    with pytest.raises(SessionExistsError) as caught:
        store.new("s", cwd=CWD)
    assert caught.value.empty is True
    assert f"already exists at {log} as an empty file (0 bytes" in str(caught.value)
    assert f"`dsh-store repair {log}` removes it" in str(caught.value)
    with store.new("other", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
    with pytest.raises(SessionExistsError) as existing:
        store.new("other", cwd=CWD)
    assert existing.value.empty is False
    assert str(existing.value).endswith("; open it instead of creating it")


def test_repair_removes_an_old_empty_log_and_the_id_is_free_again(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    store = make_store(tmp_path)
    log = _emptied(store, "s", age_s=HOUR)
    planned = repair_file(log, dry_run=True)
    assert (planned.classification, planned.removes_empty_log, planned.applied) == (
        "empty",
        True,
        False,
    )
    assert planned.needed and log.exists()
    done = repair_file(log)
    assert done.applied and done.removes_empty_log
    assert not os.path.lexists(log)
    assert log.parent in fsynced_dirs  # the removal is durable
    with store.new("s", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
    assert read_log(store.locate("s")).events[-1].type == "turn/end"


def test_a_recent_empty_log_and_a_locked_session_keep_the_file(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    log = _emptied(store, "s", age_s=5)
    with pytest.raises(NotASessionError, match="removes it once it is 10 minutes old"):
        repair_file(log)
    assert log.exists()
    os.utime(log, (time.time() - HOUR, time.time() - HOUR))
    with SessionLock(log.parent, "s"), pytest.raises(SessionLockedError):
        repair_file(log)
    assert log.exists()


def test_an_empty_loose_file_is_still_refused_not_removed(tmp_path: Path) -> None:
    loose = tmp_path / "notes.jsonl"
    loose.write_bytes(b"")
    os.utime(loose, (time.time() - HOUR, time.time() - HOUR))
    with pytest.raises(NotASessionError, match="the file is empty"):
        repair_file(loose)
    (result,) = [outcome.to_json() for outcome in repair_paths([loose])]
    assert result["status"] == "refused"
    assert loose.exists()


def test_the_repair_command_removes_an_empty_store_log(tmp_path: Path) -> None:
    store = make_store(tmp_path / "root")
    log = _emptied(store, "s", age_s=HOUR)
    runner = CliRunner()
    planned = runner.invoke(main, ["repair", str(tmp_path / "root"), "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert planned.stdout.splitlines() == [
        f"{log}: would repair (empty)",
        "  remove the empty log (0 bytes: no header, nothing acknowledged)",
    ]
    done = runner.invoke(main, ["repair", str(tmp_path / "root")])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[1] == (
        "  removed the empty log (0 bytes: no header, nothing acknowledged)"
    )
    assert not os.path.lexists(log)
