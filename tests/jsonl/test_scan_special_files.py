"""Files named like logs that are not regular files: refused by type, never read.

A FIFO used to hang every file-level entry point (the blocking open waited for a writer)
and a directory failed with an ``IsADirectoryError`` that named no file. The scanner now
opens without blocking, checks the type with ``fstat`` and raises ``NotASessionError``.
The FIFO cases run in a child process with a timeout, so a regression fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dsh_store
from dsh_store.errors import NotASessionError
from dsh_store.jsonl.scan import MAX_HEADER_BYTES, LogScanner
from dsh_store.restore import classify, examine, read_log
from dsh_store.store import repair_file, salvage_file

from .scan_logs import v4_log, write

# The dsh_store under test, for the child process (the same one this process imported).
_IMPORT_ROOT = str(Path(dsh_store.__file__).resolve().parent.parent)
_CHILD_TIMEOUT_S = 60.0

# Runs in the child: every file-level entry point on argv[1] (a FIFO), then verify_path on
# the store root argv[2]; prints one JSON object with what each call raised or returned.
_FIFO_CHILD = """
import json, sys
import dsh_store
from dsh_store.verify import verify_path

fifo, root = sys.argv[1], sys.argv[2]
out = {}
for name, call in [
    ("read_log", lambda: dsh_store.read_log(fifo)),
    ("repair_file", lambda: dsh_store.repair_file(fifo)),
    ("header", lambda: dsh_store.jsonl.scan.LogScanner(fifo).read_header()),
    ("rows", lambda: list(dsh_store.jsonl.scan.LogScanner(fifo).rows())),
]:
    try:
        call()
        out[name] = {"raised": None}
    except Exception as error:
        out[name] = {
            "raised": type(error).__name__,
            "path": getattr(error, "path", None),
            "reason": getattr(error, "reason", None),
        }
out["classify"] = dsh_store.classify(fifo)
report = dsh_store.examine(fifo)
out["examine"] = [report.classification, [f.message for f in report.findings]]
out["verify_file"] = [r.classification for r in verify_path(fifo)]
out["verify_root"] = {r.path: r.classification for r in verify_path(root)}
print(json.dumps(out))
"""


def _run_child(code: str, *args: str) -> Any:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_IMPORT_ROOT, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=_CHILD_TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung on a FIFO for {_CHILD_TIMEOUT_S} s (blocking open?)")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def store_with_fifo(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A store root holding one good session and a FIFO named ``session.v4.jsonl``."""
    root = tmp_path / "root"
    good = root / "--p--" / "good" / "session.v4.jsonl"
    good.parent.mkdir(parents=True)
    write(good, v4_log())
    fifo = root / "--p--" / "x" / "session.v4.jsonl"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    return root, good, fifo


def test_a_fifo_is_refused_promptly_by_every_entry_point(
    store_with_fifo: tuple[Path, Path, Path],
) -> None:
    root, good, fifo = store_with_fifo
    out = _run_child(_FIFO_CHILD, str(fifo), str(root))
    for name in ("read_log", "repair_file", "header", "rows"):
        assert out[name] == {
            "raised": "NotASessionError",
            "path": str(fifo),
            "reason": "a FIFO is not a regular file",
        }, name
    assert out["classify"] == "not-a-session"
    classification, messages = out["examine"]
    assert classification == "not-a-session"
    assert len(messages) == 1
    assert str(fifo) in messages[0]
    assert "a FIFO is not a regular file" in messages[0]
    assert out["verify_file"] == ["not-a-session"]
    assert out["verify_root"][str(fifo)] == "not-a-session"
    assert out["verify_root"][str(good)] != "not-a-session"


def test_a_fifo_is_left_alone(store_with_fifo: tuple[Path, Path, Path]) -> None:
    """Refusing a FIFO does not consume what a writer put into it."""
    root, _, fifo = store_with_fifo
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, b"kept\n")
        out = _run_child(_FIFO_CHILD, str(fifo), str(root))
        assert out["classify"] == "not-a-session"
        assert os.read(reader, 100) == b"kept\n"
    finally:
        os.close(writer)
        os.close(reader)


def _directory_log(tmp_path: Path) -> Path:
    directory = tmp_path / "x.jsonl"
    directory.mkdir()
    return directory


def _facts(error: NotASessionError) -> tuple[object, object]:
    """The ``path`` and ``reason`` a NotASessionError carries (set from its keywords)."""
    facts: Any = error
    return facts.path, facts.reason


def _assert_names_directory(error: NotASessionError, directory: Path) -> None:
    assert _facts(error) == (str(directory), "a directory is not a regular file")
    assert str(directory) in str(error)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda path, out: read_log(path), id="read_log"),
        pytest.param(lambda path, out: repair_file(path), id="repair_file"),
        pytest.param(lambda path, out: salvage_file(path, out), id="salvage_file"),
        pytest.param(lambda path, out: LogScanner(path).read_header(), id="read_header"),
        pytest.param(lambda path, out: list(LogScanner(path).rows()), id="rows"),
    ],
)
def test_a_directory_raises_not_a_session_naming_it(tmp_path: Path, call: Any) -> None:
    directory = _directory_log(tmp_path)
    out = tmp_path / "out.jsonl"
    with pytest.raises(NotASessionError) as caught:
        call(directory, out)
    _assert_names_directory(caught.value, directory)
    assert not out.exists()


def test_a_directory_is_reported_as_not_a_session(tmp_path: Path) -> None:
    directory = _directory_log(tmp_path)
    report = examine(directory)
    assert report.classification == "not-a-session"
    (finding,) = report.findings
    assert finding.rule == "not-a-session"
    assert str(directory) in finding.message
    assert "a directory is not a regular file" in finding.message
    assert classify(directory) == "not-a-session"


def test_a_character_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotASessionError) as caught:
        read_log(os.devnull)
    assert _facts(caught.value) == (os.devnull, "a character device is not a regular file")
    assert examine(os.devnull).classification == "not-a-session"


def test_a_unix_socket_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative name keeps within sun_path's limit
    name = "session.v4.jsonl"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        with pytest.raises(NotASessionError) as caught:
            read_log(name)
        assert _facts(caught.value) == (name, "a socket is not a regular file")
        assert classify(name) == "not-a-session"


def test_a_failed_read_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "session.v4.jsonl", v4_log())

    def failing_read(fd: int, size: int) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "read", failing_read)  # the scanner's only way to read
    for call in (lambda: LogScanner(path).read_header(), lambda: list(LogScanner(path).rows())):
        with pytest.raises(OSError) as caught:
            call()
        assert caught.value.errno == errno.EIO
        assert caught.value.filename == str(path)
        assert str(path) in str(caught.value)


def test_a_first_line_longer_than_the_header_bound_is_refused_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "session.v4.jsonl"
    log.write_bytes(b'{"type":"session","pad":"' + b"x" * (3 * MAX_HEADER_BYTES) + b'"}\n')
    read: list[int] = []
    real_read = os.read

    def counting(fd: int, size: int) -> bytes:
        block = real_read(fd, size)
        read.append(len(block))
        return block

    monkeypatch.setattr(os, "read", counting)
    with pytest.raises(NotASessionError, match="longer than"):
        LogScanner(log).read_header()
    assert sum(read) <= MAX_HEADER_BYTES + 64 * 1024
