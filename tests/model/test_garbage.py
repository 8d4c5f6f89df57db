"""Arbitrary JSON-ish garbage never escapes as anything but a typed DshStoreError."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import DshStoreError
from dsh_store.model import KNOWN_TYPES, Session, SessionEvent, SessionHeader

from .builders import new_session, open_step

TYPES = [*sorted(KNOWN_TYPES), "plugin:x", "x/unknown", "", "plugin:"]
KEYS = [
    "type",
    "seq",
    "time",
    "data",
    "ignorable",
    "sourceEventSeqs",
    "surfaceOp",
    "turn",
    "step",
    "message",
    "role",
    "content",
    "callId",
    "name",
    "arguments",
    "toolCallId",
    "isError",
    "error",
    "header",
    "reason",
    "config",
    "provider",
    "model",
    "tools",
    "adapterDefaults",
    "system",
    "stream",
    "source",
    "inherited",
    "headerSeq",
    "op",
    "startSeq",
    "endSeq",
    "kind",
    "id",
    "createdAt",
    "isSeeded",
    "delegationDepth",
    "cwd",
    "version",
    "origin",
    "agentPreset",
    "parentSession",
    "interrupted",
    "startsSeries",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(
        [
            *TYPES,
            "user",
            "assistant",
            "tool",
            "system",
            "developer",
            "append",
            "replace",
            "initial",
            "session",
            "tool-call",
            "text",
        ]
    )
    | st.text(max_size=5)
)
json_ish = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), children, max_size=6)
    ),
    max_leaves=25,
)
foreign = st.sampled_from([{1, 2}, b"bytes", (1, 2), object(), 1j, frozenset(), {1: "x"}])
anything = st.recursive(
    scalars | foreign,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS), children, max_size=5)
    ),
    max_leaves=15,
)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    base: dict[str, Any] = {
        "type": draw(st.sampled_from(TYPES)),
        "seq": draw(st.integers(0, 5)),
        "time": draw(st.integers(0, 5)),
        "data": draw(json_ish),
    }
    for key in ("ignorable", "sourceEventSeqs", "surfaceOp"):
        if draw(st.booleans()):
            base[key] = draw(json_ish)
    overrides = draw(st.dictionaries(st.sampled_from(KEYS), json_ish, max_size=2))
    base.update(overrides)
    return base if draw(st.integers(0, 9)) else draw(json_ish)


def only_typed(call: Any, *args: Any, **kwargs: Any) -> None:
    with contextlib.suppress(DshStoreError):
        call(*args, **kwargs)


@given(envelopes())
def test_from_json_garbage(obj: Any) -> None:
    only_typed(SessionEvent.from_json, obj)


@given(st.dictionaries(st.sampled_from(KEYS), json_ish, max_size=10) | json_ish)
def test_header_garbage(obj: Any) -> None:
    only_typed(SessionHeader.from_json, obj)


@given(st.sampled_from(TYPES), anything, anything, anything, anything)
def test_append_garbage(kind: str, data: Any, op: Any, sources: Any, ignorable: Any) -> None:
    session: Session = new_session()
    open_step(session)
    before = session.seq
    try:
        session.append(kind, data, surface_op=op, source_event_seqs=sources, ignorable=ignorable)
    except DshStoreError:
        assert session.seq == before


@given(st.lists(envelopes(), max_size=6))
def test_restore_garbage(objs: list[Any]) -> None:
    events = []
    for obj in objs:
        try:
            events.append(SessionEvent.from_json(obj))
        except DshStoreError:
            continue
    only_typed(Session.from_restore, SessionHeader(id="s", created_at=0), events)


@given(st.lists(st.tuples(st.sampled_from(TYPES), anything), max_size=4))
def test_append_many_garbage(items: list[tuple[str, Any]]) -> None:
    session = new_session()
    try:
        session.append_many(items)
    except DshStoreError:
        assert session.seq == 0
