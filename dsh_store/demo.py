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

from .errors import DshStoreError

__all__ = ["record_session", "run_demo"]

SESSION_ID = "demo-session"
READY = "READY"


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
    from .store import JsonlStore

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


def run_demo(root: Path | None, *, echo: Callable[[str], None]) -> int:
    """Run the whole demo in ``root`` (default: a new temp dir); return the exit code."""
    from .migrate import migrate_file
    from .store import JsonlStore
    from .verify import counts_as_failure, verify_paths

    base = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="dsh-store-demo-"))
    store_root = base / "sessions"
    echo(f"dsh-store demo in {base}")
    echo("")
    echo("1. recording a two-turn agent session in a child process (batched writer, 20 ms window)")
    child = subprocess.Popen(
        [sys.executable, "-m", "dsh_store.demo", str(store_root), SESSION_ID],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != READY:
        child.kill()
        echo(f"   the recorder failed before it was ready (exit {child.wait()})")
        return 1
    child.send_signal(signal.SIGKILL)
    child.wait()
    echo(f"2. killed the recorder with SIGKILL mid-turn (pid {child.pid}, exit {child.returncode})")

    store = JsonlStore(store_root)
    view = store.inspect(SESSION_ID)
    echo(f"3. restored {len(view.events)} durable events; classification: {view.classification}")
    echo("   closers computed in memory (nothing written yet):")
    for event in view.closers:
        code = ""
        if event.type == "tool/result":
            code = f" [{event.data.get('error', {}).get('code')}]"
        reason = event.data.get("reason", {}).get("kind") if event.type == "turn/end" else None
        echo(f"     seq {event.seq}: {event.type}{code}{f' reason={reason}' if reason else ''}")
    loaded = store.load(SESSION_ID)
    echo(f"   load committed them: {len(loaded.events)} events, now {loaded.classification}")
    with store.open(SESSION_ID) as live:
        live.append("turn/start", {"turn": 3})
        live.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
        live.flush()
        last = live.session.events[-1].seq
    echo(f"   reopened for writing: end-seed marker + a new turn, seqs continue to {last}")

    echo("4. migrating the bundled format 0-3 fixtures to format 4")
    migrated_dir = base / "fixtures"
    sources = _bundled_fixtures()
    if not sources:
        echo("   (no bundled fixtures found next to this installation; skipped)")
    for source in sources:
        # Each fixture is a session directory holding one older generation file.
        copy = migrated_dir / source.parent.name / source.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
        try:
            result = migrate_file(copy)
        except DshStoreError as error:
            echo(f"   {source.parent.name}: refused: {error}")
            continue
        echo(
            f"   {source.parent.name}/{source.name}: format {result.source_version} -> 4, "
            f"{result.events} events, published beside the untouched source"
        )

    echo("5. verifying everything")
    reports = verify_paths([store_root, migrated_dir] if sources else [store_root])
    failing = 0
    for report in reports:
        bad = counts_as_failure(report)
        failing += bad
        echo(f"   {report.classification:<16} {report.path.relative_to(base)}")
    echo("")
    echo(f"{len(reports)} file(s) verified, {failing} failing. Store left in {base}")
    return 1 if failing else 0


def _bundled_fixtures() -> list[Path]:
    """Older-format session directories: ``fixtures/demo/*/`` in a checkout."""
    here = Path(__file__).resolve().parent
    candidate = here.parent / "fixtures" / "demo"
    if not candidate.is_dir():
        return []
    return sorted(candidate.glob("*/session*.jsonl"))


def _child(argv: list[str]) -> None:
    root, session_id = Path(argv[0]), argv[1]

    def announce(message: str) -> None:
        print(message, flush=True)

    record_session(root, session_id, announce=announce)


if __name__ == "__main__":
    os.umask(0o077)
    _child(sys.argv[1:])
