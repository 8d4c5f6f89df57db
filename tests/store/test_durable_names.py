"""Names an earlier, killed writer created are made durable before anything is acknowledged.

A writer killed after ``mkdir`` or ``link`` but before it fsynced the parent directory
leaves a name that only the page cache holds: SIGKILL keeps it, a power cut after the kill
does not. No kill test can see that, so these tests record every directory fsync and check
that each writer fsyncs the chain root -> log before it acknowledges a write.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.jsonl.files import fsync_chain
from dsh_store.model import SessionEvent

from .helpers import CWD, complete_turn, make_store


def _chain(log: Path, root: Path) -> list[Path]:
    """The directories holding the names root ... log: the log's directory up to root's parent."""
    levels = [log.parent]
    while levels[-1] != root:
        levels.append(levels[-1].parent)
    return [*levels, root.parent]


def test_fsync_chain_fsyncs_every_directory_from_the_path_up_to_the_holder_of_top(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    log = tmp_path / "root" / "project" / "session" / "session.v4.jsonl"
    log.parent.mkdir(parents=True)
    log.touch()
    fsync_chain(log, tmp_path / "root")
    assert fsynced_dirs == [log.parent, log.parent.parent, tmp_path / "root", tmp_path]
    fsynced_dirs.clear()
    fsync_chain(tmp_path / "root", tmp_path / "root")
    assert fsynced_dirs == [tmp_path]


def test_fsync_chain_refuses_a_path_outside_top_before_any_fsync(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(ValueError):
        fsync_chain(tmp_path / "a", tmp_path / "b")
    assert fsynced_dirs == []


def test_open_fsyncs_the_chain_before_it_returns(tmp_path: Path, fsynced_dirs: list[Path]) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        live.flush()
        log = live.path
    fsynced_dirs.clear()
    live = store.open("s1")
    try:
        assert fsynced_dirs[-len(_chain(log, store.root)) :] == _chain(log, store.root)
    finally:
        live.close()


def test_first_write_fsyncs_directories_it_did_not_create(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    store = make_store(tmp_path)
    live = store.new("s1", cwd=CWD)
    # An earlier attempt at this session was killed after making its directories and
    # before fsyncing their parents: make_dirs now finds them and creates nothing.
    live.path.parent.mkdir(parents=True, mode=0o700)
    complete_turn(live, 1, first=True)
    live.flush()
    live.close()
    for directory in _chain(live.path, store.root):
        assert directory in fsynced_dirs, directory


def test_store_append_fsyncs_the_chain_before_writing(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        log = live.path
    after = len(store.inspect("s1").events)
    fsynced_dirs.clear()
    store.append("s1", [SessionEvent("turn/start", after, 5, {"turn": 2})])
    assert fsynced_dirs[: len(_chain(log, store.root))] == _chain(log, store.root)
    assert [event.seq for event in store.read_from("s1", after)] == [after]


def test_fork_fsyncs_the_childs_chain(tmp_path: Path, fsynced_dirs: list[Path]) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
    fsynced_dirs.clear()
    child = store.fork("s1", child_id="child")
    log = store.locate(child)
    for directory in _chain(log, store.root):
        assert directory in fsynced_dirs, directory


def test_a_fresh_session_fsyncs_each_directory_of_its_chain_once(
    tmp_path: Path, fsynced_dirs: list[Path]
) -> None:
    store = make_store(tmp_path / "root")
    live = store.new("s1", cwd=CWD)
    complete_turn(live, 1, first=True)
    live.flush()
    live.close()
    chain = _chain(live.path, store.root)
    assert sorted(fsynced_dirs) == sorted(chain)  # created levels are not fsynced twice
