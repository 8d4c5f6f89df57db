"""Derived history: projection rules, caching across replaces, copies never reach the log."""

from __future__ import annotations

from hypothesis import given

from dsh_store.model import Session, SurfaceReplace, derive_event_message, fold_surface

from .builders import (
    assistant,
    new_session,
    open_step,
    request_header,
    system,
    tool_call,
    tool_result,
    user,
)
from .test_surface import surface_script


def texts(messages: list[dict]) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    out = []
    for message in messages:
        first = message["content"][0] if message["content"] else {}
        out.append((message["role"], first.get("text", first.get("type", ""))))
    return out


def test_projection_rules() -> None:
    session = new_session()
    open_step(session)
    session.append("system/message", system(1, 1, "prompt"), surface_op="append")
    session.append("user/message", user("question"), surface_op="append")
    session.append("request/header", request_header())
    session.append("assistant/message", assistant(1, 1, None, ("c1",)), surface_op="append")
    session.append("tool/call", tool_call(1, 1, "c1"))
    session.append(
        "tool/result", tool_result(1, 1, "c1", "output"), surface_op="append", source_event_seqs=[6]
    )
    session.append("assistant/attempt", {"turn": 1, "step": 1, "stream": []})
    session.append("step/end", {"turn": 1, "step": 1})
    assert [(m["role"], m.get("toolCallId")) for m in session.derive_messages()] == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
    ]
    assert session.derive_messages()[1] == user("question")
    assert session.derive_messages()[3]["content"] == [{"type": "text", "text": "output"}]


def test_empty_assistant_and_system_nodes_project_nothing() -> None:
    session = new_session()
    open_step(session)
    head = session.append("system/message", system(1, 1, ""), surface_op="append")
    session.append("user/message", user("q"), surface_op="append")
    empty = session.append("assistant/message", assistant(1, 1, None), surface_op="append")
    dormant = session.append("system/message", system(1, 1, "", "s2"), surface_op="append")
    assert texts(session.derive_messages()) == [("user", "q")]
    assert derive_event_message(head) is None
    assert session.derive_event_message(empty) is None
    assert derive_event_message(dormant) is None
    # The empty nodes still occupy the surface.
    assert session.surface.nodes == (2, 3, 4, 5)


def test_non_surface_events_project_nothing() -> None:
    session = new_session()
    start = session.append("turn/start", {"turn": 1})
    record = session.append("plugin:x/y", {"role": "user", "content": []}, ignorable=True)
    assert derive_event_message(start) is None
    assert derive_event_message(record) is None


def test_cache_grows_then_rebuilds_after_replace() -> None:
    session = new_session()
    open_step(session)
    session.append("user/message", user("a", "a"), surface_op="append")  # 2
    assert texts(session.derive_messages()) == [("user", "a")]
    session.append("user/message", user("b", "b"), surface_op="append")  # 3
    assert texts(session.derive_messages()) == [("user", "a"), ("user", "b")]
    session.append(
        "user/message", user("ab", "ab"), surface_op=SurfaceReplace(2, 3), source_event_seqs=[2, 3]
    )
    assert texts(session.derive_messages()) == [("user", "ab")]


def test_returned_messages_are_fresh_copies() -> None:
    session = new_session()
    open_step(session)
    event = session.append("user/message", user("safe"), surface_op="append")
    first = session.derive_messages()
    first[0]["content"][0]["text"] = "mutated"
    first.append({"role": "user"})
    assert texts(session.derive_messages()) == [("user", "safe")]
    single = session.derive_event_message(event)
    assert single is not None
    single["content"].clear()
    assert texts(session.derive_messages()) == [("user", "safe")]


@given(surface_script())
def test_cached_messages_equal_projection_of_the_fold(session: Session) -> None:
    by_seq = {event.seq: event for event in session.events}
    expected = [derive_event_message(by_seq[seq]) for seq in fold_surface(session.events).nodes]
    assert session.derive_messages() == [m for m in expected if m is not None]
