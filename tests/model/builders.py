"""Payload builders and small drivers shared by the model tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from dsh_store.model import Session, SessionEvent

PROVIDER = "deepseek-official"
MODEL = "deepseek-v4-flash"


def ticking_clock(start: int = 1_000) -> Callable[[], int]:
    """A deterministic clock: start, start+1, ..."""
    counter = itertools.count(start)
    return lambda: next(counter)


def new_session(session_id: str = "s1") -> Session:
    return Session.create(session_id, clock=ticking_clock())


def user(text: str = "hello", message_id: str = "m-user") -> dict[str, Any]:
    return {
        "role": "user",
        "id": message_id,
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def system(
    turn: int, step: int, text: str = "be helpful", message_id: str = "m-sys"
) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "system",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "system-prompt"},
            "id": message_id,
        },
    }


def assistant(
    turn: int,
    step: int,
    text: str | None = "hi",
    calls: tuple[str, ...] = (),
    message_id: str = "m-a",
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for call_id in calls:
        content.append({"type": "tool-call", "id": call_id, "name": "bash", "arguments": "{}"})
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
            "id": message_id,
        },
        "stream": [],
    }


def tool_call(turn: int, step: int, call_id: str) -> dict[str, Any]:
    return {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": "{}"}


def tool_result(
    turn: int, step: int, call_id: str, text: str = "ok", is_error: bool = False
) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "tool",
            "source": {"kind": "tool", "callId": call_id},
            "toolCallId": call_id,
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            "id": f"m-r-{call_id}",
        },
    }


def request_header(reason: str = "initial", **header: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"config": {"provider": PROVIDER, "model": MODEL}}
    body.update(header)
    return {"header": body, "reason": reason}


def open_step(session: Session, turn: int = 1, step: int = 1) -> None:
    """Append turn/start (for step 1) and step/start."""
    if step == 1:
        session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": step})


def simple_turn(session: Session, turn: int = 1, *, with_system: bool = True) -> None:
    """A complete turn: system head (turn 1), user prompt, assistant reply."""
    open_step(session, turn)
    if with_system and turn == 1:
        session.append("system/message", system(1, 1), surface_op="append")
    session.append("user/message", user(f"prompt {turn}", f"m-u{turn}"), surface_op="append")
    session.append(
        "assistant/message",
        assistant(turn, 1, f"reply {turn}", message_id=f"m-a{turn}"),
        surface_op="append",
    )
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def tool_turn_open(
    session: Session, calls: tuple[str, ...] = ("c1", "c2"), logged: int = 1
) -> None:
    """Turn 1, step 1: assistant requests ``calls``; the first ``logged`` get a tool/call."""
    open_step(session)
    session.append("user/message", user(), surface_op="append")
    session.append("assistant/message", assistant(1, 1, None, calls), surface_op="append")
    for call_id in calls[:logged]:
        session.append("tool/call", tool_call(1, 1, call_id))


def restore(events: list[SessionEvent], **header: Any) -> Session:
    from dsh_store.model import SessionHeader

    return Session.from_restore(
        SessionHeader(id=header.pop("id", "s1"), created_at=0, **header),
        events,
        clock=ticking_clock(),
    )
