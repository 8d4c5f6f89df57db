"""File-level entry points on loose paths: classify, read_log, repair_file, examine, verify."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from dsh_store.bulk import RepairOutcome
from dsh_store.cli.repair import repair_text
from dsh_store.errors import (
    CorruptLogError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from dsh_store.restore import CLASSIFICATIONS, classify, examine, read_log
from dsh_store.store import NeedsMigrationError, repair_file
from dsh_store.verify import verify_path

from .helpers import CWD, complete_turn, make_store, open_tool_turn, sidecars, snapshot

V3_HEADER = {
    "type": "session",
    "version": 3,
    "id": "old",
    "createdAt": 1000,
    "isSeeded": False,
    "delegationDepth": 0,
}


def _rows(*rows: dict[str, object]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def _v3(turns_closed: bool = True, extra: list[dict[str, object]] | None = None) -> bytes:
    events: list[dict[str, object]] = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
        {
            "type": "user/message",
            "seq": 2,
            "time": 3,
            "data": {
                "role": "user",
                "id": "u1",
                "content": [{"type": "text", "text": "hi"}],
                "source": {"kind": "user"},
            },
            "surfaceOp": "append",
        },
    ]
    if turns_closed:
        events += [
            {"type": "step/end", "seq": 3, "time": 4, "data": {"turn": 1, "step": 1}},
            {
                "type": "turn/end",
                "seq": 4,
                "time": 5,
                "data": {"turn": 1, "reason": {"kind": "completed"}},
            },
        ]
    return _rows(V3_HEADER, *events, *(extra or []))


@pytest.fixture(scope="module")
def v4(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Bytes of a balanced v4 log and of one with an open turn."""
    store = make_store(tmp_path_factory.mktemp("src"))
    with store.new("ok", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        complete_turn(live, 2)
    with store.new("open", cwd=CWD) as live:
        complete_turn(live, 1)
        open_tool_turn(live, 2, ("c",), logged=0)
    return {
        "ok": store.locate("ok").read_bytes(),
        "open": store.locate("open").read_bytes(),
    }


def _corrupt(clean: bytes) -> bytes:
    lines = clean.splitlines(keepends=True)
    lines[2] = b"{not json\n"
    return b"".join(lines)


def _files(v4: dict[str, bytes]) -> dict[str, bytes]:
    """One real file per classification, plus precedence cases (name -> bytes)."""
    v5 = orjson.loads(v4["ok"].splitlines()[0])
    v5["version"] = 5
    return {
        "not-a-session": b'{"type":"chat","version":4}\n',
        "empty": b"",
        "unsupported-version": orjson.dumps(v5) + b"\n" + b"\x00\x00",
        "corrupt": _corrupt(v4["ok"]),
        "refused": _v3(extra=[{"type": "mystery/x", "seq": 5, "time": 6, "data": {}}]),
        "torn-tail": v4["ok"] + b'{"type":"turn/st',
        "open-turn": v4["open"],
        "needs-migration": _v3(),
        "ok": v4["ok"],
    }


PRECEDENCE: dict[str, tuple[Callable[[dict[str, bytes]], bytes], str]] = {
    # file -> (bytes builder, expected): the first applicable classification wins.
    "torn-over-open": (lambda v4: v4["open"] + b"\x00" * 8, "torn-tail"),
    "corrupt-over-torn": (lambda v4: _corrupt(v4["ok"]) + b"garbage", "corrupt"),
    "unsupported-over-corrupt": (
        lambda v4: b'{"type":"session","version":7}\n{garbage\n{"type":"turn/end"}\n',
        "unsupported-version",
    ),
    "torn-over-needs-migration": (lambda v4: _v3() + b'{"ty', "torn-tail"),
    "open-over-needs-migration": (lambda v4: _v3(turns_closed=False), "open-turn"),
    "not-a-session-torn-header": (lambda v4: v4["ok"][:40], "not-a-session"),
}


def test_every_classification_from_a_real_file(tmp_path: Path, v4: dict[str, bytes]) -> None:
    files = _files(v4)
    assert list(files) == list(CLASSIFICATIONS)
    for name, content in files.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(content)
        before = snapshot(path)
        assert classify(path) == name
        report = examine(path)
        assert report.classification == name
        assert report.to_json()["classification"] == name
        if name != "ok":
            assert report.findings, name
            assert all(f.message for f in report.findings)
        assert snapshot(path) == before, name
        assert sidecars(path) == []
    reports = verify_path(tmp_path)
    assert sorted(r.classification for r in reports) == sorted(CLASSIFICATIONS)


@pytest.mark.parametrize("case", sorted(PRECEDENCE))
def test_precedence(tmp_path: Path, v4: dict[str, bytes], case: str) -> None:
    build, expected = PRECEDENCE[case]
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(build(v4))
    before = snapshot(path)
    assert classify(path) == expected
    assert snapshot(path) == before


def test_findings_carry_rule_line_offset_seq(tmp_path: Path, v4: dict[str, bytes]) -> None:
    path = tmp_path / "torn.jsonl"
    path.write_bytes(v4["open"] + b"\x00" * 8)
    report = examine(path)
    (torn,) = [f for f in report.findings if f.rule == "torn-tail"]
    assert (torn.offset, torn.line) == (len(v4["open"]), v4["open"].count(b"\n") + 1)
    assert torn.seq == v4["open"].count(b"\n") - 1
    assert report.to_json()["findings"][0].keys() == {
        "rule",
        "message",
        "line",
        "eventLine",
        "offset",
        "seq",
    }


def test_read_log_raises_the_typed_errors(tmp_path: Path, v4: dict[str, bytes]) -> None:
    files = _files(v4)
    expected = {
        "not-a-session": (NotASessionError, "not a session log: the first line has type 'chat'"),
        "empty": (NotASessionError, "the file is empty"),
        "unsupported-version": (UnsupportedVersionError, "upgrade dsh-store"),
        "corrupt": (CorruptLogError, "line is not valid JSON"),
        "refused": (MigrationRefusedError, "required event type 'mystery/x'"),
    }
    for name, (error, message) in expected.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(files[name])
        with pytest.raises(error, match=message):
            read_log(path)
    path = tmp_path / "old.jsonl"
    path.write_bytes(_v3())
    view = read_log(path)
    assert (view.source_version, view.classification, view.header.version) == (
        3,
        "needs-migration",
        4,
    )
    assert [e.type for e in view.events][-1] == "turn/end"


def test_repair_file_dry_run_then_apply(tmp_path: Path, v4: dict[str, bytes]) -> None:
    path = tmp_path / "loose.jsonl"
    torn = b'{"type":"tool/res'
    path.write_bytes(v4["open"] + torn)
    before = snapshot(path)
    plan = repair_file(path, dry_run=True)
    assert snapshot(path) == before
    assert (plan.classification, plan.applied) == ("torn-tail", False)
    assert (plan.truncate_at, plan.torn_bytes) == (len(v4["open"]), len(torn))
    assert plan.closers == ("tool/result", "step/end", "turn/end")
    text = repair_text(RepairOutcome.of_plan(plan))
    assert text.startswith(f"{path}: would repair (torn-tail)")
    assert f"cut {len(torn)} torn byte(s) at offset {len(v4['open'])}" in text

    done = repair_file(path)
    assert done.applied and done.sidecar is not None
    assert done.sidecar.read_bytes() == torn
    assert path.read_bytes().startswith(v4["open"])
    assert classify(path) == "ok"
    again = repair_file(path)
    assert not again.applied
    assert repair_text(RepairOutcome.of_plan(again)) == f"{path}: ok, nothing to repair"


def test_repair_file_refuses_older_formats_and_corruption(
    tmp_path: Path, v4: dict[str, bytes]
) -> None:
    old = tmp_path / "old.jsonl"
    old.write_bytes(_v3() + b"\x00\x00")
    before = snapshot(old)
    with pytest.raises(NeedsMigrationError, match="cannot repair a format-3 log in place"):
        repair_file(old)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(_corrupt(v4["ok"]) + b"tail")
    bad_before = snapshot(bad)
    with pytest.raises(CorruptLogError, match="line is not valid JSON") as caught:
        repair_file(bad)
    assert caught.value.line == 3
    assert (snapshot(old), snapshot(bad)) == (before, bad_before)
