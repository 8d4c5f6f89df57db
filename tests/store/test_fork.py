"""``store.fork``: a seeded child with a marker at the cut; the parent is never touched."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dsh_store.errors import EventValidationError, SessionExistsError
from dsh_store.store import JsonlStore

from .helpers import CWD, complete_turn, file_lines, make_store, open_tool_turn, snapshot


def _parent(store: JsonlStore) -> Path:
    with store.new("p", cwd=CWD, agent_preset="main") as live:
        complete_turn(live, 1, first=True)  # seqs 0-6
        open_tool_turn(live, 2, ("k1",), logged=1)  # seqs 7-11, left open
        live.flush()
        return live.path


def test_fork_inside_an_open_turn(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    parent_path = _parent(store)
    before = snapshot(parent_path)
    child = store.fork("p", boundary=11, child_id="c")
    assert child == "c"
    assert snapshot(parent_path) == before

    view = store.inspect("c")
    assert view.classification == "ok"
    header = view.header
    assert (header.is_seeded, header.parent_session, header.cwd) == (True, None, CWD)
    assert header.agent_preset == "main"
    events = view.events
    parent_events = store.inspect("p").events
    assert [e.line for e in events[:12]] == [e.line for e in parent_events]
    assert (events[12].type, events[12].data) == ("session/end-seed", {"inherited": True})
    assert [e.type for e in events[13:]] == ["tool/result", "step/end", "turn/end"]
    assert events[13].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert events[-1].data["reason"] == {"kind": "forked"}

    with store.open("c") as live:
        assert live.session.inherited_event_count == 12
        assert live.session.events[-1].type == "session/end-seed"  # the resume marker
        complete_turn(live, 3)
    reloaded = store.load("c")
    assert reloaded.classification == "ok"
    assert [e.seq for e in reloaded.events] == list(range(len(reloaded.events)))
    assert snapshot(parent_path) == before


def test_fork_at_a_turn_boundary_needs_no_closers(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    _parent(store)
    child = store.fork("p", boundary=6)
    child_path = store.locate(child)
    lines = [orjson.loads(line) for line in file_lines(child_path)]
    assert lines[0]["isSeeded"] is True and "parentSession" not in lines[0]
    assert [line["type"] for line in lines[1:]][-2:] == ["turn/end", "session/end-seed"]
    assert len(lines) == 1 + 8
    with store.open(child) as live:
        assert live.session.seq == 8  # ends in a marker: no second one
    assert len(file_lines(child_path)) == 9


def test_fork_of_the_whole_log_and_refusals(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    _parent(store)
    whole = store.inspect(store.fork("p", child_id="w"))
    assert whole.events[12].data == {"inherited": True}
    with pytest.raises(SessionExistsError, match="'w' already exists"):
        store.fork("p", child_id="w")
    with pytest.raises(EventValidationError, match="fork boundary 12 is not the seq") as caught:
        store.fork("p", boundary=12, child_id="x")
    assert caught.value.rule == "fork-boundary"
    assert {h.id for h in store.list()} == {"p", "w"}
