"""Header line decoding (version first, then shape) and physical row checks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from dsh_store.errors import NotASessionError, UnsupportedVersionError
from dsh_store.jsonl.rows import (
    HeaderInfo,
    is_packed_row,
    packed_row_count,
    packed_row_problem,
    read_header_line,
    row_problem,
)

from .scan_logs import event, header, line, packed_row

PATH = "/logs/session.v4.jsonl"


def rules(info: HeaderInfo) -> list[str]:
    return [f.rule for f in info.findings]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_supported_version_parses_with_its_own_shape(version: int) -> None:
    raw = line(header(version))
    info = read_header_line(raw, path=PATH)
    assert info.version == version
    assert info.size == len(raw)
    assert info.raw == raw[:-1]
    assert info.value == header(version)
    assert info.findings == []


def test_old_header_with_seed_length_and_preset_is_clean() -> None:
    info = read_header_line(
        line(header(0, seedLength=3, origin="subagent", agentPreset="plan")), path=PATH
    )
    assert info.findings == []


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            5,
            "session format version 5 is not supported (this dsh-store reads versions 0-4): "
            "written by a newer writer; upgrade dsh-store",
        ),
        (
            5.0,
            "session format version 5 is not supported (this dsh-store reads versions 0-4): "
            "written by a newer writer; upgrade dsh-store",
        ),
        (99, "version 99 is not supported"),
        (
            -1,
            "version -1 is not supported (this dsh-store reads versions 0-4): "
            "no upgrade path exists for this version",
        ),
        (2.5, "version 2.5 is not supported"),
        (4.0, "version 4.0 is not supported"),
    ],
)
def test_unsupported_versions_are_refused_as_such(version: object, message: str) -> None:
    with pytest.raises(UnsupportedVersionError) as caught:
        read_header_line(line({"type": "session", "version": version}), path=PATH)
    assert message in str(caught.value)
    assert str(caught.value).startswith(PATH)
    assert caught.value.supported == 4


def test_newer_version_wins_over_a_broken_shape() -> None:
    raw = line({"type": "session", "version": 5, "id": 7, "createdAt": "yesterday"})
    with pytest.raises(UnsupportedVersionError, match="upgrade dsh-store"):
        read_header_line(raw, path=PATH)


def test_newer_version_wins_over_a_missing_newline() -> None:
    with pytest.raises(UnsupportedVersionError, match="version 7"):
        read_header_line(orjson.dumps({"type": "session", "version": 7}), path=PATH)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json\n", "the first line is not valid JSON"),
        (b"[1,2]\n", "the first line is not a JSON object"),
        (
            b'{"type":"turn/start","seq":0}\n',
            "the first line has type 'turn/start', expected 'session'",
        ),
        (b'{"version":4}\n', "the first line has type None, expected 'session'"),
        (b'{"type":"session","id":"x"}\n', "the session header has no 'version'"),
        (b'{"type":"session","version":"4"}\n', "the session header's version '4' is not a number"),
        (b'{"type":"session","version":true}\n', "version True is not a number"),
        (b'{"type":"session","version":null}\n', "version None is not a number"),
        (b'{"type":"session","vers', "the first line is incomplete"),
        (b'{"type":"session","version":4}', "the header line has no final newline"),
        (b"\n", "the first line is not valid JSON"),
        (b'{"type":"session",\n"version":4}\n', "the header must be exactly one line"),
    ],
)
def test_not_a_session(raw: bytes, reason: str) -> None:
    with pytest.raises(NotASessionError) as caught:
        read_header_line(raw, path=PATH)
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"{PATH}: not a session log: ")


def test_bom_and_crlf_are_findings_not_errors() -> None:
    raw = b"\xef\xbb\xbf" + orjson.dumps(header()) + b"\r\n"
    info = read_header_line(raw, path=PATH)
    assert info.version == 4
    assert info.size == len(raw)
    assert info.raw == orjson.dumps(header())
    assert rules(info) == ["bom", "crlf"]
    assert info.findings[0].message == "file starts with a UTF-8 byte order mark (skipped)"
    assert (info.findings[1].line, info.findings[1].offset) == (1, 0)


@pytest.mark.parametrize(
    ("value", "rule", "message"),
    [
        (
            {k: v for k, v in header(0).items() if k != "delegationDepth"},
            "header-missing-field",
            "header lacks required 'delegationDepth'",
        ),
        (
            {k: v for k, v in header(4).items() if k != "isSeeded"},
            "header-missing-field",
            "header lacks required 'isSeeded'",
        ),
        (
            header(4, sandboxMode="off"),
            "header-retired-field",
            "header carries retired field 'sandboxMode'",
        ),
        (
            header(4, seedLength=2),
            "header-unknown-field",
            "header field 'seedLength' is not part of version 4",
        ),
        (
            header(4, createdAt=-1),
            "header-field-type",
            "header 'createdAt' is -1, expected a non-negative safe integer",
        ),
        (
            header(2, isSeeded="no"),
            "header-field-type",
            "header 'isSeeded' is 'no', expected a boolean",
        ),
        (header(4, id=""), "header-field-type", "header 'id' is '', expected a non-empty string"),
        (
            header(1, origin="user"),
            "header-field-type",
            "header 'origin' is 'user', expected 'subagent'",
        ),
        (header(3, delegationDepth=2**53), "header-field-type", "header 'delegationDepth' is"),
    ],
)
def test_shape_problems_become_findings(value: dict[str, Any], rule: str, message: str) -> None:
    info = read_header_line(line(value), path=PATH)
    assert rules(info) == [rule]
    assert info.findings[0].message.startswith(message)
    assert (info.findings[0].line, info.findings[0].offset) == (1, 0)


def test_packed_row_helpers() -> None:
    text = packed_row(4, ["a", "b", "c"])
    tool = packed_row(7, ['{"a"', ":1", "}"], kind="tool-call-chunks")
    assert is_packed_row(text) and is_packed_row(tool)
    assert not is_packed_row(event(0, "assistant/chunk", {}))
    assert not is_packed_row(["text-chunks"])
    assert packed_row_count(text) == 3
    assert packed_row_count(tool) == 3
    assert packed_row_problem(text) is None
    assert packed_row_problem(tool) is None
    no_name = packed_row(7, ["x"], kind="tool-call-chunks")
    del no_name["data"]["name"]
    assert packed_row_problem(no_name) is None


def _broken(change: str) -> dict[str, Any]:
    row = packed_row(0, ["a", "b", "c"])
    if change == "extra-envelope":
        row["seq"] = 0
    elif change == "seq0-str":
        row["seq0"] = "0"
    elif change == "data-list":
        row["data"] = []
    elif change == "extra-data":
        row["data"]["name"] = "x"
    elif change == "turn-bool":
        row["data"]["turn"] = True
    elif change == "empty":
        row["data"]["texts"] = []
        row["data"]["dt"] = []
    elif change == "member-int":
        row["data"]["texts"] = ["a", 2, "c"]
    elif change == "dt-count":
        row["data"]["dt"] = [1]
    elif change == "dt-float":
        row["data"]["dt"] = [1, 0.5]
    return row


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("extra-envelope", "packed row envelope keys ['data', 'seq', 'seq0', 'time0', 'type']"),
        ("seq0-str", "packed row seq0/time0 must be integers"),
        ("data-list", "packed row data is not an object"),
        (
            "extra-data",
            "packed row data keys ['dt', 'index', 'name', 'step', 'texts', 'turn'] "
            "do not match the text-chunks layout",
        ),
        ("turn-bool", "packed row data.turn must be an integer"),
        ("empty", "packed row members must be a non-empty list of strings"),
        ("member-int", "packed row members must be a non-empty list of strings"),
        ("dt-count", "packed row has 3 members but 1 time gaps"),
        ("dt-float", "packed row data.dt must be a list of integers"),
    ],
)
def test_malformed_packed_rows_are_described(change: str, message: str) -> None:
    problem = packed_row_problem(_broken(change))
    assert problem is not None and problem.startswith(message)


def test_tool_packed_row_needs_string_id_and_name() -> None:
    row = packed_row(0, ["a"], kind="tool-call-chunks")
    row["data"]["id"] = 3
    assert packed_row_problem(row) == "packed row data.id must be a string"
    row["data"]["id"] = "c"
    row["data"]["name"] = None
    assert packed_row_problem(row) == "packed row data.name must be a string"


@pytest.mark.parametrize(
    ("value", "version", "expected"),
    [
        (event(0, "turn/start", {"turn": 1}), 4, None),
        (event(0, "plugin:x", [1, 2], ignorable=True), 4, None),
        (packed_row(0, ["a", "b"]), 1, None),
        (
            packed_row(0, ["a", "b"]),
            2,
            ("bad-row", "packed chunk row 'text-chunks' is not allowed in a version 2 log"),
        ),
        ([1], 4, ("bad-row", "row is a JSON array, not an object")),
        ("x", 4, ("bad-row", "row is a JSON string, not an object")),
        (None, 4, ("bad-row", "row is a JSON null, not an object")),
        (3, 4, ("bad-row", "row is a JSON number, not an object")),
        (True, 4, ("bad-row", "row is a JSON boolean, not an object")),
        ({"seq": 0, "time": 1, "data": {}}, 4, ("bad-row", "row has no string 'type'")),
        (
            {"type": "a", "seq": True, "time": 1, "data": {}},
            4,
            ("bad-row", "row 'a' has no integer 'seq'"),
        ),
        (
            {"type": "a", "seq": 0, "time": 1.5, "data": {}},
            4,
            ("bad-row", "row 'a' has no integer 'time'"),
        ),
        ({"type": "a", "seq": 0, "time": 1}, 4, ("bad-row", "row 'a' has no 'data'")),
    ],
)
def test_row_problem(value: object, version: int, expected: tuple[str, str] | None) -> None:
    assert row_problem(value, version) == expected
