"""The single-writer session lock, across objects, threads and real processes."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dsh_store.errors import SessionLockedError
from dsh_store.jsonl.lock import SessionLock

REPO = Path(__file__).resolve().parents[2]

HOLDER = """
import sys
from dsh_store.jsonl.lock import SessionLock
lock = SessionLock(sys.argv[1], "s-1")
lock.acquire()
print("locked", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
"""

CONTENDER = """
import sys
from dsh_store.errors import SessionLockedError
from dsh_store.jsonl.lock import SessionLock
try:
    SessionLock(sys.argv[1], "s-1").acquire()
except SessionLockedError as error:
    print("refused:", error, flush=True)
    sys.exit(3)
print("acquired", flush=True)
"""


def locked_message(session_dir: Path) -> str:
    return (
        f"session 's-1' is open for writing elsewhere (lock {session_dir / 'session.lock'} is "
        "held); close the other writer first — reading with inspect or read_from needs no lock"
    )


def spawn(code: str, session_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, str(session_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_second_lock_in_the_same_process_is_refused_at_once(tmp_path: Path) -> None:
    first = SessionLock(tmp_path, "s-1")
    first.acquire()
    with pytest.raises(SessionLockedError) as caught:
        SessionLock(tmp_path, "s-1").acquire()
    assert str(caught.value) == locked_message(tmp_path)
    first.release()
    with SessionLock(tmp_path, "s-1") as second:
        assert second.is_held


def test_reacquiring_a_held_lock_is_refused(tmp_path: Path) -> None:
    with SessionLock(tmp_path, "s-1") as lock:
        with pytest.raises(SessionLockedError, match="is open for writing elsewhere"):
            lock.acquire()
        assert lock.is_held


def test_lock_file_is_private_and_kept_after_release(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        lock = SessionLock(tmp_path, "s-1")
        lock.acquire()
    finally:
        os.umask(old)
    lock_file = tmp_path / "session.lock"
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600
    inode = lock_file.stat().st_ino
    lock.release()
    lock.release()
    assert not lock.is_held
    assert lock_file.stat().st_ino == inode


def test_the_hold_is_shared_across_threads(tmp_path: Path) -> None:
    lock = SessionLock(tmp_path, "s-1")
    lock.acquire()
    seen: list[bool] = []

    def release_elsewhere() -> None:
        seen.append(lock.is_held)
        lock.release()

    worker = threading.Thread(target=release_elsewhere)
    worker.start()
    worker.join()
    assert seen == [True]
    assert not lock.is_held
    with SessionLock(tmp_path, "s-1"):
        pass


def test_a_lock_held_by_another_process_is_refused(tmp_path: Path) -> None:
    holder = spawn(HOLDER, tmp_path)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(SessionLockedError) as caught:
            SessionLock(tmp_path, "s-1").acquire()
        assert str(caught.value) == locked_message(tmp_path)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "released\n"
    finally:
        holder.communicate()
    with SessionLock(tmp_path, "s-1") as lock:
        assert lock.is_held


def test_another_process_is_refused_while_this_one_holds_the_lock(tmp_path: Path) -> None:
    with SessionLock(tmp_path, "s-1"):
        contender = spawn(CONTENDER, tmp_path)
        out, _ = contender.communicate()
        assert contender.returncode == 3
        assert out == f"refused: {locked_message(tmp_path)}\n"
    contender = spawn(CONTENDER, tmp_path)
    out, _ = contender.communicate()
    assert (contender.returncode, out) == (0, "acquired\n")


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    holder = spawn(HOLDER, tmp_path)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "locked\n"
    with pytest.raises(SessionLockedError):
        SessionLock(tmp_path, "s-1").acquire()
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    assert holder.returncode == -signal.SIGKILL
    with SessionLock(tmp_path, "s-1") as lock:
        assert lock.is_held
