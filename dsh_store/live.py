"""Sessions open for writing: the sync :class:`LiveSession` and :class:`AsyncLiveSession`.

Both hold the session's exclusive lock from open (or first write) to close, validate and
sequence events in memory at ``append``, and hand the canonical lines to a write-behind
queue (a worker thread, or asyncio with disk I/O in the loop's executor).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ._typed_append import typed_append
from .backend import Appender, StorageBackend, WriterLock
from .errors import EventValidationError, ForkedSessionError, WriterBrokenError
from .jsonl.files import storage_errors
from .jsonl.writebehind import AsyncWriteBehind, ThreadWriteBehind
from .model import EventInput, Session, SessionEvent

__all__ = ["AsyncLiveSession", "AsyncOpening", "LiveSession"]

# This process's pid as the interpreter's at-fork hooks keep it: they run in every child of
# os.fork() (multiprocessing's fork start method and subprocess's preexec_fn included) and
# record the child's pid there, so comparing it is free on every append, where os.getpid()
# is a system call.
_MAKE_WAY_MASK = 63
"""``LiveSession.append`` lets a running write take the GIL on every 64th call
(``ThreadWriteBehind.make_way``): at about 8 µs an append, a write waits at most about
half a millisecond for the GIL after each of its system calls, instead of 5 ms."""

_this_pid = [os.getpid()]


def _note_fork() -> None:
    _this_pid[0] = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_note_fork)


class WriterHandle:
    """The shared core of the sync and async live sessions: model, lock, appender."""

    def __init__(
        self,
        options: Mapping[str, Any],
        session: Session,
        path: Path,
        *,
        backend: StorageBackend,
        lock: WriterLock | None = None,
        writer: Appender | None = None,
        written: int = 0,
    ) -> None:
        self.session = session
        self.path = path
        self.backend = backend  # where the log is stored
        self.lock = lock
        self.writer = writer
        self.written = written  # events already durable when the handle was made
        self.options = options  # the store's write-behind settings
        # The writer thread, the seq counter and the lock belong to this process; a fork
        # child gets copies of them that must never write, flush, close or unlock.
        self.owner_pid = os.getpid()

    def require_owner(self) -> None:
        """Raise ForkedSessionError when called in a process forked after the handle was made."""
        pid = os.getpid()
        if pid != self.owner_pid:
            raise ForkedSessionError(self.session.id, self.owner_pid, pid)

    def require_unforked(self) -> None:
        """:meth:`require_owner` by the pid the at-fork hook keeps (no system call), for
        appends; a process forked without the hooks is caught by flush and close."""
        if _this_pid[0] != self.owner_pid:
            self.require_owner()

    def pending_events(self) -> list[SessionEvent]:
        """Events in memory that are not yet handed to the writer (e.g. the end-seed)."""
        return list(self.session.events[self.written :])

    def initial_durable_seq(self) -> int | None:
        """The highest seq already on disk when the handle was made (None: nothing)."""
        return self.written - 1 if self.writer is not None and self.written > 0 else None

    def require_usable(self) -> None:
        """Raise WriterBrokenError once a rollback failed: nothing more is accepted."""
        writer = self.writer
        if writer is not None and writer.broken_cause is not None:
            raise WriterBrokenError(str(self.path), writer.broken_cause)

    def unwritten(self, durable_seq: int | None) -> tuple[SessionEvent, ...]:
        """Events of the session that are not known durable."""
        start = 0 if durable_seq is None else durable_seq + 1
        return self.session.events[start:]

    def sink(self, lines: Sequence[bytes], first_seq: int, last_seq: int) -> None:
        """Write one batch durably: materialize on the first, append afterwards."""
        if self.writer is None:
            if first_seq != 0:
                raise EventValidationError(
                    f"the first batch of a new log must start at seq 0, got {first_seq}",
                    rule="append-seq-mismatch",
                    seq=first_seq,
                    path=str(self.path),
                )
            with storage_errors("creating the session's log", self.path):
                lock = self.backend.lock(self.path, self.session.id, create=True)
                lock.acquire()
                try:
                    self.writer = self.backend.publish_first(
                        self.path,
                        self.session.header.encode(),
                        lines,
                        session_id=self.session.id,
                    )
                except BaseException:
                    lock.release()
                    raise
            self.lock = lock
            return
        self.writer.append(lines, first_seq, last_seq)

    def release(self) -> None:
        """Close the file and release the lock; idempotent."""
        try:
            if self.writer is not None:
                self.writer.close()
        finally:
            if self.lock is not None:
                self.lock.release()


class _LiveViews:
    """What the sync and async live sessions share: read-only views of the open session."""

    _handle: WriterHandle
    _queue: ThreadWriteBehind | AsyncWriteBehind

    @property
    def session(self) -> Session:
        """The in-memory session (read-only views of events, surface, messages)."""
        return self._handle.session

    @property
    def id(self) -> str:
        """The session id."""
        return self._handle.session.id

    @property
    def path(self) -> Path:
        """The log file this session writes."""
        return self._handle.path

    @property
    def durable_seq(self) -> int | None:
        """Highest seq known durable on disk (None before the first write)."""
        return self._queue.durable_seq

    @property
    def unwritten_events(self) -> tuple[SessionEvent, ...]:
        """Events appended in memory but not known durable (e.g. after a failed write)."""
        return self._handle.unwritten(self._queue.durable_seq)

    _closed: bool
    _closing: bool
    _reopen: str  # how to open the session again, named in the errors below

    def _require_open(self) -> None:
        self._handle.require_unforked()
        if self._closed:
            raise ValueError(f"session {self.id!r} is closed; reopen it with {self._reopen}")
        self._handle.require_usable()

    def _require_accepting(self) -> None:
        if self._closing:
            raise ValueError(f"session {self.id!r} is closing; reopen it with {self._reopen}")

    def _commit(
        self,
        type: str,
        data: Any,
        surface_op: Any,
        source_event_seqs: Sequence[int] | None,
        ignorable: bool,
    ) -> SessionEvent:
        """Commit one event to the session and queue it (the order lock is held, room made)."""
        self._require_accepting()
        event = self._handle.session.append(
            type,
            data,
            surface_op=surface_op,
            source_event_seqs=source_event_seqs,
            ignorable=ignorable,
        )
        self._queue.put(event.seq, event.line)
        return event

    def _commit_many(self, inputs: Iterable[EventInput | tuple[Any, ...]]) -> list[SessionEvent]:
        """:meth:`_commit` for a batch: all validated first, then all queued."""
        self._require_accepting()
        events = self._handle.session.append_many(inputs)
        for event in events:
            self._queue.put(event.seq, event.line)
        return events


class LiveSession(_LiveViews):
    """A session open for writing (sync API): appends return at once, writes batch behind.

    ``append`` validates and assigns the seq synchronously and hands the event to the
    background writer; ``flush`` returns once every event appended so far is durable;
    ``close`` drains and releases the lock. Use it as a context manager.
    """

    _queue: ThreadWriteBehind
    _reopen = "store.open()"

    def __init__(self, handle: WriterHandle) -> None:
        self._handle = handle
        self._queue = ThreadWriteBehind(
            handle.sink, durable_seq=handle.initial_durable_seq(), **handle.options
        )
        self._closed = False
        self._closing = False
        # An event is committed (its seq assigned) and queued under this lock, so seqs
        # reach the queue in order from any thread, and close() never sees one half done.
        self._order = threading.Lock()
        self._appends = 0  # calls of append, for make_way's cadence
        for event in handle.pending_events():
            self._queue.put(event.seq, event.line)

    @typed_append
    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Validate and append one event; it becomes durable within the batching window.

        Blocks only while ``max_pending_bytes`` of unwritten events are waiting, before
        anything changes: an append that raises (or is interrupted) leaves no trace.
        Thread-safe: appends from several threads get consecutive seqs.

        :raises WriterBrokenError: an earlier write could not be rolled back.
        :raises ForkedSessionError: called in a process forked from the one that opened it.
        :raises Exception: the pending write failure, when the memory cap is reached while
            automatic writes are paused (:meth:`flush` retries).
        """
        self._require_open()
        self._queue.wait_for_room()
        self._appends += 1
        if not self._appends & _MAKE_WAY_MASK:
            self._queue.make_way()  # before the commit: an interrupt here leaves no trace
        with self._order:
            return self._commit(type, data, surface_op, source_event_seqs, ignorable)

    def append_many(self, inputs: Iterable[EventInput | tuple[Any, ...]]) -> list[SessionEvent]:
        """Validate all inputs first, then append them together (all or nothing)."""
        self._require_open()
        self._queue.wait_for_room()
        self._queue.make_way()
        with self._order:
            return self._commit_many(inputs)

    def flush(self, timeout: float | None = None) -> None:
        """Block until every event appended so far (and meanwhile) is durable.

        :raises OSError: the write failed; the events stay queued and the next flush retries.
        :raises WriterBrokenError: a rollback failed; see :attr:`unwritten_events`.
        """
        self._handle.require_owner()  # the system call too: a flush waits for the disk anyway
        self._require_open()
        self._queue.flush(timeout)

    def close(self) -> None:
        """Drain every pending event, then release the file and the lock; idempotent.

        The file and the lock are released even when the drain fails (the error is
        raised), after the write-behind thread has stopped and no write is running:
        reopening the session then restores what is durable. Events that were not
        written stay readable from :attr:`unwritten_events`. Appends from other threads
        raise :class:`ValueError` once the close has begun.
        """
        if self._closed:
            return
        self._handle.require_owner()  # before any lock: a fork child may hold a copy of one
        try:
            with self._order:
                self._closing = True
            self._handle.require_usable()
            self._queue.close()
        finally:
            self._closed = True
            try:
                self._queue.abort()  # no-op after a drain; else stops the writer first
            finally:
                self._handle.release()

    def __enter__(self) -> LiveSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncOpening:
    """An opening session: ``live = await opening`` or ``async with opening as live``."""

    def __init__(self, start: Callable[[], Coroutine[Any, Any, AsyncLiveSession]]) -> None:
        self._start = start
        self._live: AsyncLiveSession | None = None

    def __await__(self) -> Generator[Any, None, AsyncLiveSession]:
        return self._start().__await__()

    async def __aenter__(self) -> AsyncLiveSession:
        self._live = await self._start()
        return await self._live.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            await self._live.__aexit__(exc_type, exc, tb)


class AsyncLiveSession(_LiveViews):
    """The asyncio twin of :class:`LiveSession`: file I/O runs in the loop's executor."""

    _queue: AsyncWriteBehind
    _reopen = "store.aopen()"

    def __init__(self, handle: WriterHandle) -> None:
        self._handle = handle
        self._queue = AsyncWriteBehind(
            handle.sink, durable_seq=handle.initial_durable_seq(), **handle.options
        )
        self._closed = False
        self._closing = False
        self._started = False
        # Seqs are assigned at append and must reach the queue in that order, even when
        # one append waits for room (backpressure) while another task appends.
        self._order = asyncio.Lock()

    async def _start(self) -> None:
        if not self._started:
            self._started = True
            for event in self._handle.pending_events():
                self._queue.put(event.seq, event.line)

    @typed_append
    async def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Validate and append one event; awaits only at ``max_pending_bytes``.

        The wait comes before anything changes, so an append that is cancelled or raises
        leaves no trace.

        :raises WriterBrokenError: an earlier write could not be rolled back.
        :raises ForkedSessionError: called in a process forked from the one that opened it.
        """
        self._require_open()
        await self._start()
        async with self._order:
            await self._queue.wait_for_room()
            return self._commit(type, data, surface_op, source_event_seqs, ignorable)

    async def append_many(
        self, inputs: Iterable[EventInput | tuple[Any, ...]]
    ) -> list[SessionEvent]:
        """Validate all inputs first, then append them together (all or nothing)."""
        self._require_open()
        await self._start()
        async with self._order:
            await self._queue.wait_for_room()
            return self._commit_many(inputs)

    async def flush(self, timeout: float | None = None) -> None:
        """Return once every event appended so far (and meanwhile) is durable.

        :raises OSError: the write failed; the events stay queued and the next flush retries.
        :raises WriterBrokenError: a rollback failed; see :attr:`unwritten_events`.
        """
        self._handle.require_owner()  # the system call too: a flush waits for the disk anyway
        self._require_open()
        await self._start()
        await self._queue.flush(timeout)

    async def close(self) -> None:
        """Drain, then release the file and the lock (in the executor); idempotent.

        Like :meth:`LiveSession.close`, the lock is released even when the drain fails or
        the close is cancelled, but only once no write is running: a cancelled close
        still waits for the write in flight (then raises the cancellation), so the file
        is never closed under a write and no second writer can start beside it.
        """
        if self._closed:
            return
        self._handle.require_owner()
        try:
            self._handle.require_usable()
            await self._start()
            # An append waiting for room holds the order lock: writing the queue gives it
            # room, so it commits and queues before the close takes the lock and drains.
            await self._queue.flush()
            async with self._order:
                self._closing = True
            await self._queue.close()
        finally:
            self._closed = True
            try:
                await self._queue.abort()  # no-op after a drain; else waits out the write
            finally:
                release = asyncio.get_running_loop().run_in_executor(None, self._handle.release)
                await asyncio.shield(release)  # runs to the end even if we are cancelled

    async def __aenter__(self) -> AsyncLiveSession:
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
