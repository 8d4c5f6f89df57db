"""Identity binding in the store: a log's header id and cwd must derive its directory.

DSH refuses a log whose header names another session or another cwd than the directory
it is filed in, before any repair or append. These tests file real logs in the wrong
place (copied bytes, as a careless ``cp`` would) and check each library entry point.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dsh_store.binding import (
    BINDING_RULE,
    check_binding,
    is_project_dir_name,
    store_root_of,
)
from dsh_store.errors import CorruptLogError
from dsh_store.jsonl import layout
from dsh_store.model import SessionEvent
from dsh_store.store import JsonlStore

from .helpers import CWD, complete_turn, make_store, snapshot

LONG_ID = "x" * 300  # its directory name is hashed (layout.encode_session_id)


def _session(store: JsonlStore, session_id: str, cwd: str | None = CWD) -> Path:
    with store.new(session_id, cwd=cwd) as live:
        complete_turn(live, 1)
        live.flush()
        return live.path


def _file_as(store: JsonlStore, source: Path, session_id: str, cwd: str | None) -> Path:
    """Copy ``source`` into the directory of ``session_id`` / ``cwd`` (a misfiled log)."""
    target = layout.log_path(store.root, session_id, cwd)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def _entry_points(store: JsonlStore, session_id: str) -> list[object]:
    return [
        lambda: store.inspect(session_id),
        lambda: store.load(session_id),
        lambda: store.read_from(session_id, 0),
        lambda: store.open(session_id).close(),
        lambda: store.fork(session_id, child_id="child"),
        lambda: store.append(session_id, [SessionEvent("turn/start", 6, 1, {"turn": 2})]),
    ]


@pytest.mark.parametrize(
    ("owner", "owner_cwd", "filed_as", "filed_cwd", "says"),
    [
        ("a", CWD, "b", CWD, "filed as session 'b'"),  # another id, same project
        ("a", CWD, "a", "/elsewhere", "cwd '/home/dev/project'"),  # same id, other project
        ("a", None, "a", CWD, "no cwd"),  # a _no-cwd log filed under a project
        ("a", CWD, "a", None, "cwd '/home/dev/project'"),  # a project log in _no-cwd
        (LONG_ID, CWD, "b", CWD, "filed as session 'b'"),  # a hashed directory's log moved
        ("a", CWD, LONG_ID, CWD, "filed as session 'xxx"),  # into a hashed directory
    ],
)
def test_every_lookup_refuses_a_misfiled_log_before_writing(
    tmp_path: Path,
    owner: str,
    owner_cwd: str | None,
    filed_as: str,
    filed_cwd: str | None,
    says: str,
) -> None:
    own = make_store(tmp_path / "own")
    source = _session(own, owner, owner_cwd)
    store = make_store(tmp_path / "root")
    misfiled = _file_as(store, source, filed_as, filed_cwd)
    before = snapshot(misfiled)
    for call in _entry_points(store, filed_as):
        with pytest.raises(CorruptLogError, match="move it to its own session directory") as err:
            call()  # type: ignore[operator]
        assert err.value.rule == BINDING_RULE
        assert err.value.line == 1 and err.value.offset == 0
        assert says in str(err.value)
        assert err.value.path == str(misfiled)
    assert snapshot(misfiled) == before
    assert sorted(p.name for p in misfiled.parent.iterdir()) == ["session.lock", "session.v4.jsonl"]
    assert store.list() == []  # left out of the listing, as an unreadable log is
    assert not (store.root / layout.project_key(filed_cwd) / "child").exists()


@pytest.mark.parametrize("session_id", ["s", LONG_ID, "a/b ~ é", ".."])
@pytest.mark.parametrize("cwd", [CWD, None, "C:\\Users\\é"])
def test_a_log_in_its_own_directory_is_bound(
    tmp_path: Path, session_id: str, cwd: str | None
) -> None:
    store = make_store(tmp_path / "root")
    path = _session(store, session_id, cwd)
    assert store.inspect(session_id).header.id == session_id
    assert [header.id for header in store.list()] == [session_id]
    assert check_binding(path, {"id": session_id, **({} if cwd is None else {"cwd": cwd})}) is None
    assert store_root_of(path) == (os.path.realpath(store.root), os.path.realpath(path.parent))


def test_the_listing_keeps_the_bound_sessions_beside_a_misfiled_one(tmp_path: Path) -> None:
    store = make_store(tmp_path / "root")
    _session(store, "real")
    _file_as(store, _session(store, "other"), "copy", CWD)
    assert [header.id for header in store.list()] == ["other", "real"]
    assert [header.id for header, _ in store.snapshots()] == ["other", "real"]


def test_a_symlinked_root_is_the_same_place(tmp_path: Path) -> None:
    real = make_store(tmp_path / "real")
    _session(real, "s")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    via_link = make_store(tmp_path / "alias")
    assert via_link.inspect("s").header.id == "s"
    assert [header.id for header in via_link.list()] == ["s"]


def test_header_values_that_name_no_place_are_misfiled(tmp_path: Path) -> None:
    directory = tmp_path / "root" / "--p--" / "s"
    directory.mkdir(parents=True)
    log = str(directory / "session.jsonl")
    for header in ({"cwd": "/p"}, {"id": "", "cwd": "/p"}, {"id": 5}, {"id": "s", "cwd": None}):
        misfiled = check_binding(log, header)
        assert misfiled is not None and misfiled.expected is None, header
        assert "cannot name a session directory" in misfiled.message
    assert check_binding(log, {"id": "s", "cwd": "/p"}) is None
    assert check_binding(log, None) is None  # no header: no claim to check


def test_loose_files_are_not_bound(tmp_path: Path) -> None:
    # Not a generation name, no project directory above, or nothing above that: loose.
    for loose in (
        tmp_path / "root" / "--p--" / "s" / "copy.jsonl",
        tmp_path / "root" / "p" / "s" / "session.jsonl",
        tmp_path / "loose" / "session.v4.jsonl",
        Path("/session.v4.jsonl"),
    ):
        assert store_root_of(loose) is None, loose
        assert check_binding(loose, {"id": "another"}) is None


@pytest.mark.parametrize(
    ("name", "is_project"),
    [
        ("_no-cwd", True),
        ("--home-me--", True),
        ("--root--", True),
        ("--a~00E9b--", True),
        ("p", False),
        ("---p--", False),
        ("----", False),
        ("--a b--", False),
        ("--a~00--", False),
    ],
)
def test_project_directory_names(name: str, is_project: bool) -> None:
    assert is_project_dir_name(name) is is_project
