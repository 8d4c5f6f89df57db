"""History check (Jepsen/LazyFS style): concurrent producers, real SIGKILL, then the log.

A child process (``history_child``) shares one ``JsonlStore`` among four threads, each
appending complete turns to its own session and flushing at random points. Every thread
prints its client-side history: ``INVOKE`` before an append, ``OK`` once the ``flush()``
covering the event has returned. The parent kills the child with SIGKILL after a random
number of OKs and then compares each session's log with that history:

1. every OK'd event is on disk with the same seq, type and data (acknowledged means durable);
2. every new event on disk was INVOKEd (or is the ``session/end-seed`` marker a reopen
   writes by itself), carries exactly the payload its thread generates, and the new events
   are a prefix of that sequence — so order is the invoke order, seqs are dense from 0,
   there are no duplicates and nothing appears that no client asked for; the events from
   earlier rounds are unchanged;
3. ``load`` repairs the log to classification ``ok`` with exactly the closers ``inspect``
   predicted, and a second load changes no byte.

Histories accumulate: the next round's child reopens every session (repair, end-seed) and
carries on, and every OK from every earlier round is checked again after each kill. Some
rounds use the default 50 ms write-behind window, some ``window_s=0``. Counting kills and
checked OKs keeps the test from passing vacuously.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.errors import SessionNotFoundError
from dsh_store.model import SessionEvent
from tests.conftest import REPO

from .helpers import fast_dir, kill_after_acks, make_store, snapshot
from .history_child import session_id, turn_events

pytestmark = pytest.mark.slow

THREADS = 4
ROUNDS = 18
SESSIONS = [session_id(i) for i in range(THREADS)]
WATCHDOG_S = 30.0  # a child that stops printing is killed and the round fails

Triple = tuple[int, str, Any]  # (seq, type, data)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    # SIGKILL leaves the page cache intact, so tmpfs shows the same bytes a disk would.
    scratch = fast_dir(tmp_path)
    yield scratch / "store"
    shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class History:
    """One session's client-side history of one child life."""

    invoked: list[tuple[int, str]] = field(default_factory=list)
    ok: dict[int, dict[str, Any]] = field(default_factory=dict)


def _start(root: Path, seed: int, window_s: float) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    env["PYTHONPATH"] = str(REPO)
    args = [str(root), str(seed), str(window_s), str(THREADS), "100000"]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.history_child", *args],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )


def _parse(output: bytes) -> dict[str, History]:
    """Per-session histories; a last line cut by the kill is ignored (nothing followed it)."""
    histories = {sid: History() for sid in SESSIONS}
    for raw in output.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            continue
        line = raw.decode()
        assert not line.startswith(("ERROR", "DONE")), line
        kind, sid, seq, rest = line.rstrip("\n").split(" ", 3)
        if kind == "INVOKE":
            histories[sid].invoked.append((int(seq), rest))
        else:
            assert kind == "OK", line
            assert int(seq) not in histories[sid].ok, ("acknowledged twice", sid, seq)
            histories[sid].ok[int(seq)] = orjson.loads(rest)
    return histories


def _expected(sid: str, known: list[Triple], invoked: list[tuple[int, str]]) -> list[Triple]:
    """The events this child life may have written, in order.

    Reopening a stored log queues the store's own ``session/end-seed {}`` marker first
    (unless the log already ends in one) — possibly written before the thread could print
    anything, so it is predicted here, not announced. Then one event per INVOKE, with the
    payload the thread's turn builder produces for it.
    """
    out: list[Triple] = []
    if known and known[-1][1] != "session/end-seed":
        out.append((len(known), "session/end-seed", {}))
    turn = sum(1 for _, type_, _ in known if type_ == "turn/start")
    position = 0
    for seq, type_ in invoked:
        assert seq == len(known) + len(out), (sid, "invoked seqs not dense", seq, out[-1:])
        if type_ == "turn/start":
            turn, position = turn + 1, 0
        else:
            position += 1
        built_type, data, _ = turn_events(sid, turn)[position]
        assert built_type == type_, (sid, seq, built_type, type_)
        out.append((seq, type_, data))
    return out


def _triples(events: tuple[SessionEvent, ...]) -> list[Triple]:
    return [(e.seq, e.type, e.data) for e in events]


def _check_session(
    root: Path,
    sid: str,
    known: list[Triple],
    history: History,
    all_acked: dict[int, dict[str, Any]],
) -> list[Triple]:
    """Check one session after a kill; returns its loaded (repaired) events."""
    store = make_store(root)
    try:
        view = store.inspect(sid)
    except SessionNotFoundError:
        # The first batch was never published: nothing may have been acknowledged.
        assert known == [] and all_acked == {} and history.ok == {}, sid
        return []
    stored = _triples(view.events)
    assert [seq for seq, _, _ in stored] == list(range(len(stored))), (sid, "seqs not dense")
    # Earlier rounds: unchanged, byte-for-byte in seq, type and data.
    assert stored[: len(known)] == known, (sid, "earlier history changed")
    # This round: exactly a prefix of what the thread invoked, in invoke order, and each
    # event carries the payload the thread built for it.
    expected = _expected(sid, known, history.invoked)
    new = stored[len(known) :]
    assert new == expected[: len(new)], (sid, "an event that was never invoked, or reordered")
    # Acknowledged events: a dense run from the first live seq, all durable and unchanged.
    if history.ok:
        first = min(history.ok)
        assert sorted(history.ok) == list(range(first, first + len(history.ok))), sid
    on_disk = {seq: (type_, data) for seq, type_, data in stored}
    for seq, record in all_acked.items():
        assert seq in on_disk, (sid, "acknowledged event lost", seq, record)
        assert on_disk[seq] == (record["type"], record["data"]), (sid, "changed", seq)
    for seq, record in history.ok.items():
        assert (seq, record["type"], record["data"]) == expected[seq - len(known)], (sid, seq)
    # The repair: load commits exactly the predicted closers; a second load is a no-op.
    loaded = store.load(sid)
    assert loaded.classification == "ok", (sid, loaded.classification)
    assert _triples(loaded.events) == _triples(view.balanced), sid
    path = store.locate(sid)
    before = snapshot(path)
    again = store.load(sid)
    assert _triples(again.events) == _triples(loaded.events)
    assert snapshot(path) == before, (sid, "second load wrote")
    return _triples(loaded.events)


def _run_round(root: Path, rng: random.Random, round_no: int) -> dict[str, History]:
    window_s = 0.0 if round_no % 3 == 2 else 0.05
    child = _start(root, seed=round_no, window_s=window_s)
    assert child.stdout is not None
    watchdog = threading.Timer(WATCHDOG_S, child.kill)
    watchdog.start()
    try:
        wanted = rng.randint(5, 120)
        extra = rng.randint(1, 40) if rng.random() < 0.5 else 0
        output, oks = kill_after_acks(child, marker=b"OK ", acks=wanted, extra_lines=extra)
    finally:
        watchdog.cancel()
    assert oks == wanted, (round_no, "the child stopped before the kill", output[-300:])
    assert child.returncode == -signal.SIGKILL, (round_no, child.returncode)
    return _parse(output)


def test_acknowledged_history_survives_sigkill(root: Path) -> None:
    rng = random.Random(20240611)
    known: dict[str, list[Triple]] = {sid: [] for sid in SESSIONS}
    acked: dict[str, dict[int, dict[str, Any]]] = {sid: {} for sid in SESSIONS}
    kills = 0
    checked_oks = 0
    for round_no in range(ROUNDS):
        histories = _run_round(root, rng, round_no)
        kills += 1
        for sid in SESSIONS:
            history = histories[sid]
            known[sid] = _check_session(root, sid, known[sid], history, acked[sid] | history.ok)
            acked[sid].update(history.ok)
            checked_oks += len(history.ok)
    assert kills == ROUNDS
    # Enough acknowledged events that the checks above bite. The kill counts OKs over all
    # threads, so how they split between sessions is up to the scheduler: under load one
    # thread can be starved for whole rounds. Every session must still have been checked.
    assert checked_oks >= 1000, checked_oks
    assert all(len(acked[sid]) >= 5 for sid in SESSIONS), {s: len(a) for s, a in acked.items()}
