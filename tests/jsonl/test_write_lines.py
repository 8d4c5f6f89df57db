"""Large batches go to the kernel with ``writev``, line by line, and arrive whole.

``write_lines`` (``dsh_store/jsonl/files.py``) writes a batch of at least
``_WRITEV_MIN_BYTES`` without joining it first; smaller batches stay one ``write`` (their
faults are covered in ``test_faults.py``). These tests check the ``writev`` path: more lines
than one call takes, short writes (real ones on a pipe interrupted by signals, and injected
ones cut at every kind of place), and failures rolled back, injected and real (``EFBIG``
past ``RLIMIT_FSIZE`` in a child process).
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from dsh_store.jsonl import files
from dsh_store.jsonl.files import LogWriter, materialize, write_lines
from dsh_store.jsonl.layout import log_path

REPO = Path(__file__).resolve().parents[2]

HEADER = (
    b'{"type":"session","version":4,"id":"s-1","createdAt":1,"isSeeded":false,'
    b'"delegationDepth":0}\n'
)


def event_line(seq: int) -> bytes:
    padding = b"p" * (100 + seq % 97)  # lines of varied lengths, so cuts fall anywhere
    return b'{"type":"plugin:test","seq":%d,"time":1,"data":{"p":"%s"},"ignorable":true}\n' % (
        seq,
        padding,
    )


def lines(first: int, count: int) -> list[bytes]:
    return [event_line(seq) for seq in range(first, first + count)]


def large_batch(first: int) -> list[bytes]:
    """More lines than one writev takes, and more bytes than the writev threshold."""
    count = files._IOV_MAX * 2 + 300
    batch = lines(first, count)
    assert sum(map(len, batch)) >= files._WRITEV_MIN_BYTES
    return batch


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return log_path(tmp_path / "root", "s-1", "/w")


@pytest.fixture
def writer(path: Path) -> LogWriter:
    return materialize(path, HEADER, lines(0, 2))


class Calls:
    """Count calls of ``os.<name>`` while passing them through to the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.real = getattr(os, name)
        self.count = 0
        monkeypatch.setattr(os, name, self)

    def __call__(self, *args: object) -> object:
        self.count += 1
        return self.real(*args)


def test_a_large_batch_goes_out_in_writevs_and_arrives_whole(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = large_batch(2)
    writevs, writes = Calls(monkeypatch, "writev"), Calls(monkeypatch, "write")
    writer.append(batch, 2, 1 + len(batch))
    assert writevs.count == 3 and writes.count == 0  # 2 x IOV_MAX + 300 lines
    assert path.read_bytes() == HEADER + b"".join(lines(0, 2) + batch)
    assert writer.size == path.stat().st_size and writer.next_seq == 2 + len(batch)


def test_a_small_batch_is_joined_into_one_write(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    writevs, writes = Calls(monkeypatch, "writev"), Calls(monkeypatch, "write")
    writer.append(lines(2, 40), 2, 41)
    assert (writevs.count, writes.count) == (0, 1)
    assert path.read_bytes() == HEADER + b"".join(lines(0, 42))


class ShortWritev:
    """``os.writev`` that writes only a prefix of what it is given: ``cuts`` says how long
    each call's prefix is (a function of the call's total size), then calls go through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cuts: Sequence[object]) -> None:
        self.real = os.writev
        self.cuts = list(cuts)
        monkeypatch.setattr(os, "writev", self)

    def __call__(self, fd: int, buffers: Sequence[bytes]) -> int:
        if not self.cuts:
            return self.real(fd, buffers)
        cut = self.cuts.pop(0)
        joined = b"".join(buffers)
        size = cut(joined, buffers) if callable(cut) else int(str(cut))
        return self.real(fd, [joined[:size]])


def _inside_the_third_line(joined: bytes, buffers: Sequence[bytes]) -> int:
    return len(buffers[0]) + len(buffers[1]) + 5


def _at_a_line_boundary(joined: bytes, buffers: Sequence[bytes]) -> int:
    return len(buffers[0]) + len(buffers[1])


def _one_byte(joined: bytes, buffers: Sequence[bytes]) -> int:
    return 1


def _all_but_one_byte(joined: bytes, buffers: Sequence[bytes]) -> int:
    return len(joined) - 1


@pytest.mark.parametrize(
    "cut", [_inside_the_third_line, _at_a_line_boundary, _one_byte, _all_but_one_byte]
)
def test_a_short_writev_is_finished_from_where_it_stopped(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch, cut: object
) -> None:
    batch = large_batch(2)
    ShortWritev(monkeypatch, [cut, cut])  # the first two calls are cut, the third is whole
    writer.append(batch, 2, 1 + len(batch))
    assert path.read_bytes() == HEADER + b"".join(lines(0, 2) + batch)
    assert writer.size == path.stat().st_size


def test_real_short_writevs_on_a_pipe_interrupted_by_signals_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writev into a full pipe that a signal interrupts returns what it wrote so far: the
    kernel's own short write. The rest must follow, in order."""
    batch = lines(0, 4000)
    expected = b"".join(batch)
    shorts: list[int] = []
    real_finish = files._finish_short_writev

    def counted(fd: int, chunk: Sequence[bytes], written: int) -> None:
        shorts.append(written)
        real_finish(fd, chunk, written)

    monkeypatch.setattr(files, "_finish_short_writev", counted)
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        for _attempt in range(20):
            received = _through_a_pipe(batch)
            assert received == expected
            if shorts:
                break
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert shorts, "no writev was ever cut short by a signal"


def _through_a_pipe(batch: list[bytes]) -> bytes:
    """What a slow reader receives when ``write_lines`` sends ``batch`` into a pipe while a
    timer signal keeps interrupting the writer (this thread)."""
    read_end, write_end = os.pipe()
    received = bytearray()

    def drain() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the writer gets them
        while chunk := os.read(read_end, 4096):
            received.extend(chunk)
            time.sleep(0.0001)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
        assert write_lines(write_end, batch) == sum(map(len, batch))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        os.close(write_end)
        reader.join()
        os.close(read_end)
    return bytes(received)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_failed_writev_rolls_back_and_the_batch_is_retried_once(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch, code: int, partial: bool
) -> None:
    before = path.stat().st_size
    real = os.writev
    hits: list[int] = []

    def failing(fd: int, buffers: Sequence[bytes]) -> int:
        hits.append(len(hits))
        if len(hits) == 2:  # the second call: one writev of the batch is already on disk
            if partial:
                real(fd, [b"".join(buffers)[:1000]])
            raise OSError(code, os.strerror(code))
        return real(fd, buffers)

    monkeypatch.setattr(os, "writev", failing)
    batch = large_batch(2)
    with pytest.raises(OSError) as caught:
        writer.append(batch, 2, 1 + len(batch))
    assert caught.value.errno == code
    assert path.stat().st_size == before == writer.size
    assert writer.pending == batch and writer.pending_first_seq == 2
    monkeypatch.undo()
    writer.append(writer.pending, 2, 1 + len(batch))
    assert path.read_bytes() == HEADER + b"".join(lines(0, 2) + batch)
    assert writer.pending == []


EFBIG_CHILD = """
import os, resource, signal, sys
from dsh_store.errors import StorageError
from dsh_store.jsonl.files import LogWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
path, limit, next_seq, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lines = [sys.stdin.buffer.readline() for _ in range(count)]
writer = LogWriter.open(path, expected_size=os.path.getsize(path), next_seq=next_seq)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    writer.append(lines, next_seq, next_seq + count - 1)
except StorageError as error:
    print(error.errno, writer.size, len(writer.pending))
    sys.exit(3)
"""


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_real_write_failure_inside_a_large_batch_is_rolled_back(
    path: Path, writer: LogWriter
) -> None:
    """``EFBIG`` past ``RLIMIT_FSIZE``: the kernel writes up to the limit (a real short
    writev), the next write fails, and the writer truncates its file back."""
    writer.close()
    before = path.read_bytes()
    batch = large_batch(2)
    limit = len(before) + sum(map(len, batch)) // 2
    done = subprocess.run(
        [sys.executable, "-c", EFBIG_CHILD, str(path), str(limit), "2", str(len(batch))],
        input=b"".join(batch),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    code, size, pending = map(int, done.stdout.split())
    assert (code, size, pending) == (errno.EFBIG, len(before), len(batch))
    assert path.read_bytes() == before
