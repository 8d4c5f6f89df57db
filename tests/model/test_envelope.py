"""Envelope rules, on append and on restore, each with its rule name and message."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_store.errors import EventValidationError, LosslessJsonError
from dsh_store.model import Session, SessionEvent, SurfaceReplace

from .builders import assistant, new_session, open_step, request_header, system, tool_result, user


def expect(rule: str, text: str, call: Any, *args: Any, **kwargs: Any) -> EventValidationError:
    with pytest.raises(EventValidationError) as caught:
        call(*args, **kwargs)
    assert caught.value.rule == rule, caught.value
    assert text in str(caught.value)
    return caught.value


@pytest.fixture
def live() -> Session:
    session = new_session()
    open_step(session)
    session.append("system/message", system(1, 1), surface_op="append")
    session.append("user/message", user(), surface_op="append")
    return session


def test_surface_type_requires_surface_op(live: Session) -> None:
    error = expect("surface-op-required", "needs surfaceOp", live.append, "user/message", user())
    assert (error.seq, error.event_type) == (4, "user/message")


@pytest.mark.parametrize("kind", ["turn/start", "request/context", "permission/preset", "x/new"])
def test_log_only_and_unknown_types_forbid_surface_op(live: Session, kind: str) -> None:
    expect(
        "surface-op-forbidden",
        "only message-producing",
        live.append,
        kind,
        {"turn": 2},
        surface_op="append",
    )


def test_log_only_types_forbid_source_seqs(live: Session) -> None:
    expect(
        "source-seqs-forbidden",
        "only message-producing",
        live.append,
        "feedback/record",
        {"text": "x"},
        source_event_seqs=[0],
    )


def test_assistant_message_forbids_source_seqs(live: Session) -> None:
    expect(
        "assistant-source-seqs",
        "cannot cite sourceEventSeqs",
        live.append,
        "assistant/message",
        assistant(1, 1),
        surface_op="append",
        source_event_seqs=[3],
    )


def test_source_seqs_empty_duplicate_late(live: Session) -> None:
    expect(
        "source-seqs-empty",
        "at least one earlier seq",
        live.append,
        "user/message",
        user(),
        surface_op="append",
        source_event_seqs=[],
    )
    expect(
        "source-seqs-duplicate",
        "lists a seq twice",
        live.append,
        "user/message",
        user(),
        surface_op="append",
        source_event_seqs=[1, 1],
    )
    expect(
        "source-seqs-not-earlier",
        "cites seq 4",
        live.append,
        "user/message",
        user(),
        surface_op="append",
        source_event_seqs=[0, 4],
    )
    expect(
        "source-seqs-shape",
        "list of seqs",
        live.append,
        "user/message",
        user(),
        surface_op="append",
        source_event_seqs=[True],
    )
    expect(
        "source-seqs-shape",
        "list of seqs",
        live.append,
        "user/message",
        user(),
        surface_op="append",
        source_event_seqs="01",
    )
    assert live.seq == 4


@pytest.mark.parametrize(
    "op",
    [
        "prepend",
        {"op": "replace", "start": 2, "end": 3},
        {"op": "replace", "startSeq": 2},
        {"op": "replace", "startSeq": 2, "endSeq": 3, "x": 1},
        {"op": "swap", "startSeq": 2, "endSeq": 3},
        {"op": "replace", "startSeq": -1, "endSeq": 3},
        7,
    ],
)
def test_surface_op_shape(live: Session, op: Any) -> None:
    expect(
        "surface-op-shape", "surfaceOp must be", live.append, "user/message", user(), surface_op=op
    )


def test_replace_endpoint_must_be_earlier(live: Session) -> None:
    expect(
        "replace-not-earlier",
        "must be earlier",
        live.append,
        "user/message",
        user(),
        surface_op=SurfaceReplace(3, 9),
        source_event_seqs=[3],
    )


def test_tool_error_only_with_is_error() -> None:
    session = new_session()
    open_step(session)
    session.append("assistant/message", assistant(1, 1, None, ("c1",)), surface_op="append")
    data = tool_result(1, 1, "c1")
    data["error"] = {"name": "Boom", "code": "BOOM"}
    expect(
        "tool-error-without-is-error",
        "only allowed when data.message.isError is true",
        session.append,
        "tool/result",
        data,
        surface_op="append",
    )
    data["message"]["isError"] = True
    assert session.append("tool/result", data, surface_op="append").data["error"]["code"] == "BOOM"


@pytest.mark.parametrize(
    ("header", "rule", "text"),
    [
        ({"system": "retired"}, "header-system", "retired"),
        ({"tools": []}, "header-empty-tools", "omitted, not empty"),
        ({"adapterDefaults": {}}, "header-empty-adapter-defaults", "omitted, not empty"),
        ({"tools": "x"}, "data-shape", "data.header.tools must be an array"),
    ],
)
def test_request_header_canonical(
    live: Session, header: dict[str, Any], rule: str, text: str
) -> None:
    expect(rule, text, live.append, "request/header", request_header(**header))


def test_request_header_needs_provider_and_reason(live: Session) -> None:
    data = request_header()
    del data["header"]["config"]["model"]
    expect(
        "data-shape", "data.header.config.model is required", live.append, "request/header", data
    )
    expect(
        "data-shape",
        "data.reason must be one of",
        live.append,
        "request/header",
        request_header(reason="fallback"),
    )
    data = request_header()
    data["startsSeries"] = False
    expect(
        "data-shape", "data.startsSeries must be exactly true", live.append, "request/header", data
    )


def test_plugin_records_must_be_ignorable(live: Session) -> None:
    expect("plugin-not-ignorable", "must be marked ignorable", live.append, "plugin:x/y", {})
    event = live.append("plugin:x/y", {"a": 1}, ignorable=True)
    assert event.ignorable and b'"ignorable":true' in event.line


def test_ignorable_must_be_bool(live: Session) -> None:
    expect("ignorable-not-true", "must be a bool", live.append, "x/y", {}, ignorable=1)


def test_event_type_must_be_text(live: Session) -> None:
    expect("event-type", "non-empty string", live.append, "", {})
    expect("event-type", "non-empty string", live.append, None, {})


def test_unknown_types_are_accepted_on_append(live: Session) -> None:
    event = live.append("future/thing", {"x": [1, 2]})
    assert event.type == "future/thing" and event.seq == 4


@pytest.mark.parametrize(
    ("kind", "data", "rule", "text"),
    [
        ("turn/start", [], "data-shape", "data must be an object, got list"),
        ("turn/start", {}, "data-shape", "data.turn is required"),
        ("turn/start", {"turn": 0}, "data-shape", "data.turn must be a positive safe integer"),
        ("turn/end", {"turn": 1, "reason": "done"}, "data-shape", "data.reason must be an object"),
        ("turn/end", {"turn": 1, "reason": {}}, "data-shape", "data.reason.kind is required"),
        ("step/start", {"turn": 1, "step": 1.0}, "data-shape", "data.step must be a positive"),
        (
            "user/message",
            {"role": "assistant", "content": []},
            "message-role",
            "data.role must be 'user'",
        ),
        (
            "user/message",
            {"role": "user", "content": "hi"},
            "data-shape",
            "data.content must be an array",
        ),
        (
            "tool/call",
            {"turn": 1, "step": 1, "callId": "", "name": "x", "arguments": ""},
            "data-shape",
            "data.callId must be a non-empty string",
        ),
        ("session/end-seed", {"inherited": False}, "end-seed-shape", "{inherited: true}"),
        ("session/end-seed", {"other": 1}, "end-seed-shape", "{inherited: true}"),
        ("request/context", {"provider": "p"}, "data-shape", "data.model is required"),
        (
            "request/context",
            {"provider": "p", "model": "m", "contextWindow": -5},
            "data-shape",
            "data.contextWindow",
        ),
        ("assistant/attempt", {"turn": 1, "step": 1}, "data-shape", "data.stream is required"),
    ],
)
def test_core_payload_shapes(live: Session, kind: str, data: Any, rule: str, text: str) -> None:
    from dsh_store.model.vocabulary import SURFACE_TYPES

    op = "append" if kind in SURFACE_TYPES else None
    expect(rule, text, live.append, kind, data, surface_op=op)


def test_assistant_needs_route_and_tool_call_ids(live: Session) -> None:
    data = assistant(1, 1)
    del data["message"]["source"]["provider"]
    expect(
        "assistant-route",
        "provider and model",
        live.append,
        "assistant/message",
        data,
        surface_op="append",
    )
    data = assistant(1, 1, None, ("c1",))
    data["message"]["content"][0]["id"] = ""
    expect(
        "data-shape",
        "data.message.content[0].id must be a non-empty string",
        live.append,
        "assistant/message",
        data,
        surface_op="append",
    )
    data = assistant(1, 1)
    data["interrupted"] = False
    expect(
        "data-shape",
        "data.interrupted must be exactly true",
        live.append,
        "assistant/message",
        data,
        surface_op="append",
    )


def test_developer_header_seq_rules(live: Session) -> None:
    def developer(content: list[Any], **extra: Any) -> dict[str, Any]:
        message = {"role": "developer", "content": content, "source": {"kind": "tool-registry"}}
        return {"turn": 1, "step": 1, "message": message, **extra}

    addition = [{"type": "tool-addition", "toolName": "ping"}]
    expect(
        "developer-header-seq",
        "required when the message adds tools",
        live.append,
        "developer/message",
        developer(addition),
        surface_op="append",
    )
    expect(
        "developer-header-seq",
        "only allowed when the message adds tools",
        live.append,
        "developer/message",
        developer([], headerSeq=0),
        surface_op="append",
    )
    expect(
        "developer-header-seq",
        "is not an earlier request/header",
        live.append,
        "developer/message",
        developer(addition, headerSeq=0),
        surface_op="append",
    )
    expect(
        "developer-header-seq",
        "non-negative safe integer",
        live.append,
        "developer/message",
        developer(addition, headerSeq="0"),
        surface_op="append",
    )
    header = live.append("request/header", request_header())
    event = live.append(
        "developer/message", developer(addition, headerSeq=header.seq), surface_op="append"
    )
    assert event.seq == header.seq + 1


def test_lossless_error_names_the_path(live: Session) -> None:
    data = user()
    data["content"].append({"type": "text", "text": float("nan")})
    with pytest.raises(LosslessJsonError) as caught:
        live.append("user/message", data, surface_op="append")
    assert caught.value.json_path == "data.content[1].text"
    assert caught.value.event_type == "user/message"
    assert "NaN" in str(caught.value)
    with pytest.raises(LosslessJsonError) as caught:
        live.append("x/y", {"when": {1, 2}})
    assert caught.value.json_path == "data.when"
    with pytest.raises(LosslessJsonError):
        live.append("x/y", {"n": 2**53})
    assert live.seq == 4


def test_failed_append_leaves_the_log_unchanged(live: Session) -> None:
    before = (live.seq, live.surface, live.events)
    with pytest.raises(EventValidationError):
        live.append("step/start", {"turn": 1, "step": 1})
    assert (live.seq, live.surface, live.events) == before


def test_restore_refuses_the_same_envelope_faults() -> None:
    base = {"type": "user/message", "seq": 0, "time": 1, "data": user()}
    expect("surface-op-required", "needs surfaceOp", SessionEvent.from_json, base)
    expect(
        "surface-op-forbidden",
        "only message-producing",
        SessionEvent.from_json,
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "surfaceOp": "append"},
    )
    expect(
        "source-seqs-not-earlier",
        "cites seq 0",
        SessionEvent.from_json,
        {**base, "surfaceOp": "append", "sourceEventSeqs": [0]},
    )
    expect(
        "ignorable-not-true",
        "exactly true",
        SessionEvent.from_json,
        {**base, "surfaceOp": "append", "ignorable": False},
    )
    expect(
        "surface-op-shape", "omitted, not null", SessionEvent.from_json, {**base, "surfaceOp": None}
    )
