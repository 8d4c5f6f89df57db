"""The store contract (upstream §5.1 and the JSONL items of §5.2/§5.3, in our API)."""

from __future__ import annotations

import datetime
import math
import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.errors import (
    CorruptLogError,
    EventValidationError,
    LosslessJsonError,
    SessionExistsError,
    SessionNotFoundError,
)
from dsh_store.model import SessionEvent, interrupted_closers
from dsh_store.model.closers import TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN_TEXT
from dsh_store.store import JsonlStore

from .helpers import (
    CWD,
    complete_turn,
    file_lines,
    make_store,
    open_tool_turn,
    sidecars,
    snapshot,
    tool_turn,
)


def _one_turn(store: JsonlStore, session_id: str = "s1", **header: Any) -> Path:
    with store.new(session_id, cwd=CWD, **header) as live:
        complete_turn(live, 1)
        live.flush()
        return live.path


def _crashed(store: JsonlStore, session_id: str = "s1") -> Path:
    """One complete turn, then an open turn (turn/start, step/start): a crashed writer."""
    with store.new(session_id, cwd=CWD) as live:
        complete_turn(live, 1)
        live.append("turn/start", {"turn": 2})
        live.append("step/start", {"turn": 2, "step": 1})
        live.flush()
        return live.path


def _revision(store: JsonlStore, session_id: str) -> str:
    return dict((header.id, revision) for header, revision in store.snapshots())[session_id]


# -- round trip --------------------------------------------------------------------------


def test_round_trip_returns_identical_header_events_and_bytes(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        complete_turn(live, 1, first=True)
        tool_turn(live, 2)
        live.flush()
        written = live.session.events
        header = live.session.header
        path = live.path
    loaded = store.load("s1")
    assert loaded.header == header
    assert loaded.events == written
    assert [(e.type, e.seq, e.time, e.data) for e in loaded.events] == [
        (e.type, e.seq, e.time, e.data) for e in written
    ]
    assert loaded.closers == ()
    assert file_lines(path) == [header.encode(), *(e.line for e in written)]
    assert loaded.classification == "ok"


def test_header_fields_round_trip(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    _one_turn(store, "parent")
    with store.new(
        "child",
        cwd=CWD,
        parent_session="parent",
        origin="subagent",
        delegation_depth=2,
        agent_preset="reviewer",
    ) as live:
        complete_turn(live, 1, first=True)
    header = store.load("child").header
    assert (header.parent_session, header.origin, header.delegation_depth) == (
        "parent",
        "subagent",
        2,
    )
    assert (header.agent_preset, header.cwd, header.is_seeded) == ("reviewer", CWD, False)
    first = orjson.loads(file_lines(store.locate("child"))[0])
    assert list(first) == [
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "isSeeded",
        "origin",
        "delegationDepth",
        "agentPreset",
    ]
    assert {h.id for h in store.list()} == {"parent", "child"}


def test_new_refuses_an_existing_id(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _one_turn(store)
    with pytest.raises(SessionExistsError, match="already exists") as caught:
        store.new("s1", cwd="/elsewhere")
    assert caught.value.path == str(path)


def test_missing_session_is_not_found(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    for call in (store.inspect, store.load, store.open):
        with pytest.raises(SessionNotFoundError, match="'nope' not found under"):
            call("nope")
    with pytest.raises(SessionNotFoundError, match="not found"):
        store.read_from("nope", 0)


# -- crash recovery ----------------------------------------------------------------------


def test_crash_recovery_inspect_is_pure_load_commits(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _crashed(store)
    before = snapshot(path)
    revision = _revision(store, "s1")
    view = store.inspect("s1")
    assert [e.type for e in view.balanced[-4:]] == [
        "turn/start",
        "step/start",
        "step/end",
        "turn/end",
    ]
    assert [e.seq for e in view.balanced] == list(range(10))
    assert view.classification == "open-turn"
    assert snapshot(path) == before
    assert _revision(store, "s1") == revision

    loaded = store.load("s1")
    assert [e.seq for e in loaded.events] == list(range(10))
    assert loaded.events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert loaded.closers == ()
    assert _revision(store, "s1") != revision
    assert file_lines(path)[:-2] == before[0].splitlines(keepends=True)

    with store.open("s1") as live:
        assert live.session.seq == 11  # the end-seed marker took seq 10
        live.append("turn/start", {"turn": 3})
        live.flush()
    reloaded = store.load("s1")  # closes turn 3, left open by the writer
    assert [e.seq for e in reloaded.events] == list(range(13))
    assert [e.type for e in reloaded.events[10:]] == ["session/end-seed", "turn/start", "turn/end"]
    assert reloaded.events[10].data == {}


def test_closers_for_unstarted_and_unfinished_tool_calls(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.new("s1", cwd=CWD) as live:
        open_tool_turn(live, 1, ("c-logged", "c-never"), logged=1)
        live.flush()
        events = live.session.events
    loaded = store.load("s1")
    closers = loaded.events[len(events) :]
    assert [e.type for e in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
    logged, never = closers[0].data, closers[1].data
    assert logged["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert logged["message"]["content"][0]["text"] == TOOL_OUTCOME_UNKNOWN_TEXT
    assert closers[0].source_event_seqs == (events[-1].seq,)
    assert logged["message"]["id"] == f"interrupted-tool-result-c-logged-{closers[0].seq}"
    assert never["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert never["message"]["content"][0]["text"] == TOOL_NOT_STARTED_TEXT
    assert closers[1].source_event_seqs is None
    assert never["message"]["isError"] is True
    assert closers[3].data["reason"] == {"kind": "interrupted"}
    assert list(closers) == interrupted_closers(events)
    # The resumed session pairs each call with its error result.
    with store.open("s1") as live:
        messages = live.session.derive_messages()
    results = [m for m in messages if m.get("role") == "tool"]
    assert [m["toolCallId"] for m in results] == ["c-logged", "c-never"]


def test_a_second_load_changes_nothing(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _crashed(store)
    store.load("s1")
    after_first = snapshot(path)
    again = store.load("s1")
    assert snapshot(path) == after_first
    assert again.classification == "ok"


# -- listing and revisions ---------------------------------------------------------------


def test_list_and_snapshots_leave_out_never_written_sessions(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert store.list() == []
    assert store.snapshots() == []
    store.new("ghost", cwd=CWD).close()
    _one_turn(store, "real")
    assert [h.id for h in store.list()] == ["real"]
    assert [h.id for h, _ in store.snapshots()] == ["real"]
    with pytest.raises(SessionNotFoundError, match="'ghost' not found"):
        store.inspect("ghost")


def test_revisions_are_stable_then_change(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    _one_turn(store)
    first = store.snapshots()
    assert store.snapshots() == first
    assert JsonlStore(tmp_path).snapshots() == first  # a new store object on the same root
    assert store.inspect("s1").revision == first[0][1]
    with store.open("s1") as live:
        live.flush()
    assert store.snapshots()[0][1] != first[0][1]


# -- read_from ---------------------------------------------------------------------------


def test_read_from_slices_the_physical_log(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    _crashed(store)
    whole = store.read_from("s1", 0)
    assert [e.seq for e in whole] == list(range(8))
    assert [e.seq for e in store.read_from("s1", 3)] == list(range(3, 8))
    assert store.read_from("s1", 8) == []
    assert store.read_from("s1", 1000) == []
    assert whole[-1].type == "step/start"  # no closers for the open turn
    for bad in (-1, 1.5, True, "0", None):
        with pytest.raises(EventValidationError, match="non-negative integer seq") as caught:
            store.read_from("s1", bad)  # type: ignore[arg-type]
        assert caught.value.rule == "read-from-seq"


def test_read_from_never_returns_the_torn_fragment(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _one_turn(store)
    with open(path, "ab") as log:
        log.write(b'{"type":"turn/start","seq":6,"ti')
    assert [e.seq for e in store.read_from("s1", 0)] == list(range(6))


# -- store.append ------------------------------------------------------------------------


def _event(kind: str, seq: int, data: Any) -> SessionEvent:
    return SessionEvent(kind, seq, 5, data)


def test_store_append_continues_and_checks_seqs(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _one_turn(store)
    size = path.stat().st_size
    with pytest.raises(EventValidationError, match="expected seq 6 at batch index 0, got 0") as e:
        store.append("s1", [_event("turn/start", 0, {"turn": 2})])
    assert e.value.rule == "append-seq-mismatch"
    with pytest.raises(EventValidationError, match="expected seq 7 at batch index 1, got 8"):
        store.append(
            "s1",
            [_event("turn/start", 6, {"turn": 2}), _event("step/start", 8, {"turn": 2, "step": 1})],
        )
    assert path.stat().st_size == size
    store.append("s1", [])
    assert path.stat().st_size == size
    store.append(
        "s1",
        [_event("turn/start", 6, {"turn": 2}), _event("step/start", 7, {"turn": 2, "step": 1})],
    )
    assert [e.seq for e in store.read_from("s1", 6)] == [6, 7]


def test_store_append_commits_a_pending_repair_first(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _crashed(store)
    with pytest.raises(EventValidationError, match="expected seq 10 at batch index 0, got 8"):
        store.append("s1", [_event("turn/start", 8, {"turn": 3})])
    # The repair was committed (it is what made seq 10 the next one).
    assert store.inspect("s1").classification == "ok"
    store.append("s1", [_event("turn/start", 10, {"turn": 3})])
    assert [e.type for e in store.read_from("s1", 8)] == ["step/end", "turn/end", "turn/start"]
    assert path.exists()


def test_store_append_validates_the_model_rules(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _one_turn(store)
    size = path.stat().st_size
    with pytest.raises(EventValidationError, match=r"\[rule: outside-turn\]") as caught:
        store.append("s1", [_event("step/start", 6, {"turn": 2, "step": 1})])
    assert caught.value.seq == 6
    assert path.stat().st_size == size


# -- lossless JSON and lazy materialization ---------------------------------------------


def _cycle() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (math.nan, "NaN is not JSON"),
        (math.inf, "inf is not JSON"),
        (-0.0, "-0.0 does not survive"),
        ({1, 2}, "set is not a JSON value"),
        (object(), "object is not a JSON value"),
        (b"raw", "bytes is not a JSON value"),
        (2**60, "outside ±(2^53 - 1)"),
        ({1: "a"}, "dict key 1 has type int"),
        (datetime.date(2024, 1, 1), "datetime.date is not a JSON value"),
        (_cycle(), "reference cycle"),
    ],
)
def test_non_json_data_is_refused_and_nothing_is_written(
    tmp_path: Path, bad: object, reason: str
) -> None:
    store = make_store(tmp_path)
    live = store.new("s1", cwd=CWD)
    with pytest.raises(LosslessJsonError, match=r"not lossless JSON at data\.x") as caught:
        live.append("turn/start", {"turn": 1, "x": bad})
    assert reason in str(caught.value)
    assert caught.value.event_type == "turn/start"
    assert live.session.seq == 0
    live.close()
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert store.list() == []


def test_materialization_is_lazy_and_locate_is_pure(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = make_store(root)
    expected = root / "--home-dev-project--" / "s1" / "session.v4.jsonl"
    assert store.locate("s1", CWD) == expected
    live = store.new("s1", cwd=CWD)
    assert store.locate("s1", CWD) == expected
    assert not root.exists()
    live.append("turn/start", {"turn": 1})
    assert not expected.exists() or live.durable_seq == 0  # only the writer creates it
    live.flush()
    assert expected.exists()
    assert store.locate("s1") == expected
    live.close()


def test_file_and_directory_modes(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        root = tmp_path / "root"
        store = make_store(root)
        path = _crashed(store)
        with open(path, "ab") as log:
            log.write(b'{"torn')
        store.load("s1")
    finally:
        os.umask(old)

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert mode(path.parent.parent) == 0o700
    assert mode(root) == 0o700
    assert mode(path.parent / "session.lock") == 0o600
    assert [mode(p) for p in sidecars(path)] == [0o600]


# -- resume and end-seed -----------------------------------------------------------------


def test_resume_writes_end_seed_first_and_never_the_seed(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _one_turn(store)
    before = path.read_bytes()
    with store.open("s1") as live:
        assert live.session.first_live_seq == 6
        live.append("turn/start", {"turn": 2})
        live.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    after = path.read_bytes()
    assert after.startswith(before)
    added = [orjson.loads(line) for line in after[len(before) :].splitlines()]
    assert [(e["seq"], e["type"]) for e in added] == [
        (6, "session/end-seed"),
        (7, "turn/start"),
        (8, "turn/end"),
    ]
    assert added[0]["data"] == {}


def test_resume_adds_no_second_marker(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _one_turn(store)
    with store.open("s1"):
        pass
    once = path.read_bytes()
    assert once.splitlines()[-1].startswith(b'{"type":"session/end-seed","seq":6')
    with store.open("s1") as live:
        assert live.session.seq == 7
    assert path.read_bytes() == once


# -- identity and committed bytes --------------------------------------------------------


def test_a_log_filed_under_another_id_is_refused_before_any_repair(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    own = _crashed(store, "a")
    _one_turn(store, "b")
    with open(own, "ab") as log:
        log.write(b'{"type":"tu')
    misfiled = store.locate("b")
    misfiled.write_bytes(own.read_bytes())
    before = (snapshot(own), snapshot(misfiled))
    for call in (store.load, store.open, store.inspect, lambda i: store.read_from(i, 0)):
        with pytest.raises(CorruptLogError, match="header names session 'a'") as caught:
            call("b")
        assert caught.value.rule == "identity-binding"
        assert caught.value.line == 1
    with pytest.raises(CorruptLogError, match="filed as session 'b'"):
        store.append("b", [_event("turn/start", 8, {"turn": 3})])
    assert (snapshot(own), snapshot(misfiled)) == before
    assert sidecars(misfiled) == []


def test_committed_bytes_are_never_rewritten(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    path = _crashed(store)
    torn = b'\n{"partial'
    with open(path, "ab") as log:
        log.write(torn)
    old = path.read_bytes()
    cut = len(old) - len(torn)  # an empty line then a fragment: all of it is crash tail
    store.load("s1")
    with store.open("s1") as live:
        live.append("turn/start", {"turn": 3})
    new = path.read_bytes()
    assert new.startswith(old[:cut])
    (sidecar,) = sidecars(path)
    assert sidecar.name == f"session.v4.jsonl.torn-{cut}"
    assert sidecar.read_bytes() == old[cut:]


def test_store_append_continues_its_own_open_turn_across_calls(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    _one_turn(store)
    first = len(store.inspect("s1").events)
    store.append(
        "s1",
        [
            _event("turn/start", first, {"turn": 2}),
            _event("step/start", first + 1, {"turn": 2, "step": 1}),
        ],
    )
    # The turn left open by that call is not a crash: the next call continues it.
    store.append("s1", [_event("step/end", first + 2, {"turn": 2, "step": 1})])
    store.append(
        "s1", [_event("turn/end", first + 3, {"turn": 2, "reason": {"kind": "completed"}})]
    )
    types = [event.type for event in store.inspect("s1").events][first:]
    assert types == ["turn/start", "step/start", "step/end", "turn/end"]

    # Another store object (another process) sees an open turn it did not write: a crash.
    store.append("s1", [_event("turn/start", first + 4, {"turn": 3})])
    other = make_store(tmp_path)
    other.append("s1", [_event("turn/start", first + 6, {"turn": 4})])
    types = [event.type for event in other.inspect("s1").events][first + 4 :]
    assert types == ["turn/start", "turn/end", "turn/start"]  # turn 3 closed as interrupted
    # After that change by someone else, this store too treats turn 4 as a crash.
    store.append("s1", [_event("turn/start", first + 8, {"turn": 5})])
    types = [event.type for event in store.inspect("s1").events][first + 6 :]
    assert types == ["turn/start", "turn/end", "turn/start"]


def test_unreadable_entries_do_not_hide_the_rest_of_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path)
    good = _one_turn(store, "good")
    with store.new("locked-out", cwd="/elsewhere") as live:
        complete_turn(live, 1)
        hidden_project = live.path.parent.parent
    with store.new("unreadable-log", cwd="/third") as live:
        complete_turn(live, 1)
        unreadable = live.path
    real_iterdir, real_open, real_lstat = Path.iterdir, os.open, os.lstat

    def iterdir(self: Path) -> Any:
        if self == hidden_project:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    def open_(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == str(unreadable):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if Path(os.fspath(path)).parent == hidden_project:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "lstat", lstat)
    assert [header.id for header in store.list()] == ["good"]
    assert store.inspect("good").path == good  # another project's denial is not in the way
    with pytest.raises(SessionNotFoundError):
        store.inspect("locked-out")
