"""Lossless JSON: what is accepted, what is refused, and the path every refusal names."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import DshStoreError, LosslessJsonError
from dsh_store.jsonvalue import MAX_DEPTH, MAX_SAFE_INTEGER, check_json, check_loaded, encode


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


def nested_lists(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def refusal(value: object, path: str = "data") -> LosslessJsonError:
    with pytest.raises(LosslessJsonError) as caught:
        encode(value, event_type="user/message", path=path)
    assert isinstance(caught.value, DshStoreError)
    assert caught.value.event_type == "user/message"
    assert "user/message" in str(caught.value)
    return caught.value


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ({"a": float("nan")}, "data.a", "NaN is not JSON"),
        ({"a": [1, float("inf")]}, "data.a[1]", "inf is not JSON"),
        ({"a": float("-inf")}, "data.a", "-inf is not JSON"),
        ({"a": -0.0}, "data.a", "-0.0 does not survive a JSON round trip"),
        ({"n": MAX_SAFE_INTEGER + 1}, "data.n", "outside ±(2^53 - 1)"),
        ({"n": -MAX_SAFE_INTEGER - 1}, "data.n", "outside ±(2^53 - 1)"),
        ({"n": 2**70}, "data.n", "outside ±(2^53 - 1)"),
        ({1: "x"}, "data", "dict key 1 has type int, not str"),
        ({"b": b"raw"}, "data.b", "bytes is not a JSON value"),
        ({"s": {1, 2}}, "data.s", "set is not a JSON value"),
        ({"s": frozenset()}, "data.s", "frozenset is not a JSON value"),
        ({"d": datetime.datetime(2026, 1, 1)}, "data.d", "datetime.datetime is not a JSON value"),
        ({"d": datetime.date(2026, 1, 1)}, "data.d", "datetime.date is not a JSON value"),
        ({"p": Point(1)}, "data.p", "Point is not a JSON value"),
        ({"e": Color.RED}, "data.e", "Color is not a JSON value"),
        ({"e": Level.LOW}, "data.e", "Level is a subclass of int"),
        ({"u": uuid.UUID(int=1)}, "data.u", "uuid.UUID is not a JSON value"),
        ({"n": Name("x")}, "data.n", "Name is a subclass of str"),
        ({"c": 1j}, "data.c", "complex is not a JSON value"),
        ({"m": decimal.Decimal("1.5")}, "data.m", "decimal.Decimal is not a JSON value"),
        ({"o": object()}, "data.o", "object is not a JSON value"),
        ({"t": "\ud800"}, "data.t", "lone surrogate"),
        ({"\udfff": 1}, "data", "lone surrogate"),
        ({"weird key": [0, {"x": float("nan")}]}, 'data["weird key"][1].x', "NaN"),
        (
            {"message": {"content": [{"text": "a"}, {"text": "b"}, {"text": float("nan")}]}},
            "data.message.content[2].text",
            "NaN",
        ),
    ],
)
def test_refusals_name_path_and_reason(value: object, path: str, reason: str) -> None:
    error = refusal(value)
    assert error.json_path == path
    assert reason in error.reason
    assert f"at {path} " in str(error)


def test_cycle_is_refused_as_a_cycle() -> None:
    loop: list[Any] = []
    loop.append(loop)
    error = refusal({"a": loop})
    assert error.json_path == "data.a[0]"
    assert "cycle" in error.reason


def test_shared_subvalue_is_not_a_cycle() -> None:
    shared = {"k": 1}
    assert orjson.loads(encode({"a": shared, "b": [shared, shared]})) == {
        "a": {"k": 1},
        "b": [{"k": 1}, {"k": 1}],
    }


def test_depth_limit_is_refused_without_recursion_error() -> None:
    assert orjson.loads(encode(nested_lists(MAX_DEPTH))) == nested_lists(MAX_DEPTH)
    error = refusal(nested_lists(MAX_DEPTH + 1))
    assert f"deeper than {MAX_DEPTH}" in error.reason
    deep = refusal(nested_lists(100_000))
    assert f"deeper than {MAX_DEPTH}" in deep.reason


def test_tuples_are_written_as_arrays() -> None:
    assert encode({"t": (1, "a", (None,))}) == b'{"t":[1,"a",[null]]}'


def test_canonical_bytes_are_compact_and_ordered() -> None:
    assert encode({"b": 1, "a": [True, None, 1.5, "é\n"]}) == (
        '{"b":1,"a":[true,null,1.5,"é\\n"]}'.encode()
    )


def test_null_and_negative_fractions_take_the_slow_path_and_pass() -> None:
    assert encode({"a": None, "b": -0.05, "c": "null -0.0"}) == (
        b'{"a":null,"b":-0.05,"c":"null -0.0"}'
    )


def test_check_json_accepts_plain_values() -> None:
    check_json({"a": [1, 2.5, "x", None, True, {"b": -(2**53 - 1)}]})


def test_check_loaded_catches_what_decoding_lets_through() -> None:
    raw = b'{"a":-0.0}'
    with pytest.raises(LosslessJsonError) as caught:
        check_loaded(orjson.loads(raw), path="data")
    assert caught.value.json_path == "data.a"
    big = b'{"a":9007199254740993}'
    with pytest.raises(LosslessJsonError):
        check_loaded(orjson.loads(big), path="data")
    fine = b'{"a":"-0 and -0.0 and 12345678901234567890 in text"}'
    check_loaded(orjson.loads(fine), path="data")


def test_check_loaded_refuses_nesting_the_encoder_could_not_write() -> None:
    # orjson decodes up to 1024 levels but encodes at most MAX_DEPTH: a restored value
    # deeper than that could never be written again, so it is not lossless JSON here.
    deep = b'{"a":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    with pytest.raises(LosslessJsonError, match="nesting deeper") as caught:
        check_loaded(orjson.loads(deep), path="data")
    assert caught.value.json_path.startswith("data.a[0][0]")
    shallow = b'{"a":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    check_loaded(orjson.loads(shallow), path="data")


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0.0 or str(f) == "0.0")
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=40,
)


@given(json_values)
def test_accepted_values_round_trip_equal(value: object) -> None:
    assert orjson.loads(encode(value)) == value


anything = st.recursive(
    json_scalars
    | st.floats()
    | st.integers()
    | st.binary(max_size=3)
    | st.sets(st.integers(), max_size=2)
    | st.uuids()
    | st.datetimes()
    | st.sampled_from([Color.RED, Level.LOW, Point(1)]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text() | st.integers(), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(anything)
def test_any_value_is_accepted_losslessly_or_refused_with_a_path(value: object) -> None:
    try:
        encoded = encode(value, path="data")
    except LosslessJsonError as error:
        assert error.json_path.startswith("data")
        # The slow path agrees with the fast path.
        with pytest.raises(LosslessJsonError):
            check_json(value, path="data")
        return
    assert orjson.loads(encoded) == _as_lists(value)


def _as_lists(value: object) -> object:
    if isinstance(value, dict):
        return {key: _as_lists(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_lists(item) for item in value]
    return value


@pytest.mark.parametrize("raw", [b"[-0.0]", b'{"a":-0e0}', b'{"a":[1,-0.00]}', b"-0E3"])
def test_check_loaded_finds_every_spelling_of_negative_zero(raw: bytes) -> None:
    with pytest.raises(LosslessJsonError, match=r"-0\.0 does not survive"):
        check_loaded(orjson.loads(raw), path="data")


@pytest.mark.parametrize(
    "raw", [b'{"d":"2024-01-05"}', b'{"n":-0}', b'{"n":-1.5e-07}', b"[123456789012345]"]
)
def test_check_loaded_accepts_lookalikes(raw: bytes) -> None:
    check_loaded(orjson.loads(raw), path="data")
