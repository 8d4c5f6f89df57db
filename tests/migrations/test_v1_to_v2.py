"""The 1->2 edge: chunk folding, insertions, seed cut, renumbering and refusals."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrate import upgrade
from dsh_store.migrations import EDGES, v1_to_v2
from dsh_store.migrations.packed import expand_packed_row
from dsh_store.migrations.streams import expand_stream

from .early_logs import (
    CONTEXT,
    PATH,
    Row,
    assistant,
    chunk,
    ev,
    header,
    long_log,
    refuse_run,
    refused,
    run01,
    run12,
    text,
    user,
    v0_logs,
)

E = "1->2"


refuse = partial(refuse_run, run12, E)


def kinds(rows: list[Row]) -> list[str]:
    return [row["type"] for row in rows]


def step_start(seq: int, turn: int = 1, step: int = 1) -> Row:
    return ev("step/start", seq, {"turn": turn, "step": step})


def step_end(seq: int, turn: int = 1, step: int = 1) -> Row:
    return ev("step/end", seq, {"turn": turn, "step": step})


def todo(seq: int) -> Row:
    return ev("todo/write", seq, {"todos": []})


# -- transformations --------------------------------------------------------------


def test_registered_edge_is_this_module() -> None:
    assert EDGES[1] is v1_to_v2.EDGE


def test_header_replaces_seed_length_with_is_seeded() -> None:
    seeded = v1_to_v2.EDGE.header(header(1, seedLength=2), CONTEXT)
    assert list(seeded) == ["type", "version", "id", "createdAt", "isSeeded", "delegationDepth"]
    assert seeded["version"] == 2 and seeded["isSeeded"] is True
    assert v1_to_v2.EDGE.header(header(1), CONTEXT)["isSeeded"] is False


def test_packed_rows_expand_to_their_exact_chunks() -> None:
    packed = {
        "type": "tool-call-chunks",
        "seq0": 4,
        "time0": 100,
        "data": {
            "turn": 1,
            "step": 2,
            "index": 1,
            "id": "c",
            "name": "bash",
            "dt": [5, -3],
            "args": ["{", "}", ""],
        },
    }
    members = expand_packed_row(packed)
    assert [(m["seq"], m["time"]) for m in members] == [(4, 100), (5, 105), (6, 102)]
    assert members[1]["data"] == {
        "turn": 1,
        "step": 2,
        "chunk": {
            "type": "tool-call-delta",
            "index": 1,
            "id": "c",
            "name": "bash",
            "argumentsDelta": "}",
        },
    }


def test_claimed_attempt_becomes_the_message_stream() -> None:
    rows = [
        step_start(0),
        chunk(1, {"type": "block-start", "index": 0, "blockType": "text"}, time=50),
        {
            "type": "text-chunks",
            "seq0": 2,
            "time0": 60,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [2, -1], "texts": ["a", "b", "c"]},
        },
        chunk(5, text(0, "d"), time=70),
        chunk(6, {"type": "finish", "reason": {"kind": "stop"}}, time=71),
        assistant(7, [1, [2, 6]]),
    ]
    out = run12(rows)
    assert kinds(out) == ["step/start", "assistant/message"]
    message = out[1]
    assert message["seq"] == 1 and "sourceEventSeqs" not in message
    assert list(message["data"])[-1] == "stream"
    assert message["data"]["stream"] == [
        {
            "type": "chunk",
            "time": 50,
            "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
        },
        {
            "type": "text-chunks",
            "time0": 60,
            "index": 0,
            "dt": [2, -1, 9],
            "texts": ["a", "b", "c", "d"],
        },
        {"type": "chunk", "time": 71, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
    ]
    assert expand_stream(message["data"]["stream"])[1:5] == [
        (60, text(0, "a")),
        (62, text(0, "b")),
        (61, text(0, "c")),
        (70, text(0, "d")),
    ]


def test_tool_call_runs_keep_id_and_name_and_odd_deltas_stay_raw() -> None:
    tool = {"type": "tool-call-delta", "index": 1, "id": "c", "name": "n", "argumentsDelta": "{"}
    no_id = {"type": "tool-call-delta", "index": 1, "id": "", "argumentsDelta": "x"}
    out = run12(
        [
            chunk(0, tool, time=1),
            chunk(1, {**tool, "argumentsDelta": "}"}, time=2),
            chunk(2, no_id, time=3),
            assistant(3, [0, 1, 2]),
        ]
    )
    assert out[0]["data"]["stream"] == [
        {
            "type": "tool-call-chunks",
            "time0": 1,
            "index": 1,
            "dt": [1],
            "id": "c",
            "name": "n",
            "args": ["{", "}"],
        },
        {"type": "chunk", "time": 3, "chunk": no_id},
    ]


def test_unclaimed_attempt_becomes_assistant_attempt_at_its_last_chunk() -> None:
    rows = [
        step_start(0),
        chunk(1, text(0, "a"), time=40),
        todo(2),
        chunk(3, text(0, "b"), time=41),
        todo(4),
        ev("llm/retry-started", 5, {"retryId": "r", "turn": 1, "step": 1, "retry": 1}),
    ]
    out = run12(rows)
    assert kinds(out) == [
        "step/start",
        "todo/write",
        "assistant/attempt",
        "todo/write",
        "llm/retry-started",
    ]
    attempt = out[2]
    assert attempt == {
        "type": "assistant/attempt",
        "seq": 2,
        "time": 41,
        "data": {
            "turn": 1,
            "step": 1,
            "stream": [
                {"type": "text-chunks", "time0": 40, "index": 0, "dt": [1], "texts": ["a", "b"]}
            ],
        },
    }
    assert [row["seq"] for row in out] == [0, 1, 2, 3, 4]
    assert out[1]["time"] == 1002 and out[3]["time"] == 1004


def test_events_after_the_last_chunk_go_before_the_claiming_message() -> None:
    out = run12([chunk(0, text(0, "a")), todo(1), assistant(2, [0])])
    assert kinds(out) == ["todo/write", "assistant/message"]


def test_empty_sources_settle_the_pending_attempt_first() -> None:
    out = run12([chunk(0, text(0, "a")), assistant(1, [])])
    assert kinds(out) == ["assistant/attempt", "assistant/message"]
    assert out[1]["data"]["stream"] == []


def test_message_without_sources_and_nothing_pending_gets_an_empty_stream() -> None:
    out = run12([assistant(0, None)])
    assert out[0]["data"]["stream"] == []


def test_message_for_another_step_settles_the_pending_attempt() -> None:
    out = run12([chunk(0, text(0, "a"), step=1), assistant(1, None, step=2)])
    assert kinds(out) == ["assistant/attempt", "assistant/message"]
    assert out[1]["data"]["stream"] == []


def test_chunk_after_finish_starts_a_new_attempt() -> None:
    finish = {"type": "finish", "reason": {"kind": "stop"}}
    out = run12([chunk(0, finish), chunk(1, text(0, "a")), assistant(2, [1])])
    assert kinds(out) == ["assistant/attempt", "assistant/message"]
    assert out[0]["data"]["stream"] == [{"type": "chunk", "time": 1000, "chunk": finish}]


def test_legacy_restart_inserts_an_interrupted_turn_end() -> None:
    splice = {"target": "next-turn", "start": 0, "inserted": [{"role": "user"}]}
    out = run12(
        [
            ev("turn/start", 0, {"turn": 1}),
            ev("agent/inbox/spliced", 1, splice),
            ev("turn/start", 2, {"turn": 2}, time=77),
        ]
    )
    assert kinds(out) == ["turn/start", "agent/inbox/spliced", "turn/end", "turn/start"]
    assert out[2] == {
        "type": "turn/end",
        "seq": 2,
        "time": 77,
        "data": {"turn": 1, "reason": {"kind": "interrupted"}},
    }
    assert out[3]["seq"] == 3


def test_legacy_goal_message_is_split() -> None:
    change = {"kind": "set", "version": 1, "operation": "create"}
    row = ev(
        "user/message",
        0,
        {
            "role": "user",
            "id": "g",
            "content": [],
            "source": {"kind": "goal", "change": change, "round": 2},
        },
        surfaceOp="append",
    )
    out = run12([row])
    assert out[0] == {"type": "goal/change", "seq": 0, "time": 1000, "data": change}
    assert out[1]["data"]["source"] == {"kind": "plugin", "plugin": "goal"}
    assert out[1]["seq"] == 1


def test_end_seed_at_the_cut_is_tagged_inherited() -> None:
    out = run12(
        [todo(0), ev("session/end-seed", 1, {}), ev("session/end-seed", 2, {})],
        header(1, seedLength=1),
    )
    assert [row["data"] for row in out[1:]] == [{"inherited": True}, {}]


def test_marker_is_inserted_before_the_first_event_at_the_cut() -> None:
    out = run12(
        [todo(0), chunk(1, text(0, "a")), todo(2), assistant(3, [1])], header(1, seedLength=1)
    )
    assert kinds(out) == ["todo/write", "session/end-seed", "todo/write", "assistant/message"]
    assert out[1] == {
        "type": "session/end-seed",
        "seq": 1,
        "time": 1002,
        "data": {"inherited": True},
    }


def test_marker_is_appended_at_the_end_when_the_cut_is_the_end() -> None:
    out = run12([todo(0)], header(1, seedLength=1))
    assert out[1] == {
        "type": "session/end-seed",
        "seq": 1,
        "time": 1000,
        "data": {"inherited": True},
    }


def test_every_declared_reference_field_is_remapped() -> None:
    rows = [
        user(0),
        chunk(1, text(0, "a")),
        assistant(2, [1]),
        user(3),
        chunk(4, text(0, "b")),
        assistant(5, [4]),
        ev(
            "compaction/summary",
            6,
            {
                "compactionId": "c",
                "summary": [],
                "shadowedRange": {"start": 3, "end": 5},
                "shadowedSeqs": [3, 5],
                "shadowedTokenCount": 1,
                "provider": "p",
                "model": "m",
            },
        ),
        ev(
            "user/message",
            7,
            {"role": "user", "id": "r", "content": [], "source": {"kind": "user"}},
            surfaceOp={"op": "replace", "start": 3, "end": 5},
            sourceEventSeqs=[[2, 3], 5],
        ),
        ev(
            "compaction/prune",
            8,
            {
                "shadowedRange": {"start": 0, "end": 2},
                "shadowedSeqs": [0, 2],
                "shadowedTokenCount": 1,
            },
        ),
        ev("command/done", 9, {"commandId": "k", "kind": "success", "sourceEventSeq": 7}),
        ev("session/title", 10, {"title": "t", "messageSeqs": [0, 5], "source": {}}),
        ev(
            "session/title-llm-request",
            11,
            {
                "titleProvider": "p",
                "messageSeqs": [3],
                "route": {},
                "system": "s",
                "messages": [{"text": "seq 3"}],
                "maxTokens": 9,
            },
        ),
    ]
    out = run12(rows)
    assert [row["seq"] for row in out] == list(range(10))
    summary, replace, prune, done, title, request = out[4:]
    assert summary["data"]["shadowedRange"] == {"start": 2, "end": 3}
    assert summary["data"]["shadowedSeqs"] == [2, 3]
    assert replace["surfaceOp"] == {"op": "replace", "start": 2, "end": 3}
    assert replace["sourceEventSeqs"] == [1, 2, 3]
    assert prune["data"]["shadowedRange"] == {"start": 0, "end": 1}
    assert prune["data"]["shadowedSeqs"] == [0, 1]
    assert done["data"]["sourceEventSeq"] == 5
    assert title["data"]["messageSeqs"] == [0, 3]
    assert request["data"]["messageSeqs"] == [2]
    assert request["data"]["messages"] == [{"text": "seq 3"}]


def test_rows_given_to_the_edge_are_never_mutated() -> None:
    rows = [chunk(0, text(0, "a")), assistant(1, [0]), user(2, sourceEventSeqs=[1])]
    before = copy.deepcopy(rows)
    run12(rows)
    assert rows == before


def test_streaming_keeps_only_one_turn_buffered() -> None:
    stage = v1_to_v2.EDGE.stage(header(1), CONTEXT)
    largest = 0
    emitted = 0
    for row in long_log(turns=3000, chunks_per_attempt=20):
        emitted += len(list(stage.feed(row)))
        largest = max(largest, stage.buffered_events)
    emitted += len(list(stage.finish()))
    assert largest == 20
    assert stage.buffered_events == 0
    assert emitted == 3000 * 5
    # one run of kept events and one run of folded chunks per turn, never one per event
    assert stage.seq_map_runs == 2 * 3000 + 1


@given(v0_logs(), st.booleans())
def test_property_dense_deterministic_and_lossless(rows: list[Row], seeded: bool) -> None:
    v1 = run01(rows)
    head = header(1, seedLength=0) if seeded else header(1)
    first, second = run12(v1, head), run12(copy.deepcopy(v1), head)
    assert first == second
    assert [row["seq"] for row in first] == list(range(len(first)))
    source_chunks: list[tuple[int, Any]] = []
    source_events: list[tuple[str, int]] = []
    for row in v1:
        if row["type"].endswith("-chunks"):
            source_chunks += [(m["time"], m["data"]["chunk"]) for m in expand_packed_row(row)]
        elif row["type"] == "assistant/chunk":
            source_chunks.append((row["time"], row["data"]["chunk"]))
        else:
            source_events.append((row["type"], row["time"]))
    # The restart pattern (a turn/start right after a next-turn splice, its turn still
    # open) gets an interrupted turn/end with the turn/start's time just before it.
    restarts = sum(
        row["type"] == "turn/start" and v1[index - 1]["type"] == "agent/inbox/spliced"
        for index, row in enumerate(v1)
    )
    closers = [
        index
        for index, row in enumerate(first[:-1])
        if row["type"] == "turn/end"
        and row["data"]["reason"] == {"kind": "interrupted"}
        and first[index + 1]["type"] == "turn/start"
        and first[index + 1]["time"] == row["time"]
    ]
    assert len(closers) == restarts
    kept = [
        (row["type"], row["time"])
        for index, row in enumerate(first)
        if row["type"] != "assistant/attempt"
        and row["data"] != {"inherited": True}
        and index not in closers
    ]
    assert kept == source_events
    folded = [
        pair
        for row in first
        if "stream" in row["data"]
        for pair in expand_stream(row["data"]["stream"])
    ]
    assert folded == source_chunks
    assert sum(row["data"] == {"inherited": True} for row in first) == int(seeded)


# -- refusals ---------------------------------------------------------------------


def test_refuses_a_header_that_is_not_version_1() -> None:
    refused(
        lambda: v1_to_v2.EDGE.stage(header(0), CONTEXT),
        rule="wrong-source-version",
        seq=None,
        event_type=None,
        detail="header version is 0",
        edge=E,
    )


def test_refuses_a_malformed_seed_length() -> None:
    refused(
        lambda: v1_to_v2.EDGE.header(header(1, seedLength=-1), CONTEXT),
        rule="malformed-seed-length",
        seq=None,
        event_type=None,
        detail="seedLength -1",
        edge=E,
    )


def test_refuses_a_malformed_packed_row() -> None:
    refuse(
        [
            {
                "type": "reasoning-chunks",
                "seq0": 0,
                "time0": 1,
                "extra": 1,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]},
            }
        ],
        rule="malformed-packed-row",
        seq=0,
        event_type="reasoning-chunks",
        detail="envelope keys",
    )


def test_refuses_a_seq_gap() -> None:
    refuse(
        [todo(0), todo(2)],
        rule="seq-not-dense",
        seq=2,
        event_type="todo/write",
        detail="event has seq 2, expected 1",
    )


def test_refuses_unknown_types_even_when_ignorable() -> None:
    refuse(
        [ev("workspace/changes", 0, {}, ignorable=True)],
        rule="unknown-event-type",
        seq=0,
        event_type="workspace/changes",
        detail="not a format-1 event type",
    )


def test_refuses_chunk_envelope_extras() -> None:
    refuse(
        [{**chunk(0, text(0, "a")), "extra": 1}],
        rule="envelope-member",
        seq=0,
        event_type="assistant/chunk",
        detail="envelope member(s) extra",
    )


def test_refuses_unexpected_payload_members() -> None:
    refuse(
        [ev("step/end", 0, {"turn": 1, "step": 1, "stream": []})],
        rule="unexpected-payload-member",
        seq=0,
        event_type="step/end",
        detail="member(s) stream",
    )


def test_refuses_missing_payload_members() -> None:
    refuse(
        [ev("turn/start", 0, {})],
        rule="missing-payload-member",
        seq=0,
        event_type="turn/start",
        detail="member(s) turn",
    )


def test_refuses_a_malformed_chunk() -> None:
    refuse(
        [ev("assistant/chunk", 0, {"turn": 1, "step": 1, "chunk": "x"})],
        rule="malformed-chunk",
        seq=0,
        event_type="assistant/chunk",
        detail="assistant/chunk data must be",
    )


def test_refuses_a_message_without_sources_while_an_attempt_is_pending() -> None:
    refuse(
        [chunk(0, text(0, "a")), assistant(1, None)],
        rule="claim-without-sources",
        seq=1,
        event_type="assistant/message",
        detail="does not cite its complete chunk attempt",
    )


@pytest.mark.parametrize("sources", [[1, 0], [0], [0, 1, 2]])
def test_refuses_an_inexact_chunk_claim(sources: list[int]) -> None:
    refuse(
        [chunk(0, text(0, "a")), chunk(1, text(0, "b")), todo(2), assistant(3, sources)],
        rule="inexact-chunk-claim",
        seq=3,
        event_type="assistant/message",
        detail="chunk provenance is not one complete ordered attempt",
    )


def test_refuses_a_reference_to_a_consumed_chunk() -> None:
    refuse(
        [chunk(0, text(0, "a")), assistant(1, [0]), user(2, sourceEventSeqs=[0])],
        rule="consumed-chunk-reference",
        seq=2,
        event_type="user/message",
        detail="targets consumed assistant/chunk",
    )


def test_refuses_a_reference_that_is_not_earlier() -> None:
    refuse(
        [
            todo(0),
            ev("command/done", 1, {"commandId": "k", "kind": "success", "sourceEventSeq": 1}),
        ],
        rule="invalid-reference",
        seq=1,
        event_type="command/done",
        detail="sourceEventSeq 1 is not an earlier seq",
    )


def test_refuses_chunks_that_straddle_the_cut() -> None:
    refuse(
        [chunk(0, text(0, "a")), chunk(1, text(0, "b"))],
        head=header(1, seedLength=1),
        rule="cut-splits-attempt",
        seq=1,
        event_type="assistant/chunk",
        detail="straddles the inherited cut at seq 1",
    )


def test_refuses_a_claim_that_straddles_the_cut() -> None:
    refuse(
        [chunk(0, text(0, "a")), assistant(1, [0])],
        head=header(1, seedLength=1),
        rule="cut-splits-attempt",
        seq=1,
        event_type="assistant/message",
        detail="claims chunks before the inherited cut",
    )


def test_refuses_a_seed_length_beyond_the_log() -> None:
    refuse(
        [todo(0)],
        head=header(1, seedLength=3),
        rule="seed-beyond-log",
        seq=None,
        event_type=None,
        detail="seedLength 3 exceeds the 1 event(s)",
    )


def test_refuses_a_turn_start_while_a_turn_is_open() -> None:
    refuse(
        [ev("turn/start", 0, {"turn": 1}), ev("turn/start", 1, {"turn": 2})],
        rule="turn-already-open",
        seq=1,
        event_type="turn/start",
        detail="turn/start for turn 2 while turn 1 is open",
    )


@pytest.mark.parametrize("open_turn", ["1", 1.5, [1]])
def test_refuses_a_restart_after_a_turn_that_is_not_an_integer(open_turn: object) -> None:
    # The restart pattern needs turn n+1 after turn n; a turn that is no integer has no
    # successor (DSH's own check is false there), so the restart is refused, not crashed on.
    splice = {"target": "next-turn", "start": 0, "inserted": [{"role": "user"}]}
    refuse(
        [
            ev("turn/start", 0, {"turn": open_turn}),
            ev("agent/inbox/spliced", 1, splice),
            ev("turn/start", 2, {"turn": 2}),
        ],
        rule="turn-already-open",
        seq=2,
        event_type="turn/start",
        detail=f"turn/start for turn 2 while turn {open_turn!r} is open",
    )


def test_upgrade_names_the_restart_after_a_non_integer_turn() -> None:
    # Held behind a pending attempt, the bad turn/start is not yet checked by the model,
    # so the edge's own refusal is what the reader sees: its rule and seq.
    splice = {"target": "next-turn", "start": 0, "inserted": [{"role": "user"}]}
    rows = [
        chunk(0, text(0, "x")),
        ev("turn/start", 1, {"turn": "1"}),
        ev("agent/inbox/spliced", 2, splice),
        ev("turn/start", 3, {"turn": 2}),
    ]
    with pytest.raises(MigrationRefusedError) as caught:
        list(upgrade(header(0), rows, path=PATH)[1])
    assert (caught.value.rule, caught.value.seq, caught.value.edge) == (
        "turn-already-open",
        3,
        "1->2",
    )


def test_refuses_a_malformed_legacy_goal_change() -> None:
    row = ev(
        "user/message",
        0,
        {
            "role": "user",
            "id": "g",
            "content": [],
            "source": {"kind": "goal", "change": {"kind": "set"}},
        },
        surfaceOp="append",
    )
    refuse(
        [row],
        rule="malformed-goal-change",
        seq=0,
        event_type="user/message",
        detail="not a goal/change payload",
    )


def test_refuses_a_foreign_generation_1_delivery_marker() -> None:
    row = ev(
        "session-log-deepseek/delivery-accepted",
        0,
        {"sessionId": "other", "throughSeq": 0, "sessionFormatVersion": 1},
    )
    refuse(
        [row],
        rule="foreign-delivery-marker",
        seq=0,
        event_type="session-log-deepseek/delivery-accepted",
        detail="names session 'other'",
    )
