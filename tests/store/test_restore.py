"""Restore details: the Inspection view, older logs inside a store, and convergent repair."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dsh_store.errors import SessionLockedError
from dsh_store.jsonl.lock import SessionLock
from dsh_store.restore import read_log
from dsh_store.store import NeedsMigrationError, commit_repair

from .helpers import CWD, complete_turn, make_store, open_tool_turn, sidecars, snapshot


def test_inspection_describes_the_repair_it_would_make(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1)
        open_tool_turn(live, 2, ("c",), logged=1)
        path = live.path
    clean = path.stat().st_size
    with open(path, "ab") as log:
        log.write(b"\x00" * 5)
    view = store.inspect("s1")
    assert view.needs_repair
    assert (view.committed_size, view.file_size) == (clean, clean + 5)
    assert view.torn is not None
    assert (view.torn.offset, view.torn.length, view.torn.seq) == (clean, 5, 11)
    assert [e.seq for e in view.closers] == [11, 12, 13]
    assert view.balanced == view.events + view.closers
    assert view.source_version == 4
    rules = [f.rule for f in view.findings]
    assert rules == ["torn-tail", "open-turn"]


def test_repair_converges_when_closers_were_half_written(tmp_path: Path) -> None:
    """A repair that died inside its closer write, after saving the sidecar, completes."""
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1)
        open_tool_turn(live, 2, ("c",), logged=1)
        path = live.path
    clean = path.read_bytes()
    torn = b'{"type":"tool/ca'
    path.write_bytes(clean + torn)
    view = read_log(path)
    closer_bytes = b"".join(e.line for e in view.closers)
    # The state a crash leaves: sidecar published, log truncated, half the closers written
    # and not fsynced, so the watermark still says what it said before the repair.
    watermark = Path(f"{path}.durable")
    recorded = watermark.read_bytes()
    store.load("s1")
    path.write_bytes(clean + closer_bytes[:30])
    watermark.write_bytes(recorded)
    assert read_log(path).torn is not None
    with SessionLock(path.parent, "s1"):
        healed = commit_repair(read_log(path))
    assert healed.classification == "ok"
    assert path.read_bytes() == clean + closer_bytes
    (sidecar,) = sidecars(path)
    assert sidecar.read_bytes() == torn


def test_repair_needs_the_lock_and_refuses_older_logs(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        open_tool_turn(live, 1, ("c",), logged=0)
        live.flush()
        with pytest.raises(SessionLockedError, match="'s1' is open for writing elsewhere"):
            store.load("s1")
    old = tmp_path / "v3.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": "o",
        "createdAt": 1,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    old.write_bytes(orjson.dumps(header) + b"\n" + b'{"type":"turn/start","seq":0,"ti')
    with pytest.raises(NeedsMigrationError, match="run `dsh-store migrate`"):
        commit_repair(read_log(old))


def test_an_older_log_in_a_store_is_read_in_memory_and_upgraded_on_open(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    directory = tmp_path / "--home-dev-project--" / "old"
    directory.mkdir(parents=True)
    source = directory / "session.v3.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": "old",
        "createdAt": 1,
        "cwd": CWD,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    rows = [
        {"type": "turn/start", "seq": 0, "time": 2, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 3,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [header, *rows]))
    before = snapshot(source)
    assert [h.id for h in store.list()] == ["old"]
    view = store.inspect("old")
    assert (view.source_version, view.classification) == (3, "needs-migration")
    assert store.load("old").source_version == 3  # reads never write
    assert snapshot(source) == before
    assert not (directory / "session.v4.jsonl").exists()
    with store.open("old") as live:
        assert live.path == directory / "session.v4.jsonl"
        complete_turn(live, 2)
    assert snapshot(source) == before  # the source stays as the backup
    assert store.load("old").classification == "ok"
    assert store.inspect("old").source_version == 4


def test_examine_streams_without_keeping_events(tmp_path: Path) -> None:
    """Verification memory does not grow with the log: events are checked, not kept."""
    import tracemalloc

    from dsh_store.restore import examine

    def build(name: str, turns: int) -> Path:
        store = make_store(tmp_path / name)
        with store.new(name, cwd=CWD) as live:
            for turn in range(1, turns + 1):
                complete_turn(live, turn, first=turn == 1)
                live.append("plugin:bulk", {"blob": "x" * 20_000}, ignorable=True)
            return live.path

    def peak_of(path: Path) -> int:
        tracemalloc.start()
        try:
            report = examine(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.classification == "ok"
        return peak

    small, large = build("small", 100), build("large", 400)
    assert large.stat().st_size > 3.9 * small.stat().st_size
    small_peak, large_peak = peak_of(small), peak_of(large)
    # Four times the log, not four times the memory (a retained event list would be).
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)
