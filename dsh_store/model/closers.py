"""Synthetic closers for an open trailing turn, and fork seeds.

Both are pure functions of the validated event list: seqs continue from the log, ``time``
is copied from the last event, ids are derived from call ids and seqs. Repeating them over
the same log therefore yields the same bytes, which makes crash repair convergent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ._checks import fail
from .events import SessionEvent

__all__ = [
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "build_fork_seed",
    "interrupted_closers",
]

# The result texts are protocol constants: DSH fixes them (``dsh-session`` README, "Crash-repair
# result: What the model sees") as what a resumed model reads, so they are kept byte for byte.
TOOL_NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
"""The text of a ``TOOL_NOT_STARTED`` closer (no ``tool/call`` was logged)."""

TOOL_OUTCOME_UNKNOWN_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably "
    "recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: "
    "retry only if the operation is read-only or idempotent; if it may have side effects, "
    "first verify external state or ask the user. Do not retry blindly."
)
"""The text of a ``TOOL_OUTCOME_UNKNOWN`` closer (a ``tool/call`` was logged, no result)."""

_NOT_STARTED: Final = ("ToolNotStartedError", "TOOL_NOT_STARTED", TOOL_NOT_STARTED_TEXT)
_OUTCOME_UNKNOWN: Final = (
    "ToolOutcomeUnknownError",
    "TOOL_OUTCOME_UNKNOWN",
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
_TURN_BOUNDARIES: Final = frozenset({"turn/start", "turn/end"})


def _open_tail(
    events: Sequence[SessionEvent],
) -> tuple[int | None, int | None, dict[str, int | None]]:
    """The open turn, open step and pending calls (call id -> tool/call seq) at the end."""
    turn: int | None = None
    step: int | None = None
    pending: dict[str, int | None] = {}
    resolved: set[str] = set()
    # turn/start and turn/end set every part of the state, so the walk can start at the
    # last of them instead of at the first event (a balanced log ends in one).
    start = len(events) - 1
    while start > 0 and events[start].type not in _TURN_BOUNDARIES:
        start -= 1
    for event in events[max(start, 0) :]:
        kind = event.type
        facts = event._facts
        if kind == "assistant/message":
            for call_id in facts.requested_calls:
                if call_id not in resolved:
                    pending.setdefault(call_id, None)
        elif kind == "tool/call":
            assert facts.call_id is not None
            if facts.call_id not in resolved:
                pending[facts.call_id] = event.seq
        elif kind == "tool/result":
            assert facts.call_id is not None
            pending.pop(facts.call_id, None)
            resolved.add(facts.call_id)
        elif kind == "turn/start":
            turn, step = facts.turn, None
            pending, resolved = {}, set()
        elif kind == "turn/end":
            turn, step = None, None
            pending, resolved = {}, set()
        elif kind == "step/start":
            step = facts.step
            pending, resolved = {}, set()
        elif kind == "step/end":
            step = None
            pending, resolved = {}, set()
    return turn, step, pending


def _closers(
    events: Sequence[SessionEvent], reason_kind: str, next_seq: int, time: int
) -> list[SessionEvent]:
    turn, step, pending = _open_tail(events)
    if turn is None:
        return []
    out: list[SessionEvent] = []
    seq = next_seq
    if step is not None:
        for call_id, call_seq in pending.items():
            name, code, text = _NOT_STARTED if call_seq is None else _OUTCOME_UNKNOWN
            message: dict[str, Any] = {
                "role": "tool",
                "source": {"kind": "tool", "callId": call_id},
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": True,
                "id": f"interrupted-tool-result-{call_id}-{seq}",
            }
            data = {
                "turn": turn,
                "step": step,
                "message": message,
                "error": {"name": name, "code": code},
            }
            out.append(
                SessionEvent(
                    "tool/result",
                    seq,
                    time,
                    data,
                    surface_op="append",
                    source_event_seqs=None if call_seq is None else (call_seq,),
                )
            )
            seq += 1
        out.append(SessionEvent("step/end", seq, time, {"turn": turn, "step": step}))
        seq += 1
    out.append(SessionEvent("turn/end", seq, time, {"turn": turn, "reason": {"kind": reason_kind}}))
    return out


def interrupted_closers(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Closers that balance a log whose last turn never ended (crash repair).

    In order: one error ``tool/result`` per unanswered call of the open step
    (``TOOL_NOT_STARTED`` without a logged ``tool/call``, ``TOOL_OUTCOME_UNKNOWN`` with
    one, citing it), ``step/end`` if a step is open, then ``turn/end`` with reason
    ``{"kind": "interrupted"}``. No assistant message is invented and plugin brackets
    such as ``compaction/*`` are left alone. A balanced or empty log yields ``[]``.
    """
    if not events:
        return []
    return _closers(events, "interrupted", len(events), events[-1].time)


def build_fork_seed(
    events: Sequence[SessionEvent], boundary: int | None, *, time: int | None = None
) -> list[SessionEvent]:
    """The seed of a fork child: the prefix through ``boundary`` (inclusive), the
    ``session/end-seed {"inherited": true}`` marker at the cut, then closers with reason
    ``{"kind": "forked"}`` for a turn left open at the cut.

    ``boundary=None`` forks through the last event. The marker and closers copy the time of
    the last prefix event (``time`` is used for a fork of an empty log, default 0). The
    child's ``inherited_event_count`` is the marker's seq, and its header has
    ``is_seeded=True`` and no ``parent_session``.

    :raises EventValidationError: ``fork-boundary`` when ``boundary`` is not an event seq.
    """
    if boundary is None:
        boundary = len(events) - 1
    elif type(boundary) is not int or not 0 <= boundary < len(events):
        fail(
            "fork-boundary",
            f"fork boundary {boundary!r} is not the seq of an event (log has {len(events)})",
            seq=None,
            event_type=None,
        )
    prefix = list(events[: boundary + 1])
    stamp = prefix[-1].time if prefix else (time if time is not None else 0)
    marker = SessionEvent("session/end-seed", len(prefix), stamp, {"inherited": True})
    seeded = [*prefix, marker]
    return seeded + _closers(seeded, "forked", len(seeded), stamp)
