"""Durable writes of session logs: publish a new log, append batches with rollback.

This module deals in line bytes only (each line ends with ``b"\\n"``); it never
parses them. The protocol is described in ``docs/format.md``:

* :func:`materialize` publishes header + first batch atomically: exclusive temp
  file, write, fsync, ``os.link`` (never overwrites), directory fsync.
* :func:`staged`, :func:`link_durably` and :func:`replace_durably` are the steps every
  durable publish is made of (new logs here, migrated logs, repair sidecars): temp
  file + fsync, then link (never overwriting) or replace, then directory fsync.
* :class:`LogWriter` appends one batch with one ``write`` loop and one ``fsync``,
  after checking that the file is still exactly what this handle last wrote; on
  any failure it truncates back to the pre-batch size.

``OSError`` from the disk is re-raised unchanged (callers can match ``errno``),
except where the condition has a typed meaning: an existing log
(:class:`SessionExistsError`), a changed log (:class:`ConcurrentModificationError`)
and a failed rollback (:class:`WriterBrokenError`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from dsh_store.backend import refuse_misnumbered_batch
from dsh_store.errors import (
    ConcurrentModificationError,
    DshStoreError,
    SessionExistsError,
    StorageError,
    WriterBrokenError,
    ZstdUnavailableError,
)
from dsh_store.jsonl.failpoints import ANY_ARMED, armed, failpoint
from dsh_store.jsonl.layout import DIR_MODE, FILE_MODE, decode_session_id, temp_path
from dsh_store.jsonl.watermark import DurableMark, header_crc
from dsh_store.jsonl.zstd_frames import is_zstd_log

if TYPE_CHECKING:
    from dsh_store.jsonl.zstd_codec import FrameEncoder

__all__ = [
    "LogWriter",
    "StagedFile",
    "fsync_chain",
    "fsync_dir",
    "link_durably",
    "make_dirs",
    "materialize",
    "new_temp",
    "replace_durably",
    "staged",
    "storage_errors",
    "write_all",
    "write_lines",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that names created or removed in it survive power loss."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_chain(path: str | os.PathLike[str], top: str | os.PathLike[str]) -> None:
    """Make the names ``top`` ... ``path`` durable, whoever created them.

    fsyncs the directory holding ``path`` and each one above it, up to the directory
    holding ``top``. A writer that was killed after it created a directory or linked a
    log, but before it fsynced the parent, leaves a name that only the page cache holds;
    a later writer calls this before it acknowledges anything stored under that name.

    :raises ValueError: ``path`` is not ``top`` or below it.
    """
    _fsync_chain_except(Path(path), Path(top), set())


def _fsync_chain_except(path: Path, top: Path, already: set[Path]) -> None:
    """:func:`fsync_chain`, skipping the levels whose parent ``already`` holds fsynced."""
    path.relative_to(top)  # refuse a path outside ``top`` before any fsync
    level = path
    while True:
        if level not in already:
            fsync_dir(level.parent)
        if level == top:
            return
        level = level.parent


def make_dirs(
    path: str | os.PathLike[str], *, durable_below: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Create ``path`` and its missing parents with mode 0700; return the levels created.

    After creating each level, the parent directory is fsynced so the new name is
    durable; if that fails, the level is removed again and the error raised. Levels
    created concurrently by someone else are accepted if they are directories.
    Existing levels are left untouched (their mode is not changed).

    With ``durable_below``, every name from ``durable_below`` down to ``path`` is made
    durable, also those that already existed (see :func:`fsync_chain`): the parents of
    the levels created here were fsynced already, the others are fsynced now.
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    created: list[Path] = []
    for level in reversed(missing):
        try:
            os.mkdir(level, DIR_MODE)
        except FileExistsError:
            if not level.is_dir():
                raise
            continue
        try:
            os.chmod(level, DIR_MODE)  # the umask must not widen or narrow 0700
            fsync_dir(level.parent)
        except BaseException:
            # Take the name back so a retry creates it again and fsyncs its parent.
            with contextlib.suppress(OSError):
                os.rmdir(level)
            raise
        created.append(level)
    if durable_below is not None:
        _fsync_chain_except(target, Path(durable_below), set(created))
    return created


def write_all(
    fd: int, data: bytes | bytearray | memoryview, *, torn_failpoint: str | None = None
) -> None:
    """Write every byte of ``data`` to ``fd``, looping over short writes."""
    if torn_failpoint is not None and armed(torn_failpoint) and len(data) > 1:
        # Crash tests: put half the bytes on disk, then maybe die, leaving a torn tail.
        view = memoryview(data)
        written = os.write(fd, view[: len(view) // 2])
        view = view[written:]
        failpoint(torn_failpoint)
    else:
        # One write is the usual whole story: a view is made only after a short one.
        written = os.write(fd, data)
        if written == len(data):
            return
        if written <= 0:
            raise OSError(errno.EIO, "write() made no progress", None)
        view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "write() made no progress", None)
        view = view[written:]


def _iov_max() -> int:
    try:
        limit = os.sysconf("SC_IOV_MAX")
    except (AttributeError, ValueError, OSError):
        return 16  # POSIX's minimum
    return limit if limit > 0 else 1024  # -1: no stated limit


_IOV_MAX = _iov_max()
"""Buffers one ``writev`` takes at most (1024 on Linux)."""

_WRITEV_MIN_BYTES = 256 << 10
"""Batches of at least this many bytes go out with ``writev`` instead of being joined."""


def write_lines(fd: int, lines: Sequence[bytes]) -> int:
    """Write every byte of ``lines``, in order, to ``fd``; return how many bytes that was.

    A batch of :data:`_WRITEV_MIN_BYTES` or more goes to the kernel as its lines are,
    ``writev`` by ``writev`` (at most :data:`_IOV_MAX` lines each): joining it first would
    copy megabytes under the GIL, and at saturation that copy took the writer thread's time
    from the producer. A smaller batch is joined and written at once (one ``write``; the
    copy is cheap there, and ``writev`` costs per line). A short ``writev`` finishes the line
    it cut with :func:`write_all` and goes on from the next line, so the file receives
    exactly ``b"".join(lines)`` either way.
    """
    if len(lines) == 1:
        line = lines[0]
        write_all(fd, line)
        return len(line)
    total = sum(map(len, lines))
    if total < _WRITEV_MIN_BYTES:
        write_all(fd, b"".join(lines))
        return total
    start = 0
    count = len(lines)
    while start < count:
        chunk = lines[start : start + _IOV_MAX]
        size = sum(map(len, chunk))
        written = os.writev(fd, chunk)
        if written != size:
            _finish_short_writev(fd, chunk, written)
        start += len(chunk)
    return total


def _finish_short_writev(fd: int, chunk: Sequence[bytes], written: int) -> None:
    """Write what a ``writev`` of ``chunk`` left unwritten after its first ``written`` bytes."""
    for index, line in enumerate(chunk):
        if written < len(line):
            write_all(fd, memoryview(line)[written:])
            for rest in chunk[index + 1 :]:
                write_all(fd, rest)
            return
        written -= len(line)


def new_temp(final: str | os.PathLike[str]) -> Path:
    """A fresh temp name beside ``final``: ``<name>.<random>.tmp`` (ignored by readers)."""
    return temp_path(final, secrets.token_hex(6))


class StagedFile:
    """A file being written under a temp name, before it is published (see :func:`staged`).

    ``fd`` is open for writing while the ``with`` block runs; ``identity`` is the fsynced
    file's ``os.stat_result`` once the block has ended without an error.
    """

    __slots__ = ("fd", "identity", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.identity: os.stat_result | None = None


@contextlib.contextmanager
def staged(
    temp: Path,
    *,
    mode: int = FILE_MODE,
    exclusive: bool = True,
    before_fsync: str | None = None,
) -> Iterator[StagedFile]:
    """Steps 1-2 of every durable publish: write a temp file, then fsync it.

    ``temp`` is created with ``mode`` whatever the umask (``exclusive``: it must not
    exist; else an existing one is truncated); the block writes to ``.fd``. When the
    block ends, the failpoint ``before_fsync`` (if named) is passed, the file fsynced and
    closed. On any error the file is closed and ``temp`` removed: a crash leaves at most
    an orphan temp, which readers ignore and repair deletes.
    """
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC) | _CLOEXEC
    fd = os.open(temp, flags, mode)
    file = StagedFile(temp, fd)
    try:
        os.fchmod(fd, mode)  # independent of the umask
        yield file
        if before_fsync is not None:
            failpoint(before_fsync)
        os.fsync(fd)
        file.identity = os.fstat(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    os.close(fd)


def link_durably(
    temp: Path,
    final: Path,
    *,
    before_link: str | None = None,
    after_link: str | None = None,
    remove_temp: bool = False,
    take_back: os.stat_result | None = None,
) -> None:
    """Step 3 of a durable publish: hard-link ``temp`` to ``final``, then fsync the directory.

    ``os.link`` never overwrites: an existing ``final`` raises :class:`FileExistsError`
    with ``temp`` left in place (the caller may compare them). The failpoints
    ``before_link`` and ``after_link`` are passed around the link. ``remove_temp`` removes
    the temp name before the directory fsync (so both names change durably at once);
    otherwise the caller removes it. With ``take_back`` (the temp's identity), a failed
    directory fsync removes ``final`` again rather than report a name that may not last.
    """
    if before_link is not None:
        failpoint(before_link)
    os.link(temp, final)
    if after_link is not None:
        failpoint(after_link)
    if remove_temp:
        os.unlink(temp)
    try:
        fsync_dir(final.parent)
    except BaseException:
        if take_back is not None:
            _unlink_if_same(final, take_back)
        raise


def replace_durably(temp: Path, final: Path) -> None:
    """Step 3 of a publish that replaces: rename ``temp`` over ``final``, fsync the directory.

    The caller has kept what ``final`` named (a backup link) before replacing it.
    """
    os.replace(temp, final)
    fsync_dir(final.parent)


def _frame_encoder(path: Path) -> FrameEncoder:
    """A zstd frame encoder for the log at ``path`` (docs/format.md §7)."""
    # only for a zstd log: the codec off a raw log's write
    from dsh_store.jsonl.zstd_codec import FrameEncoder

    try:
        return FrameEncoder()
    except ZstdUnavailableError:
        raise ZstdUnavailableError(str(path)) from None


def _session_id_for(path: Path) -> str:
    name = path.parent.name
    return decode_session_id(name) or name


def materialize(
    path: str | os.PathLike[str],
    header_line: bytes,
    first_batch: Sequence[bytes],
    *,
    session_id: str | None = None,
) -> LogWriter:
    """Publish a new log holding ``header_line`` and ``first_batch``; return its writer.

    Missing directories are created (0700, each parent fsynced). The bytes go to an
    exclusive temp file ``<name>.<random>.tmp`` (0600) in the same directory, which
    is fsynced, hard-linked to ``path`` and removed; the directory is fsynced after
    the link. A crash at any point leaves either no log or the complete log (and
    perhaps an orphan temp file, which readers ignore). The first batch holds seqs
    ``0 .. len(first_batch) - 1``, so the returned writer expects seq
    ``len(first_batch)`` next.

    :param session_id: used in error messages; defaults to the decoded directory name.
    :raises SessionExistsError: ``path`` already exists; it is never overwritten.
    :raises ValueError: ``first_batch`` is empty (an empty log is never published).
    :raises OSError: the disk refused; nothing is left under ``path``.
    """
    final = Path(path)
    if not first_batch:
        raise ValueError("materialize needs a non-empty first batch: a log is never empty")
    session = session_id if session_id is not None else _session_id_for(final)
    make_dirs(final.parent)
    if os.path.lexists(final):
        raise SessionExistsError(session, str(final))
    if is_zstd_log(final):  # by its name: the header frame, then the first batch's frame
        encoder = _frame_encoder(final)
        data = encoder.header_frame(header_line) + encoder.batch_frame(b"".join(first_batch))
    else:
        data = b"".join((header_line, *first_batch))
    temp = temp_path(final, secrets.token_hex(6))
    try:
        identity = _publish(temp, final, data, session)
    except OSError as error:
        if isinstance(error, DshStoreError):
            raise
        raise StorageError("publishing the new log", str(final), error) from error
    writer = LogWriter.open(final, expected_size=len(data), next_seq=len(first_batch))
    if (writer.identity[0], writer.identity[1]) != identity:
        writer.close()
        raise ConcurrentModificationError(
            str(final), "the log was replaced right after it was published"
        )
    # The temp was fsynced before its link: all of it is durable. Recording it now also
    # replaces any watermark an earlier log of this name left.
    writer.mark.head_crc = header_crc(header_line)
    writer.mark.record(len(data))
    return writer


def _publish(temp: Path, final: Path, data: bytes, session: str) -> tuple[int, int]:
    """Temp file, fsync, link (never overwriting), directory fsync; remove the temp name."""
    try:
        with staged(temp, before_fsync="materialize.after-temp-write") as file:
            write_all(file.fd, data)
        identity = file.identity
        assert identity is not None
        try:
            link_durably(
                temp,
                final,
                before_link="materialize.before-link",
                after_link="materialize.after-link",
                take_back=identity,  # not durable as a name: take it back, no half-success
            )
        except FileExistsError as error:
            raise SessionExistsError(session, str(final)) from error
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return identity.st_dev, identity.st_ino


def _unlink_if_same(path: Path, identity: os.stat_result) -> None:
    with contextlib.suppress(OSError):
        if os.path.samestat(os.stat(path), identity):
            os.unlink(path)


class LogWriter:
    """Append handle of one existing log: batch append with tail check and rollback.

    The writer remembers the size and inode it last wrote and the next seq it
    expects. Before every append it checks, with one ``stat`` of the path, that the
    path still names that inode and that the inode still has that size (the path and
    the descriptor then name one inode, so its size is the descriptor's); anything
    else raises :class:`ConcurrentModificationError` before a byte is written. The
    handle is not thread-safe; one thread (the write-behind worker) uses it at a time.

    After each successful fsync the durable size is recorded in the log's watermark
    (``mark``, :mod:`dsh_store.jsonl.watermark`), best effort and never ahead of the fsync.

    Attributes: ``path``; ``size`` (bytes known durable); ``next_seq``;
    ``pending`` (lines of the last batch that failed, empty after a success);
    ``pending_first_seq``; ``broken`` / ``broken_cause`` (a rollback failed; every
    call now raises :class:`WriterBrokenError`); ``mark``.
    """

    def __init__(
        self, path: Path, fd: int, *, size: int, next_seq: int, encoder: FrameEncoder | None = None
    ) -> None:
        """Wrap an open ``O_APPEND`` descriptor; use :meth:`open` or :func:`materialize`.

        With an ``encoder`` (a zstd log) every batch is written as one zstd frame.
        """
        info = os.fstat(fd)
        self.encoder = encoder
        self.path = path
        self.identity: tuple[int, int] = (info.st_dev, info.st_ino)
        self.size = size
        self.next_seq = next_seq
        self.pending: list[bytes] = []
        self.pending_first_seq: int | None = None
        self.broken_cause: str | None = None
        self.mark = DurableMark(path, self.identity)
        self._fd: int | None = fd
        self._name = os.fspath(path)  # what the tail check stats, converted once

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, expected_size: int, next_seq: int) -> LogWriter:
        """Open an existing log for appending; the caller read it and knows its size and next seq.

        :raises ConcurrentModificationError: the file is missing, not a regular file,
            or its size is not ``expected_size``.
        """
        log = Path(path)
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | _CLOEXEC)
        except FileNotFoundError as error:
            raise ConcurrentModificationError(str(log), "the log file no longer exists") from error
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ConcurrentModificationError(str(log), "the log is not a regular file")
            if info.st_size != expected_size:
                raise ConcurrentModificationError(
                    str(log), f"size is {info.st_size} bytes, expected {expected_size}"
                )
            encoder = _frame_encoder(log) if is_zstd_log(log) else None
            return cls(log, fd, size=expected_size, next_seq=next_seq, encoder=encoder)
        except BaseException:
            os.close(fd)
            raise

    @property
    def broken(self) -> bool:
        """True once a rollback failed; the handle then refuses every call."""
        return self.broken_cause is not None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._fd is None

    def append(self, lines: Sequence[bytes], first_seq: int, last_seq: int) -> None:
        """Append one batch durably; returns only after ``fsync`` succeeded.

        ``lines`` carry seqs ``first_seq .. last_seq``, which must continue the log.
        On any failure the file is truncated back to its pre-batch size and fsynced,
        ``pending`` keeps the batch for a retry, and the original error is raised.

        :raises EventValidationError: the seqs do not continue the log (rule
            ``append-seq-mismatch``); nothing is written.
        :raises ConcurrentModificationError: the file changed under this handle.
        :raises WriterBrokenError: this or an earlier rollback failed.
        :raises OSError: the disk refused the batch; the file is back to its old size.
        """
        fd = self._fd
        if fd is None or self.broken_cause is not None:
            fd = self._usable_fd()
        if first_seq != self.next_seq or last_seq - first_seq + 1 != len(lines) or not lines:
            refuse_misnumbered_batch(self.path, self.next_seq, lines, first_seq, last_seq)
        self._check_tail(fd)
        before = self.size
        data: bytes | None = None
        if self.encoder is not None:  # the whole frame exists before the file is touched
            data = self.encoder.batch_frame(b"".join(lines))
        elif ANY_ARMED:
            data = b"".join(lines)  # the crash tests tear this one write in half
        try:
            if data is None:
                written = write_lines(fd, lines)
            elif ANY_ARMED:
                failpoint("append.before-write")
                write_all(fd, data, torn_failpoint="append.partial-write")
                failpoint("append.after-write")
                failpoint("append.before-fsync")
                written = len(data)
            else:
                write_all(fd, data)
                written = len(data)
            os.fsync(fd)
        except BaseException as error:
            self.pending = list(lines)
            self.pending_first_seq = first_seq
            self._rollback(fd, before, error)
            if isinstance(error, OSError) and not isinstance(error, DshStoreError):
                raise StorageError(
                    f"append of seqs {first_seq}..{last_seq}", str(self.path), error
                ) from error
            raise
        if ANY_ARMED:
            failpoint("append.after-fsync")
        self.size = before + written
        self.next_seq = last_seq + 1
        if self.pending:
            self.pending = []
            self.pending_first_seq = None
        self.mark.record(self.size)  # after the fsync returned: it may lag, never lead

    def close(self) -> None:
        """Close the descriptor; idempotent. Unwritten ``pending`` lines stay readable."""
        self.mark.close()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _usable_fd(self) -> int:
        if self.broken_cause is not None:
            raise WriterBrokenError(str(self.path), self.broken_cause)
        if self._fd is None:
            raise ValueError(f"{self.path}: the log writer is closed")
        return self._fd

    def _check_tail(self, fd: int) -> None:
        """Refuse to write unless the path still names this handle's inode at its last size.

        One ``stat`` of the path: when it names the descriptor's inode (same device and
        inode number), its size is the descriptor's, so no ``fstat`` is needed for that.
        """
        try:
            named: os.stat_result | None = os.stat(self._name)
        except FileNotFoundError:
            named = None
        if named is None or named.st_ino != self.identity[1] or named.st_dev != self.identity[0]:
            self._refuse_moved(fd, named)
        if named.st_size != self.size:
            self._refuse(f"size is {named.st_size} bytes, this writer last left {self.size}")

    def _refuse_moved(self, fd: int, named: os.stat_result | None) -> NoReturn:
        """Refuse a path that no longer names this handle's inode, saying what happened."""
        if named is not None:
            self._refuse("another file was put in place of the log")
        if os.fstat(fd).st_nlink == 0:
            self._refuse("the log file was deleted")
        self._refuse("the log file was removed from its path")

    def _refuse(self, detail: str) -> NoReturn:
        raise ConcurrentModificationError(str(self.path), detail)

    def _rollback(self, fd: int, before: int, error: BaseException) -> None:
        try:
            failpoint("rollback.before-truncate")
            os.ftruncate(fd, before)
            os.fsync(fd)
        except BaseException as rollback_error:
            self.broken_cause = (
                f"append failed with {error!r}, then truncating back to {before} bytes "
                f"failed with {rollback_error!r}"
            )
            raise WriterBrokenError(str(self.path), self.broken_cause) from rollback_error


@contextlib.contextmanager
def storage_errors(
    operation: str, path: str | os.PathLike[str], *, then: str = "flush again"
) -> Iterator[None]:
    """Raise a bare :class:`OSError` of ``operation`` as :class:`StorageError`.

    The error names the file the OS named (else ``path``), the operation and the errno;
    ``then`` ends its message (what to do again). Errors that already are dsh-store
    errors pass through unchanged.
    """
    try:
        yield
    except OSError as error:
        if isinstance(error, DshStoreError):
            raise
        named = error.filename if isinstance(error.filename, str) else os.fspath(path)
        raise StorageError(operation, named, error, then=then) from error
