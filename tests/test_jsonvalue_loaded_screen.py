"""The on-sight check of a decoded line accepts only what ``check_loaded`` accepts.

``jsonvalue.loaded_is_lossless`` (C when compiled: ``dsh_store._loadscreen.lossless``, else
a strict re-encoding that must equal the line) lets ``check_loaded`` and restore's row fast
path skip the precise check. Its True must never let through a line the precise check
refuses, and ``check_loaded`` must judge every line as it does without the screen: the same
acceptance, or the same error class, message and JSON path.

The lines are hostile on purpose: every spelling a decoder accepts that the canonical
encoder does not write (spaces, escapes, exponents, ``-0``), repeated keys at every level
(also spelled with escapes), ``-0.0`` as a value and as text, integers around 2^53 and
literals beyond 64 bits, quotes, backslashes and colons inside strings, and nesting at the
encoder's depth limit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store import jsonvalue
from dsh_store.errors import DshStoreError
from dsh_store.jsonvalue import MAX_DEPTH, MAX_SAFE_INTEGER, check_loaded
from tests.c_build import skip_without_c_compiler

SCREENS: dict[str, Callable[[Any, bytes], bool]] = {"python": jsonvalue._loaded_is_canonical}
try:
    from dsh_store._loadscreen import lossless as _c_screen
except ImportError:  # an install without a C compiler: the re-encoding alone
    pass
else:
    SCREENS["c"] = _c_screen
each_screen = pytest.mark.parametrize("screen", sorted(SCREENS))


@contextlib.contextmanager
def precise_only() -> Iterator[None]:
    """``check_loaded`` without the on-sight screen (the module global it reads per call)."""
    saved = jsonvalue._loaded_screen
    jsonvalue._loaded_screen = None
    try:
        yield
    finally:
        jsonvalue._loaded_screen = saved


def judged(raw: bytes) -> tuple[Any, ...]:
    try:
        check_loaded(orjson.loads(raw), event_type="t", raw=raw)
    except DshStoreError as error:
        return ("refused", type(error), str(error), getattr(error, "json_path", None))
    return ("accepted",)


def precise(raw: bytes) -> tuple[Any, ...]:
    with precise_only():
        return judged(raw)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(-MAX_SAFE_INTEGER - 2, -MAX_SAFE_INTEGER + 2)
    | st.integers(MAX_SAFE_INTEGER - 2, MAX_SAFE_INTEGER + 2)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, -0.5, 2.0**63, -(2.0**63), 2.0**64, 1e300, 9.2e18])
    | st.text()
    | st.sampled_from(['"', "\\", '\\"', ":", '":', '\\":', "-0.0", "a\nb", "é", "\u2028"])
)
keys = st.text(max_size=4) | st.sampled_from(['"', "\\", ":", '":"', "a", "b", "é"])
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=24,
)


def spaced(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, indent=1).encode()


def with_repeated_key(text: bytes, draw: st.DrawFn) -> bytes:
    """``text`` with one object's first key written once more in front of it."""
    starts = [index for index, byte in enumerate(text) if byte == ord("{")]
    if not starts:
        return text
    start = draw(st.sampled_from(starts))
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:].decode())
    except json.JSONDecodeError:  # the brace is inside a string
        return text
    if not isinstance(value, dict) or not value:
        return text
    key = next(iter(value))
    spelling = draw(st.sampled_from(["plain", "escaped"]))
    name = (
        json.dumps(key, ensure_ascii=False)
        if spelling == "plain"
        else '"' + "".join(f"\\u{ord(c):04x}" for c in key) + '"'
    )
    return text[: start + 1] + name.encode() + b":0," + text[start + 1 :]


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    value = draw(values)
    how = draw(st.sampled_from(["canonical", "canonical", "spaced", "ascii", "repeat"]))
    try:
        canonical = orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: only the stdlib writes it
        canonical = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    if how == "spaced":
        text = spaced(value, ascii_only=False)
    elif how == "ascii":
        text = spaced(value, ascii_only=True)
    elif how == "repeat":
        text = with_repeated_key(canonical, draw)
    else:
        text = canonical
    text = draw(st.sampled_from([text, text.replace(b"0.0", b"0.0e0"), text.replace(b".", b"E0.")]))
    return text + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


def decodes(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


@settings(max_examples=3000, deadline=None)
@given(lines())
def test_check_loaded_judges_every_line_as_without_the_screen(raw: bytes) -> None:
    if not decodes(raw):
        return
    assert judged(raw) == precise(raw)


@settings(max_examples=3000, deadline=None)
@given(lines())
def test_a_screen_accepts_only_what_the_precise_check_accepts(raw: bytes) -> None:
    if not decodes(raw):
        return
    for name, screen in SCREENS.items():
        if screen(orjson.loads(raw), raw):
            assert precise(raw) == ("accepted",), name


HOSTILE_LINES = [
    b'{"a":-0.0}',
    b'{"a":-0}',
    b'{"a":-0.000}',
    b'{"a":-0e3}',
    b'{"a":"-0.0"}',
    b'{"a":1,"a":1}',
    b'{"a":1,"\\u0061":1}',
    b'{"a":{"b":1,"b":2}}',
    b'{"a":[{"k":1},{"k":1,"k":2}]}',
    b'{"a":"x\\":","a":1}',
    b'{"a\\\\":1,"a\\\\":1}',
    b'{"a":"\\\\","b":":"}',
    b'{"n":9007199254740991}',
    b'{"n":9007199254740992}',
    b'{"n":-9007199254740992}',
    b'{"n":18446744073709551615}',
    b'{"n":18446744073709551616}',
    b'{"n":-9223372036854775809}',
    b'{"n":100000000000000000000}',
    b'{"n":123456789012345678901234567}',
    b'{"n":9.2e18}',
    b'{"n":9223372036854775807.0}',
    b'{ "a" : 1 }',
    b'{"a":1.50}',
    b'{"a":"\\u00e9"}',
    b'{"a":"\\/"}',
]


@pytest.mark.parametrize("raw", HOSTILE_LINES)
def test_hostile_lines_are_judged_alike(raw: bytes) -> None:
    for end in (b"", b"\n", b"\r\n"):
        assert judged(raw + end) == precise(raw + end)
        for name, screen in SCREENS.items():
            if screen(orjson.loads(raw), raw + end):
                assert precise(raw + end) == ("accepted",), (name, raw)


@each_screen
def test_the_screen_refuses_repeated_keys_at_any_depth(screen: str) -> None:
    for raw in (b'{"a":1,"a":1}', b'{"x":[{"k":1,"k":1}]}', b'{"a":1,"\\u0061":1}'):
        assert SCREENS[screen](orjson.loads(raw), raw) is False, raw


@each_screen
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_the_screen_stops_at_the_encoder_depth_limit(screen: str, kind: str) -> None:
    def nested(depth: int) -> bytes:
        if kind == "list":
            return b"[" * depth + b"]" * depth
        return b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)

    deepest, too_deep = nested(MAX_DEPTH), nested(MAX_DEPTH + 1)
    assert SCREENS[screen](orjson.loads(deepest), deepest) is True
    assert SCREENS[screen](orjson.loads(too_deep), too_deep) is False
    assert precise(too_deep)[0] == "refused"
    assert judged(too_deep) == precise(too_deep)


@each_screen
def test_canonical_lossless_lines_are_accepted_on_sight(screen: str) -> None:
    # Not a vacuous screen: what the library writes passes it without the precise check.
    value: Any
    for value in (
        {"type": "t", "seq": 0, "time": 1, "data": {"text": 'a "quoted": \\ line\n', "n": 1.5}},
        {"k": [None, True, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, -0.5, "é", {}, []]},
        [],
        "text",
        0,
    ):
        raw = orjson.dumps(value)
        assert SCREENS[screen](orjson.loads(raw), raw + b"\n") is True, value


def test_the_c_screen_accepts_a_decoded_line_in_other_spellings() -> None:
    # What the re-encoding cannot prove without the precise check: spaces and escapes.
    if "c" not in SCREENS:
        pytest.skip("dsh_store._loadscreen is not built here (no C compiler at install)")
    for raw in (b'{ "a" : [1, 2] }', b'{"a":"\\u00e9\\/"}', b'{"a":1.50}'):
        assert SCREENS["c"](orjson.loads(raw), raw) is True, raw
        assert SCREENS["python"](orjson.loads(raw), raw) is False, raw


def test_the_c_screen_takes_only_bytes() -> None:
    if "c" not in SCREENS:
        pytest.skip("dsh_store._loadscreen is not built here (no C compiler at install)")
    assert SCREENS["c"]({}, bytearray(b"{}")) is False  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SCREENS["c"]({})  # type: ignore[call-arg]


def test_the_c_screen_is_built_where_a_c_compiler_is() -> None:
    skip_without_c_compiler("the re-encoding")
    assert "c" in SCREENS, "dsh_store._loadscreen was not built; run scripts/setup-venv"
    assert jsonvalue._loaded_screen is SCREENS["c"]
    assert jsonvalue.loaded_is_lossless is SCREENS["c"]


@each_screen
def test_quotes_are_counted_across_every_block_boundary(screen: str) -> None:
    # The C screen counts quotes 32 bytes a step, each 16-byte block against the one a byte
    # earlier (for an escaping backslash), and adds its counters up every 127 steps.
    check = SCREENS[screen]
    for pad in range(48):
        for body in ('\\"', "\\\\", '\\\\\\"', "x", "é"):
            text = "p" * pad + body
            raw = orjson.dumps({"k": text, "l": [text, {"m": text}]})
            assert check(orjson.loads(raw), raw) is True, (pad, body)
            repeated = raw[:-1] + b',"k":"' + body.encode() + b'"}'
            assert check(orjson.loads(repeated), repeated) is False, (pad, body)
            assert precise(repeated)[0] == "refused"
    for count in (254 * 4, 255 * 4, 256 * 4, 3000):  # more quotes than a byte counter holds
        raw = orjson.dumps({"k": ["a"] * count})
        assert check(orjson.loads(raw), raw) is True, count
        repeated = raw[:-1] + b',"k":[]}'
        assert check(orjson.loads(repeated), repeated) is False, count
