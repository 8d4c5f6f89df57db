"""Real permission denials in ``new``/``open``/``load``/``fork``/``inspect`` are StorageErrors.

The operations run in a child process without the right to read or write the files
(as ``nobody`` when the tests run as root, who is never denied), against a store made and
``chmod``-ed by the test. The child prints what it caught as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_store.store import JsonlStore

from .helpers import complete_turn, new_scratch_dir

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

CHILD = """
import json, sys
from dsh_store.errors import StorageError
from dsh_store.store import JsonlStore

store = JsonlStore(sys.argv[1], window_s=0)
operation = sys.argv[2]
try:
    if operation == "new":
        with store.new("fresh") as live:
            live.append("turn/start", {"turn": 1})
            live.flush()
    elif operation == "open":
        store.open("s1").close()
    elif operation == "load":
        store.load("s1")
    elif operation == "fork":
        store.fork("s1", child_id="child")
    elif operation == "inspect":
        store.inspect("s1")
    caught = None
except Exception as error:
    caught = {
        "type": type(error).__name__,
        "storage": isinstance(error, StorageError),
        "errno": getattr(error, "errno", None),
        "path": getattr(error, "path", None),
        "operation": getattr(error, "operation", None),
        "message": str(error),
    }
print(json.dumps(caught))
"""


def _unprivileged() -> list[str]:
    """The command prefix that runs the child without root's right to read anything."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and setpriv (to drop to nobody) is not installed")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "pass"], capture_output=True, timeout=60, check=False
    )
    if probe.returncode != 0:  # e.g. its shared library lies in a directory only root reads
        pytest.skip(f"this interpreter does not run as nobody here: {probe.stderr[:120]!r}")
    return prefix


@pytest.fixture
def store_root() -> Iterator[Path]:
    """A store with one session ``s1``, in a directory the child process can reach."""
    scratch = new_scratch_dir()
    os.chmod(scratch, 0o755)
    root = scratch / "store"
    with JsonlStore(root, window_s=0).new("s1", cwd="/p") as live:
        complete_turn(live, 1, first=True)
    for directory, _, names in os.walk(root):
        os.chmod(directory, 0o755)
        for name in names:
            os.chmod(os.path.join(directory, name), 0o644)
    try:
        yield root
    finally:
        shutil.rmtree(scratch)


def _caught(root: Path, operation: str) -> dict[str, Any]:
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", CHILD, str(root), operation],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _log(root: Path) -> Path:
    return JsonlStore(root).locate("s1")


ENDINGS = {
    "creating the session's log": "flush again",
    "taking the session lock": "take the lock again",
    "opening session": "open it again",
    "loading session": "load it again",
    "reading session": "read it again",
}


def _assert_storage_error(caught: dict[str, Any] | None, path: Path, operation: str) -> None:
    assert caught is not None, "the operation succeeded although the OS should refuse it"
    (ending,) = [end for start, end in ENDINGS.items() if operation.startswith(start)]
    assert caught["message"].endswith(f"fix the disk (free space, permissions) and {ending}")
    assert (caught["type"], caught["storage"], caught["errno"]) == ("StorageError", True, 13)
    assert caught["path"] == str(path)
    assert caught["operation"].startswith(operation)
    assert caught["message"].startswith(f"{path}: {operation}")
    assert "Permission denied (errno 13)" in caught["message"]


def test_a_first_write_the_os_refuses_is_a_storage_error(store_root: Path) -> None:
    caught = _caught(store_root, "new")  # the store root is not writable for the child
    assert caught is not None
    _assert_storage_error(caught, Path(caught["path"]), "creating the session's log")
    assert Path(caught["path"]).is_relative_to(store_root)


@pytest.mark.parametrize("operation", ["open", "load"])
def test_a_lock_file_the_os_refuses_is_a_storage_error(store_root: Path, operation: str) -> None:
    lock = _log(store_root).parent / "session.lock"
    os.chmod(lock, 0o600)
    _assert_storage_error(_caught(store_root, operation), lock, "taking the session lock")


@pytest.mark.parametrize(
    ("operation", "wording"),
    [
        ("open", "opening session 's1' for writing"),
        ("load", "loading session 's1'"),
        ("fork", "reading session 's1'"),  # the source, read first
        ("inspect", "reading session 's1'"),
    ],
)
def test_an_unreadable_log_is_a_storage_error(
    store_root: Path, operation: str, wording: str
) -> None:
    log = _log(store_root)
    os.chmod(log.parent, 0o777)  # the lock can be taken; the log cannot be read
    os.chmod(log.parent / "session.lock", 0o666)
    os.chmod(log, 0o600)
    before = log.read_bytes()
    _assert_storage_error(_caught(store_root, operation), log, wording)
    assert log.read_bytes() == before
