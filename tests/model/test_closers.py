"""Crash closers: exact shapes and order, determinism, balance, idempotence."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.model import Session, SessionEvent, interrupted_closers
from dsh_store.model import closers as closers_module
from dsh_store.model.closers import TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN_TEXT

from .builders import new_session, open_step, restore, simple_turn, tool_turn_open, user

# DSH's texts (dsh-session README, "Crash-repair result"), spelled out here so that a change
# to the constants in the library cannot go unnoticed.
NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is "
    "still needed."
)
OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)


def lines(events: list[SessionEvent]) -> list[dict]:  # type: ignore[type-arg]
    return [orjson.loads(event.line) for event in events]


def test_balanced_or_empty_log_needs_none() -> None:
    assert interrupted_closers([]) == []
    session = new_session()
    simple_turn(session)
    assert interrupted_closers(session.events) == []


def test_open_turn_without_step_gets_only_turn_end() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    closers = interrupted_closers(session.events)
    assert lines(closers) == [
        {
            "type": "turn/end",
            "seq": 1,
            "time": session.events[-1].time,
            "data": {"turn": 1, "reason": {"kind": "interrupted"}},
        }
    ]


def test_open_step_gets_step_end_then_turn_end() -> None:
    session = new_session()
    open_step(session)
    session.append("user/message", user(), surface_op="append")
    assert [(e.type, e.seq) for e in interrupted_closers(session.events)] == [
        ("step/end", 3),
        ("turn/end", 4),
    ]


def test_exact_tool_result_closers() -> None:
    session = new_session()
    tool_turn_open(session, ("c1", "c2"), logged=1)  # c1 has tool/call at seq 4
    last_time = session.events[-1].time
    closers = interrupted_closers(session.events)
    assert closers[0].line.startswith(b'{"type":"tool/result","seq":5,')
    unknown, not_started, step_end, turn_end = lines(closers)
    assert unknown == {
        "type": "tool/result",
        "seq": 5,
        "time": last_time,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "tool",
                "source": {"kind": "tool", "callId": "c1"},
                "toolCallId": "c1",
                "content": [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT}],
                "isError": True,
                "id": "interrupted-tool-result-c1-5",
            },
            "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"},
        },
        "sourceEventSeqs": [4],
        "surfaceOp": "append",
    }
    assert list(unknown) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    assert not_started["data"]["error"] == {
        "name": "ToolNotStartedError",
        "code": "TOOL_NOT_STARTED",
    }
    assert not_started["data"]["message"]["id"] == "interrupted-tool-result-c2-6"
    assert "sourceEventSeqs" not in not_started
    assert not_started["data"]["message"]["content"] == [{"type": "text", "text": NOT_STARTED_TEXT}]
    assert step_end == {
        "type": "step/end",
        "seq": 7,
        "time": last_time,
        "data": {"turn": 1, "step": 1},
    }
    assert turn_end["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert all(e.type != "assistant/message" for e in closers)


def test_answered_calls_and_closed_steps_are_left_alone() -> None:
    session = new_session()
    tool_turn_open(session, ("c1",), logged=1)
    from .builders import tool_result

    session.append("tool/result", tool_result(1, 1, "c1"), surface_op="append")
    assert [e.type for e in interrupted_closers(session.events)] == ["step/end", "turn/end"]
    session2 = new_session()
    tool_turn_open(session2, ("c9",), logged=0)
    session2.append("step/end", {"turn": 1, "step": 1})
    assert [e.type for e in interrupted_closers(session2.events)] == ["turn/end"]


def test_compaction_brackets_are_not_closed() -> None:
    session = new_session()
    open_step(session)
    session.append("compaction/start", {"id": "k"})
    assert [e.type for e in interrupted_closers(session.events)] == ["step/end", "turn/end"]


def test_closers_are_deterministic() -> None:
    session = new_session()
    tool_turn_open(session)
    assert interrupted_closers(session.events) == interrupted_closers(list(session.events))


ACTIONS = st.lists(
    st.sampled_from(
        [
            "turn",
            "step",
            "user",
            "assistant_calls",
            "tool_call",
            "tool_result",
            "end_step",
            "end_turn",
            "plugin",
        ]
    ),
    max_size=30,
)


def drive(actions: list[str]) -> Session:
    """Apply whichever of the drawn actions is valid at its point (a valid random prefix)."""
    session = new_session()
    from .builders import assistant, tool_call, tool_result

    turn, step = 0, 0
    pending: list[str] = []
    called: set[str] = set()
    in_turn = in_step = False
    for action in actions:
        if action == "turn" and not in_turn:
            turn, step, in_turn = turn + 1, 0, True
            session.append("turn/start", {"turn": turn})
        elif action == "step" and in_turn and not in_step:
            step, in_step = step + 1, True
            pending, called = [], set()
            session.append("step/start", {"turn": turn, "step": step})
        elif action == "user" and in_turn:
            session.append("user/message", user(), surface_op="append")
        elif action == "assistant_calls" and in_step:
            ids = (f"c{session.seq}a", f"c{session.seq}b")
            session.append(
                "assistant/message", assistant(turn, step, "x", ids), surface_op="append"
            )
            pending.extend(ids)
        elif action == "tool_call" and in_step and [c for c in pending if c not in called]:
            call_id = next(c for c in pending if c not in called)
            called.add(call_id)
            session.append("tool/call", tool_call(turn, step, call_id))
        elif action == "tool_result" and in_step and pending:
            session.append(
                "tool/result", tool_result(turn, step, pending.pop(0)), surface_op="append"
            )
        elif action == "end_step" and in_step:
            in_step = False
            session.append("step/end", {"turn": turn, "step": step})
        elif action == "end_turn" and in_turn and not in_step:
            in_turn = False
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        elif action == "plugin":
            session.append("plugin:test/note", {"n": session.seq}, ignorable=True)
    return session


@given(ACTIONS)
def test_closers_balance_any_valid_prefix_and_are_idempotent(actions: list[str]) -> None:
    session = drive(actions)
    events = list(session.events)
    closers = interrupted_closers(events)
    repaired = restore(events + closers)  # validates the closers in place
    assert repaired.is_balanced
    assert interrupted_closers(repaired.events) == []
    assert [e.seq for e in closers] == list(range(len(events), len(events) + len(closers)))
    assert all(e.time == (events[-1].time if events else 0) for e in closers)
    assert bool(closers) == (not session.is_balanced)


def test_library_constants_are_the_pinned_texts() -> None:
    assert TOOL_NOT_STARTED_TEXT == NOT_STARTED_TEXT
    assert TOOL_OUTCOME_UNKNOWN_TEXT == OUTCOME_UNKNOWN_TEXT


@pytest.mark.requires("upstream")
def test_texts_are_the_ones_the_dsh_session_readme_fixes(tmp_path: Path) -> None:
    """The released package's README, section "Crash-repair result", names both texts."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("needs npm to fetch @deepseek-ai/dsh-session; npm is not on PATH")
    packed = subprocess.run(
        [npm, "pack", "@deepseek-ai/dsh-session@0.1.0-rc.8", "--pack-destination", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if packed.returncode != 0:
        pytest.skip(f"npm pack failed (registry unreachable?): {packed.stderr.strip()[-200:]}")
    (archive,) = tmp_path.glob("*.tgz")
    with tarfile.open(archive) as bundle:
        member = bundle.extractfile("package/README.md")
        assert member is not None
        readme = member.read().decode("utf-8")
    section = readme[readme.index("### Crash-repair result") :]
    said = re.findall(r"says `([^`]+)`", section[: section.index("#### Token effect")])
    assert said == [TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN_TEXT]


def _open_tail_from_the_first_event(
    events: list[SessionEvent],
) -> tuple[int | None, int | None, dict[str, int | None]]:
    # The open tail by a walk over every event, the definition the closers follow.
    turn: int | None = None
    step: int | None = None
    pending: dict[str, int | None] = {}
    resolved: set[str] = set()
    for event in events:
        facts = event._facts
        if event.type == "assistant/message":
            for call_id in facts.requested_calls:
                if call_id not in resolved:
                    pending.setdefault(call_id, None)
        elif event.type == "tool/call":
            assert facts.call_id is not None
            if facts.call_id not in resolved:
                pending[facts.call_id] = event.seq
        elif event.type == "tool/result":
            assert facts.call_id is not None
            pending.pop(facts.call_id, None)
            resolved.add(facts.call_id)
        elif event.type in ("turn/start", "turn/end"):
            turn = facts.turn if event.type == "turn/start" else None
            step, pending, resolved = None, {}, set()
        elif event.type == "step/start":
            step, pending, resolved = facts.step, {}, set()
        elif event.type == "step/end":
            step, pending, resolved = None, {}, set()
    return turn, step, pending


@given(ACTIONS, st.integers(0, 30))
def test_the_open_tail_starting_at_the_last_turn_boundary_is_the_whole_walk(
    actions: list[str], cut: int
) -> None:
    events = list(drive(actions).events)
    for prefix in (events, events[:cut], events[cut:]):  # a slice need not start a turn
        expected = _open_tail_from_the_first_event(prefix)
        assert closers_module._open_tail(prefix) == expected
        assert list(closers_module._open_tail(prefix)[2].items()) == list(expected[2].items())
