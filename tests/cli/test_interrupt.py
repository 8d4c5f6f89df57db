"""Ctrl-C: the installed console script exits 130 with one line and leaves every file intact.

Each test starts ``dsh-store`` as a real subprocess on work that takes a while, waits for a
sign that the command is under way (a published file, or a log held open), sends SIGINT to
it, and checks the exit code, stderr and every file. When the command finished before the
signal could land mid-work (a fast machine), the test retries with more work instead of
passing without having interrupted anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dsh_store.restore import classify, read_log
from dsh_store.verify import collect_log_files, leftover_temps
from tests.cli.conftest import CONSOLE_SCRIPT, record_session, run_script, snapshot_tree
from tests.conftest import REPO

DEMO_LOGS = sorted((REPO / "fixtures" / "demo").glob("format-*/session*.jsonl"))
INTERRUPTED = "error: interrupted; no file was left half-written\n"
ATTEMPTS = 3
START_DEADLINE_S = 20.0  # generous for a loaded machine; a healthy run starts in < 1 s


@dataclass
class Interrupted:
    """How one interrupted run ended."""

    returncode: int
    stdout: str
    stderr: str
    signalled: bool  # False: the command had already exited when the sign came


def _run_and_interrupt(args: list[str], started: Callable[[int], bool], out: Path) -> Interrupted:
    """Run ``dsh-store ARGS``; once ``started(pid)`` holds, send SIGINT; wait for the end.

    stdout and stderr go to files, so a full pipe can never stall the command.
    """
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "stdout", "w+b") as stdout, open(out / "stderr", "w+b") as stderr:
        process = subprocess.Popen(
            [str(CONSOLE_SCRIPT), *args], stdout=stdout, stderr=stderr, env=env
        )
        try:
            signalled = False
            deadline = time.monotonic() + START_DEADLINE_S
            while time.monotonic() < deadline and process.poll() is None:
                if started(process.pid):
                    os.kill(process.pid, signal.SIGINT)
                    signalled = True
                    break
                time.sleep(0.002)
            returncode = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stdout.seek(0)
        stderr.seek(0)
        return Interrupted(returncode, stdout.read().decode(), stderr.read().decode(), signalled)


def _assert_one_line_and_130(run: Interrupted) -> None:
    assert run.returncode == 130, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stderr == INTERRUPTED, run.stderr


# -- migrate: sources untouched, every published log absent or complete -----------------


def _old_store(root: Path, sessions: int) -> dict[Path, bytes]:
    """A store of ``sessions`` old-format logs (the demo fixtures, formats 0-3, round robin),
    each in the session directory of its header id. Returns every source's bytes."""
    sources: dict[Path, bytes] = {}
    for index in range(sessions):
        fixture = DEMO_LOGS[index % len(DEMO_LOGS)]
        session_id = f"s{index:05d}"
        header, _, body = fixture.read_bytes().partition(b"\n")
        row = json.loads(header)
        row["id"] = session_id
        row.pop("cwd", None)  # filed in _no-cwd: its header names no cwd
        data = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" + body
        log = root / "_no-cwd" / session_id / fixture.name
        log.parent.mkdir(parents=True)
        log.write_bytes(data)
        sources[log] = data
    return sources


def _appears(path: Path) -> Callable[[int], bool]:
    """A sign for :func:`_run_and_interrupt`: ``path`` exists."""
    return lambda _pid: path.exists()


def test_ctrl_c_during_migrate_leaves_sources_and_publications_intact(tmp_path: Path) -> None:
    assert len(DEMO_LOGS) == 4
    sessions = 300
    for attempt in range(ATTEMPTS):
        root = tmp_path / f"attempt-{attempt}" / "store"
        sources = _old_store(root, sessions)
        first = next(iter(sources)).parent / "session.v4.jsonl"  # the walk's first target
        run = _run_and_interrupt(
            ["migrate", str(root)], _appears(first), tmp_path / f"out-{attempt}"
        )
        published = [log.parent / "session.v4.jsonl" for log in sources]
        done = sum(target.exists() for target in published)
        if run.signalled and 0 < done < len(published):
            break  # interrupted mid-way: this run proves something
        sessions *= 4
    else:
        raise AssertionError(f"migrate was never interrupted mid-way ({run}, {done} published)")
    _assert_one_line_and_130(run)

    for source, data in sources.items():
        assert source.read_bytes() == data, source  # every source byte-identical
    for source, target in zip(sources, published, strict=True):
        if not target.exists():
            continue
        assert classify(target) == "ok", target
        view = read_log(target)
        assert view.torn is None and view.closers == ()
        assert view.header.id == source.parent.name
        # The published log is the source's upgrade, event for event.
        assert [e.line for e in view.events] == [e.line for e in read_log(source).events]
    # Nothing else appeared, except publish temps that verify reports beside their log.
    allowed = {*map(str, sources), *map(str, published)}
    logs = collect_log_files([root])
    reported = {temp.path for temps in leftover_temps(logs).values() for temp in temps}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if path.endswith(".tmp"):
                assert path in reported, (path, reported)
            else:
                assert path in allowed, path
    assert run_script("verify", root).returncode == 0


# -- verify: nothing written ----------------------------------------------------------


def _big_log(root: Path, turns: int) -> Path:
    """A clean v4 session of ``turns`` turns (five events each after the first turn)."""
    log = record_session(root, "big", turns=1)
    seq = len(log.read_bytes().splitlines()) - 1
    stamp = '"time":1700000000000'
    with open(log, "a", encoding="utf-8") as out:
        for turn in range(2, turns + 1):
            out.write(
                f'{{"type":"turn/start","seq":{seq},{stamp},"data":{{"turn":{turn}}}}}\n'
                f'{{"type":"step/start","seq":{seq + 1},{stamp},'
                f'"data":{{"turn":{turn},"step":1}}}}\n'
                f'{{"type":"user/message","seq":{seq + 2},{stamp},"data":{{"role":"user",'
                f'"content":[{{"type":"text","text":"question {turn}"}}],'
                f'"source":{{"kind":"user"}},"id":"user-{turn}"}},"surfaceOp":"append"}}\n'
                f'{{"type":"step/end","seq":{seq + 3},{stamp},'
                f'"data":{{"turn":{turn},"step":1}}}}\n'
                f'{{"type":"turn/end","seq":{seq + 4},{stamp},'
                f'"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}\n'
            )
            seq += 5
    return log


def _holds_open(suffix: str) -> Callable[[int], bool]:
    """A sign for :func:`_run_and_interrupt`: the process has a file ``*suffix`` open."""

    def check(pid: int) -> bool:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False
        for name in names:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}").endswith(suffix):
                    return True
            except OSError:
                continue
        return False

    return check


def test_ctrl_c_during_verify_exits_130_and_writes_nothing(tmp_path: Path) -> None:
    turns = 8_000
    for attempt in range(ATTEMPTS):
        root = tmp_path / f"attempt-{attempt}" / "store"
        log = _big_log(root, turns)
        before = snapshot_tree(root)
        run = _run_and_interrupt(
            ["verify", str(root)], _holds_open(".jsonl"), tmp_path / f"out-{attempt}"
        )
        if run.signalled and run.stdout == "":  # stopped before its report
            break
        turns *= 4
    else:
        raise AssertionError(f"verify was never interrupted mid-way ({run})")
    _assert_one_line_and_130(run)
    assert snapshot_tree(root) == before
    assert classify(log) == "ok"
