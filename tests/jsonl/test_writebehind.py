"""The thread and asyncio write-behind drivers, writing real logs through LogWriter."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from dsh_store.errors import ConcurrentModificationError, WriterBrokenError
from dsh_store.jsonl.files import LogWriter, materialize
from dsh_store.jsonl.layout import log_path
from dsh_store.jsonl.writebehind import AsyncWriteBehind, ThreadWriteBehind

HEADER = (
    b'{"type":"session","version":4,"id":"s-1","createdAt":1,"isSeeded":false,'
    b'"delegationDepth":0}\n'
)


def event_line(seq: int) -> bytes:
    return b'{"type":"plugin:test","seq":%d,"time":1,"data":{},"ignorable":true}\n' % seq


def expected_log(count: int) -> bytes:
    return HEADER + b"".join(event_line(seq) for seq in range(count))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return log_path(tmp_path, "s-1", "/w")


@pytest.fixture
def writer(path: Path) -> LogWriter:
    return materialize(path, HEADER, [event_line(0)])


class Gate:
    """A sink wrapper that can hold writes, fail them, and counts batches."""

    def __init__(self, sink: Callable[[Sequence[bytes], int, int], None]) -> None:
        self.sink = sink
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()
        self.failures: list[BaseException] = []
        self.failed = threading.Event()
        self.batches: list[tuple[int, int]] = []

    def __call__(self, lines: Sequence[bytes], first: int, last: int) -> None:
        self.entered.set()
        assert self.open.wait(10), "a test forgot to open the gate"
        self.batches.append((first, last))
        if self.failures:
            error = self.failures.pop(0)
            self.failed.set()
            raise error
        self.sink(lines, first, last)


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.001)


# -- thread driver -------------------------------------------------------------------------


def test_thread_flush_makes_everything_durable(path: Path, writer: LogWriter) -> None:
    with ThreadWriteBehind(writer.append, window_s=0.01, durable_seq=0) as queue:
        for seq in range(1, 301):
            queue.enqueue(seq, event_line(seq))
        queue.flush()
        assert queue.durable_seq == 300
        assert path.read_bytes() == expected_log(301)
        assert queue.failure is None


def test_thread_flush_does_not_wait_for_a_long_window(path: Path, writer: LogWriter) -> None:
    queue = ThreadWriteBehind(writer.append, window_s=3600, durable_seq=0)
    queue.enqueue(1, event_line(1))
    queue.flush(timeout=30)
    assert path.read_bytes() == expected_log(2)
    queue.close()


def test_thread_window_zero_batches_what_arrives_during_a_write(
    path: Path, writer: LogWriter
) -> None:
    gate = Gate(writer.append)
    gate.open.clear()
    queue = ThreadWriteBehind(gate, window_s=0, durable_seq=0)
    queue.enqueue(1, event_line(1))
    assert gate.entered.wait(10)
    for seq in range(2, 50):
        queue.enqueue(seq, event_line(seq))
    gate.open.set()
    queue.flush()
    assert gate.batches == [(1, 1), (2, 49)]
    assert path.read_bytes() == expected_log(50)
    queue.close()


class CountingCondition(threading.Condition):
    """A condition that counts its notify_all calls (each may wake the worker thread)."""

    notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()


def test_thread_append_then_flush_writes_on_the_callers_thread_and_wakes_nobody(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []

    def sink(lines: Sequence[bytes], first: int, last: int) -> None:
        threads.append(threading.current_thread())
        writer.append(lines, first, last)

    with monkeypatch.context() as patch:
        patch.setattr(threading, "Condition", CountingCondition)
        queue = ThreadWriteBehind(sink, window_s=5.0, durable_seq=0)
    condition = queue._cond
    assert isinstance(condition, CountingCondition)
    for seq in range(1, 101):
        queue.enqueue(seq, event_line(seq))
        queue.flush()
    assert path.read_bytes() == expected_log(101)
    assert threads == [threading.current_thread()] * 100
    # The first event of the session wakes the idle worker so that it naps on the window;
    # afterwards each new timer falls after the nap's end and needs no wake-up.
    assert condition.notified <= 2
    queue.close()


def test_make_way_hands_the_gil_to_a_running_write(path: Path, writer: LogWriter) -> None:
    """A producer busy in Python code keeps the GIL until the switch interval ends; here that
    interval is an hour, so a write that needs the GIL between its system calls gets it only
    when the producer's ``make_way`` hands it over."""
    steps: list[int] = []
    started, go = threading.Event(), threading.Event()

    def sink(lines: Sequence[bytes], first: int, last: int) -> None:
        started.set()
        go.wait(10)  # returning from the wait needs the GIL too
        for step in range(5):
            os.stat(path)  # a system call: the GIL is released, then wanted back
            steps.append(step)
        writer.append(lines, first, last)

    queue = ThreadWriteBehind(sink, window_s=0, durable_seq=0)
    interval = sys.getswitchinterval()
    try:
        queue.enqueue(1, event_line(1))
        assert started.wait(10)
        sys.setswitchinterval(3600)
        go.set()
        deadline = time.monotonic() + 10
        spins = 0
        while len(steps) < 5 and time.monotonic() < deadline:
            spins += 1  # pure Python: the GIL is never released here
            if spins % 1000 == 0:
                queue.make_way()
    finally:
        sys.setswitchinterval(interval)
    assert steps == [0, 1, 2, 3, 4]
    queue.flush()
    assert path.read_bytes() == expected_log(2)
    queue.close()


def test_make_way_without_a_running_write_leaves_the_gil_alone(
    writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    queue = ThreadWriteBehind(writer.append, window_s=3600, durable_seq=0)
    monkeypatch.setattr(time, "sleep", sleeps.append)
    queue.make_way()  # idle: nothing to hand over
    queue.enqueue(1, event_line(1))
    queue.make_way()  # queued, but no write runs before the window ends
    monkeypatch.undo()
    assert sleeps == []
    queue.close()


def test_thread_timer_armed_during_a_nap_still_fires(path: Path, writer: LogWriter) -> None:
    queue = ThreadWriteBehind(writer.append, window_s=0.05, durable_seq=0)
    queue.enqueue(1, event_line(1))
    queue.flush()
    queue.enqueue(2, event_line(2))  # no flush: the window alone must make it durable
    wait_until(lambda: queue.durable_seq == 2)
    assert path.read_bytes() == expected_log(3)
    # Once events stop, the worker ends its naps and sleeps until notified ...
    wait_until(lambda: queue._worker_wakes_at is None)
    # ... and the next event wakes it again.
    queue.enqueue(3, event_line(3))
    wait_until(lambda: queue.durable_seq == 3)
    assert path.read_bytes() == expected_log(4)
    queue.close()


def test_thread_flush_raises_the_write_failure_and_a_second_flush_retries(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            real_write(fd, bytes(data)[:7])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    queue = ThreadWriteBehind(writer.append, window_s=3600, durable_seq=0)
    for seq in range(1, 5):
        queue.enqueue(seq, event_line(seq))
    with pytest.raises(OSError, match="No space left on device"):
        queue.flush()
    assert path.read_bytes() == expected_log(1)
    assert isinstance(queue.failure, OSError) and queue.durable_seq == 0
    assert [seq for seq, _ in queue.pending_items()] == [1, 2, 3, 4]
    queue.flush()
    assert path.read_bytes() == expected_log(5)
    assert queue.failure is None
    queue.close()


def test_thread_background_failure_is_logged_once_and_retried_by_the_next_event(
    path: Path, writer: LogWriter, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate(writer.append)
    gate.failures.append(OSError(errno.EIO, "Input/output error"))
    queue = ThreadWriteBehind(gate, window_s=0.001, durable_seq=0)
    with caplog.at_level(logging.WARNING, logger="dsh_store.jsonl.writebehind"):
        queue.enqueue(1, event_line(1))
        assert gate.failed.wait(10)
        wait_until(lambda: queue.failure is not None)
        queue.enqueue(2, event_line(2))
        wait_until(lambda: queue.durable_seq == 2)
    assert path.read_bytes() == expected_log(3)
    assert gate.batches == [(1, 1), (1, 2)]
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "background write of seqs 1..1 failed (OSError(5, 'Input/output error')); the batch "
        "stays queued and is retried with the next event or flush"
    ]
    queue.close()


def test_thread_enqueue_blocks_at_the_pending_cap_until_a_write_frees_room(
    path: Path, writer: LogWriter
) -> None:
    gate = Gate(writer.append)
    gate.open.clear()
    line_size = len(event_line(10))
    queue = ThreadWriteBehind(
        gate, window_s=0, durable_seq=0, max_pending_bytes=4 * line_size, max_batch_events=2
    )
    produced: list[int] = []

    def produce() -> None:
        for seq in range(1, 41):
            queue.enqueue(seq, event_line(seq))
            produced.append(seq)

    producer = threading.Thread(target=produce)
    producer.start()
    assert gate.entered.wait(10)
    wait_until(lambda: queue.pending_bytes + line_size > 4 * line_size)
    assert producer.is_alive() and len(produced) < 40  # held back by the cap
    gate.open.set()
    producer.join(10)
    assert produced == list(range(1, 41))
    queue.flush()
    assert path.read_bytes() == expected_log(41)
    queue.close()


def test_thread_flush_timeout_raises_and_the_flush_goes_on(path: Path, writer: LogWriter) -> None:
    gate = Gate(writer.append)
    gate.open.clear()
    queue = ThreadWriteBehind(gate, window_s=0, durable_seq=0)
    queue.enqueue(1, event_line(1))
    with pytest.raises(TimeoutError, match=r"write-behind flush did not finish within 0\.01 s"):
        queue.flush(timeout=0.01)
    gate.open.set()
    queue.flush()
    assert path.read_bytes() == expected_log(2)
    queue.close()


def test_thread_close_drains_then_refuses_events(path: Path, writer: LogWriter) -> None:
    queue = ThreadWriteBehind(writer.append, window_s=3600, durable_seq=0)
    queue.enqueue(1, event_line(1))
    queue.close()
    queue.close()
    assert path.read_bytes() == expected_log(2)
    with pytest.raises(ValueError, match="the write-behind queue is closed"):
        queue.enqueue(2, event_line(2))
    assert not queue._thread.is_alive()


def test_thread_broken_writer_surfaces_and_keeps_every_unwritten_line(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def eio(*_args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", eio)
    queue = ThreadWriteBehind(writer.append, window_s=3600, durable_seq=0)
    queue.enqueue(1, event_line(1))
    with pytest.raises(WriterBrokenError, match="writer is broken after a failed rollback"):
        queue.flush()
    monkeypatch.undo()
    queue.enqueue(2, event_line(2))
    with pytest.raises(WriterBrokenError):
        queue.flush()
    assert queue.pending_items() == [(1, event_line(1)), (2, event_line(2))]
    assert writer.broken


def test_thread_concurrent_modification_reaches_the_flush(path: Path, writer: LogWriter) -> None:
    queue = ThreadWriteBehind(writer.append, window_s=3600, durable_seq=0)
    with open(path, "ab") as handle:
        handle.write(b"garbage")
    queue.enqueue(1, event_line(1))
    with pytest.raises(ConcurrentModificationError, match="log changed under this writer"):
        queue.flush()
    assert path.read_bytes() == expected_log(1) + b"garbage"


def test_thread_many_producers_flushing_concurrently_all_return(
    path: Path, writer: LogWriter
) -> None:
    queue = ThreadWriteBehind(writer.append, window_s=0.001, durable_seq=0)
    lock = threading.Lock()
    next_seq = [1]

    def produce() -> None:
        for _ in range(50):
            with lock:  # seqs must be enqueued in order
                seq = next_seq[0]
                next_seq[0] += 1
                queue.enqueue(seq, event_line(seq))
            queue.flush()

    threads = [threading.Thread(target=produce) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    queue.close()
    assert path.read_bytes() == expected_log(201)


# -- asyncio driver -------------------------------------------------------------------------


def test_async_flush_makes_everything_durable(path: Path, writer: LogWriter) -> None:
    async def main() -> None:
        async with AsyncWriteBehind(writer.append, window_s=0.01, durable_seq=0) as queue:
            for seq in range(1, 201):
                await queue.enqueue(seq, event_line(seq))
            await queue.flush()
            assert queue.durable_seq == 200
            assert path.read_bytes() == expected_log(201)

    asyncio.run(main())


def test_async_writes_run_off_the_event_loop(path: Path, writer: LogWriter) -> None:
    gate = Gate(writer.append)
    gate.open.clear()

    async def main() -> None:
        queue = AsyncWriteBehind(gate, window_s=0, durable_seq=0)
        await queue.enqueue(1, event_line(1))
        flushing = asyncio.ensure_future(queue.flush())
        # The loop keeps running while the write is held in the executor.
        while not gate.entered.is_set():
            await asyncio.sleep(0.001)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not flushing.done()
        gate.open.set()
        await flushing
        assert path.read_bytes() == expected_log(2)
        await queue.close()

    asyncio.run(main())


def test_async_flush_failure_keeps_the_batch_and_the_next_flush_retries(
    path: Path, writer: LogWriter
) -> None:
    gate = Gate(writer.append)
    gate.failures.append(OSError(errno.ENOSPC, "No space left on device"))

    async def main() -> None:
        queue = AsyncWriteBehind(gate, window_s=3600, durable_seq=0)
        await queue.enqueue(1, event_line(1))
        await queue.enqueue(2, event_line(2))
        with pytest.raises(OSError, match="No space left on device"):
            await queue.flush()
        assert [seq for seq, _ in queue.pending_items()] == [1, 2]
        await queue.flush()
        await queue.close()
        assert gate.batches == [(1, 2), (1, 2)]

    asyncio.run(main())
    assert path.read_bytes() == expected_log(3)


def test_async_background_failure_is_retried_with_the_next_event(
    path: Path, writer: LogWriter
) -> None:
    gate = Gate(writer.append)
    gate.failures.append(OSError(errno.EIO, "Input/output error"))

    async def main() -> None:
        queue = AsyncWriteBehind(gate, window_s=0.001, durable_seq=0)
        await queue.enqueue(1, event_line(1))
        while queue.failure is None:
            await asyncio.sleep(0.001)
        await queue.enqueue(2, event_line(2))
        while queue.durable_seq != 2:
            await asyncio.sleep(0.001)
        await queue.close()

    asyncio.run(main())
    assert gate.batches == [(1, 1), (1, 2)]
    assert path.read_bytes() == expected_log(3)


def test_async_enqueue_awaits_at_the_pending_cap(path: Path, writer: LogWriter) -> None:
    gate = Gate(writer.append)
    gate.open.clear()
    line_size = len(event_line(10))

    async def main() -> None:
        queue = AsyncWriteBehind(gate, window_s=0, durable_seq=0, max_pending_bytes=3 * line_size)
        produced: list[int] = []

        async def produce() -> None:
            for seq in range(1, 31):
                await queue.enqueue(seq, event_line(seq))
                produced.append(seq)

        producer = asyncio.ensure_future(produce())
        while not gate.entered.is_set():
            await asyncio.sleep(0.001)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not producer.done() and len(produced) < 30
        gate.open.set()
        await producer
        await queue.close()

    asyncio.run(main())
    assert path.read_bytes() == expected_log(31)


def test_async_close_is_idempotent_and_refuses_later_events(path: Path, writer: LogWriter) -> None:
    async def main() -> None:
        queue = AsyncWriteBehind(writer.append, window_s=3600, durable_seq=0)
        await queue.enqueue(1, event_line(1))
        await queue.close()
        await queue.close()
        with pytest.raises(ValueError, match="the write-behind queue is closed"):
            await queue.enqueue(2, event_line(2))

    asyncio.run(main())
    assert path.read_bytes() == expected_log(2)
