"""Tail damage is a torn tail (repaired); damage before a later turn/end is corruption."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from dsh_store.errors import CorruptLogError, UnsupportedVersionError
from dsh_store.restore import examine, read_log
from dsh_store.store import JsonlStore

from .helpers import CWD, complete_turn, file_lines, make_store, sidecars, snapshot, tool_turn


def _two_turns(store: JsonlStore) -> Path:
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        tool_turn(live, 2)
        return live.path


def _readers(store: JsonlStore, path: Path) -> tuple[Callable[[], object], ...]:
    """Every read entry point for session s1: the store's by id, ``read_log`` by path."""
    return (
        lambda: store.load("s1"),
        lambda: store.open("s1"),
        lambda: store.inspect("s1"),
        lambda: read_log(path),
    )


@pytest.mark.parametrize(
    "tail",
    [
        b"\x00" * 64,
        b"\x00" * 4096,
        b"\x8f\xff garbage \x01",
        b"garbage line\n",
        b'{"type":"turn/start","seq":99,"time":1,"data":{"turn":3}}\n',  # a seq gap, no turn/end
        b"\x00" * 10 + b"\n" + b"\x00" * 10,
    ],
)
def test_damaged_tail_is_torn_and_repaired(tmp_path: Path, tail: bytes) -> None:
    store = make_store(tmp_path)
    path = _two_turns(store)
    clean = path.read_bytes()
    with open(path, "ab") as log:
        log.write(tail)
    report = examine(path)
    assert report.classification == "torn-tail"
    (finding,) = [f for f in report.findings if f.rule == "torn-tail"]
    assert finding.offset == len(clean)
    assert finding.line == clean.count(b"\n") + 1
    assert f"crash tail of {len(tail)} byte(s)" in finding.message
    loaded = store.load("s1")
    assert loaded.classification == "ok"
    assert path.read_bytes() == clean
    (sidecar,) = sidecars(path)
    assert sidecar.name == f"session.v4.jsonl.torn-{len(clean)}"
    assert sidecar.read_bytes() == tail


def _damage(path: Path, line_no: int, replacement: bytes | None) -> int:
    """Replace (or with None delete) 1-based physical line ``line_no``; return its offset."""
    lines = file_lines(path)
    offset = sum(len(line) for line in lines[: line_no - 1])
    if replacement is None:
        del lines[line_no - 1]
    else:
        lines[line_no - 1] = replacement
    path.write_bytes(b"".join(lines))
    return offset


@pytest.mark.parametrize(
    ("replacement", "rule", "detail"),
    [
        (b'{"type":"step/start","seq":1,"ti\n', "unparsable-line", "line is not valid JSON"),
        (b"\x00\x00\x00\n", "unparsable-line", "line is not valid JSON"),
        (None, "seq-gap", "expected seq 1, found 2"),
        (
            b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n',
            "seq-duplicate",
            "expected seq 1, found 0",
        ),
    ],
)
@pytest.mark.parametrize("watermark", [True, False], ids=["watermark", "no-watermark"])
def test_damage_before_a_later_turn_end_is_corruption(
    tmp_path: Path, replacement: bytes | None, rule: str, detail: str, watermark: bool
) -> None:
    store = make_store(tmp_path)
    path = _two_turns(store)
    if not watermark:  # as DSH leaves a log: the later turn/end is the evidence
        Path(f"{path}.durable").unlink()
    offset = _damage(path, 3, replacement)  # line 3 holds seq 1
    before = snapshot(path)
    for call in _readers(store, path):
        with pytest.raises(CorruptLogError, match="corrupt session log") as caught:
            call()
        error = caught.value
        assert (error.line, error.offset, error.rule) == (3, offset, rule)
        assert detail in str(error)
        assert f"session.v4.jsonl:3 (byte {offset}, seq 1)" in str(error)
        if watermark:
            assert "which its writer saw fsynced" in str(error)
        else:  # the later turn/end, or first the valid line right after the damage
            assert "this region was committed" in str(error)
    report = examine(path)
    assert report.classification == "corrupt"
    (finding,) = report.findings
    assert (finding.rule, finding.line, finding.offset, finding.seq) == (rule, 3, offset, 1)
    assert snapshot(path) == before
    assert sidecars(path) == []


def test_committed_event_breaking_a_model_rule_is_corruption(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _two_turns(store)
    lines = file_lines(path)
    bad = orjson.loads(lines[4])  # seq 3: the first user/message
    assert bad["type"] == "user/message"
    del bad["surfaceOp"]
    offset = _damage(path, 5, orjson.dumps(bad) + b"\n")
    before = snapshot(path)
    with pytest.raises(CorruptLogError, match="surfaceOp") as caught:
        store.load("s1")
    assert (caught.value.line, caught.value.offset, caught.value.seq) == (5, offset, 3)
    assert examine(path).classification == "corrupt"
    assert snapshot(path) == before


def test_newer_version_is_unsupported_never_corrupt(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _two_turns(store)
    lines = file_lines(path)
    header = orjson.loads(lines[0])
    header["version"] = 5
    header["futureField"] = {"x": 1}
    path.write_bytes(orjson.dumps(header) + b"\n" + b"".join(lines[1:]) + b"\x00garbage")
    before = snapshot(path)
    for call in _readers(store, path):
        with pytest.raises(
            UnsupportedVersionError, match="written by a newer writer; upgrade"
        ) as e:
            call()
        assert e.value.version == 5
    report = examine(path)
    assert (report.classification, report.version) == ("unsupported-version", 5)
    assert snapshot(path) == before


def test_a_newer_generation_beside_the_log_wins(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _two_turns(store)
    newer = path.with_name("session.v5.jsonl")
    newer.write_bytes(b'{"type":"session","version":5,"id":"s1"}\n')
    with pytest.raises(UnsupportedVersionError, match="session format version 5 is not supported"):
        store.load("s1")
    assert store.list() == []  # an unreadable newest generation is not listed


def test_a_second_torn_tail_at_the_same_offset_gets_its_own_sidecar(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _two_turns(store)
    clean = path.read_bytes()
    with open(path, "ab") as log:
        log.write(b'{"torn-A')
    assert store.load("s1").classification == "ok"
    assert path.read_bytes() == clean
    # The log is torn again at exactly the same offset (e.g. a lost later batch).
    with open(path, "ab") as log:
        log.write(b'{"torn-B')
    assert store.load("s1").classification == "ok"
    assert path.read_bytes() == clean
    saved = {sidecar.name: sidecar.read_bytes() for sidecar in sidecars(path)}
    assert saved == {
        f"session.v4.jsonl.torn-{len(clean)}": b'{"torn-A',
        f"session.v4.jsonl.torn-{len(clean)}.2": b'{"torn-B',
    }
    # Loading again writes nothing new.
    assert store.load("s1").classification == "ok"
    assert {sidecar.name for sidecar in sidecars(path)} == set(saved)
