"""Long lines are read with their long strings held once, and read exactly as before.

Three things used to copy a long line: the decoder's own copy of its input, the lossless
check's re-encoding, and the event's copy of the line with its newline. Each replacement
must give what the whole-line path gives (the same value, the same refusal): checked
here on crafted lines, and as properties with the length thresholds lowered so that
generated values exercise the long-line paths.
"""

from __future__ import annotations

import pickle
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store import jsonvalue
from dsh_store.errors import DuplicateKeyError, LosslessJsonError
from dsh_store.jsonl import rows
from dsh_store.jsonl.rows import decode_long_line
from dsh_store.model import SessionEvent

LONG = "x" * (1 << 17)


def _same_as_decoder(raw: bytes) -> None:
    try:
        expected: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        with pytest.raises(orjson.JSONDecodeError):
            decode_long_line(raw)
        return
    got = decode_long_line(raw)
    assert got == expected
    assert orjson.dumps(got) == orjson.dumps(expected)  # same types, same order


@pytest.mark.parametrize(
    "raw",
    [
        orjson.dumps({"type": "tool/call", "data": {"arguments": LONG, "n": 1}}),
        orjson.dumps({"a": [LONG, "short", LONG + "é€𝄞"], "b": {"c": LONG}}),
        orjson.dumps({LONG: 1, "v": LONG}),  # a long key stays with the decoder
        orjson.dumps({"v": LONG + '"quoted" \\ and\nnewline'}),  # escapes: decoded whole
        orjson.dumps({"v": LONG, "w": 'x\\"'}),  # a quote after a backslash elsewhere
        orjson.dumps({"v": "\x00" + LONG}),  # a string that starts like a marker
        b'{"v": "' + LONG.encode() + b'" , "w" :1}',  # whitespace around tokens
        b'{"v":"' + LONG.encode() + b'\x01"}',  # a raw control character: not JSON
        b'{"v":"' + LONG.encode() + b'\xff"}',  # not UTF-8
        b'{"v":"' + LONG.encode() + b'\xed\xa0\x80"}',  # an encoded surrogate
        b'{"v":"' + LONG.encode() + b'"',  # unbalanced
        b'{"v":"' + LONG.encode() + b'",}',  # trailing comma
        b'{"v":"' + LONG.encode() + b'","v":"' + LONG.encode() + b'!"}',  # a key twice
        b'["' + LONG.encode() + b'"]\n',
    ],
)
def test_a_long_line_decodes_as_the_decoder_decodes_it(raw: bytes) -> None:
    _same_as_decoder(raw)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, cut=st.integers(0, 200), byte=st.integers(0, 255), mutate=st.booleans())
def test_decoding_in_pieces_is_the_decoder_on_any_line(
    value: Any, cut: int, byte: int, mutate: bool
) -> None:
    raw = orjson.dumps(value)
    if mutate and raw:  # damage one byte: both must refuse, or agree
        position = cut % len(raw)
        raw = raw[:position] + bytes([byte]) + raw[position + 1 :]
    previous = rows._LONG_STRING_BYTES
    rows._LONG_STRING_BYTES = 2  # type: ignore[misc]  # every string of 2+ bytes is "long"
    try:
        _same_as_decoder(raw)
    finally:
        rows._LONG_STRING_BYTES = previous  # type: ignore[misc]


def _whole_path_outcome(value: Any, raw: bytes) -> str:
    try:
        jsonvalue.check_loaded(value, raw=raw)
    except DuplicateKeyError:
        return "duplicate"
    except LosslessJsonError:
        return "refused"
    return "ok"


@settings(max_examples=300, deadline=None)
@given(value=_JSON, spaced=st.booleans(), ending=st.sampled_from([b"", b"\n", b"\r\n", b" "]))
def test_the_piecewise_canonical_check_agrees_with_the_whole_one(
    value: Any, spaced: bool, ending: bytes
) -> None:
    try:
        canonical = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return  # not a value a line decodes to
    raw = (orjson.dumps(value, option=orjson.OPT_INDENT_2) if spaced else canonical) + ending
    decoded = orjson.loads(raw)
    previous = (jsonvalue.LARGE_LINE_BYTES, jsonvalue._PIECE_CHARS)
    try:
        jsonvalue.LARGE_LINE_BYTES, jsonvalue._PIECE_CHARS = 1 << 40, 3  # type: ignore[misc]
        whole = _whole_path_outcome(decoded, raw)
        jsonvalue.LARGE_LINE_BYTES = 0  # type: ignore[misc]
        pieces = _whole_path_outcome(decoded, raw)
        vouched = jsonvalue._is_canonical_in_pieces(decoded, raw)
    finally:
        jsonvalue.LARGE_LINE_BYTES, jsonvalue._PIECE_CHARS = previous  # type: ignore[misc]
    assert pieces == whole
    # It vouches exactly for canonical lines the strict rules accept.
    assert vouched == (raw.rstrip(b"\r\n") == canonical and ending != b" " and whole == "ok")


def test_an_unsafe_integer_or_negative_zero_in_a_long_line_is_still_refused() -> None:
    for value in ({"v": LONG, "n": 2**60}, {"v": LONG, "f": -0.0}):
        raw = orjson.dumps(value)
        assert len(raw) >= jsonvalue.LARGE_LINE_BYTES // 8
        previous = jsonvalue.LARGE_LINE_BYTES
        jsonvalue.LARGE_LINE_BYTES = 1024  # type: ignore[misc]
        try:
            with pytest.raises(LosslessJsonError):
                jsonvalue.check_loaded(orjson.loads(raw), raw=raw)
        finally:
            jsonvalue.LARGE_LINE_BYTES = previous  # type: ignore[misc]


def test_an_event_keeps_a_long_line_as_read_and_still_gives_it_with_its_newline() -> None:
    data = {"turn": 1, "step": 1, "callId": "c", "name": "x", "arguments": "a" * (1 << 21)}
    row = {"type": "tool/call", "seq": 3, "time": 9, "data": data}
    raw = orjson.dumps(row)
    kept = SessionEvent.from_json(orjson.loads(raw), line=raw)
    terminated = SessionEvent.from_json(orjson.loads(raw), line=raw + b"\n")
    assert kept._line is raw  # no second copy of the line
    assert kept.line == raw + b"\n" == terminated.line
    assert kept == terminated and hash(kept) == hash(terminated)
    assert pickle.loads(pickle.dumps(kept)) == terminated
    assert kept.data["arguments"] == data["arguments"]
    short = orjson.dumps(
        {"type": "tool/call", "seq": 3, "time": 9, "data": {**data, "arguments": "a"}}
    )
    kept_short = SessionEvent.from_json(orjson.loads(short), line=short)
    assert kept_short._line is short  # a short line is not copied either
    assert kept_short.line == short + b"\n"
