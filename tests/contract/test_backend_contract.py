"""The contract every storage backend passes, through the public store API.

DSH's persistence contract (round trip, crash recovery with closers, listing,
``read_from``, revisions, seq continuity) plus this project's: lazy materialization,
rollback of a failed append, single writer, torn tail cut loss-free, committed corruption
refused, idempotent repair, end-seed on resume and fork. See ``conftest.py`` for the
parameters (backend x writer flavour x window) and how a backend joins.
"""

from __future__ import annotations

import pytest

from dsh_store.errors import (
    CorruptLogError,
    EventValidationError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
)
from dsh_store.model import SessionEvent
from dsh_store.model.closers import TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN_TEXT
from tests.model.builders import assistant, system, tool_call, user

from .conftest import Contract, Writer

CWD = "/home/dev/project"
COMPLETED = {"kind": "completed"}


def _turn(writer: Writer, turn: int, *, first: bool = False) -> None:
    """A balanced one-step turn: 6 events (7 with the system head of the first turn)."""
    writer.append("turn/start", {"turn": turn})
    writer.append("step/start", {"turn": turn, "step": 1})
    if first:
        writer.append("system/message", system(turn, 1), surface_op="append")
    writer.append("user/message", user(f"prompt {turn}", f"m-u{turn}"), surface_op="append")
    writer.append(
        "assistant/message",
        assistant(turn, 1, f"reply {turn}", message_id=f"m-a{turn}"),
        surface_op="append",
    )
    writer.append("step/end", {"turn": turn, "step": 1})
    writer.append("turn/end", {"turn": turn, "reason": COMPLETED})


def _stored(contract: Contract, session_id: str = "s1", *, turns: int = 1) -> None:
    writer = contract.new(session_id, cwd=CWD)
    _turn(writer, 1, first=True)
    for turn in range(2, turns + 1):
        _turn(writer, turn)
    writer.close()


def _crashed(contract: Contract, fragment: bytes = b'{"type":"assistant/chunk","seq":') -> None:
    """One complete turn (0-6), the resume's end-seed (7), an open turn (8, 9), then a torn
    fragment."""
    _stored(contract)
    writer = contract.open("s1")
    writer.append("turn/start", {"turn": 2})
    writer.append("step/start", {"turn": 2, "step": 1})
    writer.flush()
    writer.close()
    contract.harness.tear(contract.store.locate("s1"), fragment)


def test_round_trip(contract: Contract) -> None:
    writer = contract.new("s1", cwd=CWD)
    _turn(writer, 1, first=True)
    written = [event.line for event in writer.live.session.events]
    writer.close()
    loaded = contract.store.load("s1")
    assert [event.line for event in loaded.events] == written
    assert (loaded.header.id, loaded.header.cwd, loaded.header.version) == ("s1", CWD, 4)
    assert loaded.torn is None and loaded.closers == ()


def test_lazy_materialization(contract: Contract) -> None:
    writer = contract.new("s1", cwd=CWD)
    assert contract.store.list() == []
    writer.close()  # nothing was appended: nothing is stored
    assert contract.store.list() == []
    with pytest.raises(SessionNotFoundError):
        contract.store.inspect("s1")
    writer = contract.new("s1", cwd=CWD)
    writer.append("turn/start", {"turn": 1})
    writer.flush()  # the first publish holds the header and the first batch together
    view = contract.store.inspect("s1")
    assert [event.type for event in view.events] == ["turn/start"]
    writer.close()


def test_seq_continuity_is_refused(contract: Contract) -> None:
    _stored(contract)
    stored = contract.store.inspect("s1")
    before = stored.revision
    with pytest.raises(EventValidationError) as refused:
        contract.store.append("s1", stored.events[:3])  # seqs 0-2 again
    assert refused.value.rule == "append-seq-mismatch"
    gap = SessionEvent("turn/start", 8, 1, {"turn": 2})  # the log continues at seq 7
    with pytest.raises(EventValidationError) as refused:
        contract.store.append("s1", [gap])
    assert refused.value.rule == "append-seq-mismatch"
    assert contract.store.inspect("s1").revision == before
    backend, location = contract.store.backend, contract.store.locate("s1")
    with backend.lock(location, "s1"):
        appender = backend.open_appender(location, expected_size=stored.file_size, next_seq=7)
        with pytest.raises(EventValidationError):
            appender.append([gap.line], 8, 8)  # a gap inside the appender's own count
        appender.close()
    assert contract.store.inspect("s1").revision == before


def test_a_failed_append_rolls_back(contract: Contract) -> None:
    _stored(contract)
    before = contract.store.inspect("s1")
    backend, location = contract.store.backend, contract.store.locate("s1")
    event = SessionEvent("session/end-seed", 7, 1, {})
    with backend.lock(location, "s1"):
        appender = backend.open_appender(location, expected_size=before.file_size, next_seq=7)
        contract.harness.fail_next_append(location)
        with pytest.raises(OSError):
            appender.append([event.line], 7, 7)
        after = contract.store.inspect("s1")
        assert after.events == before.events and after.file_size == before.file_size
        appender.append([event.line], 7, 7)  # the retry continues at the same seq
        appender.close()
    assert [event.seq for event in contract.store.inspect("s1").events] == list(range(8))


def test_a_failed_background_write_loses_nothing(contract: Contract) -> None:
    _stored(contract)
    writer = contract.open("s1")
    writer.flush()  # the end-seed (seq 7)
    contract.harness.fail_next_append(contract.store.locate("s1"))
    writer.append("turn/start", {"turn": 2})
    try:
        writer.flush()  # with a window the flush meets the failure; without, it retries it
    except OSError:
        assert len(contract.store.inspect("s1").events) == 8  # rolled back
    writer.append("step/start", {"turn": 2, "step": 1})
    writer.append("step/end", {"turn": 2, "step": 1})
    writer.append("turn/end", {"turn": 2, "reason": COMPLETED})
    writer.close()
    assert [event.seq for event in contract.store.load("s1").events] == list(range(12))


def test_single_writer(contract: Contract) -> None:
    _stored(contract)
    writer = contract.open("s1")
    with pytest.raises(SessionLockedError):
        contract.store.open("s1")
    with pytest.raises(SessionLockedError):
        contract.store.load("s1")
    writer.close()
    contract.store.open("s1").close()


def test_torn_tail_is_cut_loss_free_and_the_turn_closed(contract: Contract) -> None:
    fragment = b'{"type":"assistant/chunk","seq":'
    _crashed(contract, fragment)
    view = contract.store.inspect("s1")
    assert view.torn is not None and view.torn.length == len(fragment)
    assert [event.type for event in view.closers] == ["step/end", "turn/end"]
    assert contract.store.inspect("s1").revision == view.revision  # inspect never writes
    loaded = contract.store.load("s1")
    assert loaded.torn is None and loaded.closers == ()
    assert [event.seq for event in loaded.events] == list(range(12))
    assert loaded.events[-1].data["reason"] == {"kind": "interrupted"}
    assert loaded.revision != view.revision
    assert contract.harness.cut_tails(contract.store.locate("s1")) == [fragment]
    writer = contract.open("s1")
    assert writer.append("turn/start", {"turn": 3}).seq == 13  # after the end-seed at 12
    writer.close()


def test_committed_corruption_is_refused_and_left_alone(contract: Contract) -> None:
    _stored(contract, turns=2)
    location = contract.store.locate("s1")
    contract.harness.replace_row(location, 2, b'{"type":"system/message","seq":2,')
    with pytest.raises(CorruptLogError) as refused:
        contract.store.inspect("s1")
    assert refused.value.line == 4 and refused.value.seq == 2
    revision = contract.store.backend.revision(location)
    with pytest.raises(CorruptLogError):
        contract.store.load("s1")
    with pytest.raises(CorruptLogError):
        contract.store.open("s1")
    assert contract.store.backend.revision(location) == revision


def test_closers_for_an_open_tool_call(contract: Contract) -> None:
    writer = contract.new("s1", cwd=CWD)
    writer.append("turn/start", {"turn": 1})
    writer.append("step/start", {"turn": 1, "step": 1})
    writer.append("user/message", user(), surface_op="append")
    writer.append("assistant/message", assistant(1, 1, None, ("c1", "c2")), surface_op="append")
    writer.append("tool/call", tool_call(1, 1, "c1"))
    writer.close()
    closers = contract.store.inspect("s1").closers
    assert [event.type for event in closers] == ["tool/result"] * 2 + ["step/end", "turn/end"]
    codes = [event.data["message"]["content"][0]["text"] for event in closers[:2]]
    assert codes == [TOOL_OUTCOME_UNKNOWN_TEXT, TOOL_NOT_STARTED_TEXT]
    assert closers[0].source_event_seqs == (4,)


def test_repair_is_idempotent(contract: Contract) -> None:
    _crashed(contract)
    first = contract.store.load("s1")
    second = contract.store.load("s1")
    assert second.revision == first.revision
    assert second.events == first.events
    assert len(contract.harness.cut_tails(contract.store.locate("s1"))) == 1


def test_end_seed_on_resume(contract: Contract) -> None:
    _stored(contract)
    writer = contract.open("s1")
    writer.close()
    events = contract.store.inspect("s1").events
    assert (events[-1].type, events[-1].seq, events[-1].data) == ("session/end-seed", 7, {})
    contract.open("s1").close()  # the log already ends in a marker: none is added
    assert len(contract.store.inspect("s1").events) == 8


def test_fork(contract: Contract) -> None:
    _stored(contract, turns=2)
    child = contract.store.fork("s1", boundary=6, child_id="child")
    forked = contract.store.inspect(child)
    assert forked.header.is_seeded and forked.header.parent_session is None
    source = contract.store.inspect("s1").events
    assert [event.line for event in forked.events[:7]] == [event.line for event in source[:7]]
    assert (forked.events[7].type, forked.events[7].data) == (
        "session/end-seed",
        {"inherited": True},
    )
    assert [header.id for header in contract.store.list()] == ["child", "s1"]
    with pytest.raises(SessionExistsError):
        contract.store.fork("s1", child_id="child")
    writer = contract.open(child)  # the seed ends in its marker: no second end-seed
    assert writer.append("turn/start", {"turn": 2}).seq == 8
    writer.close()


def test_revision_tokens(contract: Contract) -> None:
    _stored(contract)
    first = contract.store.snapshots()
    assert contract.store.snapshots() == first
    writer = contract.open("s1")
    writer.close()
    assert contract.store.snapshots()[0][1] != first[0][1]


def test_list(contract: Contract) -> None:
    for session_id in ("b", "a"):
        _stored(contract, session_id)
    contract.new("never", cwd=CWD).close()
    assert [header.id for header in contract.store.list()] == ["a", "b"]
    assert [entry.header.value["id"] for entry in contract.store.backend.list_headers()] != []


def test_read_from(contract: Contract) -> None:
    _stored(contract)
    events = contract.store.inspect("s1").events
    assert contract.store.read_from("s1", 0) == list(events)
    assert contract.store.read_from("s1", 3) == list(events[3:])
    assert contract.store.read_from("s1", 7) == []
    with pytest.raises(EventValidationError):
        contract.store.read_from("s1", -1)
    with pytest.raises(SessionNotFoundError):
        contract.store.read_from("missing", 0)
    assert [
        row.first_seq for row in contract.store.backend.read_from(contract.store.locate("s1"), 5)
    ] == [5, 6]


def test_each_read_decodes_fresh_rows(contract: Contract) -> None:
    """Reading an older log rewrites the rows' values in place as they are upgraded, so a
    backend must hand every read values of its own, never ones it keeps or shares."""
    _stored(contract)
    location = contract.store.locate("s1")
    first = contract.store.backend.read(location)
    first.read_header()
    for row in first.rows():
        row.value["data"]["changed"] = True
        row.value.clear()
    again = contract.store.backend.read(location)
    again.read_header()
    values = [row.value for row in again.rows()]
    assert [value["seq"] for value in values] == list(range(7))
    assert all("changed" not in value["data"] for value in values)
    assert [event.seq for event in contract.store.inspect("s1").events] == list(range(7))
