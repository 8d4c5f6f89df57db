"""``SessionEvent.from_json``'s fast path for restored rows refuses exactly what its
general path refuses.

A row read from a log in one of the common envelope shapes skips the general envelope
checks and proves lossless JSON on sight (``jsonvalue.loaded_is_lossless``). Here the
same row and line run twice, once as shipped and once with the fast path switched off, on
near-valid rows with hostile mutations of the envelope, the payload and the line's bytes:
both must accept with the same event (line, fields and facts), or refuse with the same
error class, rule, message and seq.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store.errors import DshStoreError
from dsh_store.model import SessionEvent
from dsh_store.model import events as events_module

# Valid rows of each envelope shape the fast path takes (and of the shapes it leaves).
BASES: list[dict[str, Any]] = [
    {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}},
    {"type": "step/start", "seq": 1, "time": 6, "data": {"turn": 1, "step": 1}},
    {
        "type": "tool/call",
        "seq": 4,
        "time": 7,
        "data": {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}"},
    },
    {
        "type": "user/message",
        "seq": 2,
        "time": 8,
        "data": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        "surfaceOp": "append",
    },
    {
        "type": "tool/result",
        "seq": 5,
        "time": 9,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "tool",
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "ok"}],
            },
        },
        "sourceEventSeqs": [4],
        "surfaceOp": "append",
    },
    {
        "type": "assistant/message",
        "seq": 3,
        "time": 9,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "source": {"provider": "p", "model": "m"},
            },
            "stream": [],
        },
        "surfaceOp": "append",
    },
    {"type": "todo/write", "seq": 3, "time": 10, "data": {"todos": [1.5, None, True]}},
    {"type": "plugin:x/y", "seq": 3, "time": 10, "data": {}, "ignorable": True},
]

# Hostile values by envelope key: each differs from a valid one in one way a check must
# notice (or, for the valid look-alikes, must not).
HOSTILE: dict[str, list[Any]] = {
    "type": [
        "",
        "x",
        "user/message",
        "assistant/message",
        "tool/result",
        "turn/start",
        "todo/write",
        "nope/unknown",
        "plugin:x/y",
        1,
        None,
    ],
    "seq": [0, -1, 4, 5, 6, 2**53 - 1, 2**53, True, 1.0, None],
    "time": [0, -1, 2**53 - 1, 2**53, True, 1.0, None],
    "surfaceOp": ["append", "x", None, 1, [], {"op": "replace", "startSeq": 0, "endSeq": 1}],
    "sourceEventSeqs": [
        [],
        [0],
        [4],
        [5],
        [6],
        [0, 4],
        [4, 4],
        [-1],
        [True],
        [1.0],
        [2**53],
        [0, [1, 3]],
        [[1, 3]],
        "4",
        None,
    ],
    "ignorable": [True, False, None, 1],
    "data": [None, 1, [], {}],
    "x": [1],
}
PAYLOAD_HOSTILE: list[Any] = [None, True, 0, -1, 2**53, 2**60, 1.0, -0.0, "", "x", [], {}]
ENVELOPE_KEYS = sorted(HOSTILE)


@contextlib.contextmanager
def fast_path_off() -> Iterator[None]:
    original = events_module._from_plain_row
    events_module._from_plain_row = lambda obj, line: None
    try:
        yield
    finally:
        events_module._from_plain_row = original


def outcome(obj: dict[str, Any], line: bytes) -> tuple[Any, ...]:
    try:
        event = SessionEvent.from_json(obj, line=line)
    except DshStoreError as error:
        return (
            "refused",
            type(error),
            *(getattr(error, name, None) for name in ("rule", "seq")),
            str(error),
        )
    return (
        "accepted",
        event._line,
        event.line,
        event.type,
        event.seq,
        event.time,
        event.ignorable,
        event.surface_op,
        event.source_event_seqs,
        event._facts,
    )


def spell(row: dict[str, Any], how: str) -> bytes:
    """The row's JSON text: canonical, spaced out, with a repeated key, or a lossy literal."""
    if how == "spaced":
        return json.dumps(row).encode()
    canonical = orjson.dumps(row)
    if how == "repeated-key":
        return b'{"seq":0,' + canonical[1:]
    if how == "huge-literal":
        return canonical.replace(b'"time":', b'"time":123456789012345678901234567,"t":', 1)
    if how == "negative-zero-text":
        return canonical[:-1] + b',"x":"-0.0"}'
    return canonical


@st.composite
def rows(draw: st.DrawFn) -> tuple[dict[str, Any], bytes]:
    row = dict(draw(st.sampled_from(BASES)))
    row["data"] = orjson.loads(orjson.dumps(row["data"]))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(ENVELOPE_KEYS))
        if draw(st.integers(0, 4)) == 0 and key in row:
            del row[key]
        else:
            row[key] = draw(st.sampled_from(HOSTILE[key]))
    if draw(st.integers(0, 2)) == 0:  # a hostile value inside the payload
        target = row.get("data")
        if type(target) is dict and target:
            field = draw(st.sampled_from(sorted(target)))
            target[field] = draw(st.sampled_from(PAYLOAD_HOSTILE))
    how = draw(
        st.sampled_from(
            [
                "canonical",
                "canonical",
                "spaced",
                "repeated-key",
                "huge-literal",
                "negative-zero-text",
            ]
        )
    )
    try:
        text = spell(row, how)
    except orjson.JSONEncodeError:
        text = spell(row, "spaced")
    end = draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    return orjson.loads(text), text + end


@settings(max_examples=1500, deadline=None)
@given(rows())
def test_the_fast_path_accepts_and_refuses_as_the_general_path(
    case: tuple[dict[str, Any], bytes],
) -> None:
    obj, line = case
    shipped = outcome(obj, line)
    with fast_path_off():
        general = outcome(orjson.loads(line), line)
    assert shipped == general


SPELLINGS = ["canonical", "spaced", "repeated-key", "huge-literal", "negative-zero-text"]


def test_every_single_mutation_is_judged_alike() -> None:
    """Each base row with each one key removed or given each hostile value, every spelling."""
    cases = 0
    for base in BASES:
        variants: list[dict[str, Any]] = [dict(base)]
        for key, values in HOSTILE.items():
            variants.append({name: value for name, value in base.items() if name != key})
            variants.extend({**base, key: value} for value in values)
        data = base["data"]
        for field in data:
            variants.extend({**base, "data": {**data, field: value}} for value in PAYLOAD_HOSTILE)
        for row in variants:
            for how in SPELLINGS:
                try:
                    text = spell(row, how)
                except orjson.JSONEncodeError:
                    continue
                line = text + b"\n"
                shipped = outcome(orjson.loads(text), line)
                with fast_path_off():
                    general = outcome(orjson.loads(text), line)
                assert shipped == general, (row, how)
                cases += 1
    assert cases > 2000


def test_the_common_shapes_take_the_fast_path() -> None:
    for row in BASES[:6]:
        line = orjson.dumps(row)
        assert events_module._from_plain_row(orjson.loads(line), line) is not None, row["type"]
    for row in BASES[6:]:  # a log-only type is taken; an ignorable plugin row is not
        line = orjson.dumps(row)
        taken = events_module._from_plain_row(orjson.loads(line), line)
        assert (taken is None) == ("ignorable" in row), row["type"]


def test_the_fast_path_keeps_the_line_it_was_given() -> None:
    row = BASES[4]
    line = orjson.dumps(row)
    event = SessionEvent.from_json(orjson.loads(line), line=line)
    assert event._line is line  # taken by the fast path, not copied to add the newline
    assert event.line == line + b"\n"
    assert event.source_event_seqs == (4,)
    assert event == SessionEvent.from_json(orjson.loads(line), line=line + b"\n")
