"""The v3 -> v4 edge: closers, plugin namespace, producer kinds, tool lift, catalog."""

from __future__ import annotations

import copy
from itertools import pairwise
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrations import MigrationContext, v3_to_v4

from .late_logs import (
    drain,
    load_sample,
    log,
    pure_dense_run,
    refusal_of,
    session_header,
    user,
)

EDGE = v3_to_v4.EDGE
PATH = "/logs/s/session.v3.jsonl"
HEADER: dict[str, Any] = session_header(3)
NO_CHILDREN: tuple[dict[str, Any], ...] = ()


def context(children: Any = NO_CHILDREN, **extras: Any) -> MigrationContext:
    return MigrationContext(path=PATH, session_id="s-1", child_headers=children, extras=extras)


def run(
    events: list[dict[str, Any]],
    header: dict[str, Any] | None = None,
    ctx: MigrationContext | None = None,
) -> list[dict[str, Any]]:
    return drain(EDGE.stage(header or HEADER, ctx or context()), events)


def refusal(
    events: list[dict[str, Any]],
    header: dict[str, Any] | None = None,
    ctx: MigrationContext | None = None,
) -> Any:
    return refusal_of(lambda: run(events, header, ctx), edge="3->4", path=PATH)


def splice(*messages: dict[str, Any]) -> tuple[Any, ...]:
    return ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": list(messages)})


def turn(n: int) -> tuple[Any, ...]:
    return ("turn/start", {"turn": n})


def step(t: int, s: int, end: bool = False) -> tuple[Any, ...]:
    return ("step/end" if end else "step/start", {"turn": t, "step": s})


def tool_result(message: dict[str, Any], **data: Any) -> tuple[Any, ...]:
    return (
        "tool/result",
        {"turn": 1, "step": 1, "message": message, **data},
        {"surfaceOp": "append"},
    )


def wrapper(**extra: Any) -> dict[str, Any]:
    block = {
        "type": "tool-result",
        "toolCallId": "c1",
        "content": [{"type": "text", "text": "ok"}],
        **extra,
    }
    return {
        "role": "user",
        "id": "r1",
        "content": [block],
        "source": {"kind": "tool", "callId": "c1"},
    }


# -- header -------------------------------------------------------------------------


def test_header_bumps_version_only() -> None:
    header = {**HEADER, "agentPreset": "ptc"}
    assert EDGE.header(header, context()) == {**header, "version": 4}


def test_header_of_wrong_version_is_refused() -> None:
    with pytest.raises(MigrationRefusedError) as caught:
        EDGE.header({**HEADER, "version": 2}, context())
    assert cast(Any, caught.value).rule == "wrong source version"
    assert "header version is 2, expected 3" in str(caught.value)


# -- interrupted-turn closer -----------------------------------------------------------


def test_closer_is_inserted_before_a_restarting_turn_and_references_follow() -> None:
    events = log(
        turn(1),
        user("a", "m1"),  # seq 1
        splice(user("next", "m2")[1]),
        turn(2),  # closer goes before this
        ("session/title", {"title": "t", "messageSeqs": [1], "source": {"kind": "fallback"}}),
        ("command/done", {"commandId": "c", "kind": "ok", "sourceEventSeq": 4}),
        (
            "user/message",
            user("s", "m3")[1],
            {
                "surfaceOp": {"op": "replace", "startSeq": 1, "endSeq": 1},
                "sourceEventSeqs": [1, 3, 4],
            },
        ),
        ("image/offload", {"targets": [{"seq": 6, "x": 1}]}),
    )
    out = run(events)
    assert out[3] == {
        "type": "turn/end",
        "seq": 3,
        "time": 103,
        "data": {"turn": 1, "reason": {"kind": "interrupted"}},
    }
    assert [e["seq"] for e in out] == list(range(9))
    assert out[4]["type"] == "turn/start"
    assert out[5]["data"]["messageSeqs"] == [1]  # before the insertion: unchanged
    assert out[6]["data"]["sourceEventSeq"] == 5
    assert out[7]["surfaceOp"] == {"op": "replace", "startSeq": 1, "endSeq": 1}
    assert out[7]["sourceEventSeqs"] == [1, 4, 5]
    assert out[8]["data"]["targets"] == [{"seq": 7, "x": 1}]
    assert events[5]["data"]["sourceEventSeq"] == 4  # the source is untouched


@pytest.mark.parametrize(
    "specs",
    [
        (turn(1), step(1, 1), splice(user("n", "m")[1]), turn(2)),  # a step is open
        (turn(1), splice(), turn(2)),  # nothing inserted
        (turn(1), splice(user("n", "m")[1]), turn(3)),  # not the next turn
        (turn(1), splice(user("n", "m")[1]), ("plan/mode", {"active": True}), turn(2)),
    ],
)
def test_no_closer_outside_the_exact_pattern(specs: tuple[tuple[Any, ...], ...]) -> None:
    out = run(log(*specs))
    assert [e["type"] for e in out] == [s[0] for s in specs]


def test_reference_not_earlier_is_refused_after_a_closer() -> None:
    events = log(
        turn(1),
        splice(user("n", "m")[1]),
        turn(2),
        ("command/done", {"commandId": "c", "kind": "ok", "sourceEventSeq": 3}),
    )
    error = refusal(events)
    assert (error.rule, error.seq, error.event_type) == ("reference not earlier", 3, "command/done")
    assert "data.sourceEventSeq names seq 3, which is not earlier" in str(error)


# -- vocabulary ---------------------------------------------------------------------


def test_unknown_ignorable_event_becomes_a_plugin_record_verbatim() -> None:
    odd = ("odd/thing", {"k": [1]}, {"ignorable": True, "sourceEventSeqs": [0], "extra": "x"})
    events = log(turn(1), splice(user("n", "m")[1]), turn(2), odd)
    out = run(events)
    assert out[4] == {
        "type": "plugin:odd/thing",
        "seq": 4,
        "time": 103,
        "data": {"k": [1]},
        "ignorable": True,
        "sourceEventSeqs": [0],  # envelope metadata stays unvalidated and unmapped
        "extra": "x",
    }


def test_known_v3_types_are_not_renamed() -> None:
    out = run(log(("workspace/changes", {"a": 1}), ("deliverables/presented", {})))
    assert [e["type"] for e in out] == ["workspace/changes", "deliverables/presented"]
    assert len(v3_to_v4.V3_EVENT_TYPES) == 58


@pytest.mark.parametrize("event_type", ["developer/message", "odd/thing"])
def test_unknown_required_event_is_refused(event_type: str) -> None:
    error = refusal(log(turn(1), (event_type, {"turn": 1})))
    assert (error.rule, error.seq, error.event_type) == ("unknown required event", 1, event_type)
    assert f"required event type {event_type!r} is not part of the v3 vocabulary" in str(error)


def test_non_dense_seq_is_refused() -> None:
    events = log(turn(1), turn(2))
    events[1]["seq"] = 7
    error = refusal(events)
    assert (error.rule, error.seq, error.event_type) == ("non-dense source seq", 1, "turn/start")
    assert "seq 7 where 1 was expected" in str(error)


# -- message sources -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugin", "role", "kind"),
    [
        ("compact", "user", "compact-checkpoint"),
        ("tools-code-mode", "user", "ptc-mode"),
        ("tools-ptc", "user", "ptc-mode"),
        ("dsh-compaction-basic", "user", "compact-basic"),
        ("@deepseek-ai/dsh-system-prompt", "system", "system-prompt"),
        ("@deepseek-ai/dsh-system-prompt", "user", "runtime-context"),
        ("goal", "user", "goal"),
        ("dsh-session-title-llm", "user", "dsh-session-title-llm"),
        ("my-extension", "user", "plugin:my-extension"),
        ("", "user", "plugin:"),
        ("plugin:x", "user", "plugin:plugin:x"),
    ],
)
def test_producer_kinds(plugin: str, role: str, kind: str) -> None:
    from dsh_store.migrations._v4_messages import producer_kind

    assert producer_kind(plugin, role) == kind


def test_plugin_sources_become_producer_kinds_in_every_slot_keeping_key_order() -> None:
    source = {
        "kind": "plugin",
        "form": "snapshot",
        "plugin": "@deepseek-ai/dsh-system-prompt",
        "z": 1,
    }
    system = {
        "role": "system",
        "id": "h",
        "content": [],
        "source": {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"},
    }
    title_request = {
        "titleProvider": "p",
        "messageSeqs": [],
        "route": {},
        "system": "",
        "messages": [
            {"role": "user", "content": [], "source": {"kind": "plugin", "plugin": "goal"}}
        ],
        "maxTokens": 5,
    }
    events = log(
        turn(1),
        step(1, 1),
        ("system/message", {"turn": 1, "step": 1, "message": system}, {"surfaceOp": "append"}),
        user("x", "m1", dict(source)),
        splice(user("y", "m2", {"kind": "plugin", "plugin": "compact"})[1]),
        ("session/title-llm-request", title_request),
        user("z", "m3", {"kind": "user", "plugin": "kept"}),
        user("w", "m4", {"kind": "custom-kind"}),
    )
    out = run(events)
    assert out[2]["data"]["message"]["source"] == {"kind": "system-prompt"}
    assert out[3]["data"]["source"] == {"kind": "runtime-context", "form": "snapshot", "z": 1}
    assert list(out[3]["data"]["source"]) == ["kind", "form", "z"]
    assert out[4]["data"]["inserted"][0]["source"] == {"kind": "compact-checkpoint"}
    assert out[5]["data"]["messages"][0]["source"] == {"kind": "goal"}
    assert out[6]["data"]["source"] == {"kind": "user", "plugin": "kept"}  # direct kinds untouched
    assert out[7]["data"]["source"] == {"kind": "custom-kind"}
    assert events[3]["data"]["source"] == source


def test_plugin_source_without_name_is_refused() -> None:
    error = refusal(log(turn(1), step(1, 1), user("x", "m", {"kind": "plugin", "plugin": 3})))
    assert (error.rule, error.seq, error.event_type) == (
        "plugin source without name",
        2,
        "user/message",
    )
    assert "data.source is a plugin source without a string plugin name" in str(error)


def test_source_without_kind_is_refused() -> None:
    error = refusal(log(turn(1), step(1, 1), user("x", "m", {"kind": ""})))
    assert (error.rule, error.seq, error.event_type) == (
        "message source without kind",
        2,
        "user/message",
    )
    assert "data.source has no non-empty string kind" in str(error)


# -- tool-result lift ----------------------------------------------------------------


def test_tool_result_is_lifted_to_a_tool_role_message() -> None:
    message = wrapper(isError=True, note="n")
    message["meta2"] = "m"
    out = run(log(turn(1), step(1, 1), tool_result(message, error={"name": "E", "code": "X"})))
    lifted = out[2]["data"]["message"]
    assert lifted == {
        "role": "tool",
        "source": {"kind": "tool", "callId": "c1"},
        "toolCallId": "c1",
        "content": [{"type": "text", "text": "ok"}],
        "isError": True,
        "id": "r1",
        "plugin:message:meta2": "m",
        "plugin:result:note": "n",
    }
    assert list(lifted) == [
        "role",
        "source",
        "toolCallId",
        "content",
        "isError",
        "id",
        "plugin:message:meta2",
        "plugin:result:note",
    ]
    assert out[2]["data"]["error"] == {"name": "E", "code": "X"}


def test_lifted_content_gets_plugin_tags() -> None:
    message = wrapper()
    message["content"][0]["content"] = [{"type": "diagram", "v": 1}]
    out = run(log(turn(1), step(1, 1), tool_result(message)))
    assert out[2]["data"]["message"]["content"] == [{"type": "plugin:diagram", "v": 1}]
    assert "isError" not in out[2]["data"]["message"]


@pytest.mark.parametrize(
    ("mutate", "detail"),
    [
        (lambda m: m.update(id=""), "data.message.id must be a non-empty string"),
        (lambda m: m.update(source={"kind": "user"}), "must be {kind: 'tool', callId}"),
        (
            lambda m: m["content"].append({"type": "text", "text": "x"}),
            "must hold exactly one block",
        ),
        (
            lambda m: m["content"][0].update(toolCallId="other"),
            "must be a tool-result block for call 'c1'",
        ),
        (lambda m: m["content"][0].update(content="flat"), "content[0].content is not a list"),
        (lambda m: m["content"][0].update(isError="yes"), "isError is not a boolean"),
        (lambda m: m.update(role="assistant"), "a v3 tool result is a user-role wrapper"),
    ],
)
def test_malformed_tool_result_wrapper_is_refused(mutate: Any, detail: str) -> None:
    message = wrapper()
    mutate(message)
    error = refusal(log(turn(1), step(1, 1), tool_result(message)))
    assert (error.rule, error.seq, error.event_type) == (
        "malformed tool-result wrapper",
        2,
        "tool/result",
    )
    assert detail in str(error)


def test_nested_tool_result_is_refused() -> None:
    message = wrapper()
    message["content"][0]["content"] = [{"type": "tool-result", "toolCallId": "c2", "content": []}]
    error = refusal(log(turn(1), step(1, 1), tool_result(message)))
    assert (error.rule, error.seq, error.event_type) == ("nested tool result", 2, "tool/result")
    assert "nests a tool-result inside a tool result" in str(error)


def test_tool_error_without_is_error_is_refused() -> None:
    error = refusal(
        log(turn(1), step(1, 1), tool_result(wrapper(), error={"name": "E", "code": "X"}))
    )
    assert (error.rule, error.seq, error.event_type) == (
        "tool error without error result",
        2,
        "tool/result",
    )
    assert "does not have isError: true" in str(error)


def test_leftover_tool_result_block_is_refused() -> None:
    message = user("x", "m")
    message[1]["content"] = [{"type": "tool-result", "toolCallId": "c", "content": []}]
    error = refusal(log(turn(1), step(1, 1), message))
    assert (error.rule, error.seq, error.event_type) == (
        "leftover tool-result block",
        2,
        "user/message",
    )
    assert "data.content[0] is a tool-result block outside a tool/result wrapper" in str(error)


# -- content tags ---------------------------------------------------------------------


def test_unknown_content_blocks_are_tagged_in_owned_arrays_and_streams() -> None:
    odd = {"type": "chart", "v": 1}
    user_message = user("x", "m")
    user_message[1]["content"] = [{"type": "text", "text": "t"}, dict(odd)]
    stream = [
        {
            "type": "chunk",
            "time": 1,
            "chunk": {"type": "block-start", "index": 0, "blockType": "chart"},
        },
        {
            "type": "chunk",
            "time": 2,
            "chunk": {"type": "block-end", "index": 0, "block": dict(odd)},
        },
        {"type": "text-chunks", "time0": 3, "index": 1, "dt": [], "texts": ["a"]},
    ]
    message = {"role": "assistant", "id": "a", "content": [dict(odd)], "source": {"kind": "model"}}
    summary = {
        "compactionId": "c",
        "summary": [dict(odd)],
        "rawOutput": [dict(odd)],
        "shadowedRange": {"start": 0, "end": 0},
        "shadowedSeqs": [],
        "shadowedTokenCount": 0,
        "provider": "p",
        "model": "m",
    }
    events = log(
        turn(1),
        step(1, 1),
        user_message,
        (
            "assistant/message",
            {"turn": 1, "step": 1, "message": message, "stream": stream},
            {"surfaceOp": "append"},
        ),
        ("assistant/attempt", {"turn": 1, "step": 1, "stream": copy.deepcopy(stream)}),
        ("team/message/queued", {"version": 1, "teamId": "t", "message": {"content": [dict(odd)]}}),
        ("compaction/summary", summary),
        ("tool/ptc-dispatch", {"content": [dict(odd)], "isError": False}),
    )
    snapshot = copy.deepcopy(events)
    out = run(events)
    tagged = {"type": "plugin:chart", "v": 1}
    assert out[2]["data"]["content"] == [{"type": "text", "text": "t"}, tagged]
    assert out[3]["data"]["message"]["content"] == [tagged]
    for index in (3, 4):
        assert out[index]["data"]["stream"][0]["chunk"]["blockType"] == "plugin:chart"
        assert out[index]["data"]["stream"][1]["chunk"]["block"] == tagged
        assert out[index]["data"]["stream"][2] == stream[2]
    assert out[5]["data"]["message"]["content"] == [tagged]
    assert out[6]["data"]["summary"] == [tagged]
    assert out[6]["data"]["rawOutput"] == [tagged]
    assert out[7]["data"]["content"] == [tagged]
    assert events == snapshot


# -- request headers and delivery markers ----------------------------------------------


def test_defer_loading_is_refused() -> None:
    header = {"config": {}, "tools": [{"name": "a"}, {"name": "b", "deferLoading": True}]}
    error = refusal(log(("request/header", {"header": header, "reason": "initial"})))
    assert (error.rule, error.seq, error.event_type) == (
        "deferLoading in v3 tool",
        0,
        "request/header",
    )
    assert "data.header.tools[1] carries deferLoading" in str(error)


def marker(**data: Any) -> tuple[Any, ...]:
    return ("session-log-deepseek/delivery-accepted", data)


def test_delivery_marker_claiming_v4_is_refused() -> None:
    error = refusal(log(turn(1), marker(sessionId="s-1", throughSeq=0, sessionFormatVersion=4)))
    assert (error.rule, error.seq, error.event_type) == (
        "delivery marker claims newer format",
        1,
        "session-log-deepseek/delivery-accepted",
    )
    assert "claiming format 4" in str(error)


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (
            {"sessionId": "s-1", "throughSeq": 0, "sessionFormatVersion": -1},
            "sessionFormatVersion -1 is not",
        ),
        (
            {"sessionId": "", "throughSeq": 0, "sessionFormatVersion": 3},
            "needs a non-empty sessionId",
        ),
        (
            {"sessionId": "s-1", "throughSeq": 1, "sessionFormatVersion": 3},
            "throughSeq 1 is not an earlier seq",
        ),
    ],
)
def test_malformed_delivery_marker_is_refused(data: dict[str, Any], detail: str) -> None:
    error = refusal(log(turn(1), marker(**data)))
    assert (error.rule, error.seq) == ("malformed delivery marker", 1)
    assert detail in str(error)


def test_foreign_delivery_marker_rules() -> None:
    foreign = {"sessionId": "other", "throughSeq": 0, "sessionFormatVersion": 3}
    error = refusal(log(turn(1), marker(**foreign)))
    assert (error.rule, error.seq) == ("foreign delivery marker", 1)
    assert "names session 'other', not this session 's-1'" in str(error)
    child = {**HEADER, "isSeeded": True, "parentSession": "p"}
    kept = run(log(turn(1), marker(**foreign), ("session/end-seed", {"inherited": True})), child)
    assert kept[1]["data"] == foreign
    error = refusal(
        log(("session/end-seed", {"inherited": True}), turn(1), marker(**foreign)), child
    )
    assert (error.rule, error.seq) == ("foreign delivery marker", 2)
    assert "outside the inherited prefix" in str(error)
    other_generation = {"sessionId": "anyone", "throughSeq": 5, "sessionFormatVersion": 2}
    assert run(log(marker(**other_generation)))[0]["data"] == other_generation


def test_cut_disagreeing_with_header_is_refused() -> None:
    error = refusal(log(turn(1)), {**HEADER, "isSeeded": True})
    assert (error.rule, error.seq, error.event_type) == ("cut disagrees with header", None, None)
    assert "no session/end-seed {inherited: true}" in str(error)
    error = refusal(log(("session/end-seed", {"inherited": True})))
    assert (error.rule, error.seq) == ("cut disagrees with header", 0)
    assert "whose header is not seeded" in str(error)


# -- subagent catalog completion -------------------------------------------------------


def child(child_id: str, created_at: int) -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": child_id,
        "createdAt": created_at,
        "parentSession": "s-1",
    }


def catalog(**data: Any) -> tuple[Any, ...]:
    return ("subagent/catalog", data)


def descriptor(version: int, mode: str = "one-shot", **extra: Any) -> dict[str, Any]:
    return {"mode": mode, "version": version, "provider": "p", **extra}


def test_catalog_is_completed_from_child_evidence_in_creation_order() -> None:
    children = (child("b", 20), child("a", 20), child("c", 10), child("d", 30))
    descriptors = {
        "a": [descriptor(1, label="A")],
        "b": [descriptor(3, "one-shot")],
        "d": [descriptor(2), descriptor(3)],  # two descriptors: unknown
    }
    out = run(log(turn(1)), ctx=context(children, child_descriptors=descriptors))
    assert out[1:] == [
        {
            "type": "subagent/catalog",
            "seq": 1,
            "time": 100,
            "data": {"version": 1, "childId": "c", "childCreatedAt": 10, "mode": "unknown"},
        },
        {
            "type": "subagent/catalog",
            "seq": 2,
            "time": 100,
            "data": {
                "version": 0,
                "childId": "a",
                "childCreatedAt": 20,
                "mode": "continuable",
                "label": "A",
            },
        },
        {
            "type": "subagent/catalog",
            "seq": 3,
            "time": 100,
            "data": {"version": 0, "childId": "b", "childCreatedAt": 20, "mode": "one-shot"},
        },
        {
            "type": "subagent/catalog",
            "seq": 4,
            "time": 100,
            "data": {"version": 1, "childId": "d", "childCreatedAt": 30, "mode": "unknown"},
        },
    ]


def test_existing_entries_are_kept_and_not_duplicated() -> None:
    events = log(turn(1), catalog(version=0, childId="a", childCreatedAt=20, mode="one-shot"))
    out = run(events, ctx=context((child("a", 20),), child_descriptors={"a": [descriptor(3)]}))
    assert out == events


def test_empty_log_uses_the_header_time_and_no_children_appends_nothing() -> None:
    assert run([], ctx=context((child("a", 5),))) == [
        {
            "type": "subagent/catalog",
            "seq": 0,
            "time": 1000,
            "data": {"version": 1, "childId": "a", "childCreatedAt": 5, "mode": "unknown"},
        }
    ]
    assert run(log(turn(1))) == log(turn(1))


def test_unknown_children_leave_the_catalog_as_written() -> None:
    events = log(turn(1))
    assert run(events, ctx=context(None)) == events


def test_unknown_children_are_refused_when_evidence_is_required() -> None:
    with pytest.raises(MigrationRefusedError) as caught:
        EDGE.stage(HEADER, context(None, require_child_evidence=True))
    error: Any = caught.value
    assert (error.rule, error.seq, error.event_type, error.edge) == (
        "missing child evidence",
        None,
        None,
        "3->4",
    )
    assert "the children of this session are unknown" in str(error)


def test_invalid_child_evidence_is_refused() -> None:
    with pytest.raises(MigrationRefusedError) as caught:
        EDGE.stage(HEADER, context(({"id": "x"},)))
    assert cast(Any, caught.value).rule == "invalid child evidence"
    assert "lacks a string id or a safe integer createdAt" in str(caught.value)


def test_entries_before_the_final_inherited_marker_are_discarded() -> None:
    header = {**HEADER, "isSeeded": True}
    events = log(
        catalog(version=0, childId="a", childCreatedAt=1, mode="one-shot"),
        catalog(version=0, childId="a", childCreatedAt=1, mode="one-shot"),
        ("session/end-seed", {"inherited": True}),
    )
    out = run(events, header, context((child("a", 2),)))
    # The inherited entries do not count: a fresh fact is appended for the own child.
    assert out[-1]["data"] == {"version": 1, "childId": "a", "childCreatedAt": 2, "mode": "unknown"}


def test_duplicate_catalog_children_are_refused() -> None:
    events = log(
        catalog(version=1, childId="a", childCreatedAt=1, mode="unknown"),
        catalog(version=1, childId="a", childCreatedAt=1, mode="unknown"),
    )
    error = refusal(events)
    assert (error.rule, error.seq, error.event_type) == (
        "duplicate catalog child",
        1,
        "subagent/catalog",
    )
    assert "two subagent/catalog entries name the same childId" in str(error)


def test_conflicting_catalog_entries_are_refused() -> None:
    events = log(catalog(version=0, childId="a", childCreatedAt=1, mode="one-shot"))
    error = refusal(events, ctx=context((child("a", 2),)))
    assert (error.rule, error.seq, error.event_type) == (
        "conflicting catalog entry",
        0,
        "subagent/catalog",
    )
    assert "says childCreatedAt 1 but the child was created at 2" in str(error)
    error = refusal(
        events, ctx=context((child("a", 1),), child_descriptors={"a": [descriptor(1, label="L")]})
    )
    assert (error.rule, error.seq) == ("conflicting catalog entry", 0)
    assert "disagrees with the child's descriptor (mode 'continuable', label 'L')" in str(error)


@pytest.mark.parametrize(
    ("bad", "detail"),
    [
        (descriptor(3, provider=None), "descriptor has a non-string provider"),
        (descriptor(2, "forever"), "descriptor mode 'forever' is not supported"),
        (descriptor(3, "continuable"), "a continuable catalog entry needs a string label"),
    ],
)
def test_invalid_descriptor_is_refused(bad: dict[str, Any], detail: str) -> None:
    error = refusal(log(turn(1)), ctx=context((child("a", 1),), child_descriptors={"a": [bad]}))
    assert (error.rule, error.seq, error.event_type) == (
        "invalid descriptor",
        None,
        "subagent/catalog",
    )
    assert detail in str(error)


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (
            {"version": 2, "childId": "a", "childCreatedAt": 1, "mode": "one-shot"},
            "catalog version 2 is not 0 or 1",
        ),
        (
            {"version": 0, "childId": "a", "childCreatedAt": 1, "mode": "unknown"},
            "catalog mode 'unknown' is not allowed at version 0",
        ),
        (
            {"version": 0, "childId": "a", "childCreatedAt": 1, "mode": "continuable"},
            "needs a string label",
        ),
        (
            {"version": 1, "childId": "a", "childCreatedAt": 1, "mode": "unknown", "label": 3},
            "label must be a string",
        ),
    ],
)
def test_invalid_catalog_fact_is_refused(data: dict[str, Any], detail: str) -> None:
    error = refusal(log(("subagent/catalog", data)))
    assert (error.rule, error.seq, error.event_type) == (
        "invalid catalog fact",
        0,
        "subagent/catalog",
    )
    assert detail in str(error)


# -- the real sample ------------------------------------------------------------------


def _without_stream_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = copy.deepcopy(rows)
    for row in rows:
        for record in (
            row.get("data", {}).get("stream", []) if isinstance(row.get("data"), dict) else []
        ):
            for key in ("time", "time0", "dt"):
                record.pop(key, None)
    return rows


@pytest.mark.requires("shared")
def test_feedback_command_sample_v3_migrates_to_the_recorded_v4() -> None:
    # Both files keep "{{tools}}" in the same place; the corpus rule drops the key in
    # formats 3-4 either way, so it cancels out and the rows are compared as they are.
    v3 = load_sample("feedback-command.v3.jsonl")
    v4 = load_sample("feedback-command.v4.jsonl")
    ctx = context(())
    assert EDGE.header(v3[0], ctx) == v4[0]
    out = run(v3[1:], v3[0], ctx)
    # The two generations were recorded separately (samples/README.md): the only
    # difference is the model stream's wall-clock timing inside assistant/message.
    differing = [i for i, (a, b) in enumerate(zip(out, v4[1:], strict=True)) if a != b]
    assert differing == [13]
    assert out[13]["type"] == "assistant/message"
    assert _without_stream_times(out) == _without_stream_times(v4[1:])


# -- property -------------------------------------------------------------------------

SOURCES: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"kind": "user"},
        {"kind": "plugin", "plugin": "compact"},
        {"kind": "plugin", "plugin": "x-ext", "extra": 1},
        {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"},
    ]
)


@st.composite
def v3_logs(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """v3 logs with interrupted restarts, plugin sources, titles and unknown records."""
    specs: list[tuple[Any, ...]] = []
    messages: list[int] = []
    for n in range(1, draw(st.integers(1, 4)) + 1):
        specs.append(turn(n))
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["user", "title", "plugin"]))
            if kind == "user":
                messages.append(len(specs))
                specs.append(user("x", f"m{len(specs)}", dict(draw(SOURCES))))
            elif kind == "plugin":
                specs.append(("odd/x", {}, {"ignorable": True}))
            elif messages:
                cited = sorted(
                    set(draw(st.lists(st.sampled_from(messages), min_size=1, max_size=3)))
                )
                specs.append(
                    (
                        "session/title",
                        {"title": "t", "messageSeqs": cited, "source": {"kind": "fallback"}},
                    )
                )
        if draw(st.booleans()):
            specs.append(splice(user("next", f"q{len(specs)}")[1]))  # restart pattern
        else:
            specs.append(("turn/end", {"turn": n, "reason": {"kind": "completed"}}))
    return specs


@given(v3_logs())
def test_property_dense_deterministic_and_references_follow_their_events(
    specs: list[tuple[Any, ...]],
) -> None:
    events = log(*specs)
    out = pure_dense_run(run, events)
    closers = [
        e for e in out if e["type"] == "turn/end" and e["data"]["reason"] == {"kind": "interrupted"}
    ]
    survivors = [e for e in out if e not in closers]
    assert len(survivors) == len(events)
    restarts = sum(
        1
        for a, b in pairwise(events)
        if a["type"] == "agent/inbox/spliced" and b["type"] == "turn/start"
    )
    assert len(closers) == restarts
    new_seq = {s["seq"]: t["seq"] for s, t in zip(events, survivors, strict=True)}
    for source, target in zip(events, survivors, strict=True):
        expected_type = (
            source["type"]
            if source["type"] in v3_to_v4.V3_EVENT_TYPES
            else "plugin:" + source["type"]
        )
        assert target["type"] == expected_type
        if source["type"] == "session/title":
            assert target["data"]["messageSeqs"] == [
                new_seq[s] for s in source["data"]["messageSeqs"]
            ]
            assert all(out[s]["type"] == "user/message" for s in target["data"]["messageSeqs"])
        if source["type"] == "user/message":
            assert "plugin" not in target["data"]["source"]
