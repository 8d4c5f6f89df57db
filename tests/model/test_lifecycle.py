"""Turn/step numbering and enclosure, tool call/result pairing, standalone records."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_store.errors import EventValidationError
from dsh_store.model import Session, SessionEvent

from .builders import (
    assistant,
    new_session,
    open_step,
    restore,
    simple_turn,
    tool_call,
    tool_result,
    tool_turn_open,
    user,
)


def expect(rule: str, text: str, session: Session, kind: str, data: Any, **kw: Any) -> None:
    before = session.seq
    with pytest.raises(EventValidationError) as caught:
        session.append(kind, data, **kw)
    assert caught.value.rule == rule, caught.value
    assert text in str(caught.value)
    assert caught.value.seq == before and caught.value.event_type == kind
    assert session.seq == before


def test_turn_numbering() -> None:
    session = new_session()
    expect("turn-number", "expected turn 1, got turn 2", session, "turn/start", {"turn": 2})
    session.append("turn/start", {"turn": 1})
    expect("turn-already-open", "turn 1 is still open", session, "turn/start", {"turn": 2})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    expect("turn-number", "expected turn 2, got turn 1", session, "turn/start", {"turn": 1})
    session.append("turn/start", {"turn": 2})


def test_turn_end_rules() -> None:
    session = new_session()
    expect(
        "outside-turn",
        "no turn is open",
        session,
        "turn/end",
        {"turn": 1, "reason": {"kind": "completed"}},
    )
    open_step(session)
    expect(
        "turn-mismatch",
        "names turn 2, but the open turn is 1",
        session,
        "turn/end",
        {"turn": 2, "reason": {"kind": "completed"}},
    )
    expect(
        "turn-end-step-open",
        "step 1 is still open",
        session,
        "turn/end",
        {"turn": 1, "reason": {"kind": "completed"}},
    )


def test_step_rules() -> None:
    session = new_session()
    expect("outside-turn", "no turn is open", session, "step/start", {"turn": 1, "step": 1})
    session.append("turn/start", {"turn": 1})
    expect(
        "step-number",
        "expected step 1 of turn 1, got step 2",
        session,
        "step/start",
        {"turn": 1, "step": 2},
    )
    expect("outside-step", "no step of turn 1 is open", session, "step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    expect(
        "step-already-open", "step 1 is still open", session, "step/start", {"turn": 1, "step": 2}
    )
    expect(
        "step-mismatch",
        "names step 2, but the open step is 1",
        session,
        "step/end",
        {"turn": 1, "step": 2},
    )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    session.append("step/end", {"turn": 1, "step": 2})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})  # step numbering restarts per turn


def test_step_scoped_events_must_match_open_step() -> None:
    session = new_session()
    expect(
        "outside-turn",
        "no turn is open",
        session,
        "assistant/message",
        assistant(1, 1),
        surface_op="append",
    )
    session.append("turn/start", {"turn": 1})
    expect("outside-step", "no step of turn 1 is open", session, "tool/call", tool_call(1, 1, "c"))
    session.append("step/start", {"turn": 1, "step": 1})
    expect(
        "step-mismatch",
        "names step 3",
        session,
        "assistant/attempt",
        {"turn": 1, "step": 3, "stream": []},
    )
    expect(
        "turn-mismatch",
        "names turn 4",
        session,
        "assistant/message",
        assistant(4, 1),
        surface_op="append",
    )


def test_user_message_needs_a_turn() -> None:
    session = new_session()
    expect(
        "outside-turn", "inside an open turn", session, "user/message", user(), surface_op="append"
    )


def test_tool_pairing() -> None:
    session = new_session()
    tool_turn_open(session, ("c1", "c2"), logged=1)
    expect(
        "tool-call-duplicate",
        "'c1' was already logged",
        session,
        "tool/call",
        tool_call(1, 1, "c1"),
    )
    expect(
        "tool-result-unpaired",
        "no tool call 'zz' was requested in step 1 of turn 1",
        session,
        "tool/result",
        tool_result(1, 1, "zz"),
        surface_op="append",
    )
    session.append(
        "tool/result", tool_result(1, 1, "c1"), surface_op="append", source_event_seqs=[4]
    )
    expect(
        "tool-result-duplicate",
        "'c1' already has a result",
        session,
        "tool/result",
        tool_result(1, 1, "c1"),
        surface_op="append",
    )
    # c2 was requested by the assistant message but never logged as a tool/call.
    session.append("tool/result", tool_result(1, 1, "c2"), surface_op="append")


def test_tool_call_without_assistant_request_pairs_with_its_result() -> None:
    session = new_session()
    open_step(session)
    session.append("tool/call", tool_call(1, 1, "solo"))
    session.append("tool/result", tool_result(1, 1, "solo"), surface_op="append")


def test_pairing_is_scoped_to_the_step() -> None:
    session = new_session()
    tool_turn_open(session, ("c1",), logged=1)
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    expect(
        "tool-result-unpaired",
        "step 2 of turn 1",
        session,
        "tool/result",
        tool_result(1, 2, "c1"),
        surface_op="append",
    )


def test_plugin_and_log_only_events_stand_between_turns() -> None:
    session = new_session()
    simple_turn(session)
    session.append("compaction/start", {"id": "k"})
    session.append("plugin:notes/added", {"n": 1}, ignorable=True)
    session.append("feedback/record", {"text": "x"})
    session.append("turn/start", {"turn": 2})


def test_restore_applies_lifecycle_rules_with_the_seq() -> None:
    events = [
        SessionEvent("turn/start", 0, 1, {"turn": 1}),
        SessionEvent("step/start", 1, 1, {"turn": 1, "step": 2}),
    ]
    with pytest.raises(EventValidationError) as caught:
        restore(events)
    assert caught.value.rule == "step-number" and caught.value.seq == 1
    assert "expected step 1" in str(caught.value)


def attempt(turn: int, step: int) -> dict[str, Any]:
    return {"turn": turn, "step": step, "stream": []}


def test_a_settled_attempt_may_stand_outside_any_turn() -> None:
    """Real V0 logs hold attempts settled while no turn was open; they project nothing."""
    session = new_session()
    settled = session.append("assistant/attempt", attempt(1, 1))
    assert session.is_balanced and session.derive_messages() == []
    assert restore([settled]).seq == 1
    # Inside a turn the attempt must still name the open step.
    session.append("turn/start", {"turn": 1})
    expect("outside-step", "no step of turn 1 is open", session, "assistant/attempt", attempt(1, 1))
    session.append("step/start", {"turn": 1, "step": 1})
    expect("step-mismatch", "names step 2", session, "assistant/attempt", attempt(1, 2))
    session.append("assistant/attempt", attempt(1, 1))
