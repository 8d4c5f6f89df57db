"""Loss-free removal of a crash tail: keep the torn bytes in a sidecar, then truncate.

Protocol of :func:`commit_truncation` (each step is safe to crash after; a repeat with the
same arguments picks up from what is on disk and ends in the same state):

1. If the log is already ``offset`` bytes long there is nothing to do (its size is fsynced
   again, in case an earlier run died between truncate and fsync).
2. Copy the tail bytes ``[offset:]`` to the fixed scratch name ``<log>.torn-<offset>.partial``
   (created or overwritten, mode 0600), fsync it. Blocks of zero bytes are not written but
   left as holes (the file's length is set at the end), so the sidecar of a zero-filled tail,
   which may be a sparse hole of gigabytes, holds the same bytes and uses no disk space.
3. Publish it as ``<log>.torn-<offset>`` with ``os.link`` (never overwrites). If that name
   already exists with the same bytes -- an earlier run crashed after publishing -- it is
   reused. If it holds different bytes (a later crash tore the log again at the same
   offset), the next free name ``<log>.torn-<offset>.2``, ``.3``, ... is used the same way,
   so no torn byte is ever overwritten or dropped and a repeat still finds its own copy.
   Remove the scratch name and fsync the directory. Failpoint ``repair.after-sidecar``.
4. ``ftruncate`` the log to ``offset`` and fsync it. Failpoint ``repair.after-truncate``.

Because the sidecar only ever appears under its final name complete and fsynced, and the
log is only shortened after that, no byte of the log is lost at any crash point. The caller
must hold the session's write lock, so no writer appends while the tail is moved.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..errors import ConcurrentModificationError, DshStoreError, StorageError
from .failpoints import failpoint
from .files import fsync_dir, link_durably, replace_durably, staged, write_all

__all__ = [
    "commit_truncation",
    "drop_intent",
    "drop_stale_intents",
    "intent_path",
    "read_intent",
    "sidecar_path",
    "write_intent",
]

_COPY_BLOCK = 1 << 20
_SIDECAR_MODE = 0o600


def sidecar_path(path: str | os.PathLike[str], offset: int, number: int = 1) -> Path:
    """Name of the ``number``-th sidecar that keeps bytes cut from ``path`` at ``offset``.

    The first is ``<log>.torn-<offset>``; later different tails cut at the same offset go
    to ``<log>.torn-<offset>.<number>``.
    """
    log = Path(path)
    suffix = "" if number == 1 else f".{number}"
    return log.with_name(f"{log.name}.torn-{offset}{suffix}")


def commit_truncation(
    path: str | os.PathLike[str], offset: int, *, expected_size: int | None = None
) -> Path | None:
    """Move the bytes of ``path`` after ``offset`` into a sidecar, then truncate to ``offset``.

    ``expected_size`` is the file size the caller's scan saw; a different size (other than
    an already finished truncation) raises :class:`ConcurrentModificationError` without
    touching anything. Returns the sidecar path, or None when the file already was
    ``offset`` bytes long. See the module docstring for the crash story.
    """
    log = Path(path)
    if offset < 0:
        raise ValueError(f"offset must be non-negative, got {offset}")
    try:
        return _commit_truncation(log, offset, expected_size)
    except OSError as error:
        if isinstance(error, DshStoreError):
            raise
        raise StorageError(
            f"cutting the torn tail at byte {offset}", str(log), error, then="open or load it again"
        ) from error


def _commit_truncation(log: Path, offset: int, expected_size: int | None) -> Path | None:
    fd = os.open(log, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == offset:
            os.fsync(fd)
            return None
        if size < offset:
            raise ConcurrentModificationError(
                str(log), f"it is {size} bytes long, shorter than the committed prefix {offset}"
            )
        if expected_size is not None and size != expected_size:
            raise ConcurrentModificationError(
                str(log), f"it is {size} bytes long, the scan saw {expected_size}"
            )
        sidecar = _publish_sidecar(fd, log, offset, size)
        failpoint("repair.after-sidecar")
        os.ftruncate(fd, offset)
        os.fsync(fd)
        failpoint("repair.after-truncate")
        return sidecar
    finally:
        os.close(fd)


def _publish_sidecar(fd: int, log: Path, offset: int, size: int) -> Path:
    """Steps 2-3 of the protocol: a complete, fsynced sidecar under its final name."""
    scratch = sidecar_path(log, offset).with_name(sidecar_path(log, offset).name + ".partial")
    number = 1
    while True:
        sidecar = sidecar_path(log, offset, number)
        if not sidecar.exists():
            break
        if _same_bytes(fd, sidecar, offset, size):
            _fsync_path(sidecar)
            scratch.unlink(missing_ok=True)
            fsync_dir(log.parent)
            return sidecar
        number += 1
    # Nothing refers to the scratch copy yet (the tail is still in the log); one that
    # cannot be removed after a failure is a leftover that verify reports and repair deletes.
    with staged(scratch, mode=_SIDECAR_MODE, exclusive=False) as file:
        position = offset
        while position < size:
            block = os.pread(fd, min(_COPY_BLOCK, size - position), position)
            if not block:
                raise ConcurrentModificationError(
                    str(log), f"it shrank below {size} bytes while its tail was copied"
                )
            if not _all_zero(block):
                os.lseek(file.fd, position - offset, os.SEEK_SET)
                write_all(file.fd, block)
            position += len(block)
        # Zero blocks were skipped, not written: the length set here makes them holes, so
        # a zero-filled (perhaps sparse) tail costs the sidecar no disk space.
        os.ftruncate(file.fd, size - offset)
    # The caller holds the session lock, so nobody else publishes between check and link;
    # link still never overwrites, and a lost race surfaces as FileExistsError.
    link_durably(scratch, sidecar, remove_temp=True)
    return sidecar


def _all_zero(block: bytes) -> bool:
    """Whether every byte of ``block`` is NUL (the first and last byte decide most blocks)."""
    return block[0] == 0 and block[-1] == 0 and block.count(0) == len(block)


def _same_bytes(fd: int, sidecar: Path, offset: int, size: int) -> bool:
    """Whether ``sidecar`` holds exactly the log's bytes ``[offset:size]``."""
    if sidecar.stat().st_size != size - offset:
        return False
    with open(sidecar, "rb") as existing:
        position = offset
        while position < size:
            expected = os.pread(fd, min(_COPY_BLOCK, size - position), position)
            if not expected or existing.read(len(expected)) != expected:
                return False
            position += len(expected)
    return True


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def intent_path(path: str | os.PathLike[str], offset: int) -> Path:
    """Name of the lines a zstd repair appends after cutting ``path`` at ``offset``:
    ``<log>.repair-<offset>`` (docs/format.md §7.3)."""
    log = Path(path)
    return log.with_name(f"{log.name}.repair-{offset}")


def write_intent(path: str | os.PathLike[str], offset: int, lines: list[bytes]) -> Path:
    """Make the lines a zstd repair appends at ``offset`` durable before it cuts anything.

    Written to a scratch name, fsynced, renamed over ``<log>.repair-<offset>`` (a rerun
    computes the same lines from the same torn log), directory fsynced. Failpoint
    ``repair.after-intent``.
    """
    intent = intent_path(path, offset)
    scratch = intent.with_name(intent.name + ".partial")
    try:
        with staged(scratch, mode=_SIDECAR_MODE, exclusive=False) as file:
            write_all(file.fd, b"".join(lines))
        replace_durably(scratch, intent)
    except OSError as error:
        raise StorageError("saving the lines a repair appends", str(intent), error) from error
    failpoint("repair.after-intent")
    return intent


def read_intent(path: str | os.PathLike[str], offset: int) -> list[bytes] | None:
    """The lines an earlier zstd repair of ``path`` at ``offset`` was to append, or None."""
    try:
        data = intent_path(path, offset).read_bytes()
    except FileNotFoundError:
        return None
    return data.splitlines(keepends=True)


def drop_intent(path: str | os.PathLike[str], offset: int) -> None:
    """Remove a finished repair's intent (its lines are in the log now)."""
    intent = intent_path(path, offset)
    with contextlib.suppress(FileNotFoundError):
        intent.unlink()
        fsync_dir(intent.parent)


def drop_stale_intents(path: str | os.PathLike[str], committed: int) -> None:
    """Remove the intents of repairs that finished: their offset is below ``committed``.

    A repair cuts the log to its intent's offset before it appends, so a log whose
    committed prefix reaches past that offset already holds the intent's lines.
    """
    log = Path(path)
    prefix = f"{log.name}.repair-"
    try:
        names = os.listdir(log.parent)
    except OSError:
        return
    for name in names:
        offset = name[len(prefix) :]
        if name.startswith(prefix) and offset.isdigit() and int(offset) < committed:
            drop_intent(log, int(offset))
