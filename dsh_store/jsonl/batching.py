"""The write-behind batching algorithm as a sans-I/O state machine.

:class:`WriteBehindController` decides *when* queued lines are written and *which*
lines form a batch; it never sleeps, reads a clock or touches a file. Drivers
(:mod:`dsh_store.jsonl.writebehind`) feed it inputs with the current time and
carry out the actions it returns:

* :class:`StartWrite` — write these lines now (at most one write is in flight);
* :class:`ArmTimer` / :class:`CancelTimer` — call :meth:`~WriteBehindController.timer_fired`
  at this monotonic time / no timer is needed;
* :class:`ResolveFlushes` — these flush or close waiters are done, with this error or none;
* :class:`ReportBackgroundFailure` — a write nobody waits on failed (log it); the same
  failure again (same type and text) is reported once until a write succeeds;
* :class:`Closed` — the queue is drained after ``close``; release the writer.

Rules (DESIGN §5): a fixed window starts when the queue goes from empty to
non-empty and later events do not move it (window 0 writes as soon as the
previous write finished); a batch starts early once ``max_batch_events`` or
``max_batch_bytes`` are queued; events arriving during a write keep or get their
own deadline; ``flush`` is a shared barrier that drains everything, including
events added while it runs; a failed background write goes back to the front of
the queue and automatic writes pause until the next event or flush; a failure of
a write the barrier started is reported to every waiter, and the batch stays.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from dsh_store.errors import EventValidationError

__all__ = [
    "Action",
    "ArmTimer",
    "CancelTimer",
    "Closed",
    "ReportBackgroundFailure",
    "ResolveFlushes",
    "StartWrite",
    "WriteBehindController",
]


# The actions are records a driver reads and never changes. Those made for every event or
# batch (StartWrite, ArmTimer, ResolveFlushes) are not frozen: building a frozen dataclass
# costs one ``object.__setattr__`` call per field, several times per event on the hot path.


@dataclass(slots=True)
class StartWrite:
    """Write ``lines`` (seqs ``first_seq .. last_seq``, ``nbytes`` bytes) now."""

    lines: list[bytes]
    first_seq: int
    last_seq: int
    nbytes: int


@dataclass(slots=True)
class ArmTimer:
    """Call ``timer_fired`` once the clock reaches ``deadline`` (replaces any earlier timer)."""

    deadline: float


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """No timer is needed any more."""


@dataclass(slots=True)
class ResolveFlushes:
    """Wake the flush/close waiters ``tokens``: done if ``error`` is None, else failed with it."""

    tokens: tuple[int, ...]
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class ReportBackgroundFailure:
    """A background write of seqs ``first_seq .. last_seq`` failed; it will be retried later."""

    error: BaseException
    first_seq: int
    last_seq: int


@dataclass(frozen=True, slots=True)
class Closed:
    """``close`` finished draining; the driver may release the writer and its lock."""


Action = StartWrite | ArmTimer | CancelTimer | ResolveFlushes | ReportBackgroundFailure | Closed

_CANCEL_TIMER = CancelTimer()


class WriteBehindController:
    """Sans-I/O write-behind queue of one session (see the module docstring for the rules).

    :param window_s: fixed batching window in seconds (0 = no intentional wait).
    :param max_batch_events: a batch starts early, and is cut, at this many events.
    :param max_batch_bytes: a batch starts early, and is cut, at this many bytes
        (a single larger line still forms a batch of its own).
    :param max_pending_bytes: cap on queued plus in-flight bytes; see :meth:`has_room`.
    :param durable_seq: highest seq already durable (None for an empty log); the
        next enqueued seq must follow it.
    """

    def __init__(
        self,
        *,
        window_s: float = 0.05,
        max_batch_events: int | None = None,
        max_batch_bytes: int | None = None,
        max_pending_bytes: int | None = None,
        durable_seq: int | None = None,
    ) -> None:
        if window_s < 0:
            raise ValueError(f"window_s must be >= 0, got {window_s}")
        for name, limit in (
            ("max_batch_events", max_batch_events),
            ("max_batch_bytes", max_batch_bytes),
            ("max_pending_bytes", max_pending_bytes),
        ):
            if limit is not None and limit < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {limit}")
        self.window_s = window_s
        self.max_batch_events = max_batch_events
        self.max_batch_bytes = max_batch_bytes
        self.max_pending_bytes = max_pending_bytes
        # The caps as plain numbers for the per-event checks (no limit: never reached).
        self._event_cap = max_batch_events if max_batch_events is not None else math.inf
        self._byte_cap = max_batch_bytes if max_batch_bytes is not None else math.inf
        # The queue holds the lines of seqs ``_queue_first .. _last_seq``: enqueue admits only
        # the next seq, so the seqs need not be stored beside the lines.
        self._queue: deque[bytes] = deque()
        self._queue_bytes = 0
        self._queue_first = 0 if durable_seq is None else durable_seq + 1
        self._in_flight: StartWrite | None = None
        self._in_flight_background = False  # started by the window or a cap, not a barrier
        self._deadline: float | None = None
        self._armed: float | None = None
        self._paused = False
        self._waiters: list[int] = []
        self._next_token = 0
        self._closing = False
        self._closed = False
        self._last_seq = durable_seq
        self.durable_seq = durable_seq
        """Highest seq known durable (None before the first write)."""
        self.failure: BaseException | None = None
        """Error of the latest failed write; cleared by the next successful write."""
        # The failure last reported (type, text) since the last successful write: the same
        # failure again is not reported again, so a full disk is logged once, not per event.
        self._reported: tuple[type[BaseException], str] | None = None

    # -- queries ---------------------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        """Bytes held in memory: queued plus in flight."""
        in_flight = self._in_flight
        return self._queue_bytes + (in_flight.nbytes if in_flight is not None else 0)

    @property
    def pending_count(self) -> int:
        """Events not yet durable: queued plus in flight."""
        in_flight = self._in_flight
        return len(self._queue) + (len(in_flight.lines) if in_flight is not None else 0)

    @property
    def writing(self) -> bool:
        """True while a write is in flight."""
        return self._in_flight is not None

    @property
    def paused(self) -> bool:
        """True after a failed background write, until the next event or flush."""
        return self._paused

    @property
    def closed(self) -> bool:
        """True once ``close`` drained the queue."""
        return self._closed

    @property
    def timer_deadline(self) -> float | None:
        """The timer the driver should have armed, or None."""
        return self._armed

    def pending_items(self) -> list[tuple[int, bytes]]:
        """``(seq, line)`` of every event not yet durable, in seq order (nothing is dropped)."""
        items: list[tuple[int, bytes]] = []
        in_flight = self._in_flight
        if in_flight is not None:
            items.extend(enumerate(in_flight.lines, in_flight.first_seq))
        items.extend(enumerate(self._queue, self._queue_first))
        return items

    def has_room(self, nbytes: int) -> bool:
        """Tell whether a line of ``nbytes`` may be queued now, or the producer must wait.

        An empty queue always has room, so a line larger than the cap still passes.

        :raises BaseException: the pending failure, when the cap is reached while
            automatic writes are paused: waiting would never end; ``flush`` retries.
        """
        limit = self.max_pending_bytes
        pending = self.pending_bytes
        if limit is None or pending == 0 or pending + nbytes <= limit:
            return True
        if self._paused and self.failure is not None:
            raise self.failure
        return False

    # -- inputs ----------------------------------------------------------------------------

    def enqueue(self, seq: int, line: bytes, now: float) -> list[Action]:
        """Queue one event line; ``seq`` must follow the previous one.

        :raises ValueError: the controller is closing or closed.
        :raises EventValidationError: ``seq`` does not continue the queue
            (rule ``append-seq-mismatch``).
        """
        if self._closing or self._closed:
            raise ValueError("the write-behind queue is closed; no more events are accepted")
        last = self._last_seq
        expected = 0 if last is None else last + 1
        if seq != expected:
            raise EventValidationError(
                f"append seq mismatch: expected seq {expected}, got {seq}",
                rule="append-seq-mismatch",
                seq=seq,
            )
        queue = self._queue
        was_empty = not queue
        queue.append(line)
        size = len(line)
        self._queue_bytes += size
        self._last_seq = seq
        if self._paused:
            # The next event resumes automatic writes: a fresh window for old + new.
            self._paused = False
            self._deadline = now + self.window_s
        elif was_empty:
            self._deadline = now + self.window_s
        if self._settled(now):
            return []
        return self._pump(now, [])

    def timer_fired(self, now: float) -> list[Action]:
        """The armed timer expired (a stale or early call is harmless)."""
        self._armed = None
        return self._pump(now, [])

    def write_succeeded(self, now: float) -> list[Action]:
        """The batch of the last :class:`StartWrite` is durable."""
        batch = self._take_in_flight()
        self.durable_seq = batch.last_seq
        self.failure = None
        self._reported = None
        out: list[Action] = []
        if not self._queue:
            if self._waiters:
                self._finish_barrier(None, out)
            if self._armed is None:
                return out  # nothing queued and no timer: all that _pump would decide
        return self._pump(now, out)

    def write_failed(self, error: BaseException, now: float) -> list[Action]:
        """The batch of the last :class:`StartWrite` was not written; it goes back in front."""
        background = self._in_flight_background
        batch = self._take_in_flight()
        self._queue.extendleft(reversed(batch.lines))
        self._queue_first = batch.first_seq
        self._queue_bytes += batch.nbytes
        self.failure = error
        out: list[Action] = []
        if background and self._reported != (type(error), str(error)):
            self._reported = (type(error), str(error))
            out.append(ReportBackgroundFailure(error, batch.first_seq, batch.last_seq))
        if self._waiters and background:
            return self._pump(now, out)  # a barrier is waiting: it retries this batch once
        if self._waiters:
            self._finish_barrier(error, out)
        self._paused = True
        self._deadline = None
        return self._pump(now, out)

    def flush(self, now: float) -> tuple[int, list[Action]]:
        """Start (or join) the barrier; the returned token is resolved when all is durable."""
        token = self._new_token()
        if not self._queue and self._in_flight is None:
            return token, [ResolveFlushes((token,), None)]
        self._waiters.append(token)
        self._paused = False
        return token, self._pump(now, [])

    def close(self, now: float) -> tuple[int, list[Action]]:
        """Refuse new events, drain like :meth:`flush`, then emit :class:`Closed`.

        If the drain fails, the token is resolved with the error and the queue
        accepts events again (the close can be retried).
        """
        if self._closed:
            token = self._new_token()
            return token, [ResolveFlushes((token,), None)]
        self._closing = True
        token, out = self.flush(now)
        if not self._queue and self._in_flight is None and not self._waiters:
            self._closing = False
            self._closed = True
            out.append(Closed())
        return token, out

    # -- internals -------------------------------------------------------------------------

    def _new_token(self) -> int:
        self._next_token += 1
        return self._next_token

    def _take_in_flight(self) -> StartWrite:
        batch = self._in_flight
        if batch is None:
            raise RuntimeError("no write is in flight")
        self._in_flight = None
        return batch

    def _finish_barrier(self, error: BaseException | None, out: list[Action]) -> None:
        tokens, self._waiters = tuple(self._waiters), []
        out.append(ResolveFlushes(tokens, error))
        if not self._closing:
            return
        self._closing = False
        if error is None:
            self._closed = True
            out.append(Closed())

    def _settled(self, now: float) -> bool:
        """True when an enqueue changes no decision, so ``_pump`` would return nothing.

        A pure shortcut for the two states most events arrive in: a write is in flight
        and no timer is armed, or no write is in flight and the batch's timer is armed,
        not yet due, and no cap is reached.
        """
        if self._waiters:
            return False
        if self._in_flight is not None:
            return self._armed is None
        return (
            self._armed is not None
            and self._armed == self._deadline
            and now < self._armed
            and self.window_s != 0
            and len(self._queue) < self._event_cap
            and self._queue_bytes < self._byte_cap
        )

    def _pump(self, now: float, out: list[Action]) -> list[Action]:
        wanted: float | None = None
        queue = self._queue
        if self._in_flight is None and queue and not self._paused:
            deadline = self._deadline
            if (
                self._waiters
                or self.window_s == 0
                or len(queue) >= self._event_cap
                or self._queue_bytes >= self._byte_cap
                or (deadline is not None and now >= deadline)
            ):
                out.append(self._start_write())
            else:
                wanted = deadline  # idle, not due, and no barrier waits: the window's timer
        if wanted != self._armed:
            self._armed = wanted
            out.append(_CANCEL_TIMER if wanted is None else ArmTimer(wanted))
        return out

    def _start_write(self) -> StartWrite:
        queue = self._queue
        if len(queue) <= self._event_cap and self._queue_bytes <= self._byte_cap:
            # Everything queued fits in one batch (the usual case): take it whole.
            lines = list(queue)
            queue.clear()
            nbytes = self._queue_bytes
        else:
            lines = []
            nbytes = 0
            limit_events = self.max_batch_events or len(queue)
            limit_bytes = self.max_batch_bytes
            while queue and len(lines) < limit_events:
                size = len(queue[0])
                if limit_bytes is not None and lines and nbytes + size > limit_bytes:
                    break
                lines.append(queue.popleft())
                nbytes += size
        first = self._queue_first
        self._queue_first = first + len(lines)
        self._queue_bytes -= nbytes
        if not queue:
            self._deadline = None  # the remainder, if any, keeps its (possibly past) deadline
        write = StartWrite(lines, first, first + len(lines) - 1, nbytes)
        self._in_flight = write
        self._in_flight_background = not self._waiters
        return write
