"""The lenient opt-in: format-0 logs DSH's reader loads, migrated with every deviation noted.

The default stays faithful (the refusals are the edges' own tests). With ``lenient=True``:

- a surface event inside a turn before its first ``step/start`` gets the empty system head
  just before it (turn: the open one, step: the one that opens next), which the first
  request header's prompt then replaces as in every migrated log;
- an ignorable event of a type no format knows is carried and becomes ``plugin:<type>``;
- both are listed, by source seq, in one trailing ``migration/note`` event marked
  ``ignorable: true``; without a deviation the bytes are exactly the default's.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from dsh_store.errors import EventValidationError, LoneSurrogateError, MigrationRefusedError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.migrate import migrate_file, upgrade
from dsh_store.migrations import MigrationContext
from dsh_store.migrations._lenient import LenientLog
from dsh_store.migrations.v2_to_v3 import EDGE as EDGE_23
from dsh_store.migrations.v2_to_v3 import synthetic_system_id
from dsh_store.model import Session, SessionEvent, SessionHeader
from dsh_store.restore import examine, read_log
from dsh_store.verify import verify_path

from .early_logs import chunk, ev, header, text, user, v0_logs

Row = dict[str, Any]
PROMPT = "You are terse."


def _request(seq: int, system: str = PROMPT) -> Row:
    return ev(
        "request/header",
        seq,
        {
            "header": {"config": {"provider": "p", "model": "m"}, "system": system},
            "reason": "initial",
        },
    )


def _answer(seq: int) -> Row:
    message = {
        "role": "assistant",
        "id": f"a{seq}",
        "content": [{"type": "text", "text": "Done."}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    return ev(
        "assistant/message",
        seq,
        {"turn": 1, "step": 1, "message": message},
        surfaceOp="append",
        sourceEventSeqs=[],
    )


def user_first_log() -> list[Row]:
    """DSH's own fixture order: the user message enters turn 1 before its first step."""
    return [
        ev("turn/start", 0, {"turn": 1}),
        user(1, "Count the files."),
        ev("step/start", 2, {"turn": 1, "step": 1}),
        _request(3),
        _answer(4),
        ev("step/end", 5, {"turn": 1, "step": 1}),
        ev("turn/end", 6, {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def _upgraded(rows: list[Row], *, lenient: bool) -> list[Row]:
    _, events = upgrade(header(), rows, path="/logs/s.jsonl", lenient=lenient)
    return [event.to_json() for event in events]


def _write(path: Path, rows: list[Row], head: Row | None = None) -> Path:
    lines = [head or header(), *rows]
    path.write_bytes(b"".join(json.dumps(row).encode() + b"\n" for row in lines))
    return path


# -- a surface event before the first step ---------------------------------------------


def test_default_still_refuses_a_user_message_before_the_first_step() -> None:
    with pytest.raises(MigrationRefusedError) as refused:
        _upgraded(user_first_log(), lenient=False)
    assert (refused.value.rule, refused.value.seq) == ("surface before first step", 1)
    assert "not even leniently" not in str(refused.value)


def test_lenient_head_is_surface_node_zero_before_the_user_message() -> None:
    out = _upgraded(user_first_log(), lenient=True)
    assert [row["type"] for row in out] == [
        "turn/start",
        "system/message",  # the head, before the message that came first
        "user/message",
        "step/start",
        "system/message",  # the first request header's prompt replaces it
        "request/header",
        "assistant/message",
        "step/end",
        "turn/end",
        "migration/note",
    ]
    head = out[1]
    assert head["data"]["turn"] == 1 and head["data"]["step"] == 1
    assert head["data"]["message"]["content"] == []
    assert head["data"]["message"]["id"] == synthetic_system_id("s-1", 1, "user/message")
    assert head["data"]["message"]["source"] == {"kind": "system-prompt"}
    assert head["surfaceOp"] == "append"
    assert out[4]["surfaceOp"] == {"op": "replace", "startSeq": 1, "endSeq": 1}
    assert out[4]["data"]["message"]["content"] == [{"type": "text", "text": PROMPT}]
    note = out[-1]
    assert note["ignorable"] is True
    assert note["seq"] == len(out) - 1 and note["time"] == out[-2]["time"]
    assert note["data"] == {
        "producer": "dsh-store",
        "mode": "lenient",
        "sourceVersion": 0,
        "changes": [
            {
                "change": "system-head-before-first-step",
                "sourceSeq": 1,
                "sourceType": "user/message",
                "messageId": head["data"]["message"]["id"],
            }
        ],
    }


def test_lenient_log_derives_the_prompt_first_conversation() -> None:
    v4_header, events = upgrade(header(), user_first_log(), lenient=True)
    session = Session.from_restore(v4_header, list(events))
    assert [(m["role"], m["content"]) for m in session.derive_messages()] == [
        ("system", [{"type": "text", "text": PROMPT}]),
        ("user", [{"type": "text", "text": "Count the files."}]),
        ("assistant", [{"type": "text", "text": "Done."}]),
    ]


def test_lenient_refuses_a_message_logged_before_its_own_turn_start() -> None:
    # The message opens a synthesized turn 1; the turn/start that follows names the same
    # turn, so no framing can hold both without moving the message.
    rows = [
        user(0),
        ev("turn/start", 1, {"turn": 1}),
        ev("turn/end", 2, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    with pytest.raises(MigrationRefusedError) as refused:
        _upgraded(rows, lenient=True)
    assert (refused.value.rule, refused.value.seq) == ("surface before first step", 1)
    assert "not even leniently: turn 1 starts after a message" in str(refused.value)


def pre_turn_log() -> list[Row]:
    """A pre-turn build's log: no turn/start, step/start or step/end, two steps of chunks."""
    return [
        user(0, "Search, then answer."),
        chunk(1, {"type": "block-start", "index": 0, "blockType": "text"}, step=1),
        chunk(2, text(0, "Searching."), step=1),
        chunk(
            3, {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Searching."}}
        ),
        chunk(4, {"type": "finish", "reason": {"kind": "tool-calls"}}, step=1),
        chunk(5, {"type": "block-start", "index": 0, "blockType": "text"}, step=2),
        chunk(6, text(0, "Done."), step=2),
        chunk(
            7, {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Done."}}, step=2
        ),
        chunk(8, {"type": "finish", "reason": {"kind": "stop"}}, step=2),
    ]


def test_default_refuses_a_log_without_turn_framing() -> None:
    with pytest.raises(MigrationRefusedError) as refused:
        _upgraded(pre_turn_log(), lenient=False)
    assert (refused.value.rule, refused.value.seq) == ("surface before first step", 0)


def test_lenient_synthesizes_the_turn_and_step_framing_and_notes_each_event() -> None:
    out = _upgraded(pre_turn_log(), lenient=True)
    assert [(row["type"], row["data"].get("turn"), row["data"].get("step")) for row in out] == [
        ("turn/start", 1, None),  # synthesized: the message opens turn 1
        ("system/message", 1, 1),  # the head, before the message
        ("user/message", None, None),
        ("step/start", 1, 1),  # synthesized before step 1's attempt
        ("assistant/attempt", 1, 1),
        ("step/end", 1, 1),  # synthesized: step 2's attempt ends step 1
        ("step/start", 1, 2),
        ("assistant/attempt", 1, 2),
        ("step/end", 1, 2),  # synthesized at the end: the source never opened the turn,
        ("turn/end", 1, None),  # so nothing of it is left for a load to close
        ("migration/note", None, None),
    ]
    assert out[-2]["data"]["reason"] == {"kind": "interrupted"}
    assert out[-2]["time"] == out[-4]["time"]  # the last event's time
    assert [row["seq"] for row in out] == list(range(len(out)))
    assert out[0]["time"] == out[2]["time"]  # a synthesized event has its anchor's time
    assert out[3]["time"] == out[4]["time"] and out[5]["time"] == out[7]["time"]
    changes = out[-1]["data"]["changes"]
    # Each synthesized event is placed by the source event it precedes: an attempt folded
    # from chunks by its first chunk.
    assert [(c["change"], c.get("sourceSeq")) for c in changes] == [
        ("synthesized-turn-start", 0),
        ("system-head-before-first-step", 0),
        ("synthesized-step-start", 1),
        ("synthesized-step-end", 5),
        ("synthesized-step-start", 5),
        ("synthesized-step-end", None),
        ("synthesized-turn-end", None),
    ]
    assert [c.get("atEnd") for c in changes][-2:] == [True, True]
    assert changes[-1]["reason"] == {"kind": "interrupted"}
    assert changes[0]["turn"] == 1
    assert (changes[2]["turn"], changes[2]["step"]) == (1, 1)
    assert (changes[3]["turn"], changes[3]["step"]) == (1, 1)
    assert (changes[4]["turn"], changes[4]["step"]) == (1, 2)


def test_a_lenient_log_without_framing_loads_with_nothing_to_close(tmp_path: Path) -> None:
    source = _write(tmp_path / "old.jsonl", pre_turn_log())
    output = tmp_path / "new.jsonl"
    assert migrate_file(source, output=output, lenient=True).status == "migrated"
    published = read_log(output)  # the default reader: plain v4
    assert published.closers == ()  # as DSH's reader appends nothing to such a log
    assert examine(output).classification == "ok"
    assert published.events[-1].type == "migration/note"
    session = Session.from_restore(published.header, list(published.events))
    assert [(m["role"], m["content"]) for m in session.derive_messages()] == [
        ("user", [{"type": "text", "text": "Search, then answer."}]),
    ]
    (report,) = verify_path(source)
    assert report.lenient_would_migrate is True


def test_a_synthesized_turn_is_ended_before_the_next_real_turn() -> None:
    rows = [*pre_turn_log()[:5], ev("turn/start", 5, {"turn": 2}), user(6)]
    rows += [ev("turn/end", 7, {"turn": 2, "reason": {"kind": "completed"}})]
    out = _upgraded(rows, lenient=True)
    types = [row["type"] for row in out]
    start = types.index("turn/start", 1)
    assert types[start - 2 : start + 1] == ["step/end", "turn/end", "turn/start"]
    assert out[start - 1]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    changes = out[-1]["data"]["changes"]
    ended = [c for c in changes if c["change"] == "synthesized-turn-end"]
    assert ended == [
        {"change": "synthesized-turn-end", "sourceSeq": 5, "turn": 1, "reason": ended[0]["reason"]}
    ]


def test_a_step_scoped_event_of_another_turn_gets_no_framing() -> None:
    # Framing is only synthesized for the open turn's next step: an attempt naming turn 3
    # while turn 1 is open is left to the usual rules, with nothing invented for it.
    out = _upgraded([user(0), chunk(1, text(0, "x"), turn=3, step=1)], lenient=True)
    assert [row["type"] for row in out] == [
        "turn/start",
        "system/message",
        "user/message",
        "assistant/attempt",
        "turn/end",
        "migration/note",
    ]
    assert "synthesized-step-start" not in [c["change"] for c in out[-1]["data"]["changes"]]


def test_the_v2_edge_records_the_head_by_its_input_seq() -> None:
    log = LenientLog()
    stage = EDGE_23.stage(
        {**header(2), "isSeeded": False}, MigrationContext(session_id="s-1", lenient=log)
    )
    rows = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 2,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
        {"type": "turn/start", "seq": 2, "time": 3, "data": {"turn": 2}},
    ]
    user_row = {
        "type": "user/message",
        "seq": 3,
        "time": 4,
        "data": {"role": "user", "id": "u", "content": [], "source": {"kind": "user"}},
        "surfaceOp": "append",
    }
    out = [row for event in [*rows, user_row] for row in stage.feed(event)]
    assert out[3]["type"] == "system/message"
    assert (out[3]["data"]["turn"], out[3]["data"]["step"]) == (2, 1)
    assert [entry[:2] for entry in log.entries] == [("2->3", 3)]


# -- unknown ignorable events -------------------------------------------------------------


def _with_unknown(**envelope: Any) -> list[Row]:
    rows = [
        ev("turn/start", 0, {"turn": 1}),
        ev("step/start", 1, {"turn": 1, "step": 1}),
        user(2),
        ev("web/keenable-search-request", 3, {"query": "q", "n": 1}, **envelope),
        ev("step/end", 4, {"turn": 1, "step": 1}),
        ev("turn/end", 5, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    return rows


def test_default_refuses_an_unknown_ignorable_event_at_edge_0_to_1() -> None:
    with pytest.raises(MigrationRefusedError) as refused:
        _upgraded(_with_unknown(ignorable=True), lenient=False)
    assert (refused.value.rule, refused.value.edge, refused.value.seq) == (
        "unknown-event-type",
        "0->1",
        3,
    )


def test_lenient_carries_an_unknown_ignorable_event_as_a_plugin_record() -> None:
    out = _upgraded(_with_unknown(ignorable=True), lenient=True)
    carried = [row for row in out if row["type"] == "plugin:web/keenable-search-request"]
    assert carried == [
        {
            "type": "plugin:web/keenable-search-request",
            "seq": 4,  # after the inserted system head
            "time": 1003,
            "data": {"query": "q", "n": 1},
            "ignorable": True,
        }
    ]
    note = out[-1]
    assert note["type"] == "migration/note"
    assert note["data"]["changes"] == [
        {
            "change": "ignorable-unknown-event",
            "sourceSeq": 3,
            "sourceType": "web/keenable-search-request",
            "carriedAs": "plugin:web/keenable-search-request",
        }
    ]


@pytest.mark.parametrize(
    ("event_type", "envelope"),
    [
        ("web/keenable-search-request", {}),  # required: a reader cannot skip it
        ("image/offload", {"ignorable": True}),  # a later format's type: its meaning is checked
    ],
)
def test_lenient_still_refuses_what_it_cannot_carry(event_type: str, envelope: Row) -> None:
    rows = _with_unknown(**envelope)
    rows[3]["type"] = event_type
    with pytest.raises(MigrationRefusedError) as refused:
        _upgraded(rows, lenient=True)
    assert refused.value.rule == "unknown-event-type"


def test_lenient_still_refuses_surface_fields_on_an_unknown_event() -> None:
    with pytest.raises(MigrationRefusedError) as refused:
        _upgraded(_with_unknown(ignorable=True, surfaceOp="append"), lenient=True)
    assert refused.value.rule == "envelope-member"


def test_without_a_deviation_lenient_gives_the_default_bytes() -> None:
    rows = _with_unknown()[:3] + _with_unknown()[4:]
    for index, row in enumerate(rows):
        row["seq"] = index
    assert _upgraded(rows, lenient=True) == _upgraded(rows, lenient=False)


@settings(max_examples=40, deadline=None)
@given(v0_logs())
def test_generated_logs_read_leniently_give_the_default_bytes(rows: list[Row]) -> None:
    # Logs the chain accepts as they are need no deviation: no note, the same events.
    default = _upgraded(copy.deepcopy(rows), lenient=False)
    assert default
    assert _upgraded(copy.deepcopy(rows), lenient=True) == default


# -- the model: a system head rendered before its step ----------------------------------


def _session_with(*events: SessionEvent) -> Session:
    return Session.from_restore(SessionHeader("s", 1), list(events))


@pytest.mark.parametrize(
    ("turn", "step", "rule"),
    [(1, 1, None), (1, 2, "outside-step"), (2, 1, "turn-mismatch")],
)
def test_a_system_message_may_precede_only_the_step_that_opens_next(
    turn: int, step: int, rule: str | None
) -> None:
    head = SessionEvent(
        "system/message",
        1,
        1,
        {
            "turn": turn,
            "step": step,
            "message": {
                "id": "h",
                "role": "system",
                "source": {"kind": "system-prompt"},
                "content": [],
            },
        },
        surface_op="append",
    )
    start = SessionEvent("turn/start", 0, 1, {"turn": 1})
    if rule is None:
        _session_with(start, head)
        return
    with pytest.raises(EventValidationError) as refused:
        _session_with(start, head)
    assert refused.value.rule == rule


# -- files: migrate_file, read_log, verify -----------------------------------------------


def test_migrate_file_lenient_publishes_a_log_every_reader_accepts(tmp_path: Path) -> None:
    source = _write(tmp_path / "old.jsonl", user_first_log())
    output = tmp_path / "new.jsonl"
    with pytest.raises(MigrationRefusedError):
        migrate_file(source, output=output)
    assert not output.exists()
    result = migrate_file(source, output=output, lenient=True)
    assert result.status == "migrated"
    published = read_log(output)  # the default reader: it is plain v4
    assert published.events[-1].type == "migration/note"
    assert published.events[-1].ignorable
    lenient_read = read_log(source, lenient=True)
    assert [event.line for event in lenient_read.events] == [
        event.line for event in published.events
    ]


def test_verify_says_which_refused_files_the_opt_in_would_migrate(tmp_path: Path) -> None:
    yes = _write(tmp_path / "yes.jsonl", user_first_log())
    no_rows = [user(0), ev("turn/start", 1, {"turn": 1})]  # the message precedes its turn
    no = _write(tmp_path / "no.jsonl", no_rows)
    plain = _write(tmp_path / "plain.jsonl", [*_with_unknown(ignorable=True)[:3]])
    (report,) = verify_path(yes)
    assert report.classification == "refused"
    assert report.lenient_would_migrate is True
    assert "`--lenient` would migrate it" in report.findings[-1].message
    assert report.to_json()["lenientWouldMigrate"] is True
    (report,) = verify_path(no)
    assert report.lenient_would_migrate is False
    assert "`--lenient` would not migrate it either" in report.findings[-1].message
    (report,) = verify_path(plain)
    assert report.classification == "open-turn"
    assert report.lenient_would_migrate is None
    assert "lenientWouldMigrate" not in report.to_json()
    (report,) = verify_path(yes, lenient=True)
    assert report.classification == "needs-migration"
    assert [finding.rule for finding in report.findings] == ["needs-migration", "lenient-migration"]
    assert "system-head-before-first-step at source seq 1" in report.findings[-1].message
    (report,) = verify_path(plain, lenient=True)  # a lenient read with nothing to change
    assert "lenient-migration" not in [finding.rule for finding in report.findings]
    assert examine(yes, lenient=True).events == 10


def test_the_layered_chain_and_the_fused_driver_agree_under_lenient() -> None:
    from dsh_store.migrations import chain
    from dsh_store.migrations._pipeline import fused_chain

    rows = [*user_first_log()[:3], dict(_with_unknown(ignorable=True)[3], seq=3)]
    rows += [dict(row, seq=row["seq"] + 1) for row in user_first_log()[3:]]

    def context() -> MigrationContext:
        return MigrationContext(session_id="s-1", lenient=LenientLog())

    layered = list(chain(header(), [dict(row) for row in rows], context())[1])
    fused = list(fused_chain(header(), [dict(row) for row in rows], context())[1])
    assert layered == fused
    assert [change["sourceSeq"] for change in fused[-1]["data"]["changes"]] == [1, 3]


def test_no_step_is_framed_after_a_step_that_is_not_an_integer() -> None:
    # Step "1" has no next step: the attempt of step 2 gets no framing (the model refuses
    # the step/start), on either driver, instead of a TypeError in the 2->3 edge.
    from dsh_store.migrations import chain
    from dsh_store.migrations._pipeline import fused_chain

    rows = [
        ev("turn/start", 0, {"turn": 1}),
        ev("step/start", 1, {"turn": 1, "step": "1"}),
        ev("step/end", 2, {"turn": 1, "step": "1"}),
        chunk(3, text(0, "x"), turn=1, step=2),
    ]

    def upgraded(driver: Any) -> list[str]:
        context = MigrationContext(session_id="s-1", lenient=LenientLog())
        return [row["type"] for row in driver(header(), [dict(row) for row in rows], context)[1]]

    expected = ["turn/start", "step/start", "system/message", "step/end", "assistant/attempt"]
    assert upgraded(chain) == upgraded(fused_chain) == expected
    with pytest.raises(MigrationRefusedError) as caught:
        _upgraded(rows, lenient=True)
    assert (caught.value.rule, caught.value.seq) == ("data-shape", 1)


# -- lone surrogates -------------------------------------------------------------------


def _broken_text_log(path: Path) -> Path:
    """A format-0 log whose user text holds two lone surrogates, as DSH's writer escapes
    them (``JSON.stringify`` of half a pair), and a paired one that is a real character."""
    rows = [
        ev("turn/start", 0, {"turn": 1}),
        ev("step/start", 1, {"turn": 1, "step": 1}),
        user(2, "look \ud83d here \udc00 and \U0001f600"),
    ]
    _write(path, rows)
    assert b"\\ud83d here \\udc00 and \\ud83d\\ude00" in path.read_bytes()
    return path


def test_default_refuses_a_lone_surrogate_and_verify_offers_the_opt_in(tmp_path: Path) -> None:
    source = _broken_text_log(tmp_path / "old.jsonl")
    with pytest.raises(LoneSurrogateError):
        read_log(source)
    (report,) = verify_path(source)
    assert report.classification == "corrupt"
    assert report.lenient_would_migrate is True
    assert "`--lenient` would migrate it, replacing each lone surrogate" in (
        report.findings[-1].message
    )
    assert report.to_json()["lenientWouldMigrate"] is True


def test_lenient_replaces_lone_surrogates_and_notes_where(tmp_path: Path) -> None:
    source = _broken_text_log(tmp_path / "old.jsonl")
    before = source.read_bytes()
    output = tmp_path / "new.jsonl"
    assert migrate_file(source, output=output, lenient=True).status == "migrated"
    assert source.read_bytes() == before
    published = read_log(output)  # the default reader: valid UTF-8 text now
    message = next(e for e in published.events if e.type == "user/message")
    assert message.data["content"] == [
        {"type": "text", "text": "look \ufffd here \ufffd and \U0001f600"}
    ]
    note = published.events[-1]
    assert note.type == "migration/note"
    assert note.data["changes"] == [
        {
            "change": "lone-surrogate-replaced",
            "sourceSeq": 2,
            "line": 4,
            "replaced": [
                {"jsonPath": "$.data.content[0].text", "codeUnit": "U+D83D"},
                {"jsonPath": "$.data.content[0].text", "codeUnit": "U+DC00"},
            ],
        }
    ]
    lenient_read = read_log(source, lenient=True)
    assert [e.line for e in lenient_read.events] == [e.line for e in published.events]
    (report,) = verify_path(source, lenient=True)
    assert report.classification == "open-turn"
    assert "lone-surrogate-replaced at source seq 2" in report.findings[-1].message


def test_a_lone_surrogate_in_a_key_is_replaced_and_a_v4_log_stays_refused(
    tmp_path: Path,
) -> None:
    bad = b'{"type":"tool/progress","seq":0,"time":3,"data":{"k\\udbff":1}}'
    old = tmp_path / "old.jsonl"
    old.write_bytes(json.dumps(header()).encode() + b"\n" + bad + b"\n")
    scanner = LogScanner(old)
    seen: list[tuple[int, int, list[tuple[str, str]]]] = []
    scanner.on_lone_surrogates = lambda seq, line, found: seen.append((seq, line, found))
    (row,) = scanner.rows()
    assert row.value["data"] == {"k\ufffd": 1}
    assert seen == [(0, 2, [('$.data["k\\udbff"]', "U+DBFF")])]
    current = tmp_path / "v4.jsonl"
    current.write_bytes(json.dumps(header(4, isSeeded=False)).encode() + b"\n" + bad + b"\n")
    with pytest.raises(LoneSurrogateError):
        read_log(current, lenient=True)  # no v4 writer produces one: never replaced


def test_keys_that_differ_only_in_lone_surrogates_stay_refused(tmp_path: Path) -> None:
    bad = b'{"type":"tool/progress","seq":0,"time":3,"data":{"k\\udbff":1,"k\\udfff":2}}'
    old = tmp_path / "old.jsonl"
    old.write_bytes(json.dumps(header()).encode() + b"\n" + bad + b"\n")
    with pytest.raises(LoneSurrogateError):
        read_log(old, lenient=True)
