"""The ordered surface: append/replace rules, the system head, incremental == full fold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import EventValidationError
from dsh_store.model import Session, SurfaceReplace, fold_surface

from .builders import assistant, new_session, open_step, system, user


@pytest.fixture
def live() -> Session:
    session = new_session()
    open_step(session)  # seqs 0, 1
    session.append("system/message", system(1, 1), surface_op="append")  # 2
    for index in range(4):  # 3, 4, 5, 6
        session.append("user/message", user(f"u{index}", f"m{index}"), surface_op="append")
    return session


def expect(session: Session, rule: str, text: str, *args: object, **kwargs: object) -> None:
    before = session.surface
    with pytest.raises(EventValidationError) as caught:
        session.append(*args, **kwargs)  # type: ignore[call-overload]
    assert caught.value.rule == rule, caught.value
    assert text in str(caught.value)
    assert session.surface == before


def test_appends_grow_the_surface(live: Session) -> None:
    assert live.surface.nodes == (2, 3, 4, 5, 6)
    assert live.surface.replace_generation == 0


def test_replace_shadows_the_span(live: Session) -> None:
    event = live.append(
        "user/message",
        user("summary", "sum"),
        surface_op={"op": "replace", "startSeq": 4, "endSeq": 5},
        source_event_seqs=[4, 5, 1],
    )
    assert event.surface_op == SurfaceReplace(4, 5)
    assert live.surface.nodes == (2, 3, 7, 6)
    assert live.surface.replace_generation == 1
    fold = fold_surface(live.events)
    assert fold.nodes == live.surface.nodes
    assert [(r.seq, r.start, r.end, r.shadowed_seqs) for r in fold.replacements] == [
        (7, 4, 5, (4, 5))
    ]
    assert fold.replace_generation == 1
    # A replacement node can itself be replaced; a single-node replace uses equal endpoints.
    live.append(
        "user/message",
        user("again", "again"),
        surface_op=SurfaceReplace(7, 7),
        source_event_seqs=[7],
    )
    assert live.surface.nodes == (2, 3, 8, 6)


def test_replace_endpoint_must_be_on_surface(live: Session) -> None:
    expect(
        live,
        "replace-endpoint-not-on-surface",
        "endpoint 1 is not a current surface node",
        "user/message",
        user(),
        surface_op=SurfaceReplace(1, 4),
        source_event_seqs=[1, 4],
    )
    live.append("user/message", user(), surface_op=SurfaceReplace(4, 4), source_event_seqs=[4])
    expect(
        live,
        "replace-endpoint-not-on-surface",
        "endpoint 4",
        "user/message",
        user(),
        surface_op=SurfaceReplace(4, 5),
        source_event_seqs=[4, 5],
    )


def test_replace_order_is_surface_order(live: Session) -> None:
    expect(
        live,
        "replace-order",
        "start 5 comes after end 3",
        "user/message",
        user(),
        surface_op=SurfaceReplace(5, 3),
        source_event_seqs=[3, 4, 5],
    )
    # After a replace, numeric and surface order differ: node 7 sits before node 6.
    live.append("user/message", user(), surface_op=SurfaceReplace(4, 5), source_event_seqs=[4, 5])
    live.append("user/message", user(), surface_op=SurfaceReplace(7, 6), source_event_seqs=[6, 7])
    assert live.surface.nodes == (2, 3, 8)


def test_replace_must_cite_every_shadowed_node(live: Session) -> None:
    expect(
        live,
        "replace-coverage",
        "missing [4]",
        "user/message",
        user(),
        surface_op=SurfaceReplace(3, 5),
        source_event_seqs=[3, 5],
    )
    expect(
        live,
        "replace-coverage",
        "missing [3, 4]",
        "user/message",
        user(),
        surface_op=SurfaceReplace(3, 4),
    )


def test_system_head_only_replaced_by_system(live: Session) -> None:
    expect(
        live,
        "replace-system-head",
        "may only be replaced by a system/message",
        "user/message",
        user(),
        surface_op=SurfaceReplace(2, 3),
        source_event_seqs=[2, 3],
    )
    live.append(
        "system/message",
        system(1, 1, "new prompt", "sys2"),
        surface_op=SurfaceReplace(2, 2),
        source_event_seqs=[2],
    )
    assert live.surface.nodes[0] == 7


def test_later_system_nodes_are_ordinary_history(live: Session) -> None:
    live.append("system/message", system(1, 1, "extra", "sys2"), surface_op="append")  # 7
    live.append("user/message", user(), surface_op=SurfaceReplace(6, 7), source_event_seqs=[6, 7])
    assert live.surface.nodes == (2, 3, 4, 5, 8)


def test_assistant_cannot_replace(live: Session) -> None:
    # It may not cite sources, so it can never cover what it would shadow.
    expect(
        live,
        "replace-coverage",
        "missing",
        "assistant/message",
        assistant(1, 1),
        surface_op=SurfaceReplace(6, 6),
    )


def test_fold_surface_validates() -> None:
    session = new_session()
    open_step(session)
    session.append("user/message", user(), surface_op="append")
    assert fold_surface(session.events).nodes == (2,)
    assert fold_surface([]).nodes == ()


@st.composite
def surface_script(draw: st.DrawFn) -> Session:
    """A valid session built from random appends and replaces of a single step."""
    session = new_session()
    open_step(session)
    if draw(st.booleans()):
        session.append("system/message", system(1, 1), surface_op="append")
    for _ in range(draw(st.integers(0, 25))):
        nodes = session.surface.nodes
        head_is_system = bool(nodes) and session.events[nodes[0]].type == "system/message"
        if not nodes or draw(st.integers(0, 2)) == 0:
            kind = draw(st.sampled_from(["user/message", "system/message"]))
            data = user("u", "u") if kind == "user/message" else system(1, 1, "s", "s")
            session.append(kind, data, surface_op="append")
            continue
        first = draw(st.integers(0, len(nodes) - 1))
        last = draw(st.integers(first, len(nodes) - 1))
        shadowed = list(nodes[first : last + 1])
        extra = draw(st.lists(st.integers(0, session.seq - 1), max_size=3))
        sources = sorted(set(shadowed) | set(extra))
        kind = "system/message" if first == 0 and head_is_system else "user/message"
        data = user("r", "r") if kind == "user/message" else system(1, 1, "r", "r")
        session.append(
            kind,
            data,
            surface_op=SurfaceReplace(nodes[first], nodes[last]),
            source_event_seqs=sources,
        )
    return session


@given(surface_script())
def test_incremental_surface_equals_full_fold(session: Session) -> None:
    fold = fold_surface(session.events)
    assert session.surface.nodes == fold.nodes
    assert session.surface.replace_generation == fold.replace_generation
    # Every node is a surface event and appears once.
    assert len(set(fold.nodes)) == len(fold.nodes)
