"""The float screen of ``jsonvalue.encode``: every NaN, ±Infinity and -0.0 is caught.

The encoder writes NaN and ±Infinity as ``null`` and keeps ``-0.0``, so the fast path's
type screen looks at the floats of the value itself. These tests pin that the screen never
misses (any bit pattern, shared float objects, bad floats among look-alikes: text such as
``null`` and ``-0.0``, negative fractions, bytes that resemble a float's encoding) and that
look-alikes alone never cause a refusal.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import LosslessJsonError
from dsh_store.jsonvalue import _screen_accepts, encode


def float_from_bits(bits: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


def is_bad(value: float) -> bool:
    return not math.isfinite(value) or (value == 0.0 and math.copysign(1.0, value) < 0)


# Bytes that also occur in bad floats' images: DEL, negative integers (FF bytes),
# lengths and integers with 0x80 / 0x7F bytes, non-ASCII text.
DECOYS: dict[str, Any] = {
    "del": "\x7f" * 40,
    "negatives": [-1, -2, -16, -255, -65536, -(2**31), -(2**40)],
    "lengths": ["x" * 127, "y" * 128, "z" * 255, "w" * 0x7F80],
    "ints": [127, 128, 255, 0x7F80, 0xF07F, 0x80000000, 2**40 + 0x7FF0],
    "text": "naïve — ½ €, 東京, emoji 🙂",
    "nulls": [None, "null", "-0.0", -0.05],
}


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_screen_flags_every_bad_bit_pattern(bits: int) -> None:
    value = float_from_bits(bits)
    if is_bad(value):
        assert not _screen_accepts(value)
        assert not _screen_accepts({"a": [DECOYS, (value,)]})
    else:
        assert _screen_accepts({"a": [DECOYS, (value,)]})


@pytest.mark.parametrize(
    "bits",
    [
        0x7FF0000000000000,  # +inf
        0xFFF0000000000000,  # -inf
        0x7FF8000000000000,  # quiet NaN
        0xFFF8000000000000,  # negative quiet NaN
        0x7FF0000000000001,  # signalling NaN, smallest payload
        0x7FFFFFFFFFFFFFFF,  # largest payload
        0xFFFFFFFFFFFFFFFF,
        0x8000000000000000,  # -0.0
    ],
)
def test_bad_floats_are_refused_among_decoys(bits: int) -> None:
    bad = float_from_bits(bits)
    value = {"decoys": DECOYS, "deep": [{"x": 1}, {"y": [0, bad]}]}
    with pytest.raises(LosslessJsonError) as caught:
        encode(value, event_type="tool/result", path="data")
    assert caught.value.json_path == "data.deep[1].y[1]"
    assert caught.value.event_type == "tool/result"


def test_shared_bad_float_is_refused_at_its_first_place() -> None:
    # One float object in several places: each place is a child of its container.
    negative_zero = -0.0
    value = {"a": [negative_zero, negative_zero], "b": negative_zero}
    with pytest.raises(LosslessJsonError) as caught:
        encode(value, path="data")
    assert caught.value.json_path == "data.a[0]"
    assert "-0.0 does not survive a JSON round trip" in caught.value.reason


@pytest.mark.parametrize(
    "decoy",
    [
        "\x7f" * 100,  # more candidate bytes than the screen inspects one by one
        [-1] * 20 + list(range(-300, -1)),
        ["\x7f" * 40, [0x7F80] * 40, "é" * 200],
    ],
    ids=["del-run", "negative-ints", "mixed"],
)
def test_look_alike_bytes_before_a_nan_do_not_hide_it(decoy: object) -> None:
    value = {"decoy": decoy, "late": float("nan")}
    with pytest.raises(LosslessJsonError) as caught:
        encode(value, path="data")
    assert caught.value.json_path == "data.late"
    assert caught.value.reason == "NaN is not JSON"


def test_decoys_alone_are_accepted_unchanged() -> None:
    assert encode(DECOYS) == orjson.dumps(DECOYS)
    finite = {"f": [0.0, 1.0, -1.5, 5e-324, -5e-324, 1e308, -1e308, 2.0**1023, -(2.0**1023)]}
    assert encode(finite) == orjson.dumps(finite)


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
        | st.floats()
        | st.text(st.characters(codec="utf-8")),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text("abé", max_size=8), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_encode_accepts_exactly_the_values_without_bad_floats(value: Any) -> None:
    def has_bad(item: Any) -> bool:
        if type(item) is float:
            return is_bad(item)
        if type(item) is list:
            return any(has_bad(child) for child in item)
        if type(item) is dict:
            return any(has_bad(child) for child in item.values())
        return False

    if has_bad(value):
        with pytest.raises(LosslessJsonError):
            encode(value)
    else:
        assert encode(value) == orjson.dumps(value)


def test_newline_variant_matches_plain_encoding() -> None:
    value = {"a": [1, "x", None, 2.5], "t": (1, 2)}
    assert encode(value, newline=True) == encode(value) + b"\n"
    with pytest.raises(LosslessJsonError) as caught:
        encode({"a": float("inf")}, path="data", newline=True)
    assert caught.value.json_path == "data.a"
    assert caught.value.reason == "inf is not JSON"
