"""A live session used in a forked child process refuses at once; the parent keeps writing.

Real ``os.fork()``: the child tries each operation on its copy of the parent's session,
records what happened in its exit status and leaves with ``os._exit`` (never through the
test runner). The parent waits with a deadline, so a child that hangs (today's ``flush``
and ``close`` wait forever for a writer thread the child does not have) fails the test
instead of blocking it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import ForkedSessionError, SessionLockedError
from dsh_store.jsonl.lock import SessionLock
from dsh_store.restore import read_log
from tests.model.builders import user

from .helpers import CWD, complete_turn, make_store

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

CHILD_DEADLINE_S = 60.0
ALL_REFUSED = 0
NOT_REFUSED = 3  # + the index of the first operation that did not raise ForkedSessionError
CRASHED = 2


def _refusals(operations: list[Callable[[], object]], parent: int) -> int:
    """In the child: every operation must raise ForkedSessionError naming both processes."""
    for index, operation in enumerate(operations):
        try:
            operation()
        except ForkedSessionError as error:
            if (error.owner_pid, error.pid) != (parent, os.getpid()):
                return NOT_REFUSED + index
        else:
            return NOT_REFUSED + index
    return ALL_REFUSED


def _fork_and_wait(child_main: Callable[[int], int]) -> int:
    """Fork, run ``child_main(parent_pid)`` in the child, return its exit status.

    The child always leaves through ``os._exit``; a child still running at the deadline
    is killed and the test fails.
    """
    parent = os.getpid()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child never returns
        status = CRASHED
        try:
            status = child_main(parent)
        finally:
            os._exit(status)
    deadline = time.monotonic() + CHILD_DEADLINE_S
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            pytest.fail(f"the forked child hung (killed after {CHILD_DEADLINE_S:.0f} s)")
        time.sleep(0.01)


def _step(coroutine: Coroutine[Any, Any, Any]) -> None:
    """Run an async session method up to its first await, outside any event loop."""
    try:
        coroutine.send(None)
    finally:
        coroutine.close()


def test_sync_session_in_a_fork_child_refuses_and_the_parent_is_unaffected(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, window_s=0.05)
    live = store.new("s", cwd=CWD)
    complete_turn(live, 1, first=True)
    live.flush()
    live.append("turn/start", {"turn": 2})  # queued, perhaps in flight, at the fork
    operations: list[Callable[[], object]] = [
        lambda: live.append("step/start", {"turn": 2, "step": 1}),
        lambda: live.append_many([("step/start", {"turn": 2, "step": 1})]),
        lambda: live.flush(),
        lambda: live.close(),
        lambda: live.__exit__(None, None, None),
    ]
    status = _fork_and_wait(lambda parent: _refusals(operations, parent))
    assert status == ALL_REFUSED
    # The child neither released the parent's lock nor closed its file.
    with pytest.raises(SessionLockedError):
        SessionLock(live.path.parent, "s").acquire()
    live.append("step/start", {"turn": 2, "step": 1})
    live.append("user/message", user("after the fork", "m-after"), surface_op="append")
    live.flush()
    assert live.durable_seq == 9
    live.close()
    events = read_log(live.path).events
    assert [event.seq for event in events] == list(range(10))
    assert events[-1].type == "user/message"


def test_async_session_in_a_fork_child_refuses_and_the_parent_is_unaffected(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, window_s=0.05)

    async def scenario() -> Path:
        live = await store.anew("a", cwd=CWD)
        await live.append("turn/start", {"turn": 1})
        await live.append("step/start", {"turn": 1, "step": 1})
        await live.flush()
        await live.append("user/message", user("before", "m-before"), surface_op="append")
        operations: list[Callable[[], object]] = [
            lambda: _step(live.append("step/end", {"turn": 1, "step": 1})),
            lambda: _step(live.append_many([("step/end", {"turn": 1, "step": 1})])),
            lambda: _step(live.flush()),
            lambda: _step(live.close()),
        ]
        status = _fork_and_wait(lambda parent: _refusals(operations, parent))
        assert status == ALL_REFUSED
        with pytest.raises(SessionLockedError):
            SessionLock(live.path.parent, "a").acquire()
        await live.append("step/end", {"turn": 1, "step": 1})
        await live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await live.flush()
        assert live.durable_seq == 4
        await live.close()
        return live.path

    path = asyncio.run(scenario())
    events = read_log(path).events
    assert [event.seq for event in events] == list(range(5))
    assert events[-1].type == "turn/end"


def test_a_session_opened_in_the_child_itself_works(tmp_path: Path) -> None:
    """The check binds a session to the process that opened it, not to the first process."""
    store = make_store(tmp_path)
    with store.new("c", cwd=CWD) as live:
        complete_turn(live, 1, first=True)

    def child_opens_and_writes(parent: int) -> int:
        with store.open("c") as reopened:
            reopened.append("turn/start", {"turn": 2})
            reopened.flush()
        return 0

    assert _fork_and_wait(child_opens_and_writes) == 0
    assert read_log(store.locate("c")).events[-1].type == "turn/start"
