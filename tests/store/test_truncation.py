"""Truncation at every byte offset of a real v4 log: restore keeps exactly the complete lines."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsh_store.errors import NotASessionError
from dsh_store.model import SessionEvent, interrupted_closers

from .helpers import (
    CWD,
    complete_turn,
    fast_dir,
    make_store,
    open_tool_turn,
    sidecars,
    tool_turn,
)


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, tuple[SessionEvent, ...]]:
    """A ~3.8 KB log: a plain turn, a tool turn, then an open turn whose prompt is a replace."""
    store = make_store(tmp_path_factory.mktemp("source"))
    with store.new("cut", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        tool_turn(live, 2)
        open_tool_turn(live, 3, ("x1", "x2"), logged=1, replace_seq=3)
        live.flush()
        events = live.session.events
        data = live.path.read_bytes()
    assert 2_000 <= len(data) <= 4_096
    return data, events


def test_every_byte_offset_restores_the_complete_lines(
    tmp_path: Path, original: tuple[bytes, tuple[SessionEvent, ...]]
) -> None:
    data, events = original
    header_size = data.index(b"\n") + 1
    boundaries = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    scratch = fast_dir(tmp_path)
    root = scratch / "root"
    log = root / "--home-dev-project--" / "cut" / "session.v4.jsonl"
    checked = 0
    for offset in range(len(data) + 1):
        if root.exists():
            shutil.rmtree(root)
        log.parent.mkdir(parents=True)
        prefix = data[:offset]
        log.write_bytes(prefix)
        store = make_store(root)
        if offset < header_size:
            reason = "file is empty" if offset == 0 else "incomplete|no final newline"
            with pytest.raises(NotASessionError, match=reason):
                store.load("cut")
            assert log.read_bytes() == prefix, offset
            continue
        complete = max(b for b in boundaries if b <= offset)
        kept = events[: complete_lines(data, complete)]
        expected = [*kept, *interrupted_closers(kept)]

        loaded = store.load("cut")
        assert list(loaded.events) == expected, offset
        assert loaded.closers == ()
        repaired = log.read_bytes()
        assert repaired == data[:complete] + b"".join(e.line for e in expected[len(kept) :])
        found = sidecars(log)
        if complete < offset:
            assert [p.name for p in found] == [f"session.v4.jsonl.torn-{complete}"], offset
            assert found[0].read_bytes() == data[complete:offset], offset
        else:
            assert found == [], offset
        again = store.load("cut")
        assert log.read_bytes() == repaired, offset
        assert list(again.events) == expected, offset
        checked += 1
    assert checked == len(data) - header_size + 1
    shutil.rmtree(scratch, ignore_errors=True)


def complete_lines(data: bytes, end: int) -> int:
    """Number of event lines (header excluded) complete in ``data[:end]``."""
    return data[:end].count(b"\n") - 1
