"""Wire conversion: canonical lines, key order, sourceEventSeqs range pairs, from/to JSON."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import EventValidationError, LosslessJsonError
from dsh_store.model import SessionEvent, SurfaceReplace, decode_source_seqs, encode_source_seqs

from .builders import new_session, open_step, user


@pytest.mark.parametrize(
    ("seqs", "wire"),
    [
        ([], []),
        ([4], [4]),
        ([1, 2], [1, 2]),
        ([1, 2, 3], [[1, 3]]),
        ([0, 1, 2, 3, 7, 9, 10, 11], [[0, 3], 7, [9, 11]]),
        ([5, 6, 8, 9], [5, 6, 8, 9]),
        ([3, 1, 2], [3, 1, 2]),  # not strictly increasing: verbatim
    ],
)
def test_range_pair_encoding(seqs: list[int], wire: list[Any]) -> None:
    assert encode_source_seqs(seqs) == wire
    assert list(decode_source_seqs(wire)) == seqs


def test_decoder_reads_mixed_and_expanded_forms() -> None:
    assert decode_source_seqs([0, [2, 4], 6]) == (0, 2, 3, 4, 6)
    assert decode_source_seqs([0, 1, 2, 3]) == (0, 1, 2, 3)
    assert decode_source_seqs([[2, 2]]) == (2,)


@pytest.mark.parametrize(
    ("wire", "rule", "text"),
    [
        ("1", "source-seqs-shape", "must be an array"),
        ([[3, 1]], "source-seqs-shape", "[start, end] pairs"),
        ([[1, 2, 3]], "source-seqs-shape", "[start, end] pairs"),
        ([1.0], "source-seqs-shape", "[start, end] pairs"),
        ([True], "source-seqs-shape", "[start, end] pairs"),
        ([[0, 3], 2], "source-seqs-range", "strictly increasing"),
    ],
)
def test_decoder_refusals(wire: Any, rule: str, text: str) -> None:
    with pytest.raises(EventValidationError) as caught:
        decode_source_seqs(wire, 9, "user/message")
    assert caught.value.rule == rule and text in str(caught.value)
    assert caught.value.seq == 9


@given(st.lists(st.integers(0, 60), unique=True))
def test_range_pairs_round_trip(seqs: list[int]) -> None:
    for order in (seqs, sorted(seqs)):
        wire = encode_source_seqs(order)
        assert list(decode_source_seqs(wire)) == order
        # Only strictly increasing lists get pairs, and only for runs of three or more.
        for item in wire:
            if isinstance(item, list):
                assert item[1] - item[0] >= 2


def test_line_key_order_and_ranges() -> None:
    event = SessionEvent(
        "user/message",
        10,
        5,
        user(),
        ignorable=True,
        surface_op=SurfaceReplace(2, 4),
        source_event_seqs=[2, 3, 4, 8],
    )
    wire = orjson.loads(event.line)
    assert list(wire) == [
        "type",
        "seq",
        "time",
        "data",
        "ignorable",
        "sourceEventSeqs",
        "surfaceOp",
    ]
    assert wire["sourceEventSeqs"] == [[2, 4], 8]
    assert wire["surfaceOp"] == {"op": "replace", "startSeq": 2, "endSeq": 4}
    assert event.line.endswith(b"}\n") and event.line.count(b"\n") == 1
    plain = event.to_json()
    assert plain["sourceEventSeqs"] == [2, 3, 4, 8]
    assert list(plain) == list(wire)
    again = SessionEvent.from_json(wire)
    assert again == event and again.line == event.line
    assert again.source_event_seqs == (2, 3, 4, 8)
    assert SessionEvent.from_json(plain).line == event.line


def test_from_json_keeps_given_line_bytes() -> None:
    line = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'
    event = SessionEvent.from_json(orjson.loads(line), line=line)
    assert event.line == line + b"\n"
    assert event.data == {"turn": 1}


def test_from_json_lossless_checks() -> None:
    line = b'{"type":"x/y","seq":0,"time":1,"data":{"v":-0.0}}\n'
    with pytest.raises(LosslessJsonError) as caught:
        SessionEvent.from_json(orjson.loads(line), line=line)
    assert caught.value.json_path == "data.v" and caught.value.event_type == "x/y"
    with pytest.raises(LosslessJsonError) as caught:
        SessionEvent.from_json({"type": "x/y", "seq": 0, "time": 1, "data": {"v": 2**60}})
    assert caught.value.json_path == "data.v"


@pytest.mark.parametrize(
    ("obj", "rule", "text"),
    [
        ([], "event-not-object", "must be a JSON object"),
        ({"seq": 0, "time": 1, "data": {}}, "event-type", "non-empty string"),
        ({"type": "x/y", "seq": "0", "time": 1, "data": {}}, "event-seq", "non-negative"),
        ({"type": "x/y", "seq": 0, "time": -1, "data": {}}, "event-time", "non-negative"),
        ({"type": "x/y", "seq": 0, "time": 1}, "event-data-missing", "has no data"),
        (
            {"type": "x/y", "seq": 0, "time": 1, "data": {}, "extra": 1},
            "envelope-unknown-key",
            "'extra'",
        ),
        (
            {"type": "plugin:a", "seq": 0, "time": 1, "data": {}},
            "plugin-not-ignorable",
            "must be marked ignorable",
        ),
    ],
)
def test_from_json_refusals(obj: Any, rule: str, text: str) -> None:
    with pytest.raises(EventValidationError) as caught:
        SessionEvent.from_json(obj)
    assert caught.value.rule == rule and text in str(caught.value)


def test_pickle_round_trip() -> None:
    event = SessionEvent(
        "user/message", 3, 7, user(), surface_op="append", source_event_seqs=[0, 1, 2]
    )
    again = pickle.loads(pickle.dumps(event))
    assert again == event and again.source_event_seqs == (0, 1, 2)
    assert hash(again) == hash(event)


def test_data_and_to_json_are_fresh() -> None:
    event = SessionEvent("x/y", 0, 1, {"a": [1]})
    event.data["a"].append(2)
    event.to_json()["data"]["a"].append(3)
    assert event.data == {"a": [1]}


def _assert_each_holds_about_its_line(build: Callable[[], SessionEvent], size: int) -> None:
    """Build 20 events (after one to warm imports and caches) and bound what each holds."""
    import gc
    import tracemalloc

    build()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        events = [build() for _ in range(20)]
        held = (tracemalloc.get_traced_memory()[0] - before) / len(events)
    finally:
        tracemalloc.stop()
    line = len(events[0].line)
    assert line > size
    assert held < line + 1_000, (held, line)


@pytest.mark.parametrize("size", [100, 1_500, 20_000])
def test_an_event_built_from_json_holds_its_line_at_its_own_size(size: int) -> None:
    # An upgraded log's events are built from dicts and kept for the session's life: the
    # memory each one holds must follow its line, not the encoder's growth buffer (orjson
    # 3.13 returns about 4 KiB for a 100-byte line and 15 KiB for 1.5 KB).
    row = {
        "type": "user/message",
        "seq": 0,
        "time": 1,
        "data": user("x" * size),
        "surfaceOp": "append",
    }
    _assert_each_holds_about_its_line(lambda: SessionEvent.from_json(row), size)


@pytest.mark.parametrize("size", [100, 1_500, 20_000])
def test_an_appended_event_holds_its_line_at_its_own_size(size: int) -> None:
    # A live session keeps every event it appended: the same bound as for a decoded row.
    session = new_session()
    open_step(session)
    data = user("x" * size)
    _assert_each_holds_about_its_line(
        lambda: session.append("user/message", data, surface_op="append"), size
    )
