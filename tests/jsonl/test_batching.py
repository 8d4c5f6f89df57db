"""The write-behind controller against a fake clock: one test per behaviour."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store.errors import EventValidationError
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


class Sim:
    """A fake driver: a virtual clock, one timer, one write slot, recorded outcomes."""

    def __init__(self, **options: object) -> None:
        self.ctrl = WriteBehindController(**options)  # type: ignore[arg-type]
        self.now = 0.0
        self.timer: float | None = None
        self.writing: StartWrite | None = None
        self.writes: list[list[int]] = []
        self.write_times: list[float] = []
        self.resolved: dict[int, BaseException | None] = {}
        self.reports: list[ReportBackgroundFailure] = []
        self.closed = False
        self.next_seq = 0

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, StartWrite):
                assert self.writing is None, "two writes in flight"
                assert len(action.lines) == action.last_seq - action.first_seq + 1
                assert action.nbytes == sum(map(len, action.lines))
                self.writing = action
                self.writes.append(list(range(action.first_seq, action.last_seq + 1)))
                self.write_times.append(self.now)
            elif isinstance(action, ArmTimer):
                self.timer = action.deadline
            elif isinstance(action, CancelTimer):
                self.timer = None
            elif isinstance(action, ResolveFlushes):
                for token in action.tokens:
                    assert token not in self.resolved
                    self.resolved[token] = action.error
            elif isinstance(action, ReportBackgroundFailure):
                self.reports.append(action)
            elif isinstance(action, Closed):
                assert not self.closed
                self.closed = True
        assert self.ctrl.timer_deadline == self.timer

    def add(self, count: int = 1, size: int = 10) -> None:
        for _ in range(count):
            line = b"x" * (size - 1) + b"\n"
            self.apply(self.ctrl.enqueue(self.next_seq, line, self.now))
            self.next_seq += 1

    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        while self.timer is not None and self.timer <= target:
            self.now = self.timer
            self.timer = None
            self.apply(self.ctrl.timer_fired(self.now))
        self.now = target

    def succeed(self) -> None:
        assert self.writing is not None
        self.writing = None
        self.apply(self.ctrl.write_succeeded(self.now))

    def fail(self, error: BaseException) -> None:
        assert self.writing is not None
        self.writing = None
        self.apply(self.ctrl.write_failed(error, self.now))

    def flush(self) -> int:
        token, actions = self.ctrl.flush(self.now)
        self.apply(actions)
        return token

    def close(self) -> int:
        token, actions = self.ctrl.close(self.now)
        self.apply(actions)
        return token


# -- the window ------------------------------------------------------------------------------


def test_window_starts_at_first_event_and_writes_exactly_at_its_end() -> None:
    sim = Sim(window_s=0.2)
    sim.add()
    assert sim.timer == pytest.approx(0.2)
    sim.advance(0.199)
    assert sim.writes == []
    sim.advance(0.001)
    assert sim.writes == [[0]]
    assert sim.write_times == [pytest.approx(0.2)]


def test_later_events_do_not_reset_the_window() -> None:
    sim = Sim(window_s=0.2)
    for _ in range(20):
        sim.add()
        sim.advance(0.01)
    assert sim.writes == [list(range(20))]
    assert sim.write_times == [pytest.approx(0.2)]


def test_window_zero_writes_at_once_and_batches_what_arrives_meanwhile() -> None:
    sim = Sim(window_s=0)
    sim.add()
    assert sim.writes == [[0]] and sim.timer is None
    sim.add(3)
    assert sim.writes == [[0]]
    sim.succeed()
    assert sim.writes == [[0], [1, 2, 3]]


def test_one_write_in_flight_at_a_time() -> None:
    sim = Sim(window_s=0.05)
    sim.add()
    sim.advance(0.05)
    sim.add(5)
    sim.advance(1.0)  # the Sim asserts no second StartWrite while one is in flight
    assert sim.writes == [[0]] and sim.timer is None
    sim.succeed()
    assert sim.writes == [[0], [1, 2, 3, 4, 5]]


def test_events_during_a_write_get_their_own_deadline() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.advance(0.1)
    sim.advance(0.03)
    sim.add()  # arrives during the write, at 0.13: its deadline is 0.23
    sim.advance(0.01)
    sim.succeed()  # at 0.14, before that deadline
    assert sim.timer == pytest.approx(0.23)
    sim.advance(0.08)
    assert sim.writes == [[0]]
    sim.advance(0.01)
    assert sim.writes == [[0], [1]]


def test_a_batch_whose_deadline_passed_during_a_write_starts_right_after_it() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.advance(0.1)
    sim.add()
    sim.advance(0.5)  # its deadline (0.2) passes while the first write runs
    assert sim.writes == [[0]]
    sim.succeed()
    assert sim.writes == [[0], [1]]
    assert sim.write_times[1] == pytest.approx(0.6)


def test_a_stale_or_early_timer_call_is_harmless() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.apply(sim.ctrl.timer_fired(0.05))
    assert sim.writes == [] and sim.timer == pytest.approx(0.1)
    sim.apply(sim.ctrl.timer_fired(0.06))
    assert sim.writes == []


# -- size triggers ---------------------------------------------------------------------------


def test_batch_starts_early_at_max_batch_events_and_is_cut_there() -> None:
    sim = Sim(window_s=10, max_batch_events=4)
    sim.add(3)
    assert sim.writes == []
    sim.add()
    assert sim.writes == [[0, 1, 2, 3]]
    sim.add(6)  # 6 queued during the write: more than one batch worth
    sim.succeed()
    assert sim.writes == [[0, 1, 2, 3], [4, 5, 6, 7]]
    sim.succeed()
    assert sim.writes[-1] == [4, 5, 6, 7]  # [8, 9] is below the trigger: it waits its window
    sim.advance(9.99)
    assert len(sim.writes) == 2
    sim.advance(0.01)
    assert sim.writes[-1] == [8, 9]


def test_remainder_after_a_cut_keeps_its_original_deadline() -> None:
    sim = Sim(window_s=1.0, max_batch_events=2)
    sim.add(3)  # [0, 1] start at once; [2] waits for the window that opened at t=0
    assert sim.writes == [[0, 1]]
    sim.advance(0.3)
    sim.succeed()
    assert sim.timer == pytest.approx(1.0)
    sim.advance(0.7)
    assert sim.writes == [[0, 1], [2]]


def test_batch_starts_early_at_max_batch_bytes_and_is_cut_there() -> None:
    sim = Sim(window_s=10, max_batch_bytes=30)
    sim.add(2, size=10)
    assert sim.writes == []
    sim.add(1, size=10)
    assert sim.writes == [[0, 1, 2]]
    sim.add(1, size=25)
    sim.add(1, size=10)
    sim.add(1, size=10)
    sim.succeed()
    assert sim.writes[-1] == [3]  # 25 + 10 would exceed 30 bytes
    sim.succeed()
    assert len(sim.writes) == 2  # 20 bytes left: below the trigger, so they wait
    sim.advance(10)
    assert sim.writes[-1] == [4, 5]


def test_a_line_larger_than_max_batch_bytes_forms_its_own_batch() -> None:
    sim = Sim(window_s=10, max_batch_bytes=8)
    sim.add(1, size=100)
    assert sim.writes == [[0]]


# -- flush barrier ---------------------------------------------------------------------------


def test_flush_of_an_empty_queue_resolves_at_once() -> None:
    sim = Sim()
    token = sim.flush()
    assert sim.resolved == {token: None}


def test_flush_writes_at_once_without_waiting_for_the_window() -> None:
    sim = Sim(window_s=5)
    sim.add(2)
    token = sim.flush()
    assert sim.writes == [[0, 1]] and sim.timer is None
    sim.succeed()
    assert sim.resolved == {token: None}
    assert sim.ctrl.durable_seq == 1


def test_concurrent_flushes_share_one_barrier_that_drains_events_added_meanwhile() -> None:
    sim = Sim(window_s=0.2)
    sim.add(2)
    first = sim.flush()
    sim.add(3)
    second = sim.flush()
    sim.add(1)
    assert sim.resolved == {}
    sim.succeed()
    assert sim.writes == [[0, 1], [2, 3, 4, 5]]
    assert sim.resolved == {}
    sim.succeed()
    assert sim.resolved == {first: None, second: None}
    assert sim.timer is None
    assert sim.ctrl.pending_count == 0


def test_flush_waits_for_a_running_write_first() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.advance(0.1)
    token = sim.flush()
    assert sim.resolved == {}
    sim.succeed()
    assert sim.resolved == {token: None}
    assert sim.writes == [[0]]


def test_work_added_after_a_finished_barrier_gets_a_new_window() -> None:
    sim = Sim(window_s=0.2)
    sim.add()
    sim.flush()
    sim.succeed()
    sim.advance(1.0)
    sim.add()
    assert sim.timer == pytest.approx(1.2)
    sim.advance(0.2)
    assert sim.writes == [[0], [1]]


# -- failures ------------------------------------------------------------------------------


def test_failed_background_write_pauses_retry_until_the_next_event_and_keeps_order() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.advance(0.1)
    error = OSError(28, "No space left on device")
    sim.fail(error)
    assert [r.error for r in sim.reports] == [error]
    assert (sim.reports[0].first_seq, sim.reports[0].last_seq) == (0, 0)
    assert sim.ctrl.paused and sim.ctrl.failure is error and sim.timer is None
    sim.advance(10.0)
    assert sim.writes == [[0]]  # no timer-driven retry loop
    sim.add()  # the next event opens a fresh window for old + new
    assert not sim.ctrl.paused and sim.timer == pytest.approx(10.2)
    sim.advance(0.1)
    assert sim.writes == [[0], [0, 1]]
    sim.succeed()
    assert sim.ctrl.durable_seq == 1 and sim.ctrl.failure is None


def test_the_same_background_failure_is_reported_once_until_a_write_succeeds() -> None:
    sim = Sim(window_s=0.1)
    full = OSError(28, "No space left on device")
    for _ in range(3):  # each new event retries the paused batch, which fails alike
        sim.add()
        sim.advance(0.1)
        sim.fail(OSError(28, "No space left on device"))
    assert [str(r.error) for r in sim.reports] == [str(full)]
    sim.add()
    sim.advance(0.1)
    sim.fail(OSError(5, "Input/output error"))  # a different failure is news
    assert [r.error.errno for r in sim.reports] == [28, 5]  # type: ignore[attr-defined]
    sim.add()
    sim.advance(0.1)
    sim.succeed()
    sim.add()
    sim.advance(0.1)
    sim.fail(OSError(28, "No space left on device"))  # after a success: reported again
    assert [r.error.errno for r in sim.reports] == [28, 5, 28]  # type: ignore[attr-defined]
    assert sim.writes == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4], [5]]


def test_flush_after_a_background_failure_retries_at_once() -> None:
    sim = Sim(window_s=0.1)
    sim.add(2)
    sim.advance(0.1)
    sim.fail(OSError(5, "Input/output error"))
    token = sim.flush()
    assert sim.writes == [[0, 1], [0, 1]]
    sim.succeed()
    assert sim.resolved == {token: None}


def test_background_failure_overlapping_a_flush_is_retried_inside_it_and_reported_once() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.advance(0.1)  # background write of [0] starts
    token = sim.flush()
    sim.fail(OSError(5, "Input/output error"))
    assert len(sim.reports) == 1
    assert sim.writes == [[0], [0]]  # retried by the barrier, no pause
    assert sim.resolved == {}
    sim.succeed()
    assert sim.resolved == {token: None}
    assert len(sim.reports) == 1


def test_flush_failure_goes_to_every_waiter_not_to_the_background_log_and_keeps_the_batch() -> None:
    sim = Sim(window_s=0.1)
    sim.add(2)
    first = sim.flush()
    second = sim.flush()
    error = OSError(28, "No space left on device")
    sim.fail(error)
    assert sim.resolved == {first: error, second: error}
    assert sim.reports == []
    assert sim.ctrl.pending_items() == [(0, b"x" * 9 + b"\n"), (1, b"x" * 9 + b"\n")]
    assert sim.ctrl.paused and sim.timer is None


def test_background_failure_whose_retry_in_a_flush_fails_is_reported_to_the_flush() -> None:
    sim = Sim(window_s=0.1)
    sim.add()
    sim.advance(0.1)
    token = sim.flush()
    sim.fail(OSError(5, "first"))
    second = OSError(5, "second")
    sim.fail(second)
    assert sim.resolved == {token: second}
    assert [str(r.error) for r in sim.reports] == ["[Errno 5] first"]


def test_a_failed_batch_of_150000_events_is_kept_in_order() -> None:
    sim = Sim(window_s=0.1, max_batch_events=None)
    sim.add(150_000, size=2)
    sim.advance(0.1)
    sim.fail(OSError(28, "No space left on device"))
    items = sim.ctrl.pending_items()
    assert len(items) == 150_000
    assert [seq for seq, _ in items] == list(range(150_000))
    sim.add()
    sim.advance(0.1)
    assert sim.writes[-1] == list(range(150_001))


# -- backpressure ----------------------------------------------------------------------------


def test_pending_bytes_cap_asks_the_producer_to_wait_until_a_write_finishes() -> None:
    sim = Sim(window_s=0.1, max_pending_bytes=30)
    sim.add(3)
    assert sim.ctrl.pending_bytes == 30
    assert not sim.ctrl.has_room(1)
    sim.advance(0.1)
    assert not sim.ctrl.has_room(1)  # in-flight bytes still count
    sim.succeed()
    assert sim.ctrl.has_room(30)
    assert not sim.ctrl.has_room(31) or sim.ctrl.pending_bytes == 0


def test_an_empty_queue_admits_a_line_larger_than_the_cap() -> None:
    sim = Sim(max_pending_bytes=5)
    assert sim.ctrl.has_room(100)


def test_cap_reached_while_paused_raises_the_failure_instead_of_waiting_forever() -> None:
    sim = Sim(window_s=0.1, max_pending_bytes=20)
    sim.add(2)
    sim.advance(0.1)
    error = OSError(28, "No space left on device")
    sim.fail(error)
    with pytest.raises(OSError) as caught:
        sim.ctrl.has_room(10)
    assert caught.value is error
    sim.flush()
    assert not sim.ctrl.has_room(10)  # writing again: wait, do not raise


# -- close and input checks -----------------------------------------------------------------


def test_close_drains_then_reports_closed_and_refuses_new_events() -> None:
    sim = Sim(window_s=5)
    sim.add(2)
    token = sim.close()
    assert not sim.closed
    with pytest.raises(ValueError, match="the write-behind queue is closed"):
        sim.add()
    sim.succeed()
    assert sim.closed and sim.resolved == {token: None} and sim.ctrl.closed
    again = sim.close()
    assert sim.resolved[again] is None
    assert sim.writes == [[0, 1]]


def test_close_of_an_empty_queue_is_immediate() -> None:
    sim = Sim()
    token = sim.close()
    assert sim.closed and sim.resolved == {token: None}


def test_a_failed_close_reports_the_error_and_reopens_the_queue() -> None:
    sim = Sim(window_s=5)
    sim.add()
    token = sim.close()
    error = OSError(5, "Input/output error")
    sim.fail(error)
    assert sim.resolved == {token: error} and not sim.closed
    sim.add()
    retry = sim.close()
    assert sim.writes == [[0], [0, 1]]
    sim.succeed()
    assert sim.closed and sim.resolved[retry] is None


def test_enqueue_refuses_a_seq_that_does_not_follow() -> None:
    ctrl = WriteBehindController(durable_seq=4)
    with pytest.raises(EventValidationError) as caught:
        ctrl.enqueue(4, b"x\n", 0.0)
    assert caught.value.rule == "append-seq-mismatch"
    assert str(caught.value) == (
        "seq 4: append seq mismatch: expected seq 5, got 4 [rule: append-seq-mismatch]"
    )
    ctrl.enqueue(5, b"x\n", 0.0)
    with pytest.raises(EventValidationError, match="expected seq 6, got 7"):
        ctrl.enqueue(7, b"x\n", 0.0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window_s": -1}, "window_s must be >= 0, got -1"),
        ({"max_batch_events": 0}, "max_batch_events must be >= 1 or None, got 0"),
        ({"max_batch_bytes": 0}, "max_batch_bytes must be >= 1 or None, got 0"),
        ({"max_pending_bytes": -5}, "max_pending_bytes must be >= 1 or None, got -5"),
    ],
)
def test_invalid_limits_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WriteBehindController(**options)  # type: ignore[arg-type]


def test_write_results_without_a_write_in_flight_are_a_driver_bug() -> None:
    ctrl = WriteBehindController()
    with pytest.raises(RuntimeError, match="no write is in flight"):
        ctrl.write_succeeded(0.0)


class _NoShortcut(WriteBehindController):
    """The controller with its enqueue shortcut disabled: every event goes through _pump."""

    def _settled(self, now: float) -> bool:
        return False


_steps = st.lists(
    st.tuples(
        st.sampled_from(["enqueue", "enqueue", "enqueue", "tick", "fire", "done", "fail", "flush"]),
        st.floats(min_value=0.0, max_value=0.08),
        st.integers(min_value=1, max_value=400),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(
    steps=_steps,
    window_s=st.sampled_from([0.0, 0.01, 0.05]),
    max_batch_events=st.sampled_from([None, 1, 3]),
    max_batch_bytes=st.sampled_from([None, 500]),
)
def test_enqueue_shortcut_never_changes_a_decision(
    steps: list[tuple[str, float, int]],
    window_s: float,
    max_batch_events: int | None,
    max_batch_bytes: int | None,
) -> None:
    options = {
        "window_s": window_s,
        "max_batch_events": max_batch_events,
        "max_batch_bytes": max_batch_bytes,
        "max_pending_bytes": None,
    }
    fast, reference = WriteBehindController(**options), _NoShortcut(**options)  # type: ignore[arg-type]
    now, seq, in_flight = 0.0, 0, False
    for kind, advance, size in steps:
        now += advance
        if kind == "enqueue":
            results = [c.enqueue(seq, b"x" * size, now) for c in (fast, reference)]
            seq += 1
        elif kind == "fire":
            results = [c.timer_fired(now) for c in (fast, reference)]
        elif kind == "flush":
            results = [c.flush(now)[1] for c in (fast, reference)]
        elif kind in ("done", "fail") and in_flight:
            error = OSError("disk")
            results = [
                c.write_succeeded(now) if kind == "done" else c.write_failed(error, now)
                for c in (fast, reference)
            ]
        else:
            continue
        assert repr(results[0]) == repr(results[1])
        assert fast.timer_deadline == reference.timer_deadline
        in_flight = (in_flight and kind not in ("done", "fail")) or any(
            isinstance(action, StartWrite) for action in results[0]
        )


@settings(max_examples=200, deadline=None)
@given(
    steps=_steps,
    window_s=st.sampled_from([0.0, 0.05]),
    max_batch_events=st.sampled_from([None, 1, 3]),
    max_batch_bytes=st.sampled_from([None, 500]),
)
def test_every_write_and_every_pending_item_pairs_each_seq_with_its_own_line(
    steps: list[tuple[str, float, int]],
    window_s: float,
    max_batch_events: int | None,
    max_batch_bytes: int | None,
) -> None:
    # The queue keeps lines without their seqs (they are consecutive): through caps, failed
    # writes put back in front and retries, each seq must still travel with its own line.
    ctrl = WriteBehindController(
        window_s=window_s, max_batch_events=max_batch_events, max_batch_bytes=max_batch_bytes
    )
    now, seq = 0.0, 0
    writing: StartWrite | None = None
    durable = -1

    def line_of(n: int, size: int = 1) -> bytes:
        return b"%d:" % n + b"x" * size + b"\n"

    def take(actions: list[Action]) -> None:
        nonlocal writing
        for action in actions:
            if isinstance(action, StartWrite):
                assert writing is None
                writing = action
                assert action.first_seq == durable + 1
                assert all(
                    line.startswith(b"%d:" % n)
                    for n, line in enumerate(action.lines, action.first_seq)
                )
                assert action.nbytes == sum(map(len, action.lines))

    for kind, advance, size in steps:
        now += advance
        if kind == "enqueue":
            take(ctrl.enqueue(seq, line_of(seq, size), now))
            seq += 1
        elif kind == "fire":
            take(ctrl.timer_fired(now))
        elif kind == "flush":
            take(ctrl.flush(now)[1])
        elif kind in ("done", "fail") and writing is not None:
            done, writing = writing, None
            if kind == "done":
                durable = done.last_seq
                take(ctrl.write_succeeded(now))
            else:
                take(ctrl.write_failed(OSError("disk"), now))
        items = ctrl.pending_items()
        assert [n for n, _ in items] == list(range(durable + 1, seq))
        assert all(line.startswith(b"%d:" % n) for n, line in items)
        assert ctrl.pending_count == len(items)
        assert ctrl.pending_bytes == sum(len(line) for _, line in items)
    assert ctrl.durable_seq == (None if durable < 0 else durable)
