"""Live sessions under interruption: a failed, cancelled or concurrent call leaves no trace.

An append commits its event in memory (the seq is assigned) only after it has room in the
write queue, and queues it in the same step; a close stops the writer before it lets go of
the file and the lock, even when the close is cancelled or its drain fails.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import StorageError
from dsh_store.restore import read_log
from tests.model.builders import user

from .helpers import CWD, make_store, wire_events

CAPPED: dict[str, Any] = {"window_s": 3600.0, "max_pending_bytes": 700, "max_batch_bytes": None}


def _on_disk(path: Path) -> list[int]:
    return [event["seq"] for event in wire_events(path)]


def test_a_cancelled_append_waiting_at_the_memory_cap_leaves_no_trace(tmp_path: Path) -> None:
    store = make_store(tmp_path, **CAPPED)

    async def scenario() -> Path:
        live = await store.anew("s", cwd=CWD)
        await live.append("turn/start", {"turn": 1})
        await live.append("step/start", {"turn": 1, "step": 1})
        await live.append("user/message", user("x" * 800, "m1"), surface_op="append")
        with pytest.raises(TimeoutError):  # waits for room; nothing is committed meanwhile
            await asyncio.wait_for(
                live.append("user/message", user("y" * 10, "m2"), surface_op="append"), 0.05
            )
        assert live.session.seq == 3
        await live.flush()
        assert (await live.append("step/end", {"turn": 1, "step": 1})).seq == 3
        await live.close()
        assert live.unwritten_events == ()
        return live.path

    assert _on_disk(asyncio.run(scenario())) == [0, 1, 2, 3]


def test_an_append_refused_at_the_cap_after_a_disk_failure_leaves_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path, **{**CAPPED, "window_s": 0.01})
    live = store.new("s", cwd=CWD)
    live.append("turn/start", {"turn": 1})
    live.append("step/start", {"turn": 1, "step": 1})
    live.flush()
    real_write = os.write
    failing = True

    def write(fd: int, data: Any) -> int:
        if failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    logging.disable(logging.WARNING)
    try:
        live.append("user/message", user("x" * 800, "m1"), surface_op="append")
        deadline = time.monotonic() + 10
        while live._queue.failure is None and time.monotonic() < deadline:
            time.sleep(0.005)  # the background write fails, automatic writes pause
        with pytest.raises(StorageError):  # at the cap with writes paused: the failure
            live.append("user/message", user("y" * 10, "m2"), surface_op="append")
    finally:
        logging.disable(logging.NOTSET)
    assert live.session.seq == 3  # the refused append left nothing behind
    failing = False
    live.flush()  # the disk is back: the flush retries the paused batch
    assert live.append("step/end", {"turn": 1, "step": 1}).seq == 3
    live.close()
    assert live.unwritten_events == ()
    assert _on_disk(live.path) == [0, 1, 2, 3]


def test_an_append_from_another_event_loop_leaves_no_trace(tmp_path: Path) -> None:
    store = make_store(tmp_path)

    async def first() -> Any:
        live = await store.anew("s", cwd=CWD)
        await live.append("turn/start", {"turn": 1})
        await live.flush()
        return live

    live = asyncio.run(first())

    async def elsewhere() -> None:
        with pytest.raises(RuntimeError, match="bound to the event loop"):
            await live.append("step/start", {"turn": 1, "step": 1})

    asyncio.run(elsewhere())
    assert live.session.seq == 1
    assert live.unwritten_events == ()


def test_appends_from_several_threads_get_consecutive_seqs_and_all_reach_the_disk(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, window_s=0.001)
    live = store.new("s", cwd=CWD)
    errors: list[BaseException] = []

    def producer(name: str) -> None:
        try:
            for index in range(200):
                live.append(f"plugin:{name}", {"n": index}, ignorable=True)
        except BaseException as error:  # reported below
            errors.append(error)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads as much as possible
    try:
        threads = [threading.Thread(target=producer, args=(f"p{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    live.close()
    assert errors == []
    assert live.unwritten_events == ()
    assert _on_disk(live.path) == list(range(800))


def test_a_cancelled_close_waits_for_the_write_in_flight_before_releasing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path, window_s=0.0)
    real_fsync = os.fsync
    slow = threading.Event()

    def fsync(fd: int) -> None:
        if slow.is_set():
            time.sleep(0.3)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    async def scenario() -> Any:
        live = await store.anew("s", cwd=CWD)
        await live.append("turn/start", {"turn": 1})
        await live.flush()
        slow.set()
        await live.append("step/start", {"turn": 1, "step": 1})  # its write starts at once
        await asyncio.sleep(0.02)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(live.close(), 0.05)
        # Released only now, with no write running: the log holds what durable_seq says.
        lock, writer = live._handle.lock, live._handle.writer
        assert lock is not None and not lock.is_held
        assert writer is not None and writer.closed
        return live

    live = asyncio.run(scenario())
    slow.clear()
    size = live.path.stat().st_size
    time.sleep(0.1)
    assert live.path.stat().st_size == size  # nothing is written after the release
    assert _on_disk(live.path) == list(range((live.durable_seq or 0) + 1))
    with store.open("s"):  # the lock is free for the next writer
        pass


def test_close_refuses_an_append_blocked_for_room_in_another_thread_and_loses_nothing(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, **CAPPED)
    live = store.new("s", cwd=CWD)
    live.append("turn/start", {"turn": 1})
    live.append("step/start", {"turn": 1, "step": 1})
    live.append("user/message", user("x" * 800, "m1"), surface_op="append")
    outcome: dict[str, Any] = {}

    def blocked() -> None:
        try:
            outcome["event"] = live.append("user/message", user("y", "m2"), surface_op="append")
        except ValueError as error:
            outcome["error"] = error

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.1)
    assert thread.is_alive()  # waiting for room
    live.close()
    thread.join(10)
    assert "event" not in outcome and isinstance(outcome.get("error"), ValueError)
    assert live.unwritten_events == ()
    assert _on_disk(live.path) == [0, 1, 2] == [event.seq for event in live.session.events]


def test_a_failed_close_stops_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path, window_s=3600.0)
    live = store.new("s", cwd=CWD)
    live.append("turn/start", {"turn": 1})
    live.flush()
    live.append("step/start", {"turn": 1, "step": 1})
    threads = threading.active_count()

    def write(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(StorageError):
        live.close()
    live._queue._thread.join(5)
    assert not live._queue._thread.is_alive()
    assert threading.active_count() == threads - 1
    assert [event.seq for event in live.unwritten_events] == [1]
    assert live._handle.lock is not None and not live._handle.lock.is_held


def test_timed_out_flushes_leave_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(0.05)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    store = make_store(tmp_path, window_s=0.0)
    live = store.new("s", cwd=CWD)
    live.append("turn/start", {"turn": 1})
    for _ in range(3):
        with pytest.raises(TimeoutError):
            live.flush(timeout=0.001)
    live.flush()
    live.close()
    assert live._queue._results == {}  # no result kept for a flush nobody waits on

    async def scenario() -> None:
        other = await store.anew("a", cwd=CWD)
        await other.append("turn/start", {"turn": 1})
        monkeypatch.setattr(os, "write", _enospc)
        with pytest.raises(TimeoutError):
            await other.flush(timeout=0.001)
        await asyncio.sleep(0.2)  # the write fails after the flush stopped listening
        monkeypatch.undo()
        await other.close()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(scenario())
        gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert read_log(store.locate("a")).classification in ("ok", "open-turn")


def _enospc(fd: int, data: Any) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_appends_make_way_for_a_running_write_every_64_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LiveSession.append`` offers the GIL to the write thread on every 64th call, before
    it commits anything; ``append_many`` once per call (``ThreadWriteBehind.make_way``
    decides whether a write is running)."""
    from dsh_store.jsonl.writebehind import ThreadWriteBehind

    offered: list[ThreadWriteBehind] = []
    monkeypatch.setattr(ThreadWriteBehind, "make_way", lambda queue: offered.append(queue))
    store = make_store(tmp_path / "root")
    with store.new("s1", cwd=CWD) as live:
        live.append("turn/start", {"turn": 1})
        live.append("step/start", {"turn": 1, "step": 1})
        for index in range(198):
            live.append("plugin:test", {"n": index}, ignorable=True)
        assert len(offered) == 3  # the 64th, 128th and 192nd of 200 calls
        live.append_many([("plugin:test", {"n": 1}, {"ignorable": True})] * 3)
        assert len(offered) == 4
