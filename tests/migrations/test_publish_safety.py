"""Publishing an upgrade: child evidence, file modes, directory fsyncs on reruns, write loop."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_store.jsonl import files
from dsh_store.jsonl.scan import LogScanner
from dsh_store.migrate import migrate_file, migrate_store, publish_upgrade
from dsh_store.restore import read_log
from dsh_store.store import JsonlStore

from .store_logs import PARENT_ID, fixture_copy, parent_log, store_with_child


class _Killed(BaseException):
    """Stands in for a SIGKILL at a chosen point of the publish protocol."""


def _fsync_dirs(monkeypatch: pytest.MonkeyPatch, *, kill_on_call: int | None = None) -> list[Path]:
    """Record migrate's directory fsyncs; optionally "die" instead of making call N."""
    calls: list[Path] = []

    def record(path: str | os.PathLike[str]) -> None:
        calls.append(Path(path))
        if kill_on_call is not None and len(calls) == kill_on_call:
            raise _Killed

    monkeypatch.setattr(files, "fsync_dir", record)
    return calls


# -- 2: publish_upgrade takes the child evidence ------------------------------------------


def test_publish_upgrade_publishes_what_the_evidence_shows(tmp_path: Path) -> None:
    by_store = tmp_path / "by-store"
    log = store_with_child(by_store)
    opened = tmp_path / "opened"
    shutil.copytree(by_store, opened)
    source = opened / log.relative_to(by_store)

    store = JsonlStore(opened)
    evidence = store.migration_children(LogScanner(source).read_header())
    assert evidence and evidence[0]["id"] == "kid"
    inspection = read_log(source, child_headers=evidence)
    published = read_log(publish_upgrade(inspection, child_headers=evidence))

    assert published.path == source.with_name("session.v4.jsonl")
    assert published.events == inspection.events  # the published log is what was shown
    migrate_store(by_store)
    expected = log.with_name("session.v4.jsonl").read_bytes()
    assert b'"childId":"kid"' in expected
    assert published.path.read_bytes() == expected
    output = tmp_path / "out.jsonl"
    migrate_file(log, output=output, child_headers=evidence)
    assert output.read_bytes() == expected


def test_publish_upgrade_without_evidence_keeps_the_catalog_as_written(tmp_path: Path) -> None:
    log = store_with_child(tmp_path / "root")
    published = read_log(publish_upgrade(read_log(log)))
    output = tmp_path / "out.jsonl"
    migrate_file(log, output=output, child_headers=())  # explicitly: no children
    assert published.path.read_bytes() == output.read_bytes()
    assert b'"childId"' not in output.read_bytes()


# -- 3: the published file is 0600 whatever the umask -----------------------------------


@pytest.fixture
def restrictive_umask() -> Iterator[int]:
    mask = 0o277  # would leave 0400 of a 0600 create
    old = os.umask(mask)
    try:
        yield mask
    finally:
        os.umask(old)


@pytest.mark.parametrize("where", ["beside", "output", "in-place", "publish_upgrade"])
def test_published_files_are_0600_under_a_restrictive_umask(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    source = parent_log(tmp_path / "root") if where == "publish_upgrade" else fixture_copy(tmp_path)
    source.chmod(0o644)
    original = source.stat()
    request.getfixturevalue("restrictive_umask")
    if where == "beside":
        target = migrate_file(source).target
    elif where == "output":
        target = migrate_file(source, output=tmp_path / "out.jsonl").target
    elif where == "in-place":
        result = migrate_file(source, in_place=True)
        target = result.target
        # The backup is the original inode under a second name (a link, not a new file):
        # it keeps the original's mode.
        assert result.backup is not None
        backup = result.backup.stat()
        assert (backup.st_ino, backup.st_mode & 0o777) == (original.st_ino, 0o644)
    else:
        target = publish_upgrade(read_log(source))
    assert target is not None
    assert target.stat().st_mode & 0o777 == 0o600


# -- 4: reruns make the directory entry durable before reporting success ----------------


def test_publish_upgrade_rerun_fsyncs_the_directory_of_an_existing_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = parent_log(tmp_path / "root")
    target = source.with_name("session.v4.jsonl")
    _fsync_dirs(monkeypatch, kill_on_call=1)  # killed between the link and the dir fsync
    with pytest.raises(_Killed):
        publish_upgrade(read_log(source))
    assert target.is_file()
    calls = _fsync_dirs(monkeypatch)
    assert publish_upgrade(read_log(source)) == target
    assert calls == [target.parent]


def test_in_place_rerun_fsyncs_the_directory_before_reporting_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixture_copy(tmp_path)
    # Call 1 follows the backup link, call 2 the replace: killed before call 2 completes.
    _fsync_dirs(monkeypatch, kill_on_call=2)
    with pytest.raises(_Killed):
        migrate_file(source, in_place=True)
    info = LogScanner(source).read_header()
    assert info is not None and info.version == 4  # replaced, the name not yet durable
    calls = _fsync_dirs(monkeypatch)
    result = migrate_file(source, in_place=True)
    assert result.status == "current"
    assert calls == [source.parent]
    assert migrate_file(source, in_place=True, dry_run=True).status == "current"
    assert calls == [source.parent]  # a dry run touches nothing


def test_output_rerun_fsyncs_the_directory_of_an_existing_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixture_copy(tmp_path)
    output = tmp_path / "out.jsonl"
    _fsync_dirs(monkeypatch, kill_on_call=1)
    with pytest.raises(_Killed):
        migrate_file(source, output=output)
    calls = _fsync_dirs(monkeypatch)
    assert migrate_file(source, output=output).status == "current"
    assert calls == [output.parent]


# -- 5: a write that makes no progress fails instead of spinning -------------------------


def test_a_write_that_makes_no_progress_fails_instead_of_looping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixture_copy(tmp_path)
    before = source.read_bytes()
    calls = 0

    def no_progress(fd: int, data: object) -> int:
        nonlocal calls
        calls += 1
        if calls > 1000:  # without the guard the loop would never end
            raise AssertionError("the write loop spins on a zero-byte write")
        return 0

    monkeypatch.setattr(os, "write", no_progress)
    with pytest.raises(OSError) as caught:
        migrate_file(source, output=tmp_path / "out.jsonl")
    monkeypatch.undo()
    assert caught.value.errno == errno.EIO
    assert calls == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sess"]
    assert sorted(p.name for p in source.parent.iterdir()) == [source.name]
    assert source.read_bytes() == before


def test_store_open_publishes_the_log_inspect_showed(tmp_path: Path) -> None:
    by_store = tmp_path / "by-store"
    log = store_with_child(by_store)
    opened = tmp_path / "opened"
    shutil.copytree(by_store, opened)
    store = JsonlStore(opened)
    shown = store.inspect(PARENT_ID)
    with store.open(PARENT_ID) as live:
        published = live.path
    assert published.name == "session.v4.jsonl"
    migrate_store(by_store)
    expected = log.with_name("session.v4.jsonl").read_bytes()
    assert b'"childId":"kid"' in expected
    # open() published what migrate_store publishes, then resumed after it
    assert published.read_bytes().startswith(expected)
    assert read_log(published).events[: len(shown.events)] == shown.events


def test_store_open_of_an_older_session_with_an_open_turn_resumes_on_a_balanced_log(
    tmp_path: Path,
) -> None:
    log = parent_log(tmp_path)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-2]))  # a crash before the step/end and turn/end
    store = JsonlStore(tmp_path)
    shown = store.inspect(PARENT_ID)
    assert shown.classification == "open-turn"
    closers = [event.type for event in shown.closers]
    assert closers[-1] == "turn/end"
    at = len(shown.events)
    with store.open(PARENT_ID) as live:
        types = [event.type for event in live.session.events]
        assert types[at : at + len(closers)] == closers  # closed before the writer resumed
        assert types[at + len(closers) :] == ["session/end-seed"]
        live.append("turn/start", {"turn": 2})  # a new turn can start
    published = read_log(log.with_name("session.v4.jsonl"))
    assert [event.type for event in published.events][at : at + len(closers)] == closers
    assert published.events[-1].type == "turn/start"  # only the new turn 2 is open
