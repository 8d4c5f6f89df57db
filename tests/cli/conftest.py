"""Builders for the command-line tests: real stores, damaged trees, a prepared corpus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dsh_store.cli import main
from dsh_store.store import JsonlStore
from tests.conftest import REPO, SHARED
from tests.corpus import loaded
from tests.model.builders import system

CONSOLE_SCRIPT = REPO / ".venv" / "bin" / "dsh-store"
CORPUS = SHARED / "corpus"
SAMPLES = SHARED / "reference" / "samples"
# The project's own older-format logs (scripts/make_fixtures.py), present in every clone.
V2_LOG = REPO / "fixtures" / "valid" / "v2-system-prompt-changes" / "session.v2.jsonl"
V3_LOG = REPO / "fixtures" / "valid" / "v3-plugin-sources" / "session.v3.jsonl"
FIXED_CLOCK_MS = 1_700_000_000_000


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def record_session(
    root: Path, session_id: str, *, turns: int = 1, open_turn: bool = False, cwd: str | None = None
) -> Path:
    """Write a v4 session with ``turns`` completed turns (plus an open one) through the store."""
    store = JsonlStore(root, window_s=0, clock=lambda: FIXED_CLOCK_MS)
    with store.new(session_id, cwd=cwd) as live:
        for turn in range(1, turns + 1 + open_turn):
            live.append("turn/start", {"turn": turn})
            live.append("step/start", {"turn": turn, "step": 1})
            if turn == 1:
                live.append("system/message", system(1, 1, "be brief", "sys"), surface_op="append")
            live.append(
                "user/message",
                {
                    "role": "user",
                    "content": _text(f"question {turn}"),
                    "source": {"kind": "user"},
                    "id": f"user-{turn}",
                },
                surface_op="append",
            )
            if turn <= turns:
                live.append("step/end", {"turn": turn, "step": 1})
                live.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        live.flush()
        path = live.path
    return path


def write_header(path: Path, version: int, session_id: str = "loose") -> None:
    """A header-only log of ``version`` (a valid, empty session of that format)."""
    header = {
        "type": "session",
        "version": version,
        "id": session_id,
        "createdAt": FIXED_CLOCK_MS,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(json.dumps(header, separators=(",", ":")).encode() + b"\n")


def prepare_corpus_file(source: Path, target: Path) -> None:
    """Copy one corpus log the way the upstream fixture loader read it (placeholders filled).

    Lines that are not JSON objects are copied unchanged, so damage stays damage.
    """
    out: list[bytes] = []
    version = 0
    for number, raw in enumerate(source.read_bytes().splitlines(keepends=True)):
        try:
            row = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        if not isinstance(row, dict):
            out.append(raw)
            continue
        if number == 0 and isinstance(row.get("version"), int):
            version = row["version"]
        row = loaded(row, version)
        end = b"\n" if raw.endswith(b"\n") else b""
        out.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + end)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"".join(out))


def corpus_manifest() -> list[dict[str, Any]]:
    """The corpus manifest's file entries."""
    entries: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())["files"]
    return entries


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Run the click group in process; returns click's result (stdout and stderr apart)."""
    runner = CliRunner()

    def run(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> Result:
        return runner.invoke(main, [os.fspath(arg) for arg in args], env=env)

    return run


def run_script(
    *args: str | os.PathLike[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed console script as a user would."""
    full_env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    full_env.update(env or {})
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *(os.fspath(arg) for arg in args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=120,
        check=False,
    )


def run_script_on_terminal(
    *args: str | os.PathLike[str], terminal: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run the console script with its ``terminal`` stream (``"stdout"`` or ``"stderr"``) on
    a pseudo-terminal and the other piped: the finished process and what the terminal got."""
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [str(CONSOLE_SCRIPT), *(os.fspath(arg) for arg in args)],
            stdout=follower if terminal == "stdout" else subprocess.PIPE,
            stderr=follower if terminal == "stderr" else subprocess.PIPE,
            env=env,
            timeout=60,
            check=False,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO once the follower side is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return done, shown


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """A store with one clean session (two turns) and one whose last turn is open."""
    root = tmp_path / "store"
    record_session(root, "clean", turns=2, cwd="/home/user/project")
    record_session(root, "crashed", turns=1, open_turn=True)
    return root


def snapshot_tree(root: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every entry's bytes (files), mode and mtime_ns, to prove a command wrote nothing."""
    state: dict[str, tuple[bytes | None, int, int]] = {}
    for directory, subdirs, files in os.walk(root):
        for name in [*subdirs, *files]:
            path = Path(directory) / name
            info = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            state[str(path.relative_to(root))] = (data, info.st_mode, info.st_mtime_ns)
    return state


def damaged_tree(base: Path) -> dict[str, str]:
    """A tree holding every kind of damage; returns relative path -> expected classification."""
    root = base / "damaged"
    clean = record_session(root, "clean", turns=2)
    expected = {str(clean.relative_to(root)): "ok"}

    torn = record_session(root, "torn", turns=2)
    with open(torn, "ab") as handle:
        handle.write(b'{"type":"turn/start","seq":')
    expected[str(torn.relative_to(root))] = "torn-tail"

    corrupt = record_session(root, "corrupt-middle", turns=2)
    lines = corrupt.read_bytes().splitlines(keepends=True)
    lines[2] = b"this line is not json\n"
    corrupt.write_bytes(b"".join(lines))
    expected[str(corrupt.relative_to(root))] = "corrupt"

    opened = record_session(root, "open", turns=1, open_turn=True)
    expected[str(opened.relative_to(root))] = "open-turn"

    loose = root / "loose"
    write_header(loose / "newer.jsonl", 5)
    expected["loose/newer.jsonl"] = "unsupported-version"
    (loose / "empty.jsonl").write_bytes(b"")
    expected["loose/empty.jsonl"] = "empty"
    (loose / "not-a-session.jsonl").write_bytes(b'{"hello":"world"}\n')
    expected["loose/not-a-session.jsonl"] = "not-a-session"
    (loose / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    expected["loose/binary.jsonl"] = "not-a-session"
    # Root reads any file whatever its mode, so "unreadable" is a symlink loop: open() fails.
    os.symlink("loop.jsonl", loose / "loop.jsonl")
    expected["loose/loop.jsonl"] = "not-a-session"
    write_header(loose / "old.jsonl", 3)
    expected["loose/old.jsonl"] = "needs-migration"
    (root / "no-logs-here").mkdir()
    (root / "no-logs-here" / "notes.txt").write_text("not a log\n")
    return expected


def copy_tree(source: Path, target: Path) -> Path:
    """A copy of ``source`` keeping symlinks as symlinks."""
    shutil.copytree(source, target, symlinks=True)
    return target


@pytest.fixture
def damaged(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """``(root, expected classification by relative path)`` of a freshly built damaged tree."""
    expected = damaged_tree(tmp_path)
    yield tmp_path / "damaged", expected
