"""Shared builders for the store suites: a deterministic clock, canned logs.

The event payloads come from ``tests.model.builders``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from dsh_store.model import SessionEvent
from dsh_store.store import JsonlStore, LiveSession
from tests.model import builders
from tests.model.builders import assistant, system, tool_call, tool_result, user

CWD = "/home/dev/project"


def ticking_clock(start: int = 1_700_000_000_000) -> Callable[[], int]:
    """A deterministic epoch-ms clock: start, start+1, ..."""
    return builders.ticking_clock(start)


def make_store(root: str | os.PathLike[str], **options: Any) -> JsonlStore:
    """A store with a short window and a deterministic clock (overridable)."""
    options.setdefault("window_s", 0.002)
    options.setdefault("clock", ticking_clock())
    return JsonlStore(root, **options)


def complete_turn(live: LiveSession, turn: int, *, first: bool = False) -> None:
    """A balanced turn: (system head,) user prompt, assistant reply."""
    live.append("turn/start", {"turn": turn})
    live.append("step/start", {"turn": turn, "step": 1})
    if first:
        live.append("system/message", system(turn, 1), surface_op="append")
    live.append("user/message", user(f"prompt {turn}", f"m-u{turn}"), surface_op="append")
    live.append(
        "assistant/message",
        assistant(turn, 1, f"reply {turn}", message_id=f"m-a{turn}"),
        surface_op="append",
    )
    live.append("step/end", {"turn": turn, "step": 1})
    live.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def tool_turn(live: LiveSession, turn: int) -> None:
    """A balanced two-step turn with a tool call, its result and a non-ASCII reply."""
    live.append("turn/start", {"turn": turn})
    live.append("step/start", {"turn": turn, "step": 1})
    live.append("user/message", user(f"run it {turn}", f"m-u{turn}"), surface_op="append")
    call = f"call-{turn}"
    live.append(
        "assistant/message",
        assistant(turn, 1, None, (call,), message_id=f"m-a{turn}"),
        surface_op="append",
    )
    call_event = live.append("tool/call", tool_call(turn, 1, call))
    live.append(
        "tool/result",
        tool_result(turn, 1, call, 'déjà vu ✓ "quoted"'),
        surface_op="append",
        source_event_seqs=[call_event.seq],
    )
    live.append("step/end", {"turn": turn, "step": 1})
    live.append("step/start", {"turn": turn, "step": 2})
    live.append(
        "assistant/message",
        assistant(turn, 2, "fertig — 完成", message_id=f"m-a{turn}b"),
        surface_op="append",
    )
    live.append("step/end", {"turn": turn, "step": 2})
    live.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def replace_user(live: LiveSession, target_seq: int, text: str = "edited prompt") -> SessionEvent:
    """A ``user/message`` that replaces the surface node ``target_seq``."""
    return live.append(
        "user/message",
        user(text, f"m-edit-{target_seq}"),
        surface_op={"op": "replace", "startSeq": target_seq, "endSeq": target_seq},
        source_event_seqs=[target_seq],
    )


def open_tool_turn(
    live: LiveSession,
    turn: int,
    calls: tuple[str, ...],
    logged: int,
    *,
    replace_seq: int | None = None,
) -> None:
    """An open turn whose step requested ``calls``; the first ``logged`` have a tool/call.

    With ``replace_seq`` the turn's prompt replaces that earlier surface node.
    """
    live.append("turn/start", {"turn": turn})
    live.append("step/start", {"turn": turn, "step": 1})
    if replace_seq is None:
        live.append("user/message", user(f"go {turn}", f"m-u{turn}"), surface_op="append")
    else:
        replace_user(live, replace_seq)
    live.append(
        "assistant/message",
        assistant(turn, 1, None, calls, message_id=f"m-a{turn}"),
        surface_op="append",
    )
    for call_id in calls[:logged]:
        live.append("tool/call", tool_call(turn, 1, call_id))


def file_lines(path: str | os.PathLike[str]) -> list[bytes]:
    """The file's lines, each with its newline."""
    return Path(path).read_bytes().splitlines(keepends=True)


def wire_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete event line of a log, decoded (header skipped)."""
    return [orjson.loads(line) for line in file_lines(path)[1:] if line.endswith(b"\n")]


def snapshot(path: str | os.PathLike[str]) -> tuple[bytes, int]:
    """Bytes and mtime (ns) of a file: what "never writes" compares."""
    return Path(path).read_bytes(), os.stat(path).st_mtime_ns


def sidecars(path: str | os.PathLike[str]) -> list[Path]:
    log = Path(path)
    return sorted(log.parent.glob(f"{log.name}.torn-*"))


def plant(store_root: Path, log: Path, content: bytes) -> Path:
    """Put ``content`` where ``log`` lives under ``store_root`` (fresh session directory)."""
    target = store_root / log.parent.parent.name / log.parent.name / log.name
    if target.parent.exists():
        shutil.rmtree(target.parent)
    target.parent.mkdir(parents=True, mode=0o700)
    target.write_bytes(content)
    os.chmod(target, 0o600)
    return target


def new_scratch_dir() -> Path:
    """A new private directory, on tmpfs when there is one; the caller removes it."""
    import tempfile

    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="dsh-store-test-", dir=where))


def fast_dir(tmp_path: Path) -> Path:
    """A scratch directory on tmpfs when there is one (fsync is cheap there), else tmp_path.

    Sweeps that repair thousands of logs need many fsyncs; on a disk they would spend
    minutes waiting for the device, which tests nothing the byte-level checks need.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        import tempfile

        return Path(tempfile.mkdtemp(prefix="dsh-store-test-", dir=shm))
    return tmp_path


def kill_after_acks(
    child: subprocess.Popen[bytes], *, marker: bytes, acks: int, extra_lines: int = 0
) -> tuple[bytes, int]:
    """Read ``child``'s stdout until ``acks`` lines start with ``marker`` (or it ends), then
    ``extra_lines`` more lines, SIGKILL it and return (everything it printed, acks seen).

    The rest is drained through the same buffered reader: ``communicate()`` reads the raw
    pipe and would silently drop lines ``readline()`` has already buffered.
    """
    assert child.stdout is not None
    lines: list[bytes] = []
    seen = 0
    while seen < acks:
        line = child.stdout.readline()
        if not line:
            break
        lines.append(line)
        seen += line.startswith(marker)
    # Letting it run on a little makes the kill land between acknowledgements.
    lines.extend(child.stdout.readline() for _ in range(extra_lines))
    child.send_signal(signal.SIGKILL)
    lines.append(child.stdout.read())
    child.stdout.close()
    child.wait(timeout=60)
    return b"".join(lines), seen
