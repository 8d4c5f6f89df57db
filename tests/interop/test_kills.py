"""Real SIGKILLs of the upstream writer, then both readers on what it left.

Each kill runs the driver writing two sessions turn by turn through DSH's live write path
(packed chunk rows on or off, a 1-3 ms batching window so background writes are in flight,
checkpoint flushes), waits for a seeded number of its checkpoints plus a seeded 0-4 ms, and
SIGKILLs it. Every session log left behind is judged by upstream's ``inspect`` and by
dsh-store's ``read_log``, compared as in ``tests/interop/__init__.py``; then upstream's
``load`` repairs it and dsh-store must read the repaired log with the same events and no
closer. ``DSH_STORE_INTEROP_KILLS`` sets the number of kills (default 20).

The kills run once with raw logs and once with ``"compression": "zstd"``
(``session.jsonl.zstd``: a torn final frame instead of a torn line).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from dsh_store.jsonl.scan import LogScanner
from tests.interop.conftest import SEED, Written, inspect_all
from tests.interop.harness import ours, run_driver, spawn_driver, theirs
from tests.interop.scenarios import Script
from tests.interop.upstream import Upstream

KILLS = int(os.environ.get("DSH_STORE_INTEROP_KILLS", "20"))
SESSIONS = ("alpha", "beta")


def _script(rng: random.Random) -> Script:
    script = Script(rng)
    for session in SESSIONS:
        script.create(session)
    for turn in range(1, 4):
        for session in SESSIONS:
            script.turn(session, turn)
    return script


def _kill_one(
    upstream: Upstream, root: Path, rng: random.Random, packed: bool, compression: str = "none"
) -> list[str]:
    """Run one writer, SIGKILL it at a seeded point; the sessions it left on disk."""
    script = _script(rng)
    checkpoints = sum(1 for action in script.actions if action["do"] == "progress")
    command = {
        "op": "write",
        "root": str(root),
        "compression": compression,
        "packChunks": packed,
        "windowMs": rng.randint(1, 3),
        "actions": script.actions,
    }
    wait_for = rng.randint(1, checkpoints - 1)
    delay = rng.uniform(0, 0.004)
    process = spawn_driver(upstream, command)
    assert process.stdout is not None and process.stderr is not None
    try:
        seen = 0
        while seen < wait_for:
            line = process.stdout.readline()
            assert line, f"writer ended early: {process.stderr.read()!r}"
            seen += line.startswith(b'{"progress"')
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    name = "session.jsonl.zstd" if compression == "zstd" else "session.jsonl"
    return [session for session in SESSIONS if list(root.glob(f"*/{session}/{name}"))]


@pytest.mark.requires("upstream")
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_sigkilled_upstream_writers_leave_logs_both_readers_agree_on(
    upstream: Upstream, tmp_path: Path, compression: str
) -> None:
    states = interrupted = torn = 0
    for kill in range(KILLS):
        rng = random.Random(f"{SEED}-kill-{kill}")
        packed = kill % 2 == 0
        root = tmp_path / f"kill-{kill}" / "store"
        sessions = _kill_one(upstream, root, rng, packed, compression)
        store = Written(root, packed, tuple(sessions), frozenset(), compression)
        reports = inspect_all(upstream, root, store.sessions, compression=compression)
        for session in sessions:
            where = f"kill {kill} (seed {SEED}), {store.log(session)}"
            upstream_verdict = theirs(reports[session])
            our_verdict = ours(store.log(session))
            assert our_verdict.structure == upstream_verdict.structure, where
            interrupted += bool(upstream_verdict.closers)
            torn += LogScanner(store.log(session)).exhaust().torn is not None
            if not upstream_verdict.tool_closers:
                assert our_verdict.conversation == upstream_verdict.conversation, where
            states += 1
        loads = inspect_all(upstream, root, store.sessions, mode="load", compression=compression)
        for session in sessions:
            where = f"kill {kill} (seed {SEED}), repaired {store.log(session)}"
            upstream_verdict = theirs(loads[session])
            assert upstream_verdict.accepted and upstream_verdict.closers == (), where
            assert ours(store.log(session)).structure == upstream_verdict.structure, where
            states += 1
    print(
        f"\nSIGKILL ({compression}): {KILLS} kills, {states} crash states compared, "
        f"{interrupted} logs left with an open turn, {torn} with a torn line (seed {SEED})"
    )
    assert states >= KILLS
    assert interrupted >= KILLS // 2  # the kills land mid-session, not between sessions


@pytest.mark.requires("upstream")
def test_the_driver_writes_zstd_logs_upstream_reads_back(
    upstream: Upstream, tmp_path: Path
) -> None:
    """The zstd switch of the driver: the upstream backend writes ``session.jsonl.zstd``
    (header frame plus one frame per batch) and reads it back with closers."""
    root = tmp_path / "store"
    script = Script(random.Random(f"{SEED}-zstd"))
    script.create("zipped")
    script.turn("zipped", 1)
    script.turn("zipped", 2, stop="outcome-unknown")
    base = {"root": str(root), "compression": "zstd"}
    run_driver(upstream, {"op": "write", **base, "actions": script.actions})
    (log,) = root.glob("*/zipped/session.jsonl.zstd")
    assert log.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    command = {"op": "inspect", **base, "ids": ["zipped"]}
    report = run_driver(upstream, command)["results"]["zipped"]
    assert theirs(report).closers[0][2] == "TOOL_OUTCOME_UNKNOWN"
