"""Benchmark group ``dsh``: peer rows against DSH's own released backend, same conversation.

DSH rc.8's JSONL backend is installed as the interoperability suite installs it
(``tests/interop/upstream.py``) and writes a conversation through its live ``SessionStore``
(``tests/interop/driver.mjs``, scripted turns of ``tests/interop/scenarios.py``: user
message, request header, streamed reasoning and tool-call chunks, tool call and result,
a streamed answer; a system prompt of about 12 KB per request). dsh-store migrates that
file to v4 (``migrate_file``), so both sides hold the same conversation, each in its own
format. Rows, each side run alternately with the other, medians:

- live append path: DSH's ``Session.append`` of every event of its conversation, then
  ``sessions.flush`` (``scripts/bench_dsh.mjs append``), against ``LiveSession.append`` of
  every event of the v4 log, then ``flush``; the ratio is DSH's time ÷ ours (target ≥ 1);
- open: DSH's ``load`` of its file against ``read_log`` of the v4 file, DSH ÷ ours.

Without npm or the registry every row is recorded as skipped, with the reason. Node times
itself with ``process.hrtime`` around the work only (not its start-up); each node process
warms up with one untimed run. Nothing here asserts a time.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, Report

sys.path.insert(0, str(REPO))

from dsh_store.migrate import migrate_file
from dsh_store.model import SessionEvent
from dsh_store.restore import read_log
from dsh_store.store import JsonlStore
from tests.interop.harness import run_driver
from tests.interop.scenarios import Script
from tests.interop.upstream import Upstream, UpstreamUnavailable, install

TIMER = Path(__file__).with_name("bench_dsh.mjs")
SESSION = "bench-dsh"
SYSTEM_WORDS = 2000  # about 12 KB of system prompt per request header
FULL_TURNS, QUICK_TURNS = 1500, 100
APPEND = ("live append path: DSH ÷ dsh-store", "DSH Session.append + flush", ">= 1.0x")
LOAD = ("open the same conversation: DSH ÷ dsh-store", "DSH load()", ">= 1.0x")


def _timer(upstream: Upstream, command: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [str(upstream.node), str(TIMER), str(upstream.packages)],
        input=json.dumps(command).encode(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"ok": False}
    if done.returncode != 0 or not result.get("ok"):
        raise RuntimeError(f"bench_dsh.mjs failed: {result.get('error')} {done.stderr[-2000:]!r}")
    return result


def write_conversation(
    upstream: Upstream, root: Path, turns: int, compression: str = "none"
) -> Path:
    """Have DSH write ``turns`` scripted turns of one session in ``compression`` (``none``
    or ``zstd``); return its log file."""
    script = Script(random.Random(15))
    system = " ".join(
        random.Random(16).choice(["alpha", "beta", "é", "日本"]) for _ in range(SYSTEM_WORDS)
    )
    script.create(SESSION)
    for turn in range(1, turns + 1):
        script.turn(SESSION, turn, system=system)
    run_driver(
        upstream,
        {
            "op": "write",
            "root": str(root),
            "compression": compression,
            "actions": script.actions,
            "clock": 1_780_000_000_000,
        },
    )
    name = "session.jsonl.zstd" if compression == "zstd" else "session.jsonl"
    (log,) = root.glob(f"*/{SESSION}/{name}")
    return log


def dsh_events(upstream: Upstream, root: Path, compression: str = "none") -> list[dict[str, Any]]:
    """DSH's own view of the conversation (its ``load``), as append inputs."""
    command = {"op": "inspect", "root": str(root), "ids": [SESSION], "mode": "load"}
    result = run_driver(upstream, {**command, "compression": compression})
    events = result["results"][SESSION]["events"]
    keep = ("type", "data", "surfaceOp", "sourceEventSeqs")
    return [{key: event[key] for key in keep if key in event} for event in events]


def ours_append(events: Sequence[SessionEvent], root: Path, encoding: str | None = None) -> float:
    """Seconds to append every v4 event through a LiveSession, then flush."""
    store = JsonlStore(root, encoding=encoding)
    start = time.perf_counter()
    live = store.new(f"append-{time.monotonic_ns()}")
    for event in events:
        live.append(
            event.type,
            event._value(),
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
        )
    live.flush()
    elapsed = time.perf_counter() - start
    live.close()
    return elapsed


def ours_load(path: Path) -> float:
    """Seconds of ``read_log`` of the v4 file."""
    start = time.perf_counter()
    inspection = read_log(path)
    elapsed = time.perf_counter() - start
    assert inspection.classification == "ok", inspection.classification
    return elapsed


def run(quick: bool) -> None:
    """Measure and record the peer rows (skipped, with the reason, without npm)."""
    report = Report("dsh")
    try:
        upstream = install()
    except UpstreamUnavailable as error:
        for name, baseline, target in (APPEND, LOAD):
            report.skipped(name, baseline, target, error.reason)
        report.print()
        return
    runs = 3 if quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-dsh-", dir=REPO) as name:
        scratch = Path(name)
        source = write_conversation(upstream, scratch / "dsh", QUICK_TURNS if quick else FULL_TURNS)
        v4 = scratch / "v4" / "session.v4.jsonl"
        v4.parent.mkdir()
        migrate_file(source, output=v4)
        ours_events = read_log(v4).events
        theirs_events = dsh_events(upstream, scratch / "dsh")
        report.value(
            "DSH log (format 0, packed chunk rows)",
            f"{source.stat().st_size / 1e6:.1f} MB, {len(theirs_events)} events",
        )
        report.value(
            "the same conversation in v4",
            f"{v4.stat().st_size / 1e6:.1f} MB, {len(ours_events)} events",
        )
        append_ours, append_theirs, load_ours, load_theirs = [], [], [], []
        command = {"root": str(scratch / "dsh-append"), "cwd": "/home/dev/project"}
        for run_index in range(runs):
            append_ours.append(ours_append(ours_events, scratch / "ours-append"))
            result = _timer(
                upstream,
                {
                    **command,
                    "op": "append",
                    "id": f"a{run_index}",
                    "runs": 2,
                    "events": theirs_events,
                },
            )
            append_theirs.append(result["seconds"][-1])
            load_ours.append(ours_load(v4))
            result = _timer(
                upstream, {"op": "load", "root": str(scratch / "dsh"), "id": SESSION, "runs": 2}
            )
            load_theirs.append(result["seconds"][-1])
        mine, theirs = statistics.median(append_ours), statistics.median(append_theirs)
        report.value("dsh-store LiveSession.append + flush", f"{mine:.3f} s")
        report.value("DSH Session.append + flush", f"{theirs:.3f} s")
        report.ratio(APPEND[0], theirs, mine, APPEND[2], baseline_name=APPEND[1])
        mine, theirs = statistics.median(load_ours), statistics.median(load_theirs)
        report.value("dsh-store read_log of the v4 file", f"{mine:.3f} s")
        report.value("DSH load() of its file", f"{theirs:.3f} s")
        report.ratio(LOAD[0], theirs, mine, LOAD[2], baseline_name=LOAD[1])
    report.print()


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
