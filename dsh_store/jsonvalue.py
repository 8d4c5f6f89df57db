"""Lossless JSON: the check and the canonical encoder every logged value goes through.

A value is *lossless JSON* when it survives encode -> decode unchanged and means the same
thing to every JSON reader (the DSH TypeScript runtime included): dicts with ``str`` keys,
lists (tuples are written as arrays), ``str`` (valid Unicode, no lone surrogates),
``bool``, ``None``, ``int`` within ±(2^53 - 1), and finite ``float`` other than ``-0.0``.
Everything else is refused with a :class:`~dsh_store.errors.LosslessJsonError` naming the
JSON path of the bad value, e.g. ``data.message.content[2].text``.

Fast path: ``orjson`` encodes with options that send every subclass of ``str``, ``int``,
``dict`` and ``list``, every dataclass and every datetime to a ``default`` that refuses it
(as do subclasses of ``float`` and ``tuple`` and every type orjson does not know), and it
refuses non-str keys, lone surrogates, cycles, excess depth and unsafe integers
itself, all in C. What it still writes without complaint is an enum member (as its value),
a ``uuid.UUID`` (as text), an ``orjson.Fragment`` (verbatim), NaN and ±Infinity (as
``null``) and ``-0.0``. Those are found by a type screen of the accepted value: every
type must be an exact builtin and every float finite and not ``-0.0``. The screen is C
(``dsh_store._jsonscreen``, compiled at install time: one pass over the containers in
place, calling no Python code); an install without a C compiler uses the same screen in
Python, one ``gc.get_referents`` call per nesting level. Anything the fast path refuses
re-runs the iterative slow path (:func:`check_json`), which finds the exact path and reason.
"""

from __future__ import annotations

import gc
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeGuard, cast

import orjson

from .errors import DuplicateKeyError, LosslessJsonError

__all__ = [
    "LINE_ENDS",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "JsonValue",
    "check_json",
    "check_loaded",
    "decode",
    "duplicate_key",
    "encode",
    "encode_framed",
    "encode_row",
    "fast_row",
    "find_negative_zero",
    "format_path",
    "loaded_is_lossless",
]

JsonValue = Any
"""A lossless JSON value: dict[str, JsonValue], list, str, int, float, bool or None."""

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Largest integer every JSON reader (IEEE-754 doubles) represents exactly."""

MAX_DEPTH: Final = 254
"""Most container levels in one encoded document (orjson's encoder limit).

An event line spends one level on its envelope, so event ``data`` nests at most 253 deep.
"""

_OPTIONS: Final = (
    orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_OPTIONS_NEWLINE: Final = _OPTIONS | orjson.OPT_APPEND_NEWLINE
_SLOW_OPTIONS_NEWLINE: Final = orjson.OPT_STRICT_INTEGER | orjson.OPT_APPEND_NEWLINE
_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


def _refuse_default(value: object) -> object:
    raise TypeError(type(value).__name__)


_PLAIN_TYPES: Final = frozenset({dict, list, tuple, str, int, bool, type(None)})
_all_plain: Final = _PLAIN_TYPES.issuperset
_all_plain_or_float: Final = (_PLAIN_TYPES | {float}).issuperset
# Typed as a guard so the filter below yields floats (it is isinstance(x, float) in C).
_is_float: Final = cast(Callable[[object], TypeGuard[float]], float.__instancecheck__)
_children: Final = gc.get_referents
_isfinite: Final = math.isfinite
_copysign: Final = math.copysign
_LEVELS: Final = range(MAX_DEPTH + 1)


def _screen_accepts_in_python(value: object) -> bool:
    """Whether ``value``, which the fast encoder accepted, holds only exact builtin types
    and only finite floats other than ``-0.0`` (exactly what :func:`check_json` accepts).

    The same screen as ``dsh_store._jsonscreen.plain`` (C, compiled at install time), for
    an install without a C compiler.

    Relies on the encoder's acceptance: no cycles, no excess depth and only exact ``str``
    keys, so a dict's children are its values (``gc.get_referents`` skips the keys of a
    dict whose keys are all exact ``str``, and yields them as ``str`` otherwise).
    """
    # A container root is plain by the encoder's acceptance; start at its children.
    kind = type(value)
    level: tuple[object, ...] | list[object] = (
        _children(value) if kind is dict or kind is list else (value,)
    )
    # Bounded by the encoder's depth limit, so a value another thread turns cyclic
    # meanwhile ends in the slow path instead of an endless walk.
    for _ in _LEVELS:
        if not level:
            return True
        if not _all_plain(map(type, level)):
            if not _all_plain_or_float(map(type, level)):
                return False
            for number in filter(_is_float, level):
                if not _isfinite(number) or (number == 0.0 and _copysign(1.0, number) < 0.0):
                    return False
        level = _children(*level)
    return not level


_screen_accepts: Callable[[object], bool]
fast_row: Callable[[dict[str, Any], object], bytes | None] | None
"""The C row encoder, or None on an install without a C compiler: ``fast_row(frame,
inner)`` is the row :func:`encode_row` writes for it (orjson, the type screen of ``inner``
and the newline in one call), or None where that is not proven (then :func:`encode_row`
decides and names any refusal)."""
try:
    from ._jsonscreen import configure, framed_line, plain
except ImportError:  # installed without a C compiler
    _screen_accepts = _screen_accepts_in_python
    fast_row = None
else:
    _screen_accepts = plain
    configure(orjson.dumps, orjson.JSONEncodeError, _refuse_default, _OPTIONS)
    fast_row = framed_line


def encode(
    value: object, *, event_type: str | None = None, path: str = "$", newline: bool = False
) -> bytes:
    """Check ``value`` and return its canonical compact UTF-8 JSON encoding.

    :param value: the value to encode.
    :param event_type: named in the error when the value is refused.
    :param path: the JSON path of ``value`` itself, used as the prefix of error paths.
    :param newline: end the encoding with ``\\n`` (a JSONL row) without another copy.
    :raises LosslessJsonError: the value is not lossless JSON.
    """
    try:
        encoded = orjson.dumps(
            value,
            default=_refuse_default,
            option=_OPTIONS_NEWLINE if newline else _OPTIONS,
        )
    except orjson.JSONEncodeError:
        check_json(value, event_type=event_type, path=path)
        # Unreachable while both paths agree (the equivalence tests pin it); should they
        # ever differ, the value is written by the plain strict encoder.
        return _own_copy(
            orjson.dumps(
                value,
                option=_SLOW_OPTIONS_NEWLINE if newline else orjson.OPT_STRICT_INTEGER,
            )
        )
    if not _screen_accepts(value):
        check_json(value, event_type=event_type, path=path)
    return _own_copy(encoded)


def encode_framed(
    frame: dict[str, Any],
    inner: object,
    *,
    event_type: str | None = None,
    path: str = "$",
    newline: bool = False,
) -> bytes:
    """:func:`encode` of ``frame``, whose values other than ``inner`` the caller has proven
    exact ``str``, ``int`` or ``bool`` (or dicts and lists of those): only ``inner`` is
    type-screened after the encoder accepted the whole (an event envelope and its data).

    Refuses, names and writes exactly as :func:`encode` of ``frame`` does, and like it
    returns bytes of their own size.
    """
    try:
        encoded = orjson.dumps(
            frame,
            default=_refuse_default,
            option=_OPTIONS_NEWLINE if newline else _OPTIONS,
        )
    except orjson.JSONEncodeError:
        pass
    else:
        if _screen_accepts(inner):
            return _own_copy(encoded)
    return encode(frame, event_type=event_type, path=path, newline=newline)


def encode_row(
    frame: dict[str, Any],
    inner: object,
    *,
    event_type: str | None = None,
    path: str = "$",
    screened: bool = False,
) -> bytes:
    """:func:`encode_framed` of ``frame`` with ``newline=True``, as bytes that hold about
    their own size: a row kept for a session's life, not the encoder's growth buffer
    (orjson 3.13 returns about 4 KiB for a 100-byte line, 15 KiB for 1.5 KB).

    ``screened`` says the caller has proven every value of ``frame`` an exact ``str``,
    ``int`` or ``bool``, so the strict encoder alone decides where the type screen is
    Python's (the C screen of such a payload costs less than skipping it).

    Refuses, names and writes exactly as :func:`encode` of ``frame`` does.
    """
    fast = fast_row
    if fast is not None:
        line = fast(frame, inner)
        if line is not None:
            return line
    elif screened:
        try:
            return _own_copy(_dumps(frame, option=_SLOW_OPTIONS_NEWLINE))
        except orjson.JSONEncodeError:
            pass  # a lone surrogate in a str: the lossless encoder below names it
    else:
        return encode_framed(frame, inner, event_type=event_type, path=path, newline=True)
    return encode(frame, event_type=event_type, path=path, newline=True)


def _own_copy(encoded: bytes) -> bytes:
    # A copy of the encoder's bytes at their own size (the growth buffer is freed).
    return memoryview(encoded).tobytes()


_dumps: Final = orjson.dumps


def decode(data: bytes | str) -> JsonValue:
    """Decode one JSON document (no lossless check; see :func:`check_loaded`)."""
    return orjson.loads(data)


_SIGNED_LONG_DIGIT_RUN: Final = re.compile(rb"-?[0-9]{19,}")
# The regular expression engine finds this literal at memchr speed, where ``in`` on bytes
# runs a general substring search: twice as fast on a line that holds any "-".
find_negative_zero: Final = re.compile(rb"-0\.0").search
"""Where ``-0.0`` first occurs in encoded bytes (a match), or None."""
LINE_ENDS: Final = (b"", b"\n", b"\r\n")
"""What may follow a row's JSON text on its line: nothing, LF or CRLF."""


def _loaded_is_canonical(value: JsonValue, raw: bytes) -> bool:
    """Whether ``raw`` is the strict canonical encoding of ``value`` (line end aside) and
    holds no ``-0.0``: what :func:`check_loaded` accepts on sight, proven by encoding once.

    The same question as ``dsh_store._loadscreen.lossless`` (C, compiled at install time,
    which answers it without encoding), for an install without a C compiler.
    """
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return False
    return (
        raw.startswith(encoded)
        and raw[len(encoded) :] in LINE_ENDS
        and find_negative_zero(encoded) is None
    )


loaded_is_lossless: Callable[[JsonValue, bytes], bool]
"""Whether ``value``, decoded from the line ``raw``, is lossless JSON as read (what
:func:`check_loaded` accepts); False means: run :func:`check_loaded`, which names the
problem or accepts. In C when compiled: one walk of the decoded containers and one
pass over the line that counts its strings (a repeated key drops some) instead of encoding
the value again."""
_loaded_screen: Callable[[JsonValue, bytes], bool] | None
try:
    from ._loadscreen import lossless as _c_loaded_screen
except ImportError:  # installed without a C compiler
    _loaded_screen = None
    loaded_is_lossless = _loaded_is_canonical
else:
    _loaded_screen = loaded_is_lossless = _c_loaded_screen


def check_loaded(
    value: JsonValue,
    *,
    event_type: str | None = None,
    path: str = "$",
    raw: bytes | None = None,
) -> None:
    """Check a value decoded from bytes read from disk.

    Decoding already excludes NaN, Infinity, lone surrogates and non-str keys; what it lets
    through is ``-0.0``, integers beyond ±(2^53 - 1) and nesting deeper than
    :data:`MAX_DEPTH`. Re-encoding the value in C finds all three at once (the strict
    encoder refuses unsafe integers and excess depth, and writes ``-0.0`` literally), so
    the Python walk runs only for a refusal or a ``-0.0`` somewhere in the output, where it
    names the exact path (text that merely contains ``-0.0`` passes it).

    ``raw`` is the line the value was decoded from (its ``\n`` or ``\r\n`` included or
    not): when it is not the canonical encoding, it is also searched for integer literals
    that decoding turned into a different float. With ``raw`` and the C screen compiled, a
    line :data:`loaded_is_lossless` accepts is accepted without encoding it again.
    """
    if raw is not None and _loaded_screen is not None and _loaded_screen(value, raw):
        return  # proven lossless as read, with no second encoding
    if raw is not None and len(raw) >= LARGE_LINE_BYTES and _is_canonical_in_pieces(value, raw):
        return  # a long canonical line: checked without a second copy of it
    try:
        reencoded = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        check_json(value, event_type=event_type, path=path)
        return
    if find_negative_zero(reencoded) is not None:
        check_json(value, event_type=event_type, path=path)
    # startswith compares in place: no copy of the line to strip its line end. A canonical
    # line can hold neither a lossy literal nor a repeated key: only other lines are searched.
    if raw is not None and not (raw.startswith(reencoded) and raw[len(reencoded) :] in LINE_ENDS):
        key = duplicate_key(raw)
        if key is not None:
            raise DuplicateKeyError(key, event_type=event_type)
        _check_huge_int_literals(value, raw, event_type=event_type, path=path)


LARGE_LINE_BYTES: Final = 1 << 20
"""From this length on, :func:`check_loaded` compares a line with its value's canonical
encoding piece by piece instead of encoding the value whole."""

_PIECE_CHARS: Final = 1 << 16
_PIECE_NODES: Final = 50_000  # a line of this many values is no long-string line: encode it whole


class _NotCanonical(Exception):
    pass


def _is_canonical_in_pieces(value: JsonValue, raw: bytes) -> bool:
    """Whether ``raw`` is exactly the canonical encoding of ``value`` (line end aside) and
    the value passes the lossless rules, found without encoding it whole.

    What :func:`check_loaded`'s single re-encoding proves, for a line that may be hundreds
    of megabytes: containers and keys are written as the encoder writes them, a long string
    in slices of :data:`_PIECE_CHARS` characters (escaping is per character, so the slices
    join to the whole), every other value through the strict encoder; each piece is
    compared in place. False (the caller then takes the whole path, which names any
    defect) on the first difference, an unsafe integer, ``-0.0``, excess depth, or a value
    of more than :data:`_PIECE_NODES` nodes, where a walk in Python would cost more than
    the copy it saves.
    """
    position = 0
    nodes = 0
    dumps = orjson.dumps
    strict = orjson.OPT_STRICT_INTEGER

    def emit(piece: bytes) -> None:
        nonlocal position
        if not raw.startswith(piece, position):
            raise _NotCanonical
        position += len(piece)

    def walk(item: JsonValue, depth: int) -> None:
        nonlocal nodes
        nodes += 1
        if nodes > _PIECE_NODES or depth > MAX_DEPTH:
            raise _NotCanonical
        kind = type(item)
        if kind is dict:
            emit(b"{")
            for index, (key, member) in enumerate(cast("dict[str, JsonValue]", item).items()):
                if index:
                    emit(b",")
                walk(key, depth + 1)
                emit(b":")
                walk(member, depth + 1)
            emit(b"}")
        elif kind is list:
            emit(b"[")
            for index, member in enumerate(cast("list[JsonValue]", item)):
                if index:
                    emit(b",")
                walk(member, depth + 1)
            emit(b"]")
        elif kind is str and len(cast(str, item)) > _PIECE_CHARS:
            text = cast(str, item)
            emit(b'"')
            for start in range(0, len(text), _PIECE_CHARS):
                emit(dumps(text[start : start + _PIECE_CHARS])[1:-1])
            emit(b'"')
        elif kind is float and item == 0.0 and math.copysign(1.0, cast(float, item)) < 0:
            raise _NotCanonical  # -0.0: the whole path names it
        else:
            try:
                emit(dumps(item, option=strict))
            except orjson.JSONEncodeError:
                raise _NotCanonical from None

    try:
        walk(value, 0)
    except _NotCanonical:
        return False
    return len(raw) - position <= 2 and raw[position:] in LINE_ENDS


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return result


def duplicate_key(raw: bytes | str) -> str | None:
    """The first key found twice in one object of the JSON document ``raw``, or None.

    A decoder keeps one of the two values (orjson and JavaScript the last, others the
    first), so such a line means different things to different readers. This is the slow
    check (the standard library's decoder with a hook on every object); callers run it
    only on lines that are not the canonical encoding of their decoded value, since the
    canonical encoding of a dict never repeats a key. A document this decoder cannot read
    (too deep for it) is reported as None; the caller's decoder has already judged it.
    """
    try:
        json.loads(raw, object_pairs_hook=_refuse_repeats)
    except _RepeatedKey as repeated:
        return repeated.key
    except (ValueError, RecursionError):
        return None
    return None


def _check_huge_int_literals(
    value: JsonValue, raw: bytes, *, event_type: str | None, path: str
) -> None:
    """Refuse an integer literal beyond 64 bits that decoding silently made a different float.

    Only reached when the line is not the canonical encoding of its value (a line written
    by this library or any canonical writer is, and skips this). Decoding turns such a
    literal (19 digits or more) into a float; when that float is not exactly the literal's
    value, the line says one number and the decoded event another. A literal the float
    holds exactly (``100000000000000000000``, how JavaScript writes ``1e20``) is kept.
    """
    lossy: set[float] = set()
    for match in _SIGNED_LONG_DIGIT_RUN.finditer(raw):
        number = int(match.group())
        if not -(2**63) <= number < 2**64:  # decoded as a float, not an int
            rounded = float(number)
            if int(rounded) != number:
                lossy.add(rounded)
    if not lossy:
        return
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, parts = stack.pop()
        if type(item) is dict:
            stack.extend((child, (*parts, key)) for key, child in item.items())
        elif type(item) is list:
            stack.extend((child, (*parts, index)) for index, child in enumerate(item))
        elif type(item) is float and item in lossy:
            raise LosslessJsonError(
                f"an integer literal beyond 64 bits was read back as the float {item!r}, "
                "which is not its value; it is outside ±(2^53 - 1) and would lose precision",
                json_path=format_path(list(parts), path),
                event_type=event_type,
            )


def format_path(parts: Iterator[str | int] | list[str | int], root: str = "$") -> str:
    """Render path parts as ``root.key[3].other`` (non-identifier keys quoted).

    With an empty ``root`` the path starts at the first key: ``data.message``.
    """
    text = root
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{orjson.dumps(part).decode()}]"
    return text


def _describe(value: object) -> str:
    kind = type(value)
    if kind.__module__ in ("builtins", "__builtin__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _scalar_problem(value: object) -> str | None:
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError:
            return "string contains a lone surrogate"
        return None
    if kind is bool or value is None:
        return None
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
            return None
        return f"integer {value} is outside ±(2^53 - 1) and would lose precision"
    if kind is float:
        assert isinstance(value, float)
        if math.isnan(value):
            return "NaN is not JSON"
        if math.isinf(value):
            return f"{value} is not JSON"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "-0.0 does not survive a JSON round trip (it reads back as 0)"
        return None
    if isinstance(value, bool | int | float | str):
        return f"{_describe(value)} is a subclass of {_builtin_base(kind)}; pass a plain value"
    return f"{_describe(value)} is not a JSON value"


def _builtin_base(kind: type) -> str:
    for base in kind.__mro__:
        if base in (bool, int, float, str, dict, list, tuple):
            return base.__name__
    return "object"


def check_json(value: object, *, event_type: str | None = None, path: str = "$") -> None:
    """Walk ``value`` iteratively and raise on the first non-lossless part.

    No recursion: arbitrarily deep input is refused at :data:`MAX_DEPTH` with its path,
    never with ``RecursionError``. Cycles are named as cycles.

    :raises LosslessJsonError: with ``json_path`` and ``event_type`` set.
    """
    # Stack entries: (value, path parts, depth); the exit marker pops an active container.
    active: set[int] = set()
    stack: list[tuple[object, tuple[str | int, ...], int, bool]] = [(value, (), 0, False)]
    while stack:
        item, parts, depth, leaving = stack.pop()
        if leaving:
            active.discard(id(item))
            continue
        kind = type(item)
        if kind is dict or kind is list or kind is tuple:
            if id(item) in active:
                raise LosslessJsonError(
                    "the value contains itself (a reference cycle)",
                    json_path=format_path(list(parts), path),
                    event_type=event_type,
                )
            if depth >= MAX_DEPTH:  # depth counts containers above this one
                raise LosslessJsonError(
                    f"nesting deeper than {MAX_DEPTH} levels",
                    json_path=format_path(list(parts), path),
                    event_type=event_type,
                )
            active.add(id(item))
            stack.append((item, parts, depth, True))
            if kind is dict:
                assert isinstance(item, dict)
                for key, child in reversed(item.items()):
                    if type(key) is not str:
                        raise LosslessJsonError(
                            f"dict key {key!r} has type {_describe(key)}, not str",
                            json_path=format_path(list(parts), path),
                            event_type=event_type,
                        )
                    key_problem = _scalar_problem(key)
                    if key_problem is not None:
                        raise LosslessJsonError(
                            f"dict key {key!r}: {key_problem}",
                            json_path=format_path(list(parts), path),
                            event_type=event_type,
                        )
                    stack.append((child, (*parts, key), depth + 1, False))
            else:
                assert isinstance(item, list | tuple)
                for index in range(len(item) - 1, -1, -1):
                    stack.append((item[index], (*parts, index), depth + 1, False))
            continue
        if kind is dict or isinstance(item, dict | list | tuple):
            problem: str | None = (
                f"{_describe(item)} is a subclass of {_builtin_base(kind)}; pass a plain dict/list"
            )
        else:
            problem = _scalar_problem(item)
        if problem is not None:
            raise LosslessJsonError(
                problem, json_path=format_path(list(parts), path), event_type=event_type
            )
