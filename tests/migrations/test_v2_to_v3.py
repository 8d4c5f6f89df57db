"""The v2 -> v3 edge: system heads, canonical envelopes, PTC renames, refusals."""

from __future__ import annotations

import copy
import hashlib
import json
from itertools import pairwise
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrations import MigrationContext, v2_to_v3
from tests.conftest import SHARED
from tests.corpus import loaded, materialize_tools

from .late_logs import (
    drain,
    load_sample,
    log,
    pure_dense_run,
    refusal_of,
    session_header,
    user,
)

EDGE = v2_to_v3.EDGE
PATH = "/logs/s/session.v2.jsonl"
HEADER: dict[str, Any] = session_header(2)
PLUGIN = "@deepseek-ai/dsh-system-prompt"


def run(events: list[dict[str, Any]], header: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Feed ``events`` (seq and time filled in from position) through the edge."""
    header = header or HEADER
    return drain(EDGE.stage(header, MigrationContext(path=PATH, session_id=header["id"])), events)


def request(system: str | None = None, **header: Any) -> tuple[Any, ...]:
    body: dict[str, Any] = {"config": {"provider": "p", "model": "m"}, **header}
    if system is not None:
        body["system"] = system
    return ("request/header", {"header": body, "reason": "initial"})


TURN = ("turn/start", {"turn": 1})
STEP = ("step/start", {"turn": 1, "step": 1})
STEP_END = ("step/end", {"turn": 1, "step": 1})
TURN_END = ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def expected_id(anchor_seq: int, anchor_type: str, header_id: str = "s-1") -> str:
    text = json.dumps(
        ["session-format-v2-to-v3", header_id, anchor_seq, anchor_type], separators=(",", ":")
    )
    return "v2-to-v3-system-" + hashlib.sha256(text.encode()).hexdigest()


def refusal(events: list[dict[str, Any]], header: dict[str, Any] | None = None) -> Any:
    return refusal_of(lambda: run(events, header), edge="2->3", path=PATH)


# -- header ---------------------------------------------------------------------------


def test_header_bumps_version_and_renames_code_preset() -> None:
    header = {**HEADER, "agentPreset": "code", "cwd": "/w"}
    migrated = EDGE.header(header, MigrationContext(path=PATH))
    assert migrated == {**header, "version": 3, "agentPreset": "ptc"}
    assert list(migrated) == list(header)
    assert header["agentPreset"] == "code"  # the input is not mutated


def test_header_keeps_other_presets() -> None:
    header = {**HEADER, "agentPreset": "standard"}
    assert EDGE.header(header, MigrationContext())["agentPreset"] == "standard"


def test_header_of_wrong_version_is_refused() -> None:
    with pytest.raises(MigrationRefusedError) as caught:
        EDGE.header({**HEADER, "version": 3}, MigrationContext(path=PATH))
    assert cast(Any, caught.value).rule == "wrong source version"
    assert "header version is 3, expected 2" in str(caught.value)


def test_header_naming_the_ptc_preset_is_kept() -> None:
    # Format-2 writers already named the preset "ptc"; the edge renames only "code".
    header = {**HEADER, "agentPreset": "ptc"}
    migrated = EDGE.header(header, MigrationContext(path=PATH))
    assert migrated == {**header, "version": 3}
    assert list(migrated) == list(header)


def test_preset_selection_naming_ptc_is_kept() -> None:
    header = {**HEADER, "agentPreset": "ptc"}
    out = run(log(("agent-preset/selected", {"agentPreset": "ptc"})), header)
    assert out == log(("agent-preset/selected", {"agentPreset": "ptc"}))


# -- the system head ----------------------------------------------------------------


def test_empty_head_follows_the_first_step_start_only() -> None:
    out = run(log(TURN, STEP, STEP_END, ("step/start", {"turn": 1, "step": 2}), TURN_END))
    assert [e["type"] for e in out] == [
        "turn/start",
        "step/start",
        "system/message",
        "step/end",
        "step/start",
        "turn/end",
    ]
    head = out[2]
    assert head == {
        "type": "system/message",
        "seq": 2,
        "time": 101,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": expected_id(1, "step/start"),
                "role": "system",
                "source": {"kind": "plugin", "plugin": PLUGIN},
                "content": [],
            },
        },
        "surfaceOp": "append",
    }
    assert list(head) == ["type", "seq", "time", "data", "surfaceOp"]
    assert [e["seq"] for e in out] == list(range(6))


def test_a_log_without_steps_gets_no_head() -> None:
    out = run(log(TURN, ("turn/end", {"turn": 1, "reason": {"kind": "blocked"}})))
    assert [e["type"] for e in out] == ["turn/start", "turn/end"]


def test_changed_prompt_inserts_a_replacement_before_the_request_header() -> None:
    out = run(
        log(TURN, STEP, request("be concise", tools=[], adapterDefaults={}), STEP_END, TURN_END)
    )
    assert [e["type"] for e in out] == [
        "turn/start",
        "step/start",
        "system/message",
        "system/message",
        "request/header",
        "step/end",
        "turn/end",
    ]
    replacement = out[3]
    assert replacement == {
        "type": "system/message",
        "seq": 3,
        "time": 102,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": expected_id(2, "request/header"),
                "role": "system",
                "source": {"kind": "plugin", "plugin": PLUGIN},
                "content": [{"type": "text", "text": "be concise"}],
            },
        },
        "surfaceOp": {"op": "replace", "startSeq": 2, "endSeq": 2},
        "sourceEventSeqs": [2],
    }
    assert list(replacement) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    # header.system, tools: [] and adapterDefaults: {} are gone; the rest is kept.
    assert out[4]["data"] == {
        "header": {"config": {"provider": "p", "model": "m"}},
        "reason": "initial",
    }


def test_unchanged_prompt_inserts_nothing_and_clearing_replaces_with_empty_content() -> None:
    steps = log(
        TURN,
        STEP,
        request("A"),
        request("A"),
        request(None),
        request("  "),
        STEP_END,
        TURN_END,
    )
    out = run(steps)
    systems = [e for e in out if e["type"] == "system/message"]
    assert [s["data"]["message"]["content"] for s in systems] == [
        [],
        [{"type": "text", "text": "A"}],
        [],
        [{"type": "text", "text": "  "}],
    ]
    # Each replacement replaces the previous head (chain of heads).
    heads = [s["seq"] for s in systems]
    assert [s["surfaceOp"] for s in systems[1:]] == [
        {"op": "replace", "startSeq": h, "endSeq": h} for h in heads[:-1]
    ]
    assert all("system" not in e["data"]["header"] for e in out if e["type"] == "request/header")
    assert len(out) == len(steps) + 4


def test_other_empty_header_values_are_kept() -> None:
    out = run(log(request(None, tools=[{"name": "t"}], adapterDefaults={"a": 1}, stop=[])))
    assert out[0]["data"]["header"] == {
        "config": {"provider": "p", "model": "m"},
        "tools": [{"name": "t"}],
        "adapterDefaults": {"a": 1},
        "stop": [],
    }


def test_synthetic_ids_are_deterministic_and_depend_on_the_header_id() -> None:
    events = log(TURN, STEP, request("x"))
    first = run(copy.deepcopy(events))
    second = run(copy.deepcopy(events))
    assert first == second
    other = run(copy.deepcopy(events), {**HEADER, "id": "s-2"})
    assert other[2]["data"]["message"]["id"] == expected_id(1, "step/start", "s-2")
    assert other[2]["data"]["message"]["id"] != first[2]["data"]["message"]["id"]
    assert v2_to_v3.synthetic_system_id("s-1", 1, "step/start") == expected_id(1, "step/start")


# -- canonical envelopes, renames, references ----------------------------------------


def test_surface_replace_becomes_start_seq_end_seq_and_is_remapped() -> None:
    replace = {"op": "replace", "start": 3, "end": 4}
    events = log(
        TURN,
        STEP,
        request("p"),
        user("a", "m1"),
        user("b", "m2"),
        ("user/message", user("s", "m3")[1], {"sourceEventSeqs": [3, 4], "surfaceOp": replace}),
    )
    out = run(events)
    last = out[-1]
    # insertions: head after seq 1, replacement before seq 2 -> source 3, 4 become 5, 6
    assert last["surfaceOp"] == {"op": "replace", "startSeq": 5, "endSeq": 6}
    assert list(last["surfaceOp"]) == ["op", "startSeq", "endSeq"]
    assert list(last) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    assert last["sourceEventSeqs"] == [5, 6]
    assert [out[5]["data"]["id"], out[6]["data"]["id"]] == ["m1", "m2"]


def test_range_encoded_source_seqs_stay_range_encoded() -> None:
    messages = [user(str(i), f"m{i}") for i in range(4)]
    cite = ("user/message", user("s", "s")[1], {"sourceEventSeqs": [[2, 5]], "surfaceOp": "append"})
    out = run(log(TURN, STEP, *messages, cite))
    assert out[-1]["sourceEventSeqs"] == [[3, 6]]


def test_payload_references_are_remapped() -> None:
    events = log(
        TURN,
        STEP,
        user("hello", "m1"),
        ("session/title", {"title": "t", "messageSeqs": [2], "source": {"kind": "fallback"}}),
        ("command/done", {"commandId": "c", "kind": "success", "sourceEventSeq": 2}),
        (
            "compaction/prune",
            {
                "shadowedRange": {"start": 2, "end": 3},
                "shadowedSeqs": [2, 3],
                "shadowedTokenCount": 5,
            },
        ),
    )
    out = run(events)
    assert out[4]["data"]["messageSeqs"] == [3]
    assert out[5]["data"]["sourceEventSeq"] == 3
    # shadowedRange keeps its start/end names (payload fields are not renamed).
    assert out[6]["data"]["shadowedRange"] == {"start": 3, "end": 4}
    assert out[6]["data"]["shadowedSeqs"] == [3, 4]
    assert events[3]["data"]["messageSeqs"] == [2]  # source rows are not mutated


def test_ptc_vocabulary_is_renamed() -> None:
    dispatch = {
        "rootCallId": "r",
        "parentCallId": "p",
        "subCallId": "s",
        "name": "n",
        "arguments": {},
    }
    code_source = {"kind": "plugin", "plugin": "tools-code-mode", "x": 1}
    inbox = {"target": "next-turn", "start": 0, "inserted": [user("i", "mi", dict(code_source))[1]]}
    events = log(
        ("agent-preset/selected", {"agentPreset": "code"}),
        ("agent/inbox/spliced", inbox),
        TURN,
        STEP,
        user("u", "mu", dict(code_source)),
        ("tool/code-dispatch-start", dispatch),
        ("tool/code-dispatch", {**dispatch, "isError": False, "content": []}),
    )
    out = run(events)
    assert out[0]["data"] == {"agentPreset": "ptc"}
    assert out[1]["data"]["inserted"][0]["source"] == {
        "kind": "plugin",
        "plugin": "tools-ptc",
        "x": 1,
    }
    assert out[5]["data"]["source"] == {"kind": "plugin", "plugin": "tools-ptc", "x": 1}
    assert [out[6]["type"], out[7]["type"]] == ["tool/ptc-dispatch-start", "tool/ptc-dispatch"]
    assert out[7]["data"] == {**dispatch, "isError": False, "content": []}


def test_ptc_plugin_rename_is_limited_to_three_slots() -> None:
    message = {
        "role": "assistant",
        "id": "a1",
        "content": [],
        "source": {"kind": "plugin", "plugin": "tools-code-mode"},
    }
    assistant = {"turn": 1, "step": 1, "message": message, "stream": []}
    out = run(log(TURN, STEP, ("assistant/message", assistant, {"surfaceOp": "append"})))
    assert out[3]["data"]["message"]["source"]["plugin"] == "tools-code-mode"


def test_inherited_marker_and_foreign_marker_inside_the_prefix_are_kept() -> None:
    header = {**HEADER, "isSeeded": True, "parentSession": "parent"}
    marker = {"sessionId": "parent", "throughSeq": 0, "sessionFormatVersion": 2}
    events = log(
        TURN,
        ("session-log-deepseek/delivery-accepted", marker),
        ("session/end-seed", {"inherited": True}),
    )
    out = run(events, header)
    assert [e["type"] for e in out] == [e["type"] for e in events]


# -- refusals -------------------------------------------------------------------------


def test_surface_before_first_step_is_refused() -> None:
    error = refusal(log(TURN, user("early", "m1"), STEP))
    assert error.rule == "surface before first step"
    assert (error.seq, error.event_type) == (1, "user/message")
    assert "surface before first step cannot acquire a system head" in str(error)


def test_changed_prompt_outside_an_open_step_is_refused() -> None:
    error = refusal(log(TURN, STEP, STEP_END, request("late")))
    assert error.rule == "changed request prompt outside an open step"
    assert (error.seq, error.event_type) == (3, "request/header")
    assert "the request prompt changes while no step is open" in str(error)


def test_changed_prompt_before_any_step_is_refused() -> None:
    error = refusal(log(request("early"), TURN, STEP))
    assert error.rule == "changed request prompt outside an open step"
    assert (error.seq, error.event_type) == (0, "request/header")


def test_unchanged_empty_prompt_before_the_first_step_is_accepted() -> None:
    assert [e["type"] for e in run(log(request(None), TURN))] == ["request/header", "turn/start"]


@pytest.mark.parametrize("ignorable", [False, True])
def test_unclassified_event_is_refused_even_when_ignorable(ignorable: bool) -> None:
    extra = {"ignorable": True} if ignorable else {}
    error = refusal(log(TURN, ("deliverables/presented", {}, extra)))
    assert error.rule == "unknown event type"
    assert (error.seq, error.event_type) == (1, "deliverables/presented")
    assert "'deliverables/presented' is not part of the released v2 vocabulary" in str(error)


def test_ptc_event_name_in_v2_is_an_unclassified_event() -> None:
    error = refusal(log(("tool/ptc-dispatch-start", {})))
    assert (error.rule, error.seq) == ("unknown event type", 0)


def test_non_dense_seq_is_refused() -> None:
    events = log(TURN, STEP)
    events[1]["seq"] = 5
    error = refusal(events)
    assert error.rule == "non-dense source seq"
    assert (error.seq, error.event_type) == (1, "step/start")
    assert "seq 5 where 1 was expected" in str(error)


def test_malformed_row_is_refused() -> None:
    error = refusal([{"seq": 0, "time": 1, "data": {}}])
    assert (error.rule, error.seq, error.event_type) == ("malformed envelope", 0, None)
    assert "not an event object with a string type" in str(error)


def test_surface_metadata_on_log_only_event_is_refused() -> None:
    error = refusal(log(("turn/start", {"turn": 1}, {"surfaceOp": "append"})))
    assert (error.rule, error.seq, error.event_type) == (
        "envelope member not allowed",
        0,
        "turn/start",
    )
    assert "envelope member(s) surfaceOp not allowed on 'turn/start'" in str(error)


def test_assistant_message_with_source_seqs_is_refused() -> None:
    message = {"role": "assistant", "id": "a", "content": [], "source": {"kind": "model"}}
    data = {"turn": 1, "step": 1, "message": message, "stream": []}
    error = refusal(
        log(
            TURN, STEP, ("assistant/message", data, {"surfaceOp": "append", "sourceEventSeqs": [0]})
        )
    )
    assert (error.rule, error.seq, error.event_type) == (
        "envelope member not allowed",
        2,
        "assistant/message",
    )
    assert "sourceEventSeqs not allowed" in str(error)


def test_non_true_ignorable_is_refused() -> None:
    error = refusal(log(("turn/start", {"turn": 1}, {"ignorable": False})))
    assert (error.rule, error.seq) == ("malformed envelope", 0)
    assert "ignorable must be exactly true" in str(error)


def test_surface_event_without_surface_op_is_refused() -> None:
    no_op = ("user/message", user("x", "m")[1])
    error = refusal(log(TURN, STEP, no_op))
    assert (error.rule, error.seq, error.event_type) == ("missing surfaceOp", 2, "user/message")
    assert "has no surfaceOp; v3 requires one" in str(error)


def test_missing_and_unexpected_payload_members_are_refused() -> None:
    error = refusal(log(("turn/start", {})))
    assert (error.rule, error.seq, error.event_type) == ("missing payload member", 0, "turn/start")
    assert "lacks required member(s) turn" in str(error)
    error = refusal(log(("turn/start", {"turn": 1, "trigger": {}})))
    assert (error.rule, error.seq, error.event_type) == (
        "unexpected payload member",
        0,
        "turn/start",
    )
    assert "unexpected member(s) trigger" in str(error)


def test_non_positive_assistant_step_is_refused() -> None:
    error = refusal(log(TURN, STEP, ("assistant/attempt", {"turn": 1, "step": 0, "stream": []})))
    assert (error.rule, error.seq, error.event_type) == (
        "non-positive turn or step",
        2,
        "assistant/attempt",
    )
    assert "step 0 is not a positive integer" in str(error)


def test_end_seed_with_false_inherited_is_refused() -> None:
    error = refusal(log(("session/end-seed", {"inherited": False})))
    assert (error.rule, error.seq, error.event_type) == (
        "malformed end-seed",
        0,
        "session/end-seed",
    )
    assert "inherited must be exactly true" in str(error)


def test_unknown_message_source_kind_is_refused() -> None:
    error = refusal(log(TURN, STEP, user("x", "m", {"kind": "system-prompt"})))
    assert (error.rule, error.seq, error.event_type) == (
        "unknown message source kind",
        2,
        "user/message",
    )
    assert "data.source kind 'system-prompt' is not a v2 source kind" in str(error)


def test_malformed_agent_message_source_is_refused() -> None:
    error = refusal(
        log(
            TURN,
            STEP,
            user("x", "m", {"kind": "agent-message", "form": "direct", "senderSessionId": "o"}),
        )
    )
    assert (error.rule, error.seq) == ("malformed agent-message source", 2)
    assert "form: 'relay'" in str(error)


def tool_result(
    message_id: str, *, error: dict[str, Any] | None = None, is_error: bool = True
) -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": "c1", "content": [], "isError": is_error}
    message = {
        "role": "user",
        "id": message_id,
        "content": [block],
        "source": {"kind": "tool", "callId": "c1"},
    }
    data: dict[str, Any] = {"turn": 1, "step": 1, "message": message}
    if error is not None:
        data["error"] = error
    return data


def test_not_started_tool_result_needs_the_interrupted_id_form() -> None:
    error = {"name": "E", "code": "TOOL_NOT_STARTED"}
    good = run(
        log(
            TURN,
            STEP,
            (
                "tool/result",
                tool_result("interrupted-tool-result-c1-7", error=error),
                {"surfaceOp": "append"},
            ),
        )
    )
    assert good[3]["data"]["message"]["id"] == "interrupted-tool-result-c1-7"
    failure = refusal(
        log(TURN, STEP, ("tool/result", tool_result("r1", error=error), {"surfaceOp": "append"}))
    )
    assert (failure.rule, failure.seq, failure.event_type) == (
        "malformed not-started tool result id",
        2,
        "tool/result",
    )
    assert "got 'r1'" in str(failure)


def test_tool_error_without_error_result_is_refused() -> None:
    data = tool_result("r1", error={"name": "E", "code": "X"}, is_error=False)
    error = refusal(log(TURN, STEP, ("tool/result", data, {"surfaceOp": "append"})))
    assert (error.rule, error.seq, error.event_type) == (
        "tool error without error result",
        2,
        "tool/result",
    )
    assert "isError: true" in str(error)


def test_unknown_content_block_type_is_refused() -> None:
    message = user("x", "m")
    message[1]["content"] = [{"type": "audio"}]
    error = refusal(log(TURN, STEP, message))
    assert (error.rule, error.seq) == ("unknown content block type", 2)
    assert "data.content[0] has content block type 'audio'" in str(error)


def test_unknown_block_in_stream_is_refused() -> None:
    stream = [
        {
            "type": "chunk",
            "time": 1,
            "chunk": {"type": "block-start", "index": 0, "blockType": "audio"},
        }
    ]
    error = refusal(
        log(TURN, STEP, ("assistant/attempt", {"turn": 1, "step": 1, "stream": stream}))
    )
    assert (error.rule, error.seq) == ("unknown content block type", 2)
    assert "data.stream[0].chunk.blockType 'audio'" in str(error)


def test_malformed_file_block_is_refused() -> None:
    message = user("x", "m")
    message[1]["content"] = [{"type": "file", "attachment": {"attachmentId": "a", "name": "n"}}]
    error = refusal(log(TURN, STEP, message))
    assert (error.rule, error.seq) == ("malformed file block", 2)
    assert "attachmentId, name, bytes" in str(error)


def test_malformed_surface_op_is_refused() -> None:
    bad = (
        "user/message",
        user("x", "m")[1],
        {"surfaceOp": {"op": "replace", "startSeq": 0, "endSeq": 0}},
    )
    error = refusal(log(TURN, STEP, bad))
    assert (error.rule, error.seq, error.event_type) == ("malformed surfaceOp", 2, "user/message")
    assert "neither 'append' nor" in str(error)


def test_reference_to_a_later_event_is_refused() -> None:
    title = ("session/title", {"title": "t", "messageSeqs": [1], "source": {"kind": "fallback"}})
    error = refusal(log(title, TURN))
    assert (error.rule, error.seq, error.event_type) == (
        "reference not earlier",
        0,
        "session/title",
    )
    assert "data.messageSeqs[0] names seq 1, which is not earlier" in str(error)


def test_empty_source_seqs_is_refused() -> None:
    bad = ("user/message", user("x", "m")[1], {"surfaceOp": "append", "sourceEventSeqs": []})
    error = refusal(log(TURN, STEP, bad))
    assert (error.rule, error.seq) == ("malformed reference", 2)
    assert "sourceEventSeqs is present but empty" in str(error)


def test_v3_ptc_tags_in_a_v2_source_are_refused() -> None:
    error = refusal(log(TURN, STEP, user("x", "m", {"kind": "plugin", "plugin": "tools-ptc"})))
    assert (error.rule, error.seq) == ("v3 ptc tag in v2 source", 2)
    assert "data.source already uses the v3 plugin name 'tools-ptc'" in str(error)


def test_synthetic_id_collision_is_refused_in_either_order() -> None:
    head_id = expected_id(1, "step/start")
    # A source id equal to an id generated earlier.
    error = refusal(log(TURN, STEP, user("x", head_id)))
    assert (error.rule, error.seq, error.event_type) == (
        "synthetic system id collision",
        2,
        "user/message",
    )
    assert "equals a synthesized system message id" in str(error)
    # A source id seen before the id is generated.
    inbox = {"target": "next-turn", "start": 0, "inserted": [user("x", head_id)[1]]}
    error = refusal(log(("agent/inbox/spliced", inbox), STEP))
    assert (error.rule, error.seq, error.event_type) == (
        "synthetic system id collision",
        1,
        "step/start",
    )
    assert "is already in use" in str(error)


def test_seeded_log_without_marker_and_unseeded_log_with_marker_are_refused() -> None:
    error = refusal(log(TURN), {**HEADER, "isSeeded": True})
    assert (error.rule, error.seq, error.event_type) == ("cut disagrees with header", None, None)
    assert "no session/end-seed {inherited: true}" in str(error)
    error = refusal(log(("session/end-seed", {"inherited": True})))
    assert (error.rule, error.seq, error.event_type) == (
        "cut disagrees with header",
        0,
        "session/end-seed",
    )
    assert "whose header is not seeded" in str(error)


def test_delivery_marker_rules() -> None:
    claims_v3 = {"sessionId": "s-1", "throughSeq": 0, "sessionFormatVersion": 3}
    error = refusal(log(TURN, ("session-log-deepseek/delivery-accepted", claims_v3)))
    assert (error.rule, error.seq) == ("delivery marker claims newer format", 1)
    assert "claiming format 3" in str(error)
    foreign = {"sessionId": "other", "throughSeq": 0, "sessionFormatVersion": 2}
    error = refusal(log(TURN, ("session-log-deepseek/delivery-accepted", foreign)))
    assert (error.rule, error.seq, error.event_type) == (
        "foreign delivery marker",
        1,
        "session-log-deepseek/delivery-accepted",
    )
    assert "names session 'other', not this session 's-1'" in str(error)
    # Foreign in a child, but after the cut: refused at the end.
    header = {**HEADER, "isSeeded": True, "parentSession": "parent"}
    events = log(
        ("session/end-seed", {"inherited": True}),
        ("session-log-deepseek/delivery-accepted", foreign),
    )
    error = refusal(events, header)
    assert (error.rule, error.seq) == ("foreign delivery marker", 1)
    assert "outside the inherited prefix" in str(error)
    # Markers of other generations are kept unchanged.
    v0_marker = {"sessionId": "anyone", "throughSeq": 0}
    out = run(log(TURN, ("session-log-deepseek/delivery-accepted", v0_marker)))
    assert out[1]["data"] == v0_marker


def test_non_string_prompt_is_refused() -> None:
    error = refusal(
        log(TURN, STEP, ("request/header", {"header": {"system": 5}, "reason": "initial"}))
    )
    assert (error.rule, error.seq, error.event_type) == ("malformed payload", 2, "request/header")
    assert "data.header.system is int, not a string" in str(error)


# -- the real sample ------------------------------------------------------------------


def _materialize_tools(rows: list[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """The corpus placeholder rule for ``header.tools`` (corpus/README.md)."""
    for row in rows:
        materialize_tools(row, version)
    return rows


def _surface(events: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    """Fold the surface; return (role, content, source) of each visible message, in order."""
    nodes: list[dict[str, Any]] = []
    for event in events:
        op = event.get("surfaceOp")
        if op is None:
            continue
        message = event["data"] if event["type"] == "user/message" else event["data"]["message"]
        if op == "append":
            nodes.append(message)
        else:
            index = next(i for i, n in enumerate(nodes) if n["_seq"] == op["startSeq"])
            nodes[index] = message
        message["_seq"] = event["seq"]
    return [(n["role"], n["content"], n["source"]) for n in nodes]


@pytest.mark.requires("shared")
def test_feedback_command_sample_v2_migrates_to_the_recorded_v3() -> None:
    v2 = _materialize_tools(load_sample("feedback-command.v2.jsonl"), 2)
    v3 = _materialize_tools(load_sample("feedback-command.v3.jsonl"), 3)
    context = MigrationContext(path=PATH, session_id=v2[0]["id"])
    assert EDGE.header(v2[0], context) == v3[0]
    out = run(v2[1:], v2[0])
    native = v3[1:]
    # The two files are separate recordings (samples/README.md), so they are not byte
    # equal. The differences are exactly these, and each is expected:
    # 1. v2 logs the prompt only on request/header, so the migrated log has an empty head
    #    after step/start plus a replacement before request/header; the native v3 writer
    #    put the prompt into the head directly (one system event, not two).
    assert len(out) == len(native) + 1
    # 2. Everything before the step's first message is the same, event for event.
    assert out[:7] == native[:7]

    # 3. The recordings logged session/title at different points of the step, sample
    #    times were rebuilt from positions, message-id placeholders are numbered by first
    #    appearance, and assistant stream timings are per recording. Ignoring those, the
    #    same non-system events appear in the same order...
    def shape(e: dict[str, Any]) -> tuple[str, str]:
        data = {k: v for k, v in e["data"].items() if k != "stream"}
        if "id" in data:
            data = {k: v for k, v in data.items() if k != "id"}
        if isinstance(data.get("message"), dict):
            data["message"] = {k: v for k, v in data["message"].items() if k != "id"}
        return e["type"], json.dumps(data, sort_keys=True)

    def non_system(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return sorted(
            shape(e) for e in rows if e["type"] not in ("system/message", "session/title")
        )

    assert non_system(out) == non_system(native)
    # ...the title cites the same user message in both,
    title_out = next(e for e in out if e["type"] == "session/title")
    title_native = next(e for e in native if e["type"] == "session/title")
    assert (
        out[title_out["data"]["messageSeqs"][0]]["data"]["content"]
        == native[title_native["data"]["messageSeqs"][0]]["data"]["content"]
    )
    # 4. ...and the model-visible surface is identical: system prompt, both user
    #    messages and the assistant reply, in this order.
    assert _surface(copy.deepcopy(out)) == _surface(copy.deepcopy(native))
    assert [e["type"] for e in out if e["type"] == "system/message"] == ["system/message"] * 2
    assert out[7]["data"]["message"]["content"] == []
    assert out[11]["surfaceOp"] == {"op": "replace", "startSeq": 7, "endSeq": 7}


# -- property -------------------------------------------------------------------------

PROMPTS = st.sampled_from([None, "", "a", "b", " "])


@st.composite
def v2_logs(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Well-formed v2 logs: turns of steps with prompts, messages and titles."""
    specs: list[tuple[Any, ...]] = []
    message_positions: list[int] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        specs.append(("turn/start", {"turn": turn}))
        for step in range(1, draw(st.integers(1, 3)) + 1):
            specs.append(("step/start", {"turn": turn, "step": step}))
            for _ in range(draw(st.integers(0, 3))):
                kind = draw(st.sampled_from(["prompt", "user", "title"]))
                if kind == "prompt":
                    specs.append(request(draw(PROMPTS)))
                elif kind == "user":
                    message_positions.append(len(specs))
                    specs.append(user("x", f"m{len(specs)}"))
                elif message_positions:
                    cited = sorted(
                        set(
                            draw(
                                st.lists(st.sampled_from(message_positions), min_size=1, max_size=3)
                            )
                        )
                    )
                    specs.append(
                        (
                            "session/title",
                            {"title": "t", "messageSeqs": cited, "source": {"kind": "fallback"}},
                        )
                    )
            specs.append(("step/end", {"turn": turn, "step": step}))
        specs.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
    return specs


@given(v2_logs())
def test_property_dense_deterministic_and_references_follow_their_events(
    specs: list[tuple[Any, ...]],
) -> None:
    events = log(*specs)
    out = pure_dense_run(run, events)
    survivors = [e for e in out if e["type"] != "system/message"]
    assert [e["type"] for e in survivors] == [e["type"] for e in events]
    new_seq = {
        source["seq"]: target["seq"] for source, target in zip(events, survivors, strict=True)
    }
    for source, target in zip(events, survivors, strict=True):
        if source["type"] == "session/title":
            assert target["data"]["messageSeqs"] == [
                new_seq[s] for s in source["data"]["messageSeqs"]
            ]
            for cited in target["data"]["messageSeqs"]:
                assert out[cited]["type"] == "user/message"
    systems = [e for e in out if e["type"] == "system/message"]
    assert len(systems) >= 1
    assert systems[0]["surfaceOp"] == "append"
    for previous, current in pairwise(systems):
        assert current["surfaceOp"] == {
            "op": "replace",
            "startSeq": previous["seq"],
            "endSeq": previous["seq"],
        }
        assert current["sourceEventSeqs"] == [previous["seq"]]
    assert len({s["data"]["message"]["id"] for s in systems}) == len(systems)


# -- the real V0 corpus through the whole chain -----------------------------------------


def _corpus_rows(relative: str) -> list[dict[str, Any]]:
    """Load one corpus log with the placeholder substitution of corpus/README.md."""
    text = (SHARED / "corpus" / relative).read_text(encoding="utf-8")
    # Every corpus log is format 0.
    rows = [loaded(json.loads(line), 0) for line in text.splitlines() if line.strip()]
    rows[0].setdefault("delegationDepth", 0)
    return rows


@pytest.mark.requires("shared")
def test_corpus_chronology_refusals_happen_at_this_edge() -> None:
    from dsh_store.migrations import chain

    manifest = json.loads((SHARED / "corpus" / "manifest.json").read_text())
    chronology = [
        f for f in manifest["files"] if f.get("reason_class") == "surface before first step"
    ]
    assert len(chronology) == 17
    for entry in chronology:
        rows = _corpus_rows(entry["path"])
        with pytest.raises(MigrationRefusedError) as caught:
            _header, events = chain(
                rows[0], rows[1:], MigrationContext(path=entry["path"], child_headers=())
            )
            list(events)
        error: Any = caught.value
        assert (error.edge, error.rule, error.event_type) == (
            "2->3",
            "surface before first step",
            "user/message",
        )
        assert entry["path"] in str(error)


@pytest.mark.requires("shared")
def test_corpus_logs_expected_to_restore_pass_both_late_edges() -> None:
    from dsh_store.migrations import chain

    manifest = json.loads((SHARED / "corpus" / "manifest.json").read_text())
    restorable = [f for f in manifest["files"] if f["expected"] == "restore"]
    assert len(restorable) == 127
    for entry in restorable:
        rows = _corpus_rows(entry["path"])
        header, events = chain(
            rows[0], rows[1:], MigrationContext(path=entry["path"], child_headers=())
        )
        migrated = list(events)
        assert header["version"] == 4
        assert [e["seq"] for e in migrated] == list(range(len(migrated)))
        assert all(
            "system" not in e["data"]["header"] for e in migrated if e["type"] == "request/header"
        )
