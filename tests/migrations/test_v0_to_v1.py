"""The 0->1 edge: version bump, legacy normalizations and refusals."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import pytest
from hypothesis import given

from dsh_store.migrations import EDGES, v0_to_v1

from .early_logs import CONTEXT, Row, ev, header, refuse_run, refused, run01, user, v0_logs

E = "0->1"


def one(row: Row, head: Row | None = None) -> Row:
    (out,) = run01([row], head)
    return out


refuse = partial(refuse_run, run01, E)


# -- transformations --------------------------------------------------------------


def test_registered_edge_is_this_module() -> None:
    assert EDGES[0] is v0_to_v1.EDGE


def test_header_bumps_version_and_keeps_every_other_key_in_order() -> None:
    head = {
        "type": "session",
        "version": 0,
        "id": "x",
        "createdAt": 1,
        "cwd": "/w",
        "seedLength": 3,
        "delegationDepth": 1,
    }
    out = v0_to_v1.EDGE.header(head, CONTEXT)
    assert list(out.items()) == [
        ("type", "session"),
        ("version", 1),
        ("id", "x"),
        ("createdAt", 1),
        ("cwd", "/w"),
        ("seedLength", 3),
        ("delegationDepth", 1),
    ]
    assert head["version"] == 0


def test_packed_rows_pass_through_and_count_their_members() -> None:
    packed = {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 9,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, -2], "texts": ["a", "b", "c"]},
    }
    out = run01([packed, ev("step/end", 3, {"turn": 1, "step": 1})])
    assert out[0] is packed
    assert out[1]["seq"] == 3


@pytest.mark.parametrize("old", ["start", "summary", "end", "prune"])
def test_compact_events_are_renamed_to_compaction(old: str) -> None:
    data: dict[str, dict[str, Any]] = {
        "start": {"compactionId": "c", "turn": None},
        "summary": {
            "compactionId": "c",
            "summary": [],
            "shadowedRange": {"start": 0, "end": 0},
            "shadowedSeqs": [0],
            "shadowedTokenCount": 1,
            "provider": "p",
            "model": "m",
        },
        "end": {"compactionId": "c", "turn": None},
        "prune": {
            "shadowedRange": {"start": 0, "end": 0},
            "shadowedSeqs": [0],
            "shadowedTokenCount": 1,
        },
    }
    out = one(ev(f"compact/{old}", 0, data[old]))
    assert out["type"] == f"compaction/{old}"
    assert out["data"] == data[old]


def test_turn_start_trigger_is_dropped() -> None:
    out = one(ev("turn/start", 0, {"turn": 2, "trigger": {"kind": "user"}}))
    assert out["data"] == {"turn": 2}


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ({"kind": "aborted"}, {"kind": "aborted", "reason": {"kind": "legacy"}}),
        ({"kind": "disposed"}, {"kind": "aborted", "reason": {"kind": "disposed"}}),
        (
            {
                "kind": "error",
                "step": 1,
                "failure": {"message": "m", "code": "AUTH", "status": 401},
            },
            {"kind": "error", "error": {"message": "m", "code": "AUTH", "status": 401}},
        ),
        (
            {"kind": "error", "step": 1, "message": "boom"},
            {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
        ),
        (
            {"kind": "error", "step": 1, "message": "boom", "code": "E1"},
            {"kind": "error", "error": {"message": "boom", "code": "E1"}},
        ),
        ({"kind": "completed"}, {"kind": "completed"}),
        (
            {"kind": "aborted", "reason": {"kind": "user"}},
            {"kind": "aborted", "reason": {"kind": "user"}},
        ),
        ({"kind": "someday", "extra": 1}, {"kind": "someday", "extra": 1}),
    ],
)
def test_turn_end_legacy_reasons_are_normalized(reason: Row, expected: Row) -> None:
    out = one(ev("turn/end", 0, {"turn": 1, "reason": reason}))
    assert out["data"] == {"turn": 1, "reason": expected}


def test_request_header_message_prefix_is_dropped() -> None:
    data = {
        "header": {"config": {"model": "m"}, "messagePrefix": [], "tools": []},
        "reason": "initial",
    }
    out = one(ev("request/header", 0, data))
    assert out["data"] == {"header": {"config": {"model": "m"}, "tools": []}, "reason": "initial"}
    assert "messagePrefix" in data["header"]


def test_steering_message_with_inner_message_becomes_user_message() -> None:
    inner = {"role": "user", "id": "m1", "content": [], "source": {"kind": "user"}}
    out = one(ev("steering/message", 0, {"turn": 1, "message": inner}))
    assert out["type"] == "user/message"
    assert out["data"] == inner


def test_steering_message_with_content_gets_a_legacy_identity() -> None:
    out = one(ev("steering/message", 0, {"turn": 1, "content": [], "source": {"kind": "user"}}))
    assert out["type"] == "user/message"
    assert list(out["data"].items()) == [
        ("content", []),
        ("source", {"kind": "user"}),
        ("id", "legacy-message:s-1:0"),
        ("role", "user"),
    ]


def retry(seq: int, turn: int = 1, **extra: Any) -> Row:
    data = {
        "turn": turn,
        "step": 1,
        "provider": "p",
        "mode": "m",
        "policyKey": "k",
        "retry": 1,
        "delayMs": 5,
        "failure": {},
        **extra,
    }
    return ev("llm/retry", seq, data)


def test_retry_ids_are_generated_then_reused_within_a_chain() -> None:
    out = run01(
        [
            ev("turn/start", 0, {"turn": 1}),
            retry(1),
            retry(2),
            retry(3, policyKey="other"),
            ev("turn/end", 4, {"turn": 1, "reason": {"kind": "completed"}}),
            ev("turn/start", 5, {"turn": 2}),
            retry(6, turn=2),
            retry(7, turn=2, retryId=""),
        ]
    )
    ids = [row["data"].get("retryId") for row in out]
    assert ids[1:4] == ["legacy-retry:s-1:1", "legacy-retry:s-1:1", "legacy-retry:s-1:3"]
    assert ids[6:] == ["legacy-retry:s-1:6", ""]
    assert next(iter(out[1]["data"])) == "retryId"


def test_compaction_ids_fill_the_open_compaction_then_reset() -> None:
    summary = {
        "summary": [],
        "shadowedRange": {"start": 0, "end": 0},
        "shadowedSeqs": [0],
        "shadowedTokenCount": 1,
        "provider": "p",
        "model": "m",
    }
    compact_source = {"kind": "plugin", "plugin": "compact"}
    out = run01(
        [
            ev("compaction/start", 0, {"turn": None}),
            ev("compaction/summary", 1, summary),
            ev(
                "user/message",
                2,
                {"role": "user", "id": "u", "content": [], "source": compact_source},
                surfaceOp="append",
            ),
            ev("compact/end", 3, {"turn": None}),
            ev(
                "user/message",
                4,
                {"role": "user", "id": "v", "content": [], "source": compact_source},
                surfaceOp="append",
            ),
        ]
    )
    cid = "legacy-compaction:s-1:0"
    assert out[0]["data"] == {"compactionId": cid, "turn": None}
    assert out[1]["data"]["compactionId"] == cid
    assert out[2]["data"]["source"] == {**compact_source, "compactionId": cid}
    assert out[3]["data"] == {"compactionId": cid, "turn": None}
    assert out[4]["data"]["source"] == compact_source


def test_user_message_without_identity_gets_a_legacy_id_and_role() -> None:
    out = one(
        ev("user/message", 0, {"content": [], "source": {"kind": "user"}}, surfaceOp="append")
    )
    assert out["data"] == {
        "content": [],
        "source": {"kind": "user"},
        "id": "legacy-message:s-1:0",
        "role": "user",
    }


def test_assistant_message_with_content_and_provenance_gets_a_message_object() -> None:
    data = {
        "turn": 1,
        "step": 1,
        "content": [{"type": "text", "text": "x"}],
        "provenance": {"provider": "p", "model": "m"},
        "usage": {"inputTokens": 1},
    }
    out = one(ev("assistant/message", 0, data, surfaceOp="append"))
    assert list(out["data"].items()) == [
        ("turn", 1),
        ("step", 1),
        (
            "message",
            {
                "id": "legacy-message:s-1:0",
                "role": "assistant",
                "content": [{"type": "text", "text": "x"}],
                "source": {"provider": "p", "model": "m", "kind": "model"},
            },
        ),
        ("usage", {"inputTokens": 1}),
    ]


def legacy_tool(seq: int, **envelope: Any) -> Row:
    data = {
        "turn": 1,
        "step": 1,
        "callId": "c1",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
    }
    return ev("tool/result", seq, data, **envelope)


def test_tool_result_with_call_id_gets_a_tool_message() -> None:
    out = one(legacy_tool(0, surfaceOp="append"))
    assert out["data"] == {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "legacy-message:s-1:0",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "content": [{"type": "text", "text": "ok"}],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": "c1"},
        },
    }


def test_replacing_legacy_tool_result_takes_the_replaced_message_id() -> None:
    out = run01(
        [
            user(0),
            user(1),
            legacy_tool(
                2, surfaceOp={"op": "replace", "start": 0, "end": 1}, sourceEventSeqs=[0, 1]
            ),
        ]
    )
    assert out[2]["data"]["message"]["id"] == "u0"


def test_delivery_marker_for_parent_is_allowed_in_a_child_inherited_prefix() -> None:
    head = header(0, parentSession="p", seedLength=1)
    row = ev("session-log-deepseek/delivery-accepted", 0, {"sessionId": "p", "throughSeq": 0})
    assert run01([row], head) == [row]


def test_rows_given_to_the_edge_are_never_mutated() -> None:
    rows = [
        ev("turn/start", 0, {"turn": 1, "trigger": {"kind": "user"}}),
        ev("user/message", 1, {"content": [], "source": {"kind": "user"}}),
    ]
    before = copy.deepcopy(rows)
    run01(rows)
    assert rows == before


@given(v0_logs())
def test_property_deterministic_and_seq_preserving(rows: list[Row]) -> None:
    first, second = run01(rows), run01(copy.deepcopy(rows))
    assert first == second
    assert len(first) == len(rows)
    assert [(r.get("seq"), r.get("seq0")) for r in first] == [
        (r.get("seq"), r.get("seq0")) for r in rows
    ]


# -- refusals ---------------------------------------------------------------------


def test_refuses_a_header_that_is_not_version_0() -> None:
    refused(
        lambda: v0_to_v1.EDGE.header(header(1), CONTEXT),
        rule="wrong-source-version",
        seq=None,
        event_type=None,
        detail="header version is 1",
        edge=E,
    )


def test_refuses_a_malformed_envelope() -> None:
    refuse(
        [{"type": "turn/start", "seq": 0, "time": 1, "data": []}],
        rule="malformed-envelope",
        seq=0,
        event_type="turn/start",
        detail="object data",
    )


def test_refuses_a_seq_gap() -> None:
    refuse(
        [ev("turn/start", 1, {"turn": 1})],
        rule="seq-not-dense",
        seq=1,
        event_type="turn/start",
        detail="row has seq 1, expected 0",
    )


def test_refuses_a_malformed_packed_row() -> None:
    packed = {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 9,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b", "c"]},
    }
    refuse(
        [packed],
        rule="malformed-packed-row",
        seq=0,
        event_type="text-chunks",
        detail="dt must hold 2 gap(s)",
    )


@pytest.mark.parametrize("event_type", ["request/header-delta", "mode/set"])
def test_refuses_removed_event_types(event_type: str) -> None:
    refuse(
        [ev(event_type, 0, {})],
        rule="removed-event-type",
        seq=0,
        event_type=event_type,
        detail="removed before format 0 was released",
    )


def test_refuses_the_fallback_request_reason() -> None:
    refuse(
        [ev("request/header", 0, {"header": {}, "reason": "fallback"})],
        rule="fallback-request-reason",
        seq=0,
        event_type="request/header",
        detail="reason 'fallback'",
    )


def test_refuses_unknown_types_even_when_ignorable() -> None:
    refuse(
        [ev("x/y", 0, {}, ignorable=True)],
        rule="unknown-event-type",
        seq=0,
        event_type="x/y",
        detail="not a format-0 event type",
    )


def test_refuses_surface_fields_on_a_log_only_event() -> None:
    refuse(
        [ev("turn/start", 0, {"turn": 1}, surfaceOp="append")],
        rule="envelope-member",
        seq=0,
        event_type="turn/start",
        detail="envelope member(s) surfaceOp",
    )


@pytest.mark.parametrize(
    ("row", "detail"),
    [
        (ev("turn/start", 0, {"turn": 1, "trigger": {"kind": ""}}), "turn/start trigger"),
        (ev("turn/end", 0, {"turn": 0, "reason": {"kind": "completed"}}), "turn/end"),
        (ev("turn/end", 0, {"turn": 1, "reason": {"kind": "blocked", "x": 1}}), "reason 'blocked'"),
        (
            ev("turn/end", 0, {"turn": 1, "reason": {"kind": "error", "step": 1}}),
            "turn/end error reason",
        ),
        (
            ev("request/header", 0, {"header": {"messagePrefix": "x"}, "reason": "initial"}),
            "messagePrefix",
        ),
        (ev("steering/message", 0, {"turn": 1}), "steering/message"),
    ],
)
def test_refuses_malformed_legacy_shapes(row: Row, detail: str) -> None:
    refuse([row], rule="malformed-legacy-shape", seq=0, event_type=row["type"], detail=detail)


def test_refuses_a_replacing_legacy_tool_result_whose_start_has_no_id() -> None:
    refuse(
        [legacy_tool(0, surfaceOp={"op": "replace", "start": 5, "end": 5})],
        rule="replaced-message-without-id",
        seq=0,
        event_type="tool/result",
        detail="replaces surface seq 5",
    )


def test_refuses_missing_payload_members() -> None:
    refuse(
        [ev("step/start", 0, {"turn": 1})],
        rule="missing-payload-member",
        seq=0,
        event_type="step/start",
        detail="lacks required member(s) step",
    )


def test_refuses_unexpected_payload_members() -> None:
    refuse(
        [ev("plan/mode", 0, {"active": True, "why": 1})],
        rule="unexpected-payload-member",
        seq=0,
        event_type="plan/mode",
        detail="member(s) why",
    )


def test_refuses_an_unknown_subagent_descriptor_version() -> None:
    refuse(
        [ev("subagent/descriptor", 0, {"mode": "one-shot", "version": 7, "provider": "p"})],
        rule="subagent-descriptor-version",
        seq=0,
        event_type="subagent/descriptor",
        detail="found 7",
    )


def test_refuses_a_foreign_delivery_marker() -> None:
    refuse(
        [ev("session-log-deepseek/delivery-accepted", 0, {"sessionId": "other", "throughSeq": 0})],
        rule="foreign-delivery-marker",
        seq=0,
        event_type="session-log-deepseek/delivery-accepted",
        detail="names session 'other'",
    )


def test_refuses_a_seed_length_beyond_the_log() -> None:
    refuse(
        [ev("turn/start", 0, {"turn": 1})],
        head=header(0, seedLength=4),
        rule="seed-beyond-log",
        seq=None,
        event_type=None,
        detail="seedLength 4 exceeds the 1 event(s)",
    )
