"""Lines that readers disagree on, or cannot decode, are refused by rule and say why."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dsh_store import jsonvalue
from dsh_store.errors import CorruptLogError, NotASessionError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.restore import examine, read_log

from .helpers import CWD, complete_turn, make_store

HEADER = (
    b'{"type":"session","version":4,"id":"d","createdAt":1,"isSeeded":false,"delegationDepth":0}\n'
)


def _log(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_bytes(HEADER + b"".join(lines))
    return path


TURN_START = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
STEP_START = b'{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}\n'


@pytest.mark.parametrize(
    ("second", "key"),
    [
        # orjson (like JavaScript) keeps the last seq: 1, which continues the log.
        (b'{"type":"step/start","seq":5,"time":1,"data":{"turn":1,"step":1},"seq":1}\n', "seq"),
        (b'{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1,"step":1}}\n', "step"),
        (
            b'{"type":"step/start","seq":1,"time":1,"time":2,"data":{"turn":1,"step":1}}\n',
            "time",
        ),
    ],
    ids=["envelope-seq", "nested", "envelope-time"],
)
def test_a_repeated_key_in_an_event_line_is_refused(
    tmp_path: Path, second: bytes, key: str
) -> None:
    path = _log(tmp_path, TURN_START, second)
    with pytest.raises(CorruptLogError) as caught:
        read_log(path)
    error = caught.value
    assert (error.rule, error.line, error.offset, error.seq) == (
        "duplicate-key",
        3,
        len(HEADER + TURN_START),
        1,
    )
    assert f"the key {key!r} appears twice in one object" in str(error)
    report = examine(path)
    assert report.classification == "corrupt"
    assert report.findings[-1].rule == "duplicate-key"


@pytest.mark.parametrize(
    ("header", "key"),
    [
        (b'{"type":"session","version":5,"id":"d","createdAt":1,"version":4}\n', "version"),
        (
            b'{"type":"session","version":4,"id":"a","createdAt":1,"isSeeded":false,'
            b'"delegationDepth":0,"id":"b"}\n',
            "id",
        ),
    ],
)
def test_a_repeated_key_in_the_header_is_refused(tmp_path: Path, header: bytes, key: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(header + TURN_START)
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(path).read_header()
    assert (caught.value.rule, caught.value.line, caught.value.offset) == ("duplicate-key", 1, 0)
    assert f"the header holds the key {key!r} twice" in str(caught.value)
    assert examine(path).classification == "corrupt"


def test_a_repeated_key_in_an_older_log_row_is_refused(tmp_path: Path) -> None:
    header = orjson.dumps(
        {"type": "session", "version": 3, "id": "o", "createdAt": 1, "isSeeded": False}
        | {"delegationDepth": 0}
    )
    path = tmp_path / "v3.jsonl"
    path.write_bytes(
        header + b"\n" + b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"turn":2}}\n'
    )
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(path).exhaust()
    assert (caught.value.rule, caught.value.line) == ("duplicate-key", 2)


def test_canonical_lines_never_take_the_slow_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path)
    with store.new("s", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        path = live.path
    calls: list[object] = []
    original = jsonvalue.duplicate_key

    def counting(raw: bytes | str) -> str | None:
        calls.append(raw)
        return original(raw)

    monkeypatch.setattr(jsonvalue, "duplicate_key", counting)
    assert read_log(path).classification == "ok"
    assert calls == []


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    ("damaged", "phrase"),
    [
        (
            b'{"type":"step/start","seq":1,"time":1,"data":' + _nested(1100) + b"}\n",
            "line nests deeper than 1024 levels, more than a reader decodes (the writer allows "
            "254) [unparsable-line]",
        ),
        (
            b'{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"x":1e400}}\n',
            "line holds the number 1e400, beyond the range of a double (it would read as "
            "infinity, which JSON cannot hold) [unparsable-line]",
        ),
        (
            b'{"type":"step/start","seq":1,"time":1,"data":{"x":-2.5E+999}}\n',
            "line holds the number -2.5E+999, beyond the range",
        ),
        (b'{"type":"step/start","seq":1,"ti}\n', "line is not valid JSON [unparsable-line]"),
    ],
    ids=["too-deep", "1e400", "negative-overflow", "invalid"],
)
def test_json_a_reader_cannot_hold_gets_its_own_message(
    tmp_path: Path, damaged: bytes, phrase: str
) -> None:
    end = b'{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
    path = _log(tmp_path, TURN_START, damaged, end)
    with pytest.raises(CorruptLogError) as caught:
        LogScanner(path).exhaust()
    assert phrase in str(caught.value)


@pytest.mark.parametrize(
    ("first", "phrase"),
    [
        (b'{"type":"session","version":4,"x":' + _nested(1100) + b"}\n", "nests deeper than"),
        (b'{"type":"session","version":4,"createdAt":1e400}\n', "holds the number 1e400"),
        (b'{"type":"session","version":4,\n', "is not valid JSON"),
    ],
)
def test_a_header_a_reader_cannot_hold_says_why(tmp_path: Path, first: bytes, phrase: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(first + TURN_START)
    with pytest.raises(NotASessionError, match=f"the first line {phrase}"):
        LogScanner(path).read_header()
