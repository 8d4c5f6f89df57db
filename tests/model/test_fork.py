"""Fork seeds and the session/end-seed boundary."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import EventValidationError
from dsh_store.model import Session, SessionEvent, SessionHeader, build_fork_seed

from .builders import new_session, restore, simple_turn, ticking_clock, tool_turn_open
from .test_closers import ACTIONS, drive


def seeded_header(child: str = "child") -> SessionHeader:
    return SessionHeader(id=child, created_at=0, is_seeded=True)


def test_fork_of_balanced_prefix() -> None:
    source = new_session()
    simple_turn(source)
    simple_turn(source, 2)
    boundary = 6  # the first turn/end
    seed = build_fork_seed(source.events, boundary)
    assert seed[:7] == list(source.events[:7])
    marker = seed[7]
    assert orjson.loads(marker.line) == {
        "type": "session/end-seed",
        "seq": 7,
        "time": source.events[6].time,
        "data": {"inherited": True},
    }
    assert len(seed) == 8
    child = Session.create("child", seed=seed, header=seeded_header(), inherited_event_count=7)
    assert child.inherited_event_count == 7 and child.first_live_seq == 8
    assert child.header.is_seeded and child.header.parent_session is None
    child.append("turn/start", {"turn": 2})  # numbering continues from the prefix


def test_fork_closes_an_open_tail_as_forked() -> None:
    source = new_session()
    tool_turn_open(source, ("c1",), logged=1)
    seed = build_fork_seed(source.events, None)
    kinds = [(e.type, e.seq) for e in seed[len(source.events) :]]
    assert kinds == [("session/end-seed", 5), ("tool/result", 6), ("step/end", 7), ("turn/end", 8)]
    assert seed[-1].data["reason"] == {"kind": "forked"}
    assert seed[6].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert seed[6].source_event_seqs == (4,)
    child = restore(seed, id="child", is_seeded=True)
    assert child.inherited_event_count == 5 and child.is_balanced


def test_fork_boundary_must_be_an_event() -> None:
    source = new_session()
    simple_turn(source)
    for bad in (-1, 7, 99, True):
        with pytest.raises(EventValidationError) as caught:
            build_fork_seed(source.events, bad)
        assert caught.value.rule == "fork-boundary"
        assert "is not the seq of an event" in str(caught.value)


def test_fork_of_empty_log() -> None:
    seed = build_fork_seed([], None, time=42)
    assert [orjson.loads(e.line) for e in seed] == [
        {"type": "session/end-seed", "seq": 0, "time": 42, "data": {"inherited": True}}
    ]
    child = Session.create("c", seed=seed, header=seeded_header("c"))
    assert child.inherited_event_count == 0 and child.seq == 1


def test_fork_of_a_fork_uses_the_last_marker() -> None:
    source = new_session()
    simple_turn(source)
    first = Session.create(
        "c1",
        seed=build_fork_seed(source.events, None),
        header=seeded_header("c1"),
        inherited_event_count=7,
        clock=ticking_clock(),
    )
    simple_turn(first, 2)
    seed = build_fork_seed(first.events, None)
    child = Session.create(
        "c2", seed=seed, header=seeded_header("c2"), inherited_event_count=len(first.events)
    )
    assert child.inherited_event_count == len(first.events)


def test_create_adds_the_marker_for_a_bare_inherited_prefix() -> None:
    source = new_session()
    simple_turn(source)
    child = Session.create(
        "child",
        seed=source.events,
        header=seeded_header(),
        inherited_event_count=7,
        clock=ticking_clock(),
    )
    assert child.events[7].type == "session/end-seed"
    assert child.events[7].data == {"inherited": True}
    assert child.inherited_event_count == 7 and child.first_live_seq == 7


@pytest.mark.parametrize(
    ("count", "rule", "text"),
    [
        (3, "inherited-count", "exactly the inherited prefix"),
        (-1, "inherited-count", "non-negative integer"),
    ],
)
def test_create_refuses_inconsistent_inherited_count(count: int, rule: str, text: str) -> None:
    source = new_session()
    simple_turn(source)
    with pytest.raises(EventValidationError) as caught:
        Session.create(
            "child", seed=source.events, header=seeded_header(), inherited_event_count=count
        )
    assert caught.value.rule == rule and text in str(caught.value)


def test_create_refuses_count_disagreeing_with_marker() -> None:
    source = new_session()
    simple_turn(source)
    seed = build_fork_seed(source.events, None)
    with pytest.raises(EventValidationError) as caught:
        Session.create("child", seed=seed, header=seeded_header(), inherited_event_count=3)
    assert caught.value.rule == "inherited-count"
    assert "inherited marker is at seq 7" in str(caught.value)


def test_unseeded_header_refuses_inherited_history() -> None:
    source = new_session()
    simple_turn(source)
    seed = build_fork_seed(source.events, None)
    with pytest.raises(EventValidationError) as caught:
        Session.create("s9", seed=seed, header=SessionHeader(id="s9", created_at=0))
    assert caught.value.rule == "seeded-marker-mismatch"
    assert "is_seeded=True" in str(caught.value)


def test_replay_seed_gets_an_ordinary_marker_once() -> None:
    source = new_session()
    simple_turn(source)
    replay = Session.create("r", seed=source.events, clock=ticking_clock())
    assert replay.events[-1].data == {} and replay.events[-1].type == "session/end-seed"
    assert replay.first_live_seq == 7 and replay.inherited_event_count == 0
    again = Session.create("r", seed=replay.events, clock=ticking_clock())
    assert again.seq == replay.seq  # already ends in a marker


def test_restore_inherited_count_and_seeded_consistency() -> None:
    source = new_session()
    simple_turn(source)
    seed = build_fork_seed(source.events, None)
    assert restore(seed, is_seeded=True).inherited_event_count == 7
    with pytest.raises(EventValidationError) as caught:
        restore(seed)
    assert caught.value.rule == "seeded-marker-mismatch"
    assert "header isSeeded is false" in str(caught.value)
    with pytest.raises(EventValidationError) as caught:
        restore(list(source.events), is_seeded=True)
    assert caught.value.rule == "seeded-marker-mismatch"
    assert "no session/end-seed {inherited: true} marker" in str(caught.value)


def test_resume_appends_end_seed_unless_the_log_ends_in_one() -> None:
    source = new_session()
    simple_turn(source)
    header = SessionHeader(id="s1", created_at=0)
    resumed = Session.from_restore(header, source.events, resume=True, clock=lambda: 99)
    assert orjson.loads(resumed.events[-1].line) == {
        "type": "session/end-seed",
        "seq": 7,
        "time": 99,
        "data": {},
    }
    assert resumed.first_live_seq == 7
    twice = Session.from_restore(header, resumed.events, resume=True, clock=lambda: 100)
    assert twice.seq == 8
    plain = Session.from_restore(header, source.events, clock=lambda: 99)
    assert plain.seq == 7


def test_resume_keeps_the_tagged_marker_count() -> None:
    source = new_session()
    simple_turn(source)
    seed = build_fork_seed(source.events, 3)  # inside the open first step
    resumed = Session.from_restore(seeded_header("c"), seed, resume=True, clock=lambda: 5)
    assert resumed.inherited_event_count == 4
    assert resumed.events[-1].data == {}


@given(ACTIONS, st.data())
def test_every_fork_seed_is_a_valid_log(actions: list[str], data: st.DataObject) -> None:
    source = drive(actions)
    events = list(source.events)
    boundary = data.draw(st.none() | st.integers(0, max(0, len(events) - 1))) if events else None
    seed = build_fork_seed(events, boundary)
    child = Session.from_restore(seeded_header(), seed)
    cut = len(events) if boundary is None else boundary + 1
    assert child.inherited_event_count == cut
    assert child.is_balanced
    assert all(isinstance(e, SessionEvent) for e in seed)
    created = Session.create("child", seed=seed, header=seeded_header(), inherited_event_count=cut)
    assert created.events == child.events
