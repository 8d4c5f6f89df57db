"""ENOSPC / EIO injected into a LiveSession's background writes (monkeypatched ``os`` calls).

Each fault hits only the session's log (matched by inode) or its publishing ``link``; the
rest of the process keeps real I/O. Invariants: ``flush()`` raises the OSError, the file is
back to its pre-batch size, no seq is duplicated or missing, and the next flush after the
fault clears writes everything exactly once. A failing rollback breaks the writer for good.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import WriterBrokenError
from dsh_store.store import JsonlStore, LiveSession

from .helpers import CWD, complete_turn, make_store, sidecars, wire_events


class Faults:
    """Arms failures of single ``os`` calls for one log file; ``times=None`` means forever."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.inode: int | None = None
        self.remaining: dict[str, int | None] = {}
        self.hits: dict[str, int] = {}
        self.larger_than: dict[str, int | None] = {}

    def arm(
        self,
        call: str,
        code: int,
        *,
        times: int | None = None,
        inode: int | None = None,
        larger_than: int | None = None,
    ) -> None:
        """Make ``call`` fail with ``code``; ``larger_than`` limits the fault to calls made
        while the file is larger than that many bytes (a batch written beyond it)."""
        self.inode = inode
        self.remaining[call] = times
        self.larger_than[call] = larger_than
        self.hits[call] = 0
        original: Callable[..., Any] = getattr(os, call)

        def faulty(*args: Any) -> Any:
            if self._should_fail(call, args):
                if call == "write" and len(args[1]) > 1 and self.hits[call] == 1:
                    # A short write first: half the batch lands, then the disk is full.
                    return original(args[0], bytes(args[1])[: len(args[1]) // 2])
                raise OSError(code, os.strerror(code))
            return original(*args)

        self.monkeypatch.setattr(os, call, faulty)

    def disarm(self, call: str) -> None:
        self.remaining[call] = 0

    def _should_fail(self, call: str, args: tuple[Any, ...]) -> bool:
        left = self.remaining.get(call, 0)
        if left == 0:
            return False
        if call == "link":
            if not str(args[1]).endswith("session.v4.jsonl"):
                return False
        else:
            if self.inode is None or os.fstat(args[0]).st_ino != self.inode:
                return False
            floor = self.larger_than.get(call)
            if floor is not None and os.fstat(args[0]).st_size <= floor:
                return False
        self.hits[call] += 1
        if call == "write" and self.hits[call] == 1:
            return True  # the short write above, which does not count as a failure
        if left is not None:
            self.remaining[call] = left - 1
        return True


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Faults:
    return Faults(monkeypatch)


def _started(store: JsonlStore) -> tuple[LiveSession, Path, int]:
    live = store.new("s1", cwd=CWD)
    complete_turn(live, 1)
    live.flush()
    return live, live.path, live.path.stat().st_size


def _second_turn(live: LiveSession) -> None:
    live.append("turn/start", {"turn": 2})
    live.append("step/start", {"turn": 2, "step": 1})
    live.append("step/end", {"turn": 2, "step": 1})


def _assert_dense(path: Path, count: int) -> None:
    assert [event["seq"] for event in wire_events(path)] == list(range(count))


@pytest.mark.parametrize(
    ("call", "code"),
    [
        ("write", errno.ENOSPC),
        ("write", errno.EIO),
        ("fsync", errno.EIO),
        ("fsync", errno.ENOSPC),
    ],
)
def test_failed_background_write_rolls_back_and_retries(
    tmp_path: Path, faults: Faults, call: str, code: int
) -> None:
    store = make_store(tmp_path)
    live, path, size = _started(store)
    # The fault lasts until disarmed, whichever write meets it first: the writer thread
    # when the window ends during the appends (it then retries at each new event) or the
    # flush. A one-shot fault made the test depend on that race: spent by a background
    # attempt, it let the retry succeed and the flush return. An fsync fails only while
    # the batch is beyond ``size``, so the rollback's own fsync (after truncating back to
    # ``size``) succeeds, as it must for the writer to stay usable.
    floor = size if call == "fsync" else None
    faults.arm(call, code, inode=path.stat().st_ino, larger_than=floor)
    _second_turn(live)
    with pytest.raises(OSError) as caught:
        live.flush()
    assert caught.value.errno == code
    assert os.strerror(code) in str(caught.value)
    assert path.stat().st_size == size
    _assert_dense(path, 6)
    assert [e.seq for e in live.unwritten_events] == [6, 7, 8]
    faults.disarm(call)
    live.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    live.flush()
    _assert_dense(path, 10)
    live.close()
    assert [e.seq for e in store.load("s1").events] == list(range(10))
    assert sidecars(path) == []


def test_failed_link_keeps_the_first_batch(tmp_path: Path, faults: Faults) -> None:
    store = make_store(tmp_path)
    faults.arm("link", errno.ENOSPC)
    live = store.new("s1", cwd=CWD)
    complete_turn(live, 1)
    with pytest.raises(OSError) as caught:
        live.flush()
    assert caught.value.errno == errno.ENOSPC
    assert not live.path.exists()
    assert [p.name for p in live.path.parent.iterdir()] == ["session.lock"]  # temp removed
    assert store.list() == []
    faults.disarm("link")
    live.flush()
    _assert_dense(live.path, 6)
    live.close()
    assert store.load("s1").classification == "ok"


def test_a_failed_rollback_breaks_the_writer(tmp_path: Path, faults: Faults) -> None:
    store = make_store(tmp_path)
    live, path, size = _started(store)
    inode = path.stat().st_ino
    faults.arm("write", errno.EIO, inode=inode)
    faults.arm("ftruncate", errno.EIO, inode=inode)
    _second_turn(live)
    with pytest.raises(WriterBrokenError, match="writer is broken after a failed rollback") as e:
        live.flush()
    assert "truncating back to" in str(e.value)
    assert path.stat().st_size > size  # the half batch is still there
    for call in (
        live.flush,
        lambda: live.append("step/start", {"turn": 2, "step": 2}),
    ):
        with pytest.raises(WriterBrokenError, match="reopen the session"):
            call()
    assert [e.seq for e in live.unwritten_events] == [6, 7, 8]
    assert [e.type for e in live.session.events[6:]] == ["turn/start", "step/start", "step/end"]
    with pytest.raises(WriterBrokenError, match="no further writes are accepted"):
        live.close()  # releases the lock anyway
    faults.disarm("write")
    faults.disarm("ftruncate")

    view = store.inspect("s1")
    assert view.classification == "torn-tail"
    assert view.torn is not None and view.torn.offset >= size
    with store.open("s1") as reopened:
        assert reopened.session.is_balanced  # complete lines of the half batch were closed
        assert reopened.session.first_live_seq >= 6
    loaded = store.load("s1")
    assert loaded.classification == "ok"
    assert [e.seq for e in loaded.events] == list(range(len(loaded.events)))
    assert [e.type for e in loaded.events[:6]] == [e["type"] for e in wire_events(path)[:6]]
    (sidecar,) = sidecars(path)
    assert sidecar.stat().st_size == view.torn.length
