"""The fast path of ``jsonvalue.encode`` refuses exactly what the precise path refuses.

The precise path is :func:`check_json` (the iterative walk that names the path and reason)
followed by a plain strict ``orjson.dumps``. The fast path lets orjson screen types while
it encodes and then screens the accepted value's types and floats level by level. For any
value, both must agree: the same refusal (reason and JSON path), or the same bytes.

The values are hostile on purpose: everything orjson would write silently (enum members of
every mixin, UUIDs, ``orjson.Fragment``, NaN, ±Infinity, -0.0), every subclass of a JSON
type, foreign objects, unsafe integers, lone surrogates, non-str keys, dicts whose key
table is not the all-str kind, instance dicts, cycles and nesting at the depth limit.

Every property runs with each type screen: the C one (``dsh_store._jsonscreen``, compiled at
install time, with its line encoder ``framed_line``) and the Python one an install without a
compiler uses.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import decimal
import enum
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store import jsonvalue
from dsh_store.errors import EventValidationError, LosslessJsonError
from dsh_store.jsonvalue import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    _screen_accepts_in_python,
    check_json,
    encode,
    encode_framed,
    encode_row,
)
from dsh_store.model.events import encode_line
from dsh_store.model.shapes import PLAIN_PAYLOAD_SIZES, check_payload
from tests.c_build import skip_without_c_compiler

SCREENS: dict[str, Callable[[object], bool]] = {"python": _screen_accepts_in_python}
# The line encoder that goes with each screen: C's own, or the Python path around the screen.
LINE_ENCODERS: dict[str, Any] = {"python": None}
try:
    from dsh_store._jsonscreen import framed_line as _c_line
    from dsh_store._jsonscreen import plain as _c_screen
except ImportError:  # an install without a C compiler: the Python screen alone
    pass
else:
    SCREENS["c"] = _c_screen
    LINE_ENCODERS["c"] = _c_line
each_screen = pytest.mark.parametrize("screen", sorted(SCREENS))


@contextlib.contextmanager
def screened_by(screen: str) -> Iterator[None]:
    """Encode with the named type screen and its line encoder (module globals the encoders
    read per call)."""
    saved = jsonvalue._screen_accepts, jsonvalue.fast_row
    jsonvalue._screen_accepts = SCREENS[screen]
    jsonvalue.fast_row = LINE_ENCODERS[screen]
    try:
        yield
    finally:
        jsonvalue._screen_accepts, jsonvalue.fast_row = saved


class Color(enum.Enum):
    RED = "red"
    ONE = 1


class Level(enum.IntEnum):
    LOW = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class Ratio(float, enum.Enum):
    HALF = 0.5


class Perm(enum.IntFlag):
    READ = 4


class Loose(enum.Enum):
    """An enum that claims to equal its value (defeats any compare-based screen)."""

    A = 7

    def __eq__(self, other: object) -> bool:
        return other == self.value or other is self

    def __hash__(self) -> int:
        return hash(self.value)


class Text(str):
    pass


class Number(int):
    pass


class Real(float):
    pass


class Mapping(dict[str, Any]):
    pass


class Items(list[Any]):
    pass


class Row(tuple[Any, ...]):
    pass


Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Point:
    x: int


class Holder:
    def __init__(self) -> None:
        self.alpha = 1
        self.beta = "two"


def instance_dict() -> dict[str, Any]:
    # A split-table dict (shared keys), as ``vars(obj)`` returns.
    return vars(Holder())


def general_table_dict() -> dict[Any, Any]:
    # All keys are str now, but the table stopped being the all-str kind.
    value: dict[Any, Any] = {1: "gone", "kept": [1, 2]}
    del value[1]
    return value


FOREIGN = [
    Color.RED,
    Color.ONE,
    Level.LOW,
    Mode.FAST,
    Ratio.HALF,
    Perm.READ,
    Loose.A,
    uuid.UUID(int=1),
    orjson.Fragment(b'{"raw":1}'),
    b"raw",
    bytearray(b"x"),
    {1, 2},
    frozenset(),
    datetime.datetime(2026, 1, 1),
    datetime.date(2026, 1, 1),
    datetime.time(1, 2),
    decimal.Decimal("1.5"),
    1j,
    object(),
    Point(1),
    Pair(1, 2),
    Text("x"),
    Number(3),
    Real(1.5),
    Mapping(a=1),
    Items([1]),
    Row((1,)),
    collections.OrderedDict(a=1),
    collections.defaultdict(int),
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-MAX_SAFE_INTEGER - 2, max_value=-MAX_SAFE_INTEGER + 2)
    | st.integers(min_value=MAX_SAFE_INTEGER - 2, max_value=MAX_SAFE_INTEGER + 2)
    | st.floats()
    | st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf"), -0.05])
    | st.text()
    | st.sampled_from(["\ud800", "a\udfffb", "null", "-0.0", "é"])
    | st.sampled_from(FOREIGN)
)
keys = st.text(max_size=6) | st.sampled_from(
    ["\udc80", Text("k"), Mode.FAST, 1, Level.LOW, (1, 2), None, 2.5]
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(keys, children, max_size=4)
        | st.dictionaries(st.text(max_size=4), children, max_size=4)
        | st.builds(instance_dict)
        | st.builds(general_table_dict)
        | st.lists(children, max_size=3).map(Items)
        | st.dictionaries(st.text(max_size=3), children, max_size=3).map(Mapping)
    )


values = st.recursive(scalars, _containers, max_leaves=25)


@st.composite
def maybe_cyclic(draw: st.DrawFn) -> Any:
    """A value, sometimes with one of its lists or dicts made to contain itself."""
    value = draw(values)
    if not draw(st.booleans()):
        return value
    holders: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) in (list, dict):
            holders.append(item)
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    if not holders:
        return value
    target = draw(st.sampled_from(holders))
    if type(target) is list:
        target.append(target)
    else:
        target["self"] = target
    return value


def precise(value: object, newline: bool = False) -> tuple[Any, ...]:
    try:
        check_json(value, event_type="user/message", path="data")
    except LosslessJsonError as error:
        return ("refused", error.reason, error.json_path, error.event_type)
    option = orjson.OPT_STRICT_INTEGER | (orjson.OPT_APPEND_NEWLINE if newline else 0)
    return ("accepted", orjson.dumps(value, option=option))


def fast(value: object, newline: bool = False) -> tuple[Any, ...]:
    try:
        encoded = encode(value, event_type="user/message", path="data", newline=newline)
    except LosslessJsonError as error:
        return ("refused", error.reason, error.json_path, error.event_type)
    return ("accepted", encoded)


@each_screen
@given(maybe_cyclic(), st.booleans())
def test_fast_path_agrees_with_precise_path(screen: str, value: Any, newline: bool) -> None:
    with screened_by(screen):
        assert fast(value, newline) == precise(value, newline)


# What orjson writes without complaint although the lossless rules refuse it, among plain
# values only: each such value reaches the type screen (nothing else refuses it first).
SILENT = [
    Color.RED,
    Color.ONE,
    Ratio.HALF,
    Loose.A,
    uuid.UUID(int=1),
    orjson.Fragment(b"[1]"),
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
]
silent_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda number: number != 0.0)
    | st.text().filter(lambda text: not any(0xD800 <= ord(char) < 0xE000 for char in text))
    | st.sampled_from(SILENT),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=4).filter(str.isprintable), children, max_size=4)
    ),
    max_leaves=12,
)


@each_screen
@given(silent_values, st.booleans())
def test_fast_path_agrees_on_values_orjson_writes_silently(
    screen: str, value: Any, newline: bool
) -> None:
    with screened_by(screen):
        assert fast(value, newline) == precise(value, newline)
        assert framed(value, newline) == whole(value, newline)
        assert row(value) == whole(value, newline=True)


@each_screen
@given(values, st.booleans())
def test_fast_path_agrees_inside_an_event_envelope(screen: str, data: Any, newline: bool) -> None:
    envelope = {"type": "user/message", "seq": 3, "time": 1, "data": data}
    with screened_by(screen):
        assert fast(envelope, newline) == precise(envelope, newline)


def framed(data: Any, newline: bool = False) -> tuple[Any, ...]:
    envelope = {"type": "user/message", "seq": 3, "time": 1, "data": data, "surfaceOp": "append"}
    try:
        encoded = encode_framed(envelope, data, event_type="user/message", path="", newline=newline)
    except LosslessJsonError as error:
        return ("refused", error.reason, error.json_path, error.event_type)
    return ("accepted", encoded)


def row(data: Any) -> tuple[Any, ...]:
    envelope = {"type": "user/message", "seq": 3, "time": 1, "data": data, "surfaceOp": "append"}
    try:
        encoded = encode_row(envelope, data, event_type="user/message", path="")
    except LosslessJsonError as error:
        return ("refused", error.reason, error.json_path, error.event_type)
    return ("accepted", encoded)


def whole(data: Any, newline: bool = False) -> tuple[Any, ...]:
    envelope = {"type": "user/message", "seq": 3, "time": 1, "data": data, "surfaceOp": "append"}
    try:
        encoded = encode(envelope, event_type="user/message", path="", newline=newline)
    except LosslessJsonError as error:
        return ("refused", error.reason, error.json_path, error.event_type)
    return ("accepted", encoded)


@each_screen
@given(maybe_cyclic(), st.booleans())
def test_screening_only_the_data_of_an_exact_envelope_agrees(
    screen: str, data: Any, newline: bool
) -> None:
    # The envelope's own fields are exact by the envelope checks; screening its data alone
    # must refuse, name and write exactly what screening the whole envelope does.
    with screened_by(screen):
        assert framed(data, newline) == whole(data, newline)
        assert row(data) == whole(data, newline=True)


def _nested(levels: int, leaf: Any, root: str) -> Any:
    value = leaf
    for index in range(levels - 1):
        value = [value] if index % 2 else {"k": value}
    if root == "tuple":
        return (value,)
    return [value] if root == "list" else {"k": value}


@each_screen
@given(
    st.integers(min_value=MAX_DEPTH - 3, max_value=MAX_DEPTH + 3),
    st.sampled_from([1, "x", float("nan"), Level.LOW, uuid.UUID(int=2), -0.0, 2**60]),
    st.sampled_from(["list", "tuple", "dict"]),
)
def test_fast_path_agrees_at_the_depth_limit(
    screen: str, levels: int, leaf: Any, root: str
) -> None:
    value = _nested(levels, leaf, root)
    with screened_by(screen):
        assert fast(value) == precise(value)
        assert row(value) == whole(value, newline=True)


@each_screen
def test_screen_ends_on_a_value_made_cyclic_after_encoding(screen: str) -> None:
    # Another thread may change the caller's value between the encoder and the screen;
    # a cycle must end the screen (the slow path then names it), never loop forever.
    value: list[Any] = [{"a": [1, 2]}]
    value[0]["a"].append(value)
    assert SCREENS[screen](value) is False
    deep: dict[str, Any] = {"k": None}
    deep["k"] = {"k": deep}
    assert SCREENS[screen](deep) is False
    chain: Any = []
    for _ in range(100_000):  # far deeper than any encoder accepts: no stack overflow either
        chain = [chain]
    assert SCREENS[screen](chain) is False


@each_screen
def test_every_foreign_object_is_refused_alone_and_nested(screen: str) -> None:
    with screened_by(screen):
        for foreign in FOREIGN:
            for value in (foreign, [foreign], {"a": (1, {"b": foreign})}):
                outcome = fast(value)
                assert outcome[0] == "refused", foreign
                assert outcome == precise(value)
                assert row(value) == whole(value, newline=True)
                assert row(value)[0] == "refused", foreign


@given(values | silent_values)
def test_the_c_screen_judges_every_encoded_value_as_the_python_screen_does(value: Any) -> None:
    # A screen's question is only asked of a value the fast encoder accepted.
    if "c" not in SCREENS:
        pytest.skip("dsh_store._jsonscreen is not built here (no C compiler at install)")
    try:
        orjson.dumps(value, default=jsonvalue._refuse_default, option=jsonvalue._OPTIONS)
    except orjson.JSONEncodeError:
        return
    assert SCREENS["c"](value) is SCREENS["python"](value)


def test_the_c_screen_is_built_where_a_c_compiler_is() -> None:
    skip_without_c_compiler("the Python screen")
    assert "c" in SCREENS, "dsh_store._jsonscreen was not built; run scripts/setup-venv"
    assert jsonvalue._screen_accepts is SCREENS["c"]
    assert jsonvalue.fast_row is LINE_ENCODERS["c"]


@each_screen
@pytest.mark.parametrize("size", [0, 100, 1_500, 20_000, 300_000])
def test_a_row_holds_about_its_own_size(screen: str, size: int) -> None:
    # A row is kept for a session's life: what it holds follows its text, never the
    # encoder's growth buffer (orjson 3.13: about 4 KiB for a 100-byte line).
    import gc
    import tracemalloc

    data = {"text": "x" * size, "items": list(range(size // 50))}
    with screened_by(screen):
        row(data)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            rows = [row(data)[1] for _ in range(10)]
            held = (tracemalloc.get_traced_memory()[0] - before) / len(rows)
        finally:
            tracemalloc.stop()
    line = rows[0]
    assert line == whole(data, newline=True)[1] and line.endswith(b"}\n")
    assert held < len(line) + 200, (held, len(line))


def test_the_c_line_encoder_says_none_for_every_refusal() -> None:
    # framed_line never raises for a value the encoder or the screen refuses: None sends
    # the caller to the precise path, which names the problem.
    if "c" not in LINE_ENCODERS:
        pytest.skip("dsh_store._jsonscreen is not built here (no C compiler at install)")
    line = LINE_ENCODERS["c"]
    for foreign in [*FOREIGN, *SILENT, 2**60, "\ud800", {1: 2}]:
        assert line({"data": foreign}, foreign) is None, foreign
        assert line({"data": [foreign]}, [foreign]) is None, foreign
    assert line({"data": [1]}, [1]) == b'{"data":[1]}\n'
    # The screen covers only ``inner``: the caller vouches for the rest of the frame.
    assert line({"k": Level.LOW, "data": 1}, 1) == b'{"k":1,"data":1}\n'


# -- the model's prescreened payloads ---------------------------------------------------------
# Session.append skips the type screen for payloads whose every field the payload check has
# already typed (PLAIN_PAYLOAD_SIZES). For any payload the check accepts, the line must be
# the one the fully screened encoder writes, and a refusal must be the same refusal.

HOSTILE_COUNTS = [0, -1, True, 1.0, Level.LOW, Number(2), MAX_SAFE_INTEGER + 1]
HOSTILE_TEXTS = ["", "\ud800", "a\udfffb", Text("x"), Mode.FAST, 1, None]
REQUIRED: dict[str, dict[str, Any]] = {
    "turn/start": {"turn": 1},
    "step/start": {"turn": 1, "step": 2},
    "step/end": {"turn": 3, "step": 1},
    "tool/call": {"turn": 1, "step": 1, "callId": "c1", "name": "grep", "arguments": "{}"},
}


def _field(key: str) -> st.SearchStrategy[Any]:
    if key in ("turn", "step"):
        valid: st.SearchStrategy[Any] = st.integers(min_value=1, max_value=MAX_SAFE_INTEGER)
        return st.one_of(valid, valid, valid, st.sampled_from(HOSTILE_COUNTS))
    valid = st.text(max_size=5)
    return st.one_of(valid, valid, valid, st.sampled_from(HOSTILE_TEXTS))


@st.composite
def plain_candidates(draw: st.DrawFn) -> tuple[str, dict[Any, Any], bool]:
    event_type = draw(st.sampled_from(sorted(PLAIN_PAYLOAD_SIZES)))
    data: dict[Any, Any] = {
        key: draw(_field(key)) for key in REQUIRED[event_type] if draw(st.integers(0, 19))
    }
    if draw(st.booleans()):
        data.update(draw(st.dictionaries(keys, scalars, max_size=2)))
    return event_type, data, draw(st.booleans())


def _line(
    event_type: str, data: dict[Any, Any], ignorable: bool, prescreened: bool
) -> tuple[Any, ...]:
    with screened_by("python"):  # where prescreening still decides something
        return _line_as_encoded(event_type, data, ignorable, prescreened)


def _line_as_encoded(
    event_type: str, data: dict[Any, Any], ignorable: bool, prescreened: bool
) -> tuple[Any, ...]:
    try:
        encoded = encode_line(
            event_type, 7, 1, data, ignorable, None, None, prescreened=prescreened
        )
    except LosslessJsonError as error:
        return ("refused", error.reason, error.json_path, error.seq)
    return ("accepted", encoded)


def _prescreened(event_type: str, data: dict[Any, Any]) -> bool:
    """What Session.append decides for a payload the check accepted."""
    return len(data) == PLAIN_PAYLOAD_SIZES[event_type]


@given(plain_candidates())
def test_prescreened_payloads_encode_like_the_screened_encoder(
    candidate: tuple[str, dict[Any, Any], bool],
) -> None:
    event_type, data, ignorable = candidate
    try:
        check_payload(event_type, data, 7)
    except EventValidationError:
        return  # refused before any encoding, on either path
    prescreened = _prescreened(event_type, data)
    outcome = _line(event_type, data, ignorable, prescreened)
    assert outcome == _line(event_type, data, ignorable, False)
    for screen in SCREENS:
        with screened_by(screen):
            assert _line_as_encoded(event_type, data, ignorable, prescreened) == outcome


def test_an_extra_field_is_never_prescreened() -> None:
    # One more key than the required fields, holding anything at all: the line is the
    # screened encoder's line, so a foreign value is refused exactly as without the shortcut.
    for event_type, required in REQUIRED.items():
        for extra in [*FOREIGN, float("nan"), -0.0, "plain"]:
            data = {**required, "extra": extra}
            check_payload(event_type, data, 7)
            outcome = _line(event_type, data, False, _prescreened(event_type, data))
            assert outcome == _line(event_type, data, False, False)
            assert outcome[0] == ("accepted" if extra == "plain" else "refused"), extra


def test_a_lone_surrogate_in_a_prescreened_payload_is_refused_with_its_path() -> None:
    data = {**REQUIRED["tool/call"], "name": "grep\ud800"}
    check_payload("tool/call", data, 7)
    assert _prescreened("tool/call", data)
    outcome = _line("tool/call", data, False, True)
    assert outcome == ("refused", "string contains a lone surrogate", "data.name", 7)
