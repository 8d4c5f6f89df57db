"""Point-in-time salvage: the longest valid prefix of a damaged v4 log goes to a new file."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_store.cli.repair import salvage_text
from dsh_store.errors import NotASessionError, UnsupportedVersionError
from dsh_store.jsonl.rows import Finding
from dsh_store.restore import read_log
from dsh_store.salvage import SalvageRefusedError, salvage_file
from dsh_store.verify import verify_path
from tests.cli.conftest import FIXED_CLOCK_MS, record_session, snapshot_tree, write_header

T = str(FIXED_CLOCK_MS).encode()
# record_session(turns=2): line 1 is the header, lines 2..12 hold seqs 0..10:
# turn 1 = seqs 0..5 (turn/start, step/start, system, user, step/end, turn/end), turn 2 = 6..10.
Lines = list[bytes]


def damaged(tmp_path: Path, edit: Callable[[Lines], None], name: str = "s") -> tuple[Path, Lines]:
    """A two-turn log with ``edit`` applied to its lines; returns the log and the lines."""
    log = record_session(tmp_path / "store", name, turns=2)
    lines = log.read_bytes().splitlines(keepends=True)
    edit(lines)
    log.write_bytes(b"".join(lines))
    return log, lines


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def offset_of(lines: Lines, index: int) -> int:
    return sum(len(line) for line in lines[:index])


def closer_lines(out: Path, kept: int) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.read_bytes().splitlines()[1 + kept :]]


def test_garbage_line_before_a_later_turn_end_keeps_the_events_before_it(tmp_path: Path) -> None:
    log, lines = damaged(tmp_path, lambda lines: lines.__setitem__(3, b"not json at all\n"))
    before = fingerprint(log)
    out = tmp_path / "salvaged.jsonl"
    plan = salvage_file(log, out)

    assert plan.applied and plan.status == "salvaged"
    assert plan.kept_events == 2
    assert plan.kept_bytes == offset_of(lines, 3)
    assert plan.dropped_bytes == len(b"".join(lines)) - offset_of(lines, 3)
    assert plan.stop is not None
    assert (plan.stop.rule, plan.stop.line, plan.stop.offset, plan.stop.seq) == (
        "unparsable-line",
        4,
        offset_of(lines, 3),
        2,
    )
    assert plan.closers == ("step/end", "turn/end")
    data = out.read_bytes()
    assert data.startswith(b"".join(lines[:3]))  # header + seqs 0, 1, byte-identical
    assert closer_lines(out, 2) == [
        {"type": "step/end", "seq": 2, "time": FIXED_CLOCK_MS, "data": {"turn": 1, "step": 1}},
        {
            "type": "turn/end",
            "seq": 3,
            "time": FIXED_CLOCK_MS,
            "data": {"turn": 1, "reason": {"kind": "interrupted"}},
        },
    ]
    inspection = read_log(out)
    assert inspection.classification == "ok"
    assert [event.seq for event in inspection.events] == [0, 1, 2, 3]
    assert [report.classification for report in verify_path(out)] == ["ok"]
    assert fingerprint(log) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "salvaged.jsonl",
        "salvaged.jsonl.durable",
        "store",
    ]


def test_a_seq_gap_stops_at_its_line(tmp_path: Path) -> None:
    log, lines = damaged(
        tmp_path, lambda ls: ls.__setitem__(7, ls[7].replace(b'"seq":6', b'"seq":7'))
    )
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.stop is not None
    assert (plan.stop.rule, plan.stop.line, plan.stop.offset, plan.stop.seq) == (
        "seq-gap",
        8,
        offset_of(lines, 7),
        6,
    )
    # Turn 1 is complete: nothing to close, the output is the prefix itself.
    assert plan.kept_events == 6 and plan.closers == ()
    assert out.read_bytes() == b"".join(lines[:7])
    assert read_log(out).classification == "ok"


def test_a_model_rule_violation_stops_at_the_event(tmp_path: Path) -> None:
    step_outside_turn = b'{"type":"step/start","seq":6,"time":%s,"data":{"turn":2,"step":1}}\n' % T
    log, lines = damaged(tmp_path, lambda ls: ls.__setitem__(7, step_outside_turn))
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.stop == Finding(
        "outside-turn", "committed event is invalid: no turn is open", 8, offset_of(lines, 7), 6
    )
    assert plan.kept_events == 6
    assert out.read_bytes() == b"".join(lines[:7])


def test_negative_zero_stops_at_the_event_and_the_open_turn_is_closed(tmp_path: Path) -> None:
    negative_zero = (
        b'{"type":"plugin:x","seq":8,"time":%s,"data":{"v":-0.0},"ignorable":true}\n' % T
    )
    log, lines = damaged(tmp_path, lambda ls: ls.__setitem__(9, negative_zero))
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.stop is not None
    assert (plan.stop.rule, plan.stop.line, plan.stop.offset, plan.stop.seq) == (
        "not-lossless-json",
        10,
        offset_of(lines, 9),
        8,
    )
    assert plan.kept_events == 8
    assert plan.closers == ("step/end", "turn/end")
    assert out.read_bytes().startswith(b"".join(lines[:9]))
    restored = read_log(out)
    assert restored.classification == "ok"
    assert [event.type for event in restored.events][-2:] == ["step/end", "turn/end"]
    assert [event.seq for event in restored.events] == list(range(10))


def test_an_inherited_marker_in_an_unseeded_log_ends_the_prefix(tmp_path: Path) -> None:
    marker = b'{"type":"session/end-seed","seq":6,"time":%s,"data":{"inherited":true}}\n' % T
    log, lines = damaged(tmp_path, lambda ls: ls.__setitem__(7, marker))
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.stop is not None
    assert (plan.stop.rule, plan.stop.line, plan.stop.seq) == ("seeded-marker-mismatch", 8, 6)
    assert out.read_bytes() == b"".join(lines[:7])


def test_a_seeded_header_without_its_marker_leaves_nothing(tmp_path: Path) -> None:
    log, _ = damaged(
        tmp_path,
        lambda ls: ls.__setitem__(0, ls[0].replace(b'"isSeeded":false', b'"isSeeded":true')),
    )
    with pytest.raises(SalvageRefusedError, match="nothing to salvage") as caught:
        salvage_file(log, tmp_path / "out.jsonl")
    assert caught.value.rule == "nothing-to-salvage"
    assert not (tmp_path / "out.jsonl").exists()


def test_a_torn_tail_is_dropped_and_the_turn_closed(tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "torn", turns=1, open_turn=True)
    size = log.stat().st_size
    with open(log, "ab") as handle:
        handle.write(b'{"type":"step/end","seq":')
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.stop is not None
    assert (plan.stop.rule, plan.stop.offset) == ("torn-line", size)
    assert plan.stop.message.startswith("crash tail: ")
    assert (plan.kept_bytes, plan.dropped_bytes) == (size, 25)
    assert plan.closers == ("step/end", "turn/end")
    assert read_log(out).classification == "ok"


def test_crlf_lines_are_copied_as_they_are(tmp_path: Path) -> None:
    def to_crlf(lines: Lines) -> None:
        lines[:] = [line[:-1] + b"\r\n" for line in lines]
        lines[5] = b"garbage\r\n"

    log, lines = damaged(tmp_path, to_crlf)
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.kept_events == 4 and plan.kept_bytes == offset_of(lines, 5)
    assert out.read_bytes().startswith(b"".join(lines[:5]))
    assert read_log(out).classification == "ok"


def test_an_existing_output_is_refused_and_left_alone(tmp_path: Path) -> None:
    log, _ = damaged(tmp_path, lambda ls: ls.__setitem__(3, b"garbage\n"))
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"someone else's file\n")
    before = snapshot_tree(tmp_path)
    with pytest.raises(SalvageRefusedError, match="already exists") as caught:
        salvage_file(log, out)
    assert caught.value.rule == "output-exists"
    with pytest.raises(SalvageRefusedError, match="already exists"):
        salvage_file(log, out, dry_run=True)
    assert snapshot_tree(tmp_path) == before


@pytest.mark.parametrize("spelling", ["same", "dotted", "hard-link"])
def test_the_source_is_never_the_output(tmp_path: Path, spelling: str) -> None:
    log, _ = damaged(tmp_path, lambda ls: ls.__setitem__(3, b"garbage\n"))
    target = log
    if spelling == "dotted":
        target = log.parent / ".." / log.parent.name / log.name
    elif spelling == "hard-link":
        target = tmp_path / "link.jsonl"
        os.link(log, target)
    before = snapshot_tree(tmp_path)
    with pytest.raises(SalvageRefusedError, match="is the source file itself") as caught:
        salvage_file(log, target)
    assert caught.value.rule == "output-is-source"
    assert snapshot_tree(tmp_path) == before


def test_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    log, lines = damaged(tmp_path, lambda ls: ls.__setitem__(3, b"garbage\n"))
    before = snapshot_tree(tmp_path)
    plan = salvage_file(log, tmp_path / "new" / "out.jsonl", dry_run=True)
    assert (plan.applied, plan.status, plan.kept_events) == (False, "would-salvage", 2)
    assert plan.kept_bytes == offset_of(lines, 3)
    assert snapshot_tree(tmp_path) == before


def test_a_rerun_finds_its_own_output_and_writes_nothing(tmp_path: Path) -> None:
    log, _ = damaged(tmp_path, lambda ls: ls.__setitem__(3, b"garbage\n"))
    out = tmp_path / "out.jsonl"
    salvage_file(log, out)
    before = snapshot_tree(tmp_path)
    again = salvage_file(log, out)
    assert (again.applied, again.existing, again.status) == (False, True, "already-salvaged")
    assert snapshot_tree(tmp_path) == before


def test_corruption_at_the_first_event_is_refused(tmp_path: Path) -> None:
    log, lines = damaged(tmp_path, lambda ls: ls.__setitem__(1, b"\x00\x00\x00\n"))
    with pytest.raises(SalvageRefusedError, match="the first event is already bad") as caught:
        salvage_file(log, tmp_path / "out.jsonl")
    assert caught.value.rule == "nothing-to-salvage"
    stop = caught.value.stop
    assert stop is not None
    assert (stop.rule, stop.line, stop.offset, stop.seq) == ("unparsable-line", 2, len(lines[0]), 0)
    assert not (tmp_path / "out.jsonl").exists()


def test_a_header_only_log_has_nothing_to_salvage(tmp_path: Path) -> None:
    log = tmp_path / "header-only.jsonl"
    write_header(log, 4)
    with pytest.raises(SalvageRefusedError, match="the log holds no event"):
        salvage_file(log, tmp_path / "out.jsonl")


def test_files_without_a_readable_header_are_typed_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    other = tmp_path / "other.jsonl"
    other.write_bytes(b'{"hello":"world"}\n')
    newer = tmp_path / "newer.jsonl"
    write_header(newer, 5)
    older = tmp_path / "older.jsonl"
    write_header(older, 3)
    with pytest.raises(NotASessionError):
        salvage_file(empty, tmp_path / "o1.jsonl")
    with pytest.raises(NotASessionError):
        salvage_file(other, tmp_path / "o2.jsonl")
    with pytest.raises(UnsupportedVersionError):
        salvage_file(newer, tmp_path / "o3.jsonl")
    with pytest.raises(SalvageRefusedError, match="format-3 log") as caught:
        salvage_file(older, tmp_path / "o4.jsonl")
    assert caught.value.rule == "needs-migration"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "empty.jsonl",
        "newer.jsonl",
        "older.jsonl",
        "other.jsonl",
    ]


def test_a_clean_log_with_an_open_turn_gets_its_closers(tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "open", turns=1, open_turn=True)
    original = log.read_bytes()
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert plan.stop is None and plan.dropped_bytes == 0
    assert plan.closers == ("step/end", "turn/end")
    data = out.read_bytes()
    assert data.startswith(original) and data != original
    assert read_log(out).classification == "ok"
    assert "nothing dropped" in salvage_text(plan.to_json())


def test_a_clean_balanced_log_salvages_to_an_identical_copy(tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "clean", turns=2)
    out = tmp_path / "out.jsonl"
    plan = salvage_file(log, out)
    assert (plan.stop, plan.closers, plan.dropped_bytes, plan.kept_events) == (None, (), 0, 11)
    assert out.read_bytes() == log.read_bytes()


def test_the_refusal_pickles_with_its_facts() -> None:
    error = SalvageRefusedError(
        "/s/a.jsonl", "nothing", rule="nothing-to-salvage", stop=Finding("r", "m", 2, 10, 0)
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is SalvageRefusedError
    assert str(copy) == str(error) == "/s/a.jsonl: cannot salvage: nothing"
    assert copy.__dict__ == error.__dict__


def test_the_package_exports_salvage_lazily() -> None:
    import importlib

    from dsh_store import salvage, store

    # Through import_module: the names exist only through the package's lazy __getattr__.
    package = importlib.import_module("dsh_store")
    assert package.salvage_file is store.salvage_file is salvage.salvage_file
    assert package.SalvagePlan is salvage.SalvagePlan
    assert package.SalvageRefusedError is salvage.SalvageRefusedError
