"""Drivers of the write-behind controller: a worker thread, and asyncio.

Both translate :class:`~dsh_store.jsonl.batching.WriteBehindController` actions into
real timers and real writes; the batching rules live only in the controller. The
``sink`` is called once per batch as ``sink(lines, first_seq, last_seq)`` and must
return only when the batch is durable (``LogWriter.append`` does). A sink error
leaves the batch queued: :meth:`flush` retries it and raises a second failure.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from dsh_store.jsonl.batching import (
    Action,
    ArmTimer,
    CancelTimer,
    Closed,
    ReportBackgroundFailure,
    ResolveFlushes,
    StartWrite,
    WriteBehindController,
)

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_MAX_BATCH_EVENTS",
    "DEFAULT_MAX_PENDING_BYTES",
    "DEFAULT_WINDOW_S",
    "AsyncWriteBehind",
    "Sink",
    "ThreadWriteBehind",
]

Sink = Callable[[Sequence[bytes], int, int], None]
"""``sink(lines, first_seq, last_seq)``: write one batch durably or raise."""

DEFAULT_WINDOW_S = 0.05
DEFAULT_MAX_BATCH_EVENTS = 10_000
DEFAULT_MAX_BATCH_BYTES = 8 << 20
DEFAULT_MAX_PENDING_BYTES = 64 << 20

_log = logging.getLogger(__name__)


def _consume_outcome(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _log_background_failure(action: ReportBackgroundFailure) -> None:
    _log.warning(
        "background write of seqs %d..%d failed (%r); the batch stays queued and is retried "
        "with the next event or flush",
        action.first_seq,
        action.last_seq,
        action.error,
    )


class _QueueState:
    """The controller and sink both drivers share, and the views they give."""

    _sink: Sink
    _ctrl: WriteBehindController

    def _init_queue(
        self,
        sink: Sink,
        window_s: float,
        max_batch_events: int | None,
        max_batch_bytes: int | None,
        max_pending_bytes: int | None,
        durable_seq: int | None,
    ) -> None:
        self._sink = sink
        self._ctrl = WriteBehindController(
            window_s=window_s,
            max_batch_events=max_batch_events,
            max_batch_bytes=max_batch_bytes,
            max_pending_bytes=max_pending_bytes,
            durable_seq=durable_seq,
        )

    @property
    def durable_seq(self) -> int | None:
        """Highest seq made durable (None before the first write)."""
        return self._ctrl.durable_seq

    @property
    def failure(self) -> BaseException | None:
        """Error of the latest failed write; None once a later write succeeded."""
        return self._ctrl.failure

    @property
    def pending_bytes(self) -> int:
        """Bytes held in memory (queued plus in flight); bounded by ``max_pending_bytes``."""
        return self._ctrl.pending_bytes


class ThreadWriteBehind(_QueueState):
    """Write-behind queue whose writes run on one background thread.

    :meth:`enqueue` never waits for the disk, except at ``max_pending_bytes``
    where it blocks until a write frees room. :meth:`flush` returns once every
    event enqueued before or during it is durable. :meth:`close` drains and stops
    the thread. All methods are thread-safe.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_batch_events: int | None = DEFAULT_MAX_BATCH_EVENTS,
        max_batch_bytes: int | None = DEFAULT_MAX_BATCH_BYTES,
        max_pending_bytes: int | None = DEFAULT_MAX_PENDING_BYTES,
        durable_seq: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "dsh-store-write-behind",
    ) -> None:
        self._init_queue(
            sink, window_s, max_batch_events, max_batch_bytes, max_pending_bytes, durable_seq
        )
        self._clock = clock
        # Entering the bare lock is a C call; entering the Condition is two Python calls.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._write: StartWrite | None = None
        self._deadline: float | None = None
        self._results: dict[int, BaseException | None] = {}
        self._abandoned: set[int] = set()  # tokens of flushes that timed out
        self._performing = 0  # writes running now (the worker's, or a flusher's)
        self._stopped = False
        # Wake-ups are paid for only when someone needs one: a thread switch costs more
        # than the rest of an append + flush on a busy machine. ``_worker_wakes_at`` is
        # when the sleeping worker will look at the state again on its own (None: only
        # when notified; -inf: it is awake now and will look before it sleeps).
        self._worker_wakes_at: float | None = -math.inf
        # While events keep arriving the idle worker naps for one window at a time instead
        # of sleeping until notified, so a new batch's timer needs no wake-up (its deadline
        # is never before the nap ends). One nap with no event in it ends the heartbeat.
        self._enqueued = 0
        self._enqueued_seen = 0
        self._flush_waiters = 0
        self._room_waiters = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def pending_items(self) -> list[tuple[int, bytes]]:
        """``(seq, line)`` of every event not yet durable."""
        with self._lock:
            return self._ctrl.pending_items()

    def make_way(self) -> None:
        """Let a running write take the GIL now, if one is running (call it outside the lock).

        A producer appending as fast as it can holds the GIL; the write's thread wants it
        back after each of its system calls (the tail check, each ``writev``, the
        ``fsync``, the watermark) and would wait up to the interpreter's switch interval
        (5 ms) each time: tens of milliseconds per batch, measured at saturation. A
        producer that calls this every few dozen events bounds each wait to that many
        events; with no write running it costs one attribute read.
        """
        if self._performing:
            time.sleep(0)  # releases the GIL, so a thread waiting for it takes it now

    def enqueue(self, seq: int, line: bytes) -> None:
        """Queue one line; blocks only while ``max_pending_bytes`` is reached.

        :raises EventValidationError: ``seq`` does not follow the previous one.
        :raises ValueError: the queue is closed.
        :raises Exception: the pending write failure, when the cap is reached while
            automatic writes are paused (call :meth:`flush` to retry).
        """
        with self._lock:
            self._wait_for_room(len(line))
            self._put(seq, line)

    def wait_for_room(self) -> None:
        """Block while ``max_pending_bytes`` or more are pending; queue nothing.

        With :meth:`put`, a producer that must not hold an event it cannot queue (a
        session assigns the seq when it commits) waits first and commits after: the
        pending total then stays below the cap plus one event per producer.

        :raises ValueError: the queue is closed or was aborted.
        :raises Exception: the pending write failure, when the cap is reached while
            automatic writes are paused (call :meth:`flush` to retry).
        """
        # The common case without the lock: under the GIL these reads see a state the queue
        # was in, and room seen a moment late admits only what the locked check admitted
        # just before (the pending total stays below the cap plus one event per producer).
        if not self._stopped and self._ctrl.has_room(1):
            return
        with self._lock:
            self._wait_for_room(1)

    def put(self, seq: int, line: bytes) -> None:
        """Queue one line now, whatever the pending total (see :meth:`wait_for_room`).

        :raises EventValidationError: ``seq`` does not follow the previous one.
        :raises ValueError: the queue is closed or was aborted.
        """
        with self._lock:
            self._put(seq, line)

    def _put(self, seq: int, line: bytes) -> None:
        self._require_running()
        self._enqueued += 1
        actions = self._ctrl.enqueue(seq, line, self._clock())
        if actions:  # most events join a batch whose timer is already armed
            self._apply(actions)

    def _wait_for_room(self, nbytes: int) -> None:
        ctrl = self._ctrl
        while True:
            self._require_running()
            if ctrl.has_room(nbytes):
                return
            self._room_waiters += 1
            try:
                self._cond.wait()
            finally:
                self._room_waiters -= 1

    def _require_running(self) -> None:
        if self._stopped:
            raise ValueError("the write-behind queue is closed; no more events are accepted")

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything enqueued so far (and meanwhile) is durable.

        Without a ``timeout`` the calling thread performs a write that is ready to start
        itself instead of handing it to the worker and waiting: a flush after every event
        then costs one write + fsync, not two thread switches on top.

        :raises TimeoutError: ``timeout`` seconds passed first; the flush goes on.
        :raises Exception: the write failure; the failed batch stays queued.
        """
        with self._lock:
            token, actions = self._ctrl.flush(self._clock())
            # Without a timeout this thread performs a ready write itself: don't wake the
            # worker for it (a wasted thread switch per flush on a busy machine).
            self._apply(actions, hand_off=timeout is not None)
            if timeout is None:
                while token not in self._results and self._write is not None:
                    write, self._write = self._write, None
                    self._perform(write)
            self._wait(token, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Drain the queue, then stop the worker thread; idempotent.

        :raises Exception: the drain failed; the queue stays open and usable (retry
            :meth:`close`, or give up with :meth:`abort`).
        """
        with self._lock:
            if not self._stopped:
                token, actions = self._ctrl.close(self._clock())
                self._apply(actions)
                self._wait(token, timeout)
        self._thread.join()

    def abort(self) -> None:
        """Stop the worker without draining; idempotent. Returns once no write is running.

        A write already running ends first (so its file can be closed safely after this);
        none starts afterwards. Events not yet durable stay in :meth:`pending_items`, and
        flushes still waiting raise :class:`ValueError`.
        """
        with self._lock:
            self._stopped = True
            self._write = None  # a write not yet taken never starts
            self._deadline = None
            self._cond.notify_all()
            while self._performing:  # a flusher's thread may be writing, not the worker
                self._cond.wait()
        self._thread.join()

    def __enter__(self) -> ThreadWriteBehind:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _wait(self, token: int, timeout: float | None) -> None:
        if token not in self._results:
            self._flush_waiters += 1
            try:
                if not self._cond.wait_for(
                    lambda: token in self._results or self._stopped, timeout
                ):
                    # Nobody will collect this flush's result: drop it when it comes.
                    self._abandoned.add(token)
                    raise TimeoutError(f"write-behind flush did not finish within {timeout} s")
            finally:
                self._flush_waiters -= 1
            if token not in self._results:
                raise ValueError("the write-behind queue was aborted before this flush ended")
        error = self._results.pop(token)
        if error is not None:
            raise error

    def _apply(self, actions: list[Action], *, hand_off: bool = True) -> None:
        wake = False
        for action in actions:
            # The common actions first: this runs several times per event (and a class
            # pattern of ``match`` costs several times an isinstance).
            if isinstance(action, ArmTimer):
                deadline = action.deadline
                self._deadline = deadline
                # A worker already due to wake before the deadline will see the timer then.
                wakes_at = self._worker_wakes_at
                wake = wake or wakes_at is None or deadline < wakes_at
            elif isinstance(action, StartWrite):
                if self._stopped:
                    continue  # aborted: the batch stays pending, unwritten
                self._write = action
                wake = wake or hand_off
            elif isinstance(action, ResolveFlushes):
                error = action.error
                for token in action.tokens:
                    if token in self._abandoned:
                        self._abandoned.discard(token)
                    else:
                        self._results[token] = error
                wake = wake or self._flush_waiters > 0
            elif isinstance(action, CancelTimer):
                self._deadline = None  # a sleeping worker finds nothing to do: no wake
            elif isinstance(action, ReportBackgroundFailure):
                _log_background_failure(action)
            elif isinstance(action, Closed):
                self._stopped = True
                wake = True
        if wake:
            self._cond.notify_all()

    def _next_write(self) -> StartWrite | None:
        """Wait (lock held) for a write to start, firing timers; None once stopped."""
        while True:
            if self._stopped:  # after a drain nothing is left; after abort, nothing starts
                return None
            if self._write is not None:
                write, self._write = self._write, None
                return write
            if self._deadline is None:
                window_s = self._ctrl.window_s
                if window_s > 0 and self._enqueued != self._enqueued_seen:
                    self._enqueued_seen = self._enqueued
                    self._sleep(self._clock() + window_s)
                else:
                    self._sleep(None)
                continue
            now = self._clock()
            if now >= self._deadline:
                self._deadline = None
                self._apply(self._ctrl.timer_fired(now))
            else:
                self._sleep(self._deadline)

    def _sleep(self, until: float | None) -> None:
        """Worker wait (lock held): until notified, or until the clock reaches ``until``."""
        self._worker_wakes_at = until
        try:
            self._cond.wait(None if until is None else max(0.0, until - self._clock()))
        finally:
            self._worker_wakes_at = -math.inf

    def _run(self) -> None:
        with self._lock:
            while True:
                write = self._next_write()
                if write is None:
                    return
                self._perform(write)

    def _perform(self, write: StartWrite) -> None:
        """Run one write with the lock released (lock held on entry and on return).

        The controller allows one write in flight, and whoever takes it from
        ``self._write`` under the lock is its only performer.
        """
        error: BaseException | None = None
        self._performing += 1
        self._cond.release()
        try:
            self._sink(write.lines, write.first_seq, write.last_seq)
        except BaseException as caught:  # the performer must survive to report it
            error = caught
        finally:
            self._cond.acquire()
            self._performing -= 1
            if self._stopped:
                self._cond.notify_all()  # abort() may be waiting for this write to end
        now = self._clock()
        if error is None:
            self._apply(self._ctrl.write_succeeded(now))
        else:
            self._apply(self._ctrl.write_failed(error, now))
        if self._flush_waiters or self._room_waiters:
            self._cond.notify_all()  # the room freed, or a flusher's write ended


class AsyncWriteBehind(_QueueState):
    """The asyncio twin of :class:`ThreadWriteBehind`: same rules, coroutine API.

    Timers are event-loop timers; each batch is written by ``sink`` in an
    executor (``loop.run_in_executor``), so the event loop never waits on the
    disk. Use it from one event loop only.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_batch_events: int | None = DEFAULT_MAX_BATCH_EVENTS,
        max_batch_bytes: int | None = DEFAULT_MAX_BATCH_BYTES,
        max_pending_bytes: int | None = DEFAULT_MAX_PENDING_BYTES,
        durable_seq: int | None = None,
        executor: Executor | None = None,
    ) -> None:
        self._init_queue(
            sink, window_s, max_batch_events, max_batch_bytes, max_pending_bytes, durable_seq
        )
        self._executor = executor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._room_waiters: list[asyncio.Future[None]] = []
        self._write_task: asyncio.Task[None] | None = None
        self._closed = False
        self._aborted = False

    def pending_items(self) -> list[tuple[int, bytes]]:
        """``(seq, line)`` of every event not yet durable."""
        return self._ctrl.pending_items()

    async def enqueue(self, seq: int, line: bytes) -> None:
        """Queue one line; awaits only while ``max_pending_bytes`` is reached.

        Raises as :meth:`ThreadWriteBehind.enqueue` does.
        """
        await self._wait_for_room(len(line))
        self.put(seq, line)

    async def wait_for_room(self) -> None:
        """Await while ``max_pending_bytes`` or more are pending; queue nothing.

        The asyncio twin of :meth:`ThreadWriteBehind.wait_for_room`: cancelling it leaves
        the queue as it was.
        """
        await self._wait_for_room(1)

    def put(self, seq: int, line: bytes) -> None:
        """Queue one line now, whatever the pending total (see :meth:`wait_for_room`).

        :raises EventValidationError: ``seq`` does not follow the previous one.
        :raises ValueError: the queue is closed or was aborted.
        :raises RuntimeError: called from another event loop than the first one used.
        """
        loop = self._bind()
        self._require_running()
        self._apply(self._ctrl.enqueue(seq, line, loop.time()))

    async def _wait_for_room(self, nbytes: int) -> None:
        loop = self._bind()
        while True:
            self._require_running()
            if self._ctrl.has_room(nbytes):
                return
            room: asyncio.Future[None] = loop.create_future()
            self._room_waiters.append(room)
            await room

    def _require_running(self) -> None:
        if self._aborted:
            raise ValueError("the write-behind queue is closed; no more events are accepted")

    async def flush(self, timeout: float | None = None) -> None:
        """Return once everything enqueued so far (and meanwhile) is durable.

        :raises TimeoutError: ``timeout`` seconds passed first; the flush goes on.
        :raises Exception: the write failure; the failed batch stays queued.
        """
        loop = self._bind()
        token, actions = self._ctrl.flush(loop.time())
        await self._wait(loop, token, actions, timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Drain the queue, then stop accepting events; idempotent.

        :raises Exception: the drain failed; the queue stays open and usable (retry
            :meth:`close`, or give up with :meth:`abort`).
        """
        if self._closed:
            return
        loop = self._bind()
        token, actions = self._ctrl.close(loop.time())
        await self._wait(loop, token, actions, timeout)

    async def abort(self) -> None:
        """Stop writing without draining; idempotent. Returns once no write is running.

        The timer is cancelled and no write starts any more; a write already running in
        the executor is waited for, even if the awaiting task is cancelled meanwhile (the
        cancellation is raised afterwards), so its file can be closed safely after this.
        Events not yet durable stay in :meth:`pending_items`; waiting flushes and producers
        get :class:`ValueError`.
        """
        self._aborted = True
        self._cancel_timer()
        cancelled = False
        while (task := self._write_task) is not None and not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                cancelled = True  # finish waiting first: the write still uses the file
        aborted = ValueError("the write-behind queue was aborted before this flush ended")
        for token in list(self._waiters):
            self._resolve(token, aborted)
        self._wake_producers()
        if cancelled:
            raise asyncio.CancelledError

    async def __aenter__(self) -> AsyncWriteBehind:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("an AsyncWriteBehind is bound to the event loop that first used it")
        return loop

    async def _wait(
        self,
        loop: asyncio.AbstractEventLoop,
        token: int,
        actions: list[Action],
        timeout: float | None,
    ) -> None:
        done: asyncio.Future[None] = loop.create_future()
        self._waiters[token] = done  # before applying: the answer may already be in `actions`
        self._apply(actions)
        if timeout is None:
            await done
            return
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except BaseException:
            # The flush goes on without a listener: take its outcome when it comes, so a
            # later failure is not reported as "Future exception was never retrieved".
            done.add_done_callback(_consume_outcome)
            raise

    def _apply(self, actions: list[Action]) -> None:
        loop = self._loop
        assert loop is not None
        for action in actions:
            if isinstance(action, StartWrite):
                if self._aborted:
                    continue  # the batch stays pending, unwritten
                self._write_task = loop.create_task(self._write(loop, action))
            elif isinstance(action, ArmTimer):
                self._cancel_timer()
                if not self._aborted:
                    self._timer = loop.call_at(action.deadline, self._on_timer)
            elif isinstance(action, CancelTimer):
                self._cancel_timer()
            elif isinstance(action, ResolveFlushes):
                for token in action.tokens:
                    self._resolve(token, action.error)
            elif isinstance(action, ReportBackgroundFailure):
                _log_background_failure(action)
            elif isinstance(action, Closed):
                self._closed = True

    def _resolve(self, token: int, error: BaseException | None) -> None:
        done = self._waiters.pop(token, None)
        if done is None or done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        self._apply(self._ctrl.timer_fired(loop.time()))

    async def _write(self, loop: asyncio.AbstractEventLoop, write: StartWrite) -> None:
        try:
            await loop.run_in_executor(
                self._executor, self._sink, write.lines, write.first_seq, write.last_seq
            )
        except Exception as error:
            self._apply(self._ctrl.write_failed(error, loop.time()))
        else:
            self._apply(self._ctrl.write_succeeded(loop.time()))
        self._wake_producers()

    def _wake_producers(self) -> None:
        """Let every producer waiting for room look again."""
        rooms, self._room_waiters = self._room_waiters, []
        for room in rooms:
            if not room.done():
                room.set_result(None)
