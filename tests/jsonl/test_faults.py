"""Injected I/O faults and outside changes against the real writer on real files.

Faults are injected by replacing ``os.write``/``os.writev``/``os.fsync``/``os.link``/
``os.ftruncate`` with wrappers that raise a chosen errno (or write short) a chosen number of
times; the large-batch section also meets real ones (signals on a pipe, ``RLIMIT_FSIZE``).
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import ConcurrentModificationError, WriterBrokenError
from dsh_store.jsonl import files
from dsh_store.jsonl.files import LogWriter, make_dirs, materialize, write_lines
from dsh_store.jsonl.layout import log_path

REPO = Path(__file__).resolve().parents[2]

HEADER = (
    b'{"type":"session","version":4,"id":"s-1","createdAt":1,"isSeeded":false,'
    b'"delegationDepth":0}\n'
)


def event_line(seq: int) -> bytes:
    return b'{"type":"plugin:test","seq":%d,"time":1,"data":{},"ignorable":true}\n' % seq


def lines(first: int, count: int) -> list[bytes]:
    return [event_line(seq) for seq in range(first, first + count)]


def expected_log(count: int) -> bytes:
    return HEADER + b"".join(lines(0, count))


def seqs_in(path: Path) -> list[int]:
    body = path.read_bytes().split(b"\n")
    assert body[-1] == b"", "the file ends in a partial line"
    return [int(line.split(b'"seq":')[1].split(b",")[0]) for line in body[1:-1]]


class Fault:
    """Make ``os.<name>`` fail ``times`` times with ``code`` (after an optional partial write)."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        name: str,
        code: int,
        *,
        times: int = 1,
        partial: bool = False,
    ) -> None:
        self.real: Callable[..., Any] = getattr(os, name)
        self.code = code
        self.left = times
        self.partial = partial
        self.hits = 0
        monkeypatch.setattr(os, name, self)

    def __call__(self, *args: Any) -> Any:
        if self.left == 0:
            return self.real(*args)
        self.left -= 1
        self.hits += 1
        if self.partial:
            fd, data = args
            self.real(fd, bytes(data)[: len(data) // 2])
        raise OSError(self.code, os.strerror(self.code))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return log_path(tmp_path / "root", "s-1", "/w")


@pytest.fixture
def writer(path: Path) -> LogWriter:
    return materialize(path, HEADER, lines(0, 2))


CODES = [errno.ENOSPC, errno.EIO]


# -- append faults: rolled back, kept, retried ----------------------------------------------


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize(("op", "partial"), [("write", False), ("write", True), ("fsync", False)])
def test_failed_append_rolls_back_and_retries_once(
    path: Path,
    writer: LogWriter,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    op: str,
    partial: bool,
) -> None:
    before = path.stat().st_size
    fault = Fault(monkeypatch, op, code, partial=partial)
    with pytest.raises(OSError) as caught:
        writer.append(lines(2, 5), 2, 6)
    assert caught.value.errno == code
    assert fault.hits == 1
    assert path.stat().st_size == before == writer.size
    assert writer.pending == lines(2, 5) and writer.pending_first_seq == 2
    assert writer.next_seq == 2 and not writer.broken
    writer.append(writer.pending, 2, 6)
    assert path.read_bytes() == expected_log(7)
    assert seqs_in(path) == list(range(7))
    assert writer.pending == []


@pytest.mark.parametrize("code", CODES)
def test_a_fault_that_persists_keeps_failing_without_damage(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    Fault(monkeypatch, "write", code, times=3, partial=True)
    for _ in range(3):
        with pytest.raises(OSError):
            writer.append(lines(2, 4), 2, 5)
        assert path.read_bytes() == expected_log(2)
    writer.append(lines(2, 4), 2, 5)
    assert seqs_in(path) == list(range(6))


def test_short_writes_are_completed(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.write
    sizes: list[int] = []

    def dribble(fd: int, data: bytes) -> int:
        n = real(fd, bytes(data)[: 1 + len(sizes) % 7])
        sizes.append(n)
        return n

    monkeypatch.setattr(os, "write", dribble)
    writer.append(lines(2, 10), 2, 11)
    assert len(sizes) > 10
    assert path.read_bytes() == expected_log(12)


def test_a_write_that_makes_no_progress_is_an_error(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(OSError, match=r"write\(\) made no progress") as caught:
        writer.append(lines(2, 1), 2, 2)
    assert caught.value.errno == errno.EIO
    monkeypatch.undo()
    assert path.read_bytes() == expected_log(2)


# -- failed rollback: the handle is broken --------------------------------------------------


@pytest.mark.parametrize(
    ("first_op", "rollback_op"),
    [("write", "ftruncate"), ("fsync", "ftruncate"), ("fsync", "fsync")],
)
def test_failed_rollback_breaks_the_writer_for_good(
    path: Path,
    writer: LogWriter,
    monkeypatch: pytest.MonkeyPatch,
    first_op: str,
    rollback_op: str,
) -> None:
    times = 2 if first_op == rollback_op else 1
    Fault(monkeypatch, first_op, errno.EIO, times=times, partial=first_op == "write")
    if first_op != rollback_op:
        Fault(monkeypatch, rollback_op, errno.EIO)
    with pytest.raises(WriterBrokenError) as caught:
        writer.append(lines(2, 3), 2, 4)
    assert isinstance(caught.value.__cause__, OSError)
    message = str(caught.value)
    assert message.startswith(f"{path}: writer is broken after a failed rollback (append failed")
    assert "then truncating back to" in message
    assert message.endswith(
        "no further writes are accepted — reopen the session, which repairs the tail"
    )
    assert writer.broken
    monkeypatch.undo()  # the disk recovers, the handle does not
    for _ in range(2):
        with pytest.raises(WriterBrokenError, match="writer is broken after a failed rollback"):
            writer.append(lines(2, 3), 2, 4)
    assert writer.pending == lines(2, 3) and writer.pending_first_seq == 2
    writer.close()


# -- materialize faults: nothing under the final name -------------------------------------


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("op", ["write", "fsync", "link"])
def test_failed_materialize_leaves_no_log_and_no_temp(
    path: Path, monkeypatch: pytest.MonkeyPatch, code: int, op: str
) -> None:
    make_dirs(path.parent)
    Fault(monkeypatch, op, code, partial=op == "write")
    with pytest.raises(OSError) as caught:
        materialize(path, HEADER, lines(0, 3))
    assert caught.value.errno == code
    assert os.listdir(path.parent) == []
    monkeypatch.undo()
    materialize(path, HEADER, lines(0, 3)).close()
    assert path.read_bytes() == expected_log(3)


@pytest.mark.parametrize("code", CODES)
def test_failed_directory_fsync_while_creating_dirs_takes_the_level_back(
    tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    Fault(monkeypatch, "fsync", code)
    with pytest.raises(OSError) as caught:
        materialize(path, HEADER, lines(0, 1))
    assert caught.value.errno == code
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    materialize(path, HEADER, lines(0, 1)).close()
    assert path.read_bytes() == expected_log(1)


def test_failed_directory_fsync_after_link_takes_the_name_back(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = files.fsync_dir
    calls: list[Path] = []

    def fail_on_session_dir(target: str | os.PathLike[str]) -> None:
        calls.append(Path(target))
        if Path(target) == path.parent and path.exists():
            raise OSError(errno.EIO, "injected")
        real(target)

    monkeypatch.setattr(files, "fsync_dir", fail_on_session_dir)
    with pytest.raises(OSError, match="injected"):
        materialize(path, HEADER, lines(0, 1))
    assert os.listdir(path.parent) == []


def test_a_failed_temp_cleanup_is_not_an_error(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A failed temp cleanup is not an error: the log is already durable.
    Fault(monkeypatch, "unlink", errno.EIO)
    materialize(path, HEADER, lines(0, 1)).close()
    names = sorted(os.listdir(path.parent))
    temps = [name for name in names if name.endswith(".tmp")]
    assert len(temps) == 1
    assert sorted(set(names) - set(temps)) == ["session.v4.jsonl", "session.v4.jsonl.durable"]


# -- the log changed under the writer ----------------------------------------------------


def _replace_by_rename(path: Path) -> None:
    other = path.with_name("other")
    other.write_bytes(expected_log(2))
    os.rename(other, path)


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 5)


def _append_externally(path: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(event_line(2))


def _unlink(path: Path) -> None:
    path.unlink()


def _rename_away(path: Path) -> None:
    os.rename(path, path.with_name("moved.jsonl"))


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        (_replace_by_rename, "another file was put in place of the log"),
        (_truncate, "size is {size_minus_5} bytes, this writer last left {size}"),
        (_append_externally, "size is {size_plus_line} bytes, this writer last left {size}"),
        (_unlink, "the log file was deleted"),
        (_rename_away, "the log file was removed from its path"),
    ],
)
def test_a_changed_log_is_refused_and_nothing_is_written(
    path: Path, writer: LogWriter, change: Callable[[Path], None], detail: str
) -> None:
    size = writer.size
    change(path)
    snapshot = {name: (path.parent / name).read_bytes() for name in os.listdir(path.parent)}
    with pytest.raises(ConcurrentModificationError) as caught:
        writer.append(lines(2, 1), 2, 2)
    expected_detail = detail.format(
        size=size, size_minus_5=size - 5, size_plus_line=size + len(event_line(2))
    )
    assert str(caught.value) == (
        f"{path}: log changed under this writer: {expected_detail}; nothing was written — "
        "reopen the session to continue from what is on disk"
    )
    assert {n: (path.parent / n).read_bytes() for n in os.listdir(path.parent)} == snapshot
    writer.close()


# -- op-N loop: fail the N-th I/O call of a workload, retry to completion --------------------


class CountingFaults:
    """Fail exactly the ``target``-th call among write/fsync/ftruncate (1-based)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: int, code: int) -> None:
        self.count = 0
        self.target = target
        self.code = code
        for name in ("write", "fsync", "ftruncate"):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            self.count += 1
            if self.count == self.target:
                raise OSError(self.code, os.strerror(self.code))
            return real(*args)

        return call


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("target", range(1, 13))
def test_any_single_failed_io_call_leaves_a_complete_log_after_retry(
    path: Path, monkeypatch: pytest.MonkeyPatch, target: int, code: int
) -> None:
    writer = materialize(path, HEADER, lines(0, 1))
    CountingFaults(monkeypatch, target, code)
    batches = [(1, 3), (4, 1), (5, 4), (9, 2), (11, 5)]
    broken = False
    for first, count in batches:
        for _attempt in range(2):
            try:
                writer.append(lines(first, count), first, first + count - 1)
                break
            except WriterBrokenError:
                broken = True
                break
            except OSError:
                assert path.stat().st_size == writer.size
        if broken:
            break
    monkeypatch.undo()
    data = path.read_bytes()
    if broken:
        # Only a failed rollback breaks the writer; what is on disk is still a prefix.
        assert expected_log(16).startswith(data)
        return
    assert data == expected_log(16)


# -- large batches: writev ----------------------------------------------------------------
#
# ``write_lines`` writes a batch of at least ``_WRITEV_MIN_BYTES`` with ``writev`` of its lines
# instead of joining it first (the batches above stay one ``write``). These check that path:
# more lines than one call takes, short writes (real ones on a pipe interrupted by signals,
# and injected ones cut at every kind of place), and failures rolled back, injected and real
# (``EFBIG`` past ``RLIMIT_FSIZE`` in a child process).


def padded_line(seq: int) -> bytes:
    padding = b"p" * (100 + seq % 97)  # lines of varied lengths, so cuts fall anywhere
    return b'{"type":"plugin:test","seq":%d,"time":1,"data":{"p":"%s"},"ignorable":true}\n' % (
        seq,
        padding,
    )


def padded_lines(first: int, count: int) -> list[bytes]:
    return [padded_line(seq) for seq in range(first, first + count)]


def large_batch(first: int) -> list[bytes]:
    """More lines than one writev takes, and more bytes than the writev threshold."""
    count = files._IOV_MAX * 2 + 300
    batch = padded_lines(first, count)
    assert sum(map(len, batch)) >= files._WRITEV_MIN_BYTES
    return batch


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
    assert path.read_bytes() == expected_log(2) + b"".join(batch)
    assert writer.size == path.stat().st_size and writer.next_seq == 2 + len(batch)


def test_a_small_batch_is_joined_into_one_write(
    path: Path, writer: LogWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    writevs, writes = Calls(monkeypatch, "writev"), Calls(monkeypatch, "write")
    writer.append(padded_lines(2, 40), 2, 41)
    assert (writevs.count, writes.count) == (0, 1)
    assert path.read_bytes() == expected_log(2) + b"".join(padded_lines(2, 40))


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
    assert path.read_bytes() == expected_log(2) + b"".join(batch)
    assert writer.size == path.stat().st_size


def test_real_short_writevs_on_a_pipe_interrupted_by_signals_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writev into a full pipe that a signal interrupts returns what it wrote so far: the
    kernel's own short write. The rest must follow, in order."""
    batch = padded_lines(0, 4000)
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
    assert path.read_bytes() == expected_log(2) + b"".join(batch)
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
