"""``dsh-store demo``: record, crash, restore, migrate and verify, end to end.

1. A child process records a multi-turn agent session with tool calls through the
   batched writer (``JsonlStore.new`` + ``LiveSession``), flushing at the points a
   harness would (before a tool runs).
2. The parent kills it with SIGKILL in the middle of turn 2, after a tool call was
   logged and before its result.
3. The parent restores the session: ``inspect`` shows the closers in memory, ``load``
   commits them (``TOOL_OUTCOME_UNKNOWN`` result, ``step/end``, ``turn/end
   {interrupted}``), and a reopened writer continues the seqs.
4. The bundled format 0-3 fixtures are migrated to format 4 beside their sources.
5. Everything is verified; the report is printed.

Run as a module (``python -m dsh_store.demo ROOT ID``) it is the recording child.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import DemoRootError, DshStoreError
from .store import JsonlStore

__all__ = ["DemoRootError", "record_session", "run_demo"]

SESSION_ID = "demo-session"
READY = "READY"


def _require_new_or_empty(base: Path) -> None:
    """Refuse a root that exists and holds anything: a rerun or a user's own folder."""
    try:
        with os.scandir(base) as entries:
            if next(entries, None) is not None:
                raise DemoRootError(str(base), "the directory is not empty")
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise DemoRootError(str(base), "not a directory") from None


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _assistant(
    turn: int, step: int, message_id: str, parts: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "assistant",
            "content": parts,
            "source": {"kind": "model", "provider": "demo", "model": "demo-model"},
            "id": message_id,
        },
        "stream": [],
        "usage": {"inputTokens": 120 * step, "outputTokens": 40},
    }


def _request_header(reason: str) -> dict[str, Any]:
    return {
        "header": {
            "config": {"provider": "demo", "model": "demo-model"},
            "tools": [
                {
                    "name": "bash",
                    "description": "Run a shell command",
                    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                }
            ],
        },
        "reason": reason,
    }


def _tool_step(live: Any, turn: int, step: int, call_id: str, command: str) -> int:
    """Log a model step that asks for one tool call; return the tool/call seq."""
    live.append("step/start", {"turn": turn, "step": step})
    live.append("request/header", _request_header("initial" if turn == step == 1 else "change"))
    live.append(
        "assistant/message",
        _assistant(
            turn,
            step,
            f"msg-{turn}-{step}",
            [
                {"type": "text", "text": f"Let me run `{command}`."},
                {
                    "type": "tool-call",
                    "id": call_id,
                    "name": "bash",
                    "arguments": f'{{"command": "{command}"}}',
                },
            ],
        ),
        surface_op="append",
    )
    call = live.append(
        "tool/call",
        {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": command},
    )
    # A harness flushes before the tool runs, so a crash can tell "not started" from
    # "outcome unknown".
    live.flush()
    seq: int = call.seq
    return seq


def _tool_result(live: Any, turn: int, step: int, call_id: str, call_seq: int, text: str) -> None:
    live.append(
        "tool/result",
        {
            "turn": turn,
            "step": step,
            "message": {
                "role": "tool",
                "source": {"kind": "tool", "callId": call_id},
                "toolCallId": call_id,
                "content": _text(text),
                "isError": False,
                "id": f"result-{call_id}",
            },
        },
        surface_op="append",
        source_event_seqs=[call_seq],
    )


def record_session(root: Path, session_id: str, *, announce: Callable[[str], None]) -> None:
    """Record turn 1 completely and turn 2 up to a logged tool call, then wait to be killed."""
    store = JsonlStore(root, window_s=0.02)
    live = store.new(session_id, cwd="/home/demo/project")
    live.append("turn/start", {"turn": 1})
    live.append("step/start", {"turn": 1, "step": 1})
    live.append(
        "system/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "system",
                "content": _text("You are a careful coding agent."),
                "source": {"kind": "system-prompt"},
                "id": "sys-1",
            },
        },
        surface_op="append",
    )
    live.append(
        "user/message",
        {
            "role": "user",
            "content": _text("How many Python files are in this project?"),
            "source": {"kind": "user"},
            "id": "user-1",
        },
        surface_op="append",
    )
    live.append("step/end", {"turn": 1, "step": 1})
    call_seq = _tool_step(live, 1, 2, "call-1", "find . -name '*.py' | wc -l")
    _tool_result(live, 1, 2, "call-1", call_seq, "42")
    live.append("step/end", {"turn": 1, "step": 2})
    live.append("step/start", {"turn": 1, "step": 3})
    live.append(
        "assistant/message",
        _assistant(1, 3, "msg-1-3", _text("There are 42 Python files.")),
        surface_op="append",
    )
    live.append("step/end", {"turn": 1, "step": 3})
    live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    live.append("turn/start", {"turn": 2})
    live.append(
        "user/message",
        {
            "role": "user",
            "content": _text("Delete the build directory."),
            "source": {"kind": "user"},
            "id": "user-2",
        },
        surface_op="append",
    )
    _tool_step(live, 2, 1, "call-2", "rm -rf build/")
    announce(READY)
    # The tool "runs" forever: the parent kills this process here.
    signal.pause()


def run_demo(root: str | os.PathLike[str] | None, *, echo: Callable[[str], None]) -> int:
    """Run the whole demo in ``root`` (default: a new temp dir); return the exit code.

    ``root`` must be missing or an empty directory, so that a rerun or a folder of the
    user's is never written to; everything the demo writes stays under it. ``echo``
    gets the report, one line per call.

    :raises DemoRootError: ``root`` exists and is not an empty directory (nothing written).
    :raises DshStoreError: the recording child failed before the crash point.
    """
    # the recording child (``python -m dsh_store.demo``) never loads verify or migrate
    from .verify import counts_as_failure, verify_paths

    if root is not None:
        base = Path(root)
        _require_new_or_empty(base)
    else:
        base = Path(tempfile.mkdtemp(prefix="dsh-store-demo-"))
    store_root = base / "sessions"
    echo(f"dsh-store demo, working in {base}")
    echo("1. record: a child process writes a two-turn agent session (batched writer)")
    outcome = _record_and_kill(store_root)
    if outcome is not None:
        raise DshStoreError(
            f"the demo's recording child failed before the crash point: {outcome}; "
            f"files left in {base}"
        )
    echo("2. crash: SIGKILL while the tool of turn 2 runs (its result was never logged)")

    store = JsonlStore(store_root)
    view = store.inspect(SESSION_ID)
    echo(
        f"3. restore: {len(view.events)} durable events, {view.classification}; "
        "a load appends the closers:"
    )
    for event in view.closers:
        echo(f"     seq {event.seq:<3} {_describe_closer(event)}")
    loaded = store.load(SESSION_ID)
    with store.open(SESSION_ID) as live:
        live.append("turn/start", {"turn": 3})
        live.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
        live.flush()
        last = live.session.events[-1].seq
    echo(
        f"   after load: {loaded.classification}; reopened, end-seed + turn 3 written "
        f"(seqs continue to {last})"
    )

    fixtures = base / "fixtures"
    failing = _migrate_fixtures(fixtures, echo)
    reports = verify_paths([store_root, fixtures] if fixtures.exists() else [store_root])
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.classification] = counts.get(report.classification, 0) + 1
        if counts_as_failure(report):
            failing += 1
            echo(f"   FAIL {report.classification}: {Path(report.path).relative_to(base)}")
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    echo(f"5. verify: {len(reports)} file(s): {summary}")
    echo("")
    echo(f"{'FAILED' if failing else 'OK'}: {failing} problem(s). Files left in {base}")
    return 1 if failing else 0


def _record_and_kill(store_root: Path) -> str | None:
    """Run the recording child until it is ready, then SIGKILL it; an error or None."""
    child = subprocess.Popen(
        [sys.executable, "-m", "dsh_store.demo", str(store_root), SESSION_ID],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline().strip()
    if line != READY:
        child.kill()
        code = child.wait()
        last = (child.stderr.read().strip().splitlines() or ["no output"])[-1]
        return f"exit {code}: {last}"
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    child.stderr.close()
    return None


def _describe_closer(event: Any) -> str:
    if event.type == "tool/result":
        return f"tool/result  {event.data.get('error', {}).get('code')}"
    if event.type == "turn/end":
        return f"turn/end     reason {event.data.get('reason', {}).get('kind')}"
    return str(event.type)


def _migrate_fixtures(target: Path, echo: Callable[[str], None]) -> int:
    """Copy the bundled fixture sessions under ``target`` and migrate each; return refusals."""
    # as in run_demo: off the recording child's start
    from .migrate import migrate_file
    from .verify import iter_log_files

    sources = _bundled_fixtures()
    if not sources:
        echo("4. migrate: no bundled fixtures next to this installation; skipped")
        return 0
    echo(f"4. migrate: {len(sources)} bundled older-format session(s) to format 4")
    refused = 0
    for source in sources:
        copy = target / source.name
        shutil.copytree(source, copy)
        for log in iter_log_files(copy):
            try:
                result = migrate_file(log)
            except DshStoreError as error:
                refused += 1
                echo(f"   {source.name}: refused: {' '.join(str(error).split())}")
                continue
            echo(
                f"   {source.name + ':':<24} format {result.source_version} -> 4, "
                f"{result.events} events ({result.status})"
            )
    return refused


def _bundled_fixtures() -> list[Path]:
    """Older-format session directories: ``fixtures/demo/*/`` in a checkout."""
    candidate = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
    if not candidate.is_dir():
        return []
    return sorted(
        directory
        for directory in candidate.iterdir()
        if directory.is_dir() and any(directory.glob("session*.jsonl"))
    )


def _child(argv: list[str]) -> None:
    root, session_id = Path(argv[0]), argv[1]

    def announce(message: str) -> None:
        print(message, flush=True)

    record_session(root, session_id, announce=announce)


if __name__ == "__main__":
    os.umask(0o077)
    _child(sys.argv[1:])
