"""The Session API: factories, append/append_many, snapshots, listeners, restore."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dsh_store.errors import DshStoreError, EventValidationError, LosslessJsonError
from dsh_store.model import EventInput, Session, SessionEvent, SessionHeader

from .builders import new_session, open_step, restore, simple_turn, ticking_clock, user


def test_create_defaults() -> None:
    session = Session.create("abc", clock=lambda: 1234)
    assert session.id == "abc" and session.header.created_at == 1234
    assert (session.seq, session.events, session.inherited_event_count, session.first_live_seq) == (
        0,
        (),
        0,
        0,
    )
    assert session.surface.nodes == () and session.derive_messages() == []


def test_create_with_default_wall_clock_stamps_plausible_time() -> None:
    session = Session.create("abc")
    event = session.append("x/y", {})
    assert event.time >= session.header.created_at > 1_600_000_000_000


def test_create_refuses_header_for_another_id() -> None:
    with pytest.raises(EventValidationError) as caught:
        Session.create("a", header=SessionHeader(id="b", created_at=0))
    assert caught.value.rule == "header-id-mismatch" and "'b' differs" in str(caught.value)


def test_append_assigns_seq_and_time_and_returns_the_logged_event() -> None:
    session = Session.create("s", clock=ticking_clock(500))
    first = session.append("turn/start", {"turn": 1})
    second = session.append("step/start", {"turn": 1, "step": 1})
    # The header took the first tick.
    assert session.header.created_at == 500
    assert (first.seq, first.time, second.seq, second.time) == (0, 501, 1, 502)
    assert session.events == (first, second) and session.seq == 2
    assert first.line == b'{"type":"turn/start","seq":0,"time":501,"data":{"turn":1}}\n'


def test_logged_value_is_a_snapshot() -> None:
    session = new_session()
    open_step(session)
    data = user("original")
    event = session.append("user/message", data, surface_op="append")
    data["content"][0]["text"] = "changed later"
    assert event.data["content"][0]["text"] == "original"
    copy = event.data
    copy["content"].append("junk")
    assert event.data == user("original")
    assert session.derive_messages() == [user("original")]


def test_events_and_event_fields_are_immutable() -> None:
    session = new_session()
    event = session.append("turn/start", {"turn": 1})
    assert isinstance(session.events, tuple)
    with pytest.raises(AttributeError):
        event.seq = 5
    with pytest.raises(AttributeError):
        del event.type
    with pytest.raises(AttributeError):
        session.seq = 3  # type: ignore[misc]


def test_clock_must_return_epoch_ms() -> None:
    session = Session.create(
        "s",
        header=SessionHeader(id="s", created_at=0),
        clock=lambda: 1.5,  # type: ignore[arg-type, return-value]
    )
    with pytest.raises(EventValidationError) as caught:
        session.append("turn/start", {"turn": 1})
    assert caught.value.rule == "clock-invalid" and "integer epoch milliseconds" in str(
        caught.value
    )
    assert session.seq == 0


def test_append_many_is_atomic() -> None:
    session = new_session()
    bad = [
        ("turn/start", {"turn": 1}),
        EventInput("step/start", {"turn": 1, "step": 1}),
        ("user/message", user(), {"surface_op": "append"}),
        ("step/start", {"turn": 1, "step": 1}),
    ]  # second step/start is invalid
    with pytest.raises(EventValidationError) as caught:
        session.append_many(bad)
    assert caught.value.rule == "step-already-open" and caught.value.seq == 3
    assert session.seq == 0 and session.surface.nodes == ()
    with pytest.raises(LosslessJsonError):
        session.append_many([("turn/start", {"turn": 1}), ("x/y", {"v": float("inf")})])
    assert session.seq == 0
    good = session.append_many(bad[:3])
    nodes: tuple[int, ...] = session.surface.nodes
    assert [e.seq for e in good] == [0, 1, 2] and nodes == (2,)
    assert len({e.time for e in good}) == 1
    assert session.append_many([]) == []


def test_append_many_rejects_malformed_inputs() -> None:
    session = new_session()
    items: list[Any] = [["turn/start", {"turn": 1}], ("x",), ("x/y", {}, {"bogus": 1})]
    for item in items:
        with pytest.raises(EventValidationError) as caught:
            session.append_many([item])
        assert caught.value.rule == "batch-input" and "EventInput" in str(caught.value)


def test_listeners_see_each_committed_event_and_can_unsubscribe() -> None:
    session = new_session()
    seen: list[tuple[int, int]] = []
    unsubscribe = session.subscribe(lambda event: seen.append((event.seq, session.seq)))
    session.append("turn/start", {"turn": 1})
    session.append_many([("step/start", {"turn": 1, "step": 1}), ("x/y", {})])
    # Batch listeners run after the whole batch committed.
    assert seen == [(0, 1), (1, 3), (2, 3)]
    unsubscribe()
    unsubscribe()
    session.append("x/y", {})
    assert len(seen) == 3


def test_listener_errors_are_contained_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    session = new_session()
    calls: list[int] = []

    def broken(event: SessionEvent) -> None:
        raise RuntimeError("observer bug")

    session.subscribe(broken)
    session.subscribe(lambda event: calls.append(event.seq))
    with caplog.at_level(logging.ERROR, logger="dsh_store.model"):
        event = session.append("turn/start", {"turn": 1})
    assert event.seq == 0 and session.seq == 1 and calls == [0]
    assert "listener" in caplog.text and "stays committed" in caplog.text
    assert "observer bug" in caplog.text


def test_listener_cannot_reenter_append() -> None:
    session = new_session()
    errors: list[Exception] = []

    def reenter(event: SessionEvent) -> None:
        try:
            session.append("x/y", {})
        except DshStoreError as error:
            errors.append(error)

    session.subscribe(reenter)
    session.append("turn/start", {"turn": 1})
    assert len(errors) == 1 and isinstance(errors[0], EventValidationError)
    assert errors[0].rule == "append-reentrant"
    assert "append after the listener returns" in str(errors[0])
    assert session.seq == 1


def test_restore_refuses_unknown_required_types_and_keeps_ignorable_ones() -> None:
    required = SessionEvent("future/state", 0, 1, {"x": 1})
    with pytest.raises(EventValidationError) as caught:
        restore([required])
    assert caught.value.rule == "unknown-type" and caught.value.event_type == "future/state"
    assert "not marked ignorable" in str(caught.value)
    opaque = SessionEvent.from_json(
        {
            "type": "future/note",
            "seq": 0,
            "time": 1,
            "data": [1],
            "ignorable": True,
            "surfaceOp": "append",
        }
    )
    session = restore([opaque])
    assert session.events[0].data == [1] and session.surface.nodes == ()
    assert session.events[0].surface_op == "append"  # carried, not applied


def test_restore_requires_contiguous_seqs_and_events() -> None:
    with pytest.raises(EventValidationError) as caught:
        restore([SessionEvent("turn/start", 1, 1, {"turn": 1})])
    assert caught.value.rule == "seq-not-contiguous" and "expected seq 0" in str(caught.value)
    with pytest.raises(EventValidationError) as caught:
        restore([{"type": "turn/start"}])  # type: ignore[list-item]
    assert caught.value.rule == "not-an-event" and "got dict" in str(caught.value)


def test_restore_round_trip_keeps_state() -> None:
    session = new_session()
    simple_turn(session)
    session.append("turn/start", {"turn": 2})
    restored = restore(list(session.events))
    assert restored.events == session.events
    assert restored.surface == session.surface
    assert restored.derive_messages() == session.derive_messages()
    assert not restored.is_balanced
    restored.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})


def test_header_must_be_a_session_header() -> None:
    with pytest.raises(EventValidationError) as caught:
        Session.from_restore({"id": "x"}, [])  # type: ignore[arg-type]
    assert caught.value.rule == "session-header"


def test_event_constructor_validates_standalone_rules() -> None:
    with pytest.raises(EventValidationError) as caught:
        SessionEvent("turn/start", -1, 0, {"turn": 1})
    assert caught.value.rule == "event-seq"
    with pytest.raises(EventValidationError) as caught:
        SessionEvent("turn/start", 0, True, {"turn": 1})
    assert caught.value.rule == "event-time" and "time must be" in str(caught.value)
    event = SessionEvent(
        "user/message", 3, 7, user(), surface_op="append", source_event_seqs=[0, 1, 2]
    )
    assert event.source_event_seqs == (0, 1, 2)
    assert b'"sourceEventSeqs":[[0,2]]' in event.line


def events_repr(items: Any) -> list[str]:
    return [repr(item) for item in items]


def test_repr() -> None:
    session = new_session()
    event = session.append("turn/start", {"turn": 1})
    assert repr(event) == "SessionEvent(type='turn/start', seq=0, time=1001)"
    assert repr(session) == "Session(id='s1', events=1)"
