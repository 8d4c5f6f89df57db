"""Physical rows of a session log: the header line, event rows and V0/V1 packed chunk rows.

This module judges single lines and decoded JSON objects; it never reads files and never
builds model objects. :mod:`dsh_store.jsonl.scan` applies it line by line.

Header rule (*version first*): the header's ``version`` is read before anything else about
the header is judged, so a log from a newer writer is always reported as unsupported, never
as damaged. Decisions for values the upstream format leaves open:

- no ``version`` key, or a ``version`` that is not a JSON number (string, bool, null, ...):
  :class:`~dsh_store.errors.NotASessionError` -- the line does not claim to be a versioned
  session header at all;
- a number above :data:`CURRENT_VERSION` (integral floats such as ``5.0`` included):
  :class:`~dsh_store.errors.UnsupportedVersionError` ("upgrade dsh-store");
- any other number that is not one of the integers 0-4 (negative, fractional, or an
  integral float such as ``4.0``, which no DSH writer produces):
  :class:`~dsh_store.errors.UnsupportedVersionError` ("no upgrade path");
- a first line without its final ``\\n`` (torn): NotASessionError, after the version check.
  DSH publishes header and first batch atomically, so a torn header never comes from a
  crash of a DSH writer; the file is refused and never "repaired" to a new header.

Header *shape* problems (missing or mistyped fields, unknown or retired fields) do not raise
here: they become :class:`Finding` objects in :attr:`HeaderInfo.findings`, because some real
V0 logs lack ``delegationDepth`` and whether that is acceptable is a model/migration decision.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from typing import Any, Final

import orjson

from ..errors import CorruptLogError, NotASessionError, UnsupportedVersionError
from ..jsonvalue import MAX_DEPTH, MAX_SAFE_INTEGER, duplicate_key
from ..records import Finding, HeaderInfo

__all__ = [
    "BOM",
    "CURRENT_VERSION",
    "LONG_LINE_BYTES",
    "PACKED_ROW_TYPES",
    "Finding",
    "HeaderInfo",
    "decode_long_line",
    "framing_findings",
    "is_packed_row",
    "lone_surrogate",
    "packed_row_count",
    "packed_row_problem",
    "read_header_line",
    "replace_lone_surrogates",
    "row_problem",
    "unparsable_reason",
]

CURRENT_VERSION: Final = 4
"""The newest session format version this library reads and writes."""

BOM: Final = b"\xef\xbb\xbf"
"""UTF-8 byte order mark; DSH never writes one, a reader reports and skips it."""

PACKED_ROW_TYPES: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
"""Row tags of V0/V1 packed ``assistant/chunk`` runs (no slash, so never an event type)."""

LAST_PACKED_VERSION: Final = 1
"""Packed chunk rows are valid only in logs of this version or older."""

_PACKED_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_DATA_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})

_OLD_HEADER_REQUIRED: Final = ("type", "version", "id", "createdAt", "delegationDepth")
_OLD_HEADER_OPTIONAL: Final = frozenset(
    {"cwd", "parentSession", "seedLength", "origin", "agentPreset"}
)
_NEW_HEADER_REQUIRED: Final = ("type", "version", "id", "createdAt", "isSeeded", "delegationDepth")
_NEW_HEADER_OPTIONAL: Final = frozenset({"cwd", "parentSession", "origin", "agentPreset"})
_RETIRED_HEADER_FIELDS: Final = ("sandboxMode", "approvalPolicy")

DECODE_DEPTH_LIMIT: Final = 1024
"""Most container levels the line decoder (orjson) reads; deeper lines cannot be decoded."""

_NUMBER: Final = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]+|-?[0-9]{309,}")


_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_constant(literal: str) -> Any:
    """Refuse NaN and Infinity, which Python's decoder accepts and JSON does not."""
    raise ValueError(literal)


def lone_surrogate(raw: bytes) -> tuple[str, str] | None:
    """For a line the decoder refused: ``(JSON path, code unit)`` of the first lone
    UTF-16 surrogate escape (``"\\ud800"``) in a line that is otherwise valid JSON, else
    None.

    JSON's grammar admits such an escape and JavaScript's ``JSON.stringify`` writes one
    for a string holding half of a surrogate pair; it encodes no Unicode scalar value, so
    the decoder (and UTF-8) cannot hold it. The path is ``$`` then ``.key`` / ``[i]``
    steps (keys that are not plain words as JSON strings); a key that is itself the lone
    surrogate is the last step.
    """
    if _SURROGATE_ESCAPE.search(raw) is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None
    return _first_lone_surrogate(value, "$")


LONG_LINE_BYTES: Final = 1 << 20
"""Lines from this length on are decoded by :func:`decode_long_line`."""

_LONG_STRING_BYTES: Final = 1 << 16
_QUOTE_BUDGET: Final = 20_000  # more strings than this: no long-string line, decode it whole
_JSON_SPACE: Final = b" \t\n\r"
_RAW_CONTROL: Final = re.compile(rb"[\x00-\x1f]")


def decode_long_line(raw: bytes) -> Any:
    """``orjson.loads(raw)`` for a long line, holding its long strings once.

    The decoder copies its whole input before it builds the value, so a line made of one
    300 MB string would cost the line, that copy and the string. Here each long string
    value (at least 64 KiB between its quotes, no backslash escape) is decoded straight
    from the line's bytes (strict UTF-8; a raw control character, which JSON forbids,
    sends the line to the decoder), and the decoder reads the line with a unique marker
    in its place, which is then swapped for the text. The value is exactly the decoder's:
    the same strings, the same errors (any line this does not fully vouch for is handed
    to the decoder whole).
    """
    spans = _long_plain_strings(raw)
    if not spans:
        return orjson.loads(raw)
    marker = "\x00" + os.urandom(8).hex() + ":"
    texts: list[str] = []
    pieces: list[bytes] = []
    view = memoryview(raw)
    start = 0
    for start_of_text, end_of_text in spans:
        if _RAW_CONTROL.search(raw, start_of_text, end_of_text) is not None:
            return orjson.loads(raw)
        try:
            texts.append(codecs.utf_8_decode(view[start_of_text:end_of_text], "strict", True)[0])
        except UnicodeDecodeError:
            return orjson.loads(raw)
        pieces.append(raw[start:start_of_text])
        pieces.append(f"\\u0000{marker[1:]}{len(texts) - 1}".encode())
        start = end_of_text
    pieces.append(raw[start:])
    value = orjson.loads(b"".join(pieces))
    placed: list[int] = []
    try:
        value = _put_back(value, marker, texts, placed)
    except RecursionError:
        return orjson.loads(raw)
    if sorted(placed) != list(range(len(texts))):
        return orjson.loads(raw)  # a marker lost or doubled: trust only the decoder
    return value


def _long_plain_strings(raw: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of the text of each long string *value* in ``raw`` that holds no
    backslash, found by walking its quotes; empty when there is none, or when the walk
    cannot be sure of them cheaply (too many strings, or a quote right after a backslash,
    which may or may not end its string)."""
    spans: list[tuple[int, int]] = []
    find = raw.find
    size = len(raw)
    position = find(b'"')
    quotes = 0
    while position >= 0:
        quotes += 1
        if quotes > _QUOTE_BUDGET:
            return []
        opened = position + 1
        close = find(b'"', opened)
        if close < 0 or raw[close - 1] == 0x5C:
            return []  # unbalanced, or an escaped quote: the decoder reads it whole
        if close - opened >= _LONG_STRING_BYTES and find(b"\\", opened, close) < 0:
            after = close + 1
            while after < size and raw[after] in _JSON_SPACE:
                after += 1
            if after >= size or raw[after] != 0x3A:  # not followed by ":": a value
                spans.append((opened, close))
        position = find(b'"', close + 1)
    return spans


def _put_back(value: Any, marker: str, texts: list[str], placed: list[int]) -> Any:
    """``value`` with each marker string swapped for its text; ``placed`` gets the index
    of every marker met."""
    if type(value) is str:
        if value.startswith(marker) and value[len(marker) :].isdigit():
            index = int(value[len(marker) :])
            if index < len(texts):
                placed.append(index)
                return texts[index]
        return value
    if type(value) is list:
        return [_put_back(item, marker, texts, placed) for item in value]
    if type(value) is dict:
        return {key: _put_back(item, marker, texts, placed) for key, item in value.items()}
    return value


def replace_lone_surrogates(raw: bytes) -> tuple[Any, list[tuple[str, str]]] | None:
    """For a line the decoder refused: its value with every lone UTF-16 surrogate (in a
    string or a key) replaced by U+FFFD, and the ``(JSON path, code unit)`` of each, in
    document order; None when the line holds none or is not otherwise valid JSON.

    The value is checked to be one the line decoder could have produced (no integer
    beyond 64 bits), so the replacement is the line's only change.
    """
    if _SURROGATE_ESCAPE.search(raw) is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None
    found: list[tuple[str, str]] = []
    try:
        value = _replaced(value, "$", found)
    except _KeysMerged:
        return None  # two keys that differ only in their lone surrogates: not one change
    if not found:
        return None
    try:
        orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return value, found


def _replaced(value: Any, path: str, found: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _replaced_text(value, path, found)
    if isinstance(value, list):
        return [_replaced(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            step = path + _step(key)
            out[_replaced_text(key, step, found)] = _replaced(item, step, found)
        if len(out) != len(value):
            raise _KeysMerged
        return out
    return value


class _KeysMerged(Exception):
    pass


def _replaced_text(text: str, path: str, found: list[tuple[str, str]]) -> str:
    if _lone_unit(text) is None:
        return text
    chars = list(text)
    for index, char in enumerate(chars):
        if 0xD800 <= ord(char) <= 0xDFFF:
            found.append((path, f"U+{ord(char):04X}"))
            chars[index] = "\ufffd"
    return "".join(chars)


def _lone_unit(text: str) -> str | None:
    for char in text:
        if 0xD800 <= ord(char) <= 0xDFFF:
            return f"U+{ord(char):04X}"
    return None


def _step(key: str) -> str:
    if key.isidentifier() and key.isascii():
        return "." + key
    return "[" + json.dumps(key) + "]"


def _first_lone_surrogate(value: Any, path: str) -> tuple[str, str] | None:
    if isinstance(value, str):
        unit = _lone_unit(value)
        return None if unit is None else (path, unit)
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_lone_surrogate(item, f"{path}[{index}]")
            if found is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            unit = _lone_unit(key)
            if unit is not None:
                return path + _step(key), unit
            found = _first_lone_surrogate(item, path + _step(key))
            if found is not None:
                return found
    return None


def unparsable_reason(raw: bytes) -> str:
    """Why the decoder refused ``raw``: a precise phrase for JSON it cannot hold.

    Two refusals concern text that is valid JSON: nesting deeper than the decoder's
    :data:`DECODE_DEPTH_LIMIT`, and a number literal beyond the range of a double
    (``1e400``, which would overflow to infinity). Anything else is not valid JSON.
    """
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        text = str(error)
    else:  # pragma: no cover - only called for a line the decoder refused
        return "line is not valid JSON"
    if text.startswith("depth limit exceeded"):
        return (
            f"line nests deeper than {DECODE_DEPTH_LIMIT} levels, more than a reader decodes "
            f"(the writer allows {MAX_DEPTH})"
        )
    if text.startswith("number is infinity"):
        for match in _NUMBER.finditer(raw):
            if float(match.group()) in (float("inf"), float("-inf")):
                literal = match.group().decode("ascii")
                shown = literal if len(literal) <= 40 else literal[:37] + "..."
                return (
                    f"line holds the number {shown}, beyond the range of a double (it would "
                    "read as infinity, which JSON cannot hold)"
                )
        return "line holds a number beyond the range of a double (it would read as infinity)"
    return "line is not valid JSON"


def read_header_line(line: bytes, *, path: str) -> HeaderInfo:
    """Decode the first physical line of a log (including its ``\\n`` when present).

    Raises :class:`NotASessionError` when the line is not a session header and
    :class:`UnsupportedVersionError` when its version cannot be read by this library;
    see the module docstring for the exact order of checks.
    """
    findings = framing_findings(line)
    size = len(line)
    body = line
    if body.startswith(BOM):
        body = body[len(BOM) :]
    terminated = body.endswith(b"\n")
    if terminated:
        body = body[:-1]
    if b"\n" in body:
        raise NotASessionError(path, "the header must be exactly one line")
    if body.endswith(b"\r"):
        body = body[:-1]
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        if terminated:
            reason = unparsable_reason(body).removeprefix("line ")
            raise NotASessionError(path, f"the first line {reason}") from None
        raise NotASessionError(
            path, "the first line is incomplete (the file ends inside its header, no newline)"
        ) from None
    if type(value) is not dict:
        raise NotASessionError(path, "the first line is not a JSON object")
    # Before the version is read: with a repeated key (even "version") readers disagree.
    if orjson.dumps(value) != body:
        key = duplicate_key(body)
        if key is not None:
            raise CorruptLogError(
                path,
                f"the header holds the key {key!r} twice; JSON readers that keep the first "
                "value and those that keep the last disagree on what it says",
                line=1,
                offset=0,
                rule="duplicate-key",
            )
    if value.get("type") != "session":
        raise NotASessionError(
            path, f"the first line has type {value.get('type')!r}, expected 'session'"
        )
    version = _check_version(value, path)
    if not terminated:
        raise NotASessionError(
            path, "the header line has no final newline (the file ends inside its header)"
        )
    findings.extend(_header_shape_findings(value, version))
    return HeaderInfo(version=version, value=value, raw=body, size=size, findings=findings)


def framing_findings(line: bytes) -> list[Finding]:
    """The ``bom`` and ``crlf`` findings of a log's first physical line, in that order.

    :func:`read_header_line` reports them in :attr:`HeaderInfo.findings`; this lets a
    reader report them also for a header it refuses (an unsupported version).
    """
    findings: list[Finding] = []
    body = line
    if body.startswith(BOM):
        body = body[len(BOM) :]
        findings.append(Finding("bom", "file starts with a UTF-8 byte order mark (skipped)", 1, 0))
    if body.endswith(b"\n"):
        body = body[:-1]
    if body.endswith(b"\r") and b"\n" not in body:
        findings.append(Finding("crlf", "header line ends in CRLF (DSH writes LF only)", 1, 0))
    return findings


def _check_version(header: dict[str, Any], path: str) -> int:
    """Return the header's version as an int in 0..CURRENT_VERSION or raise."""
    if "version" not in header:
        raise NotASessionError(path, "the session header has no 'version'")
    version = header["version"]
    if type(version) not in (int, float):
        raise NotASessionError(path, f"the session header's version {version!r} is not a number")
    if version > CURRENT_VERSION:
        shown = int(version) if type(version) is float and version.is_integer() else version
        raise UnsupportedVersionError(path, shown, CURRENT_VERSION)
    if type(version) is not int or version < 0:
        raise UnsupportedVersionError(path, version, CURRENT_VERSION)
    return int(version)


def _is_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def _header_shape_findings(header: dict[str, Any], version: int) -> list[Finding]:
    """Compare the header with the physical header table of its version."""
    old = version <= LAST_PACKED_VERSION
    required = _OLD_HEADER_REQUIRED if old else _NEW_HEADER_REQUIRED
    optional = _OLD_HEADER_OPTIONAL if old else _NEW_HEADER_OPTIONAL
    problems: list[tuple[str, str]] = []
    for key in required:
        if key not in header:
            problems.append(("header-missing-field", f"header lacks required {key!r}"))
    for key in _RETIRED_HEADER_FIELDS:
        if key in header:
            problems.append(("header-retired-field", f"header carries retired field {key!r}"))
    known = set(required) | optional | set(_RETIRED_HEADER_FIELDS)
    for key in header:
        if key not in known:
            problems.append(
                ("header-unknown-field", f"header field {key!r} is not part of version {version}")
            )
    checks: dict[str, tuple[bool, str]] = {
        "id": (isinstance(header.get("id"), str) and header.get("id") != "", "a non-empty string"),
        "createdAt": (_is_count(header.get("createdAt")), "a non-negative safe integer"),
        "delegationDepth": (
            _is_count(header.get("delegationDepth")),
            "a non-negative safe integer",
        ),
        "isSeeded": (type(header.get("isSeeded")) is bool, "a boolean"),
        "seedLength": (_is_count(header.get("seedLength")), "a non-negative safe integer"),
        "cwd": (isinstance(header.get("cwd"), str), "a string"),
        "parentSession": (isinstance(header.get("parentSession"), str), "a string"),
        "origin": (header.get("origin") == "subagent", "'subagent'"),
        "agentPreset": (isinstance(header.get("agentPreset"), str), "a string"),
    }
    for key, (ok, expected) in checks.items():
        if key in header and key in known and not ok:
            problems.append(
                ("header-field-type", f"header {key!r} is {header[key]!r}, expected {expected}")
            )
    return [Finding(rule, message, 1, 0) for rule, message in problems]


def is_packed_row(value: object) -> bool:
    """True when ``value`` is tagged as a V0/V1 packed chunk row (shape not checked)."""
    return type(value) is dict and value.get("type") in PACKED_ROW_TYPES


_STR_TYPE = frozenset({str})
_INT_TYPE = frozenset({int})


def packed_row_count(value: dict[str, Any]) -> int:
    """Number of logical ``assistant/chunk`` events a valid packed row stands for."""
    data = value["data"]
    members = data["args"] if value["type"] == "tool-call-chunks" else data["texts"]
    return len(members)


def packed_row_problem(value: dict[str, Any]) -> str | None:
    """Describe why a packed-row-tagged object is malformed, or None when it is valid.

    Valid means: envelope exactly ``{type, seq0, time0, data}`` with integer ``seq0`` and
    ``time0``; ``data`` exactly ``{turn, step, index, dt, texts}`` (text and reasoning) or
    ``{turn, step, index, id, name?, dt, args}`` (tool calls); at least one string member
    and ``len(dt) == members - 1`` integer gaps.
    """
    if set(value) != _PACKED_ENVELOPE_KEYS:
        return f"packed row envelope keys {sorted(value)} are not exactly type/seq0/time0/data"
    if type(value["seq0"]) is not int or type(value["time0"]) is not int:
        return "packed row seq0/time0 must be integers"
    data = value["data"]
    if type(data) is not dict:
        return "packed row data is not an object"
    tool = value["type"] == "tool-call-chunks"
    keys = set(data)
    if tool:
        keys.discard("name")
        if "name" in data and not isinstance(data["name"], str):
            return "packed row data.name must be a string"
        if not isinstance(data.get("id"), str):
            return "packed row data.id must be a string"
    if keys != (_TOOL_DATA_KEYS if tool else _TEXT_DATA_KEYS):
        return f"packed row data keys {sorted(data)} do not match the {value['type']} layout"
    for key in ("turn", "step", "index"):
        if type(data[key]) is not int:
            return f"packed row data.{key} must be an integer"
    members = data["args" if tool else "texts"]
    # Type sets rather than a per-member loop: a packed row holds up to thousands of them.
    if type(members) is not list or not members or set(map(type, members)) != _STR_TYPE:
        return "packed row members must be a non-empty list of strings"
    gaps = data["dt"]
    if type(gaps) is not list or not set(map(type, gaps)) <= _INT_TYPE:
        return "packed row data.dt must be a list of integers"
    if len(gaps) != len(members) - 1:
        return f"packed row has {len(members)} members but {len(gaps)} time gaps"
    return None


def row_problem(value: object, version: int) -> tuple[str, str] | None:
    """Check the physical envelope of one decoded row of a log of ``version``.

    Returns ``(rule, message)`` for a malformed row (rule ``bad-row``) or None. Sequence
    continuity is not judged here: the caller compares ``seq``/``seq0`` with its count.
    """
    if type(value) is not dict:
        return "bad-row", f"row is a JSON {_json_kind(value)}, not an object"
    row_type = value.get("type")
    if type(row_type) is str and row_type in PACKED_ROW_TYPES:
        if version > LAST_PACKED_VERSION:
            return (
                "bad-row",
                f"packed chunk row {row_type!r} is not allowed in a version {version} log",
            )
        problem = packed_row_problem(value)
        return None if problem is None else ("bad-row", problem)
    if type(row_type) is not str:
        return "bad-row", "row has no string 'type'"
    if type(value.get("seq")) is not int:
        return "bad-row", f"row {row_type!r} has no integer 'seq'"
    if type(value.get("time")) is not int:
        return "bad-row", f"row {row_type!r} has no integer 'time'"
    if "data" not in value:
        return "bad-row", f"row {row_type!r} has no 'data'"
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
