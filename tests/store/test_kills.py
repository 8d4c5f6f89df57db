"""SIGKILL crash tests: a real writer process killed at named failpoints and at random.

After every kill: each event whose ``flush()`` returned is on disk with the same seq, type
and data; ``inspect`` and ``load`` never raise; a second load changes nothing; reopening
and appending works. The module kills at least 50 processes (the assertion at the end
of the random series counts them).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.errors import SessionNotFoundError
from tests.conftest import REPO

from .helpers import CWD, complete_turn, fast_dir, kill_after_acks, make_store, sidecars, snapshot

pytestmark = pytest.mark.slow

SESSION = "victim"


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    # SIGKILL leaves the page cache intact, so tmpfs shows the same bytes a disk would.
    scratch = fast_dir(tmp_path)
    yield scratch / "store"
    shutil.rmtree(scratch, ignore_errors=True)


def _start(
    root: Path, turns: int, failpoint: str | None = None, skip: int = 0
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    if failpoint is not None:
        env["DSH_STORE_FAILPOINT"] = failpoint
        env["DSH_STORE_FAILPOINT_SKIP"] = str(skip)
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.writer_child", str(root), SESSION, str(turns)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )


def _acks(output: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[4:]) for line in output.splitlines() if line.startswith(b"ACK ")]


def _run_to_failpoint(
    root: Path, failpoint: str, skip: int = 0, turns: int = 6
) -> list[dict[str, Any]]:
    child = _start(root, turns, failpoint, skip)
    output, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, (failpoint, skip, output[-300:])
    assert b"DONE" not in output
    return _acks(output)


def _check_after_kill(root: Path, acked: dict[int, dict[str, Any]]) -> None:
    """The post-crash invariants; ``acked`` maps seq -> record of every acknowledged event."""
    store = make_store(root)
    try:
        view = store.inspect(SESSION)
    except SessionNotFoundError:
        assert acked == {}, "acknowledged events but no log"
        return
    loaded = store.load(SESSION)
    assert [e.seq for e in view.balanced] == [e.seq for e in loaded.events]
    on_disk = {e.seq: e for e in loaded.events}
    for seq, record in acked.items():
        event = on_disk[seq]
        assert (event.type, event.data) == (record["type"], record["data"]), seq
    assert loaded.classification == "ok"
    path = store.locate(SESSION)
    before = snapshot(path)
    assert store.load(SESSION).events == loaded.events
    assert snapshot(path) == before
    assert [p for p in path.parent.iterdir() if p.name.endswith(".partial")] == []


def _continue(root: Path) -> None:
    """Reopen and append one more complete turn; the log stays balanced and readable."""
    store = make_store(root)
    try:
        live = store.open(SESSION)
    except SessionNotFoundError:
        live = store.new(SESSION, cwd=CWD)
    with live:
        turns = sum(1 for e in live.session.events if e.type == "turn/start")
        complete_turn(live, turns + 1)
    assert make_store(root).load(SESSION).classification == "ok"


MATERIALIZE = ["materialize.after-temp-write", "materialize.before-link", "materialize.after-link"]
APPEND = ["append.before-write", "append.after-write", "append.before-fsync", "append.after-fsync"]


@pytest.mark.parametrize("failpoint", MATERIALIZE)
def test_kill_while_publishing_the_log(root: Path, failpoint: str) -> None:
    acked = _run_to_failpoint(root, failpoint)
    assert acked == []
    store = make_store(root)
    if failpoint == "materialize.after-link":
        assert store.inspect(SESSION).classification == "open-turn"  # a complete first batch
    else:
        with pytest.raises(SessionNotFoundError, match="'victim' not found"):
            store.inspect(SESSION)
        assert store.list() == []
    _check_after_kill(root, {})
    _continue(root)


@pytest.mark.parametrize("failpoint", APPEND)
@pytest.mark.parametrize("skip", [0, 3, 7])
def test_kill_while_appending(root: Path, failpoint: str, skip: int) -> None:
    # The first batch materializes the log; appends start with the second.
    acked = {r["seq"]: r for r in _run_to_failpoint(root, failpoint, skip)}
    _check_after_kill(root, acked)
    _continue(root)
    # A second writer life on the repaired log, killed again at the same point.
    more = {r["seq"]: r for r in _run_to_failpoint(root, failpoint, skip)}
    acked.update(more)
    _check_after_kill(root, acked)


@pytest.mark.parametrize("failpoint", ["repair.after-sidecar", "repair.after-truncate"])
@pytest.mark.parametrize("torn", [b'{"type":"tool/res', b"\x00" * 64])
def test_kill_during_the_repair_an_open_performs(root: Path, failpoint: str, torn: bytes) -> None:
    first = _run_to_failpoint(root, "append.after-write", skip=4)
    acked = {r["seq"]: r for r in first}
    path = make_store(root).locate(SESSION)
    with open(path, "ab") as log:  # a crash tail the next open must cut
        log.write(torn)
    cut = path.stat().st_size - len(torn)
    _run_to_failpoint(root, failpoint)  # dies inside the open's repair, before any ACK
    (sidecar,) = sidecars(path)
    assert sidecar.read_bytes().endswith(torn)
    if failpoint == "repair.after-truncate":
        assert path.stat().st_size == int(sidecar.name.rsplit("-", 1)[1]) <= cut
    _check_after_kill(root, acked)
    assert sidecars(path) == [sidecar]
    _continue(root)


# More turns than a child can write while the parent reads at most 36 of its lines: its
# ACK output (~136 bytes a line, 8 lines a turn, ~11 MB) is far beyond any pipe's buffer
# (64 KiB by default, at most fs.pipe-max-size), so it blocks on stdout long before its
# last turn and is always still running when the SIGKILL comes, however slow the parent.
# (40 turns, ~44 KB of ACKs, fit in the buffer: a child that ran on while a loaded parent
# waited for its acks could finish and exit 0 before the kill.)
UNFINISHABLE_TURNS = 10_000


def test_random_sigkills(root: Path) -> None:
    rng = random.Random(20240607)
    acked: dict[int, dict[str, Any]] = {}
    kills = 0
    for round_no in range(36):
        child = _start(root, turns=UNFINISHABLE_TURNS)
        assert child.stdout is not None
        wanted = rng.randint(1, 30)
        extra = rng.randint(0, 6) if rng.random() < 0.5 else 0
        output, _ = kill_after_acks(child, marker=b"ACK ", acks=wanted, extra_lines=extra)
        assert child.returncode == -signal.SIGKILL, (round_no, output[-300:])
        assert b"DONE" not in output
        kills += 1
        for record in _acks(output):
            acked[record["seq"]] = record
        _check_after_kill(root, acked)
        if round_no % 6 == 5:
            _continue(root)
    assert kills == 36
    assert len(acked) > 100
