"""Loss-free removal of a crash tail: keep the torn bytes in a sidecar, then truncate.

Protocol of :func:`commit_truncation` (each step is safe to crash after; a repeat with the
same arguments picks up from what is on disk and ends in the same state):

1. If the log is already ``offset`` bytes long there is nothing to do (its size is fsynced
   again, in case an earlier run died between truncate and fsync).
2. Copy the tail bytes ``[offset:]`` to the fixed scratch name ``<log>.torn-<offset>.partial``
   (created or overwritten, mode 0600), fsync it.
3. Publish it as ``<log>.torn-<offset>`` with ``os.link`` (never overwrites). If that name
   already exists with the same bytes -- an earlier run crashed after publishing -- it is
   reused; with different bytes the repair stops with :class:`SidecarConflictError`.
   Remove the scratch name and fsync the directory. Failpoint ``repair.after-sidecar``.
4. ``ftruncate`` the log to ``offset`` and fsync it. Failpoint ``repair.after-truncate``.

Because the sidecar only ever appears under its final name complete and fsynced, and the
log is only shortened after that, no byte of the log is lost at any crash point. The caller
must hold the session's write lock, so no writer appends while the tail is moved.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConcurrentModificationError, DshStoreError, StorageError
from .failpoints import failpoint

__all__ = ["SidecarConflictError", "commit_truncation", "sidecar_path"]

_COPY_BLOCK = 1 << 20
_SIDECAR_MODE = 0o600


class SidecarConflictError(DshStoreError):
    """A sidecar for this offset already exists and holds different bytes than the tail.

    Nothing was truncated. Someone must decide which bytes matter: compare the sidecar
    with the log's tail, move the sidecar aside, and run the repair again.
    """

    def __init__(self, path: str, sidecar: str, offset: int) -> None:
        super().__init__(
            f"{path}: cannot move the crash tail at byte {offset} aside: {sidecar} already "
            "exists with different content; the log was not modified — compare the two, move "
            "the old sidecar away, then repair again",
            path=path,
            sidecar=sidecar,
            offset=offset,
        )


def sidecar_path(path: str | os.PathLike[str], offset: int) -> Path:
    """Name of the sidecar that keeps the bytes cut from ``path`` at ``offset``."""
    log = Path(path)
    return log.with_name(f"{log.name}.torn-{offset}")


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
        raise StorageError(f"cutting the torn tail at byte {offset}", str(log), error) from error


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
        sidecar = sidecar_path(log, offset)
        _publish_sidecar(fd, log, sidecar, offset, size)
        failpoint("repair.after-sidecar")
        os.ftruncate(fd, offset)
        os.fsync(fd)
        failpoint("repair.after-truncate")
        return sidecar
    finally:
        os.close(fd)


def _publish_sidecar(fd: int, log: Path, sidecar: Path, offset: int, size: int) -> None:
    """Steps 2-3 of the protocol: a complete, fsynced sidecar under its final name."""
    scratch = sidecar.with_name(sidecar.name + ".partial")
    if sidecar.exists():
        _require_same_bytes(fd, log, sidecar, offset, size)
        _fsync_path(sidecar)
        scratch.unlink(missing_ok=True)
        _fsync_dir(log.parent)
        return
    out = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, _SIDECAR_MODE)
    try:
        os.fchmod(out, _SIDECAR_MODE)
        position = offset
        while position < size:
            block = os.pread(fd, min(_COPY_BLOCK, size - position), position)
            if not block:
                raise ConcurrentModificationError(
                    str(log), f"it shrank below {size} bytes while its tail was copied"
                )
            _write_all(out, block)
            position += len(block)
        os.fsync(out)
    finally:
        os.close(out)
    try:
        os.link(scratch, sidecar)
    except FileExistsError:
        # Someone published it between our check and the link; judge it like a repeat.
        _require_same_bytes(fd, log, sidecar, offset, size)
    os.unlink(scratch)
    _fsync_dir(log.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _require_same_bytes(fd: int, log: Path, sidecar: Path, offset: int, size: int) -> None:
    """Raise SidecarConflictError unless ``sidecar`` holds exactly ``log[offset:size]``."""
    conflict = SidecarConflictError(str(log), str(sidecar), offset)
    if sidecar.stat().st_size != size - offset:
        raise conflict
    with open(sidecar, "rb") as existing:
        position = offset
        while position < size:
            expected = os.pread(fd, min(_COPY_BLOCK, size - position), position)
            if not expected or existing.read(len(expected)) != expected:
                raise conflict
            position += len(expected)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
