"""The durable watermark: how many bytes of a log its writer has seen fsynced.

After every ``fsync`` of a log returns (a first publish, each batch, each repair commit),
the writer records the log's size in a small side file ``<log>.durable``
(:data:`~dsh_store.jsonl.layout.DURABLE_SUFFIX`). The record is written only after the
fsync, so it can lag behind the log but never run ahead of it; it therefore needs no fsync
of its own, and a lost or torn record only weakens what a reader can prove, never what it
keeps. A reader treats every defect below the recorded size as committed corruption: those
bytes were acknowledged, and no crash tears acknowledged bytes (``docs/format.md`` §3.1).

The record is one ASCII line, self-validating::

    dsh-store-durable 1 <st_dev> <st_ino> <crc32 of the header line> <size> <crc32>\\n

It binds the size to the log's inode and to a checksum of the log's first line, and ends
with the CRC-32 of everything before it. A record that is torn, foreign or stale (another
inode, another header: a new log was published under the name) is ignored, never trusted.
Writing it is best effort: an ``OSError`` there leaves the old record (which still lags
correctly, or names another inode) and never fails the append whose bytes are durable.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import zlib
from typing import NamedTuple

from ..errors import DshStoreError
from .layout import DURABLE_SUFFIX, FILE_MODE
from .zstd_frames import MAGIC

__all__ = [
    "DurableMark",
    "Watermark",
    "discard_watermark",
    "header_crc",
    "read_watermark",
    "record_published",
    "watermark_path",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_MAGIC = b"dsh-store-durable 1"
_RECORD = re.compile(
    rb"dsh-store-durable 1 ([0-9]{1,20}) ([0-9]{1,20}) ([0-9a-f]{8}) ([0-9]{20}) ([0-9a-f]{8})\n"
)
_RECORD_MAX = 128
_HEADER_READ_MAX = (1 << 20) + 1  # the reader's header limit, plus the byte that exceeds it


class Watermark(NamedTuple):
    """A decoded, checksum-valid record: the log it names and its durable ``size``."""

    dev: int
    ino: int
    head_crc: int
    size: int

    def binds(self, info: os.stat_result, head_crc: int) -> bool:
        """Whether this record belongs to the log with this ``fstat`` and header checksum."""
        return (self.dev, self.ino, self.head_crc) == (info.st_dev, info.st_ino, head_crc)


def watermark_path(log: str | os.PathLike[str]) -> str:
    """The side file holding ``log``'s durable watermark: ``<log>.durable``."""
    return os.fspath(log) + DURABLE_SUFFIX


def header_crc(first_line: bytes) -> int:
    """The CRC-32 a record binds: of the log's first physical line, ``\\n`` included."""
    return zlib.crc32(first_line)


def encode_record(dev: int, ino: int, head_crc: int, size: int) -> bytes:
    """The record line for a log of identity ``dev``/``ino`` that is durable to ``size``.

    The size is written with 20 digits, so every record of one log has the same length
    and one ``pwrite`` at offset 0 replaces the previous one whole.
    """
    prefix = _record_prefix(dev, ino, head_crc)
    return _record_with(prefix, zlib.crc32(prefix), size)


def _record_prefix(dev: int, ino: int, head_crc: int) -> bytes:
    # A record up to its size field: the same for every record of one log.
    return b"%s %d %d %08x " % (_MAGIC, dev, ino, head_crc)


def _record_with(prefix: bytes, prefix_crc: int, size: int) -> bytes:
    # The record of ``size`` after ``prefix`` (whose CRC-32 is ``prefix_crc``).
    digits = b"%020d" % size
    return prefix + digits + b" %08x\n" % zlib.crc32(digits, prefix_crc)


def decode_record(data: bytes) -> Watermark | None:
    """The record in ``data``, or None when it is not one intact record."""
    match = _RECORD.fullmatch(data)
    if match is None:
        return None
    body = data[: match.start(5) - 1]
    if zlib.crc32(body) != int(match.group(5), 16):
        return None
    return Watermark(
        int(match.group(1)), int(match.group(2)), int(match.group(3), 16), int(match.group(4))
    )


def read_watermark(log: str | os.PathLike[str]) -> Watermark | None:
    """The intact record beside ``log``, or None (absent, unreadable, torn or foreign).

    Whether it binds the log is for the caller to check (:meth:`Watermark.binds`) with
    the ``fstat`` of the descriptor it reads the log through. Read it *before* that
    ``fstat``: the log only grows past a record, so the size then seen is never below it.
    """
    try:
        fd = os.open(watermark_path(log), os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | _NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _RECORD_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return decode_record(data)


def _read_head_crc(log: str, identity: tuple[int, int]) -> int | None:
    """CRC of the first line of the file at ``log`` if it is still inode ``identity``."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != identity:
            return None
        if os.pread(fd, 4, 0) == MAGIC:  # a zstd log: the line is frame 0's plaintext
            return _zstd_head_crc(log)
        parts: list[bytes] = []
        read = 0
        while read < _HEADER_READ_MAX:
            block = os.pread(fd, min(64 * 1024, _HEADER_READ_MAX - read), read)
            if not block:
                return None
            cut = block.find(b"\n")
            if cut >= 0:
                parts.append(block[: cut + 1])
                return header_crc(b"".join(parts))
            parts.append(block)
            read += len(block)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _zstd_head_crc(log: str) -> int | None:
    """CRC of the header line a zstd log's first frame holds, or None."""
    # only for a zstd log: the codec off a raw log's read
    from .zstd_codec import ZstdLogReader

    try:
        for frame in ZstdLogReader(log, strict=False).frames():
            return header_crc(frame.lines[0] + b"\n") if frame.lines else None
    except DshStoreError:
        return None
    return None


class DurableMark:
    """The watermark writer of one open log (used by :class:`~dsh_store.jsonl.files.LogWriter`).

    :meth:`record` is called after each fsync of the log with the size it made durable.
    The side file is opened on the first record and kept open, so each later record is one
    ``pwrite``. ``head_crc`` is read from the log on the first record unless given.
    """

    def __init__(self, log: str | os.PathLike[str], identity: tuple[int, int]) -> None:
        self.log = os.fspath(log)
        self.identity = identity
        self.head_crc: int | None = None
        self._fd: int | None = None
        # The record up to its size field, and that prefix's CRC, for ``_head``: every
        # record of one log shares them, so each later one formats and checksums its size
        # only (the same pieces :func:`encode_record` joins).
        self._head: int | None = None
        self._prefix = b""
        self._prefix_crc = 0

    def record(self, size: int) -> None:
        """Record that the log is durable up to ``size`` bytes; never raises ``OSError``."""
        try:
            if self.head_crc is None:
                self.head_crc = _read_head_crc(self.log, self.identity)
                if self.head_crc is None:
                    return
            if self._head != self.head_crc:
                self._head = self.head_crc
                self._prefix = _record_prefix(self.identity[0], self.identity[1], self.head_crc)
                self._prefix_crc = zlib.crc32(self._prefix)
            data = _record_with(self._prefix, self._prefix_crc, size)
            fd = self._fd
            if fd is None:
                fd = os.open(
                    watermark_path(self.log),
                    os.O_WRONLY | os.O_CREAT | _CLOEXEC | _NOFOLLOW,
                    FILE_MODE,
                )
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        raise OSError("the watermark is not a regular file")
                    os.fchmod(fd, FILE_MODE)
                    os.pwrite(fd, data, 0)
                    os.ftruncate(fd, len(data))  # a foreign, longer record leaves no rest
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
                return
            if os.pwrite(fd, data, 0) != len(data):
                raise OSError("short write of the watermark")
        except OSError:
            # The log's bytes are durable whatever happens here; the record lags instead.
            self.close()

    def close(self) -> None:
        """Close the side file; idempotent (a later :meth:`record` reopens it)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)


def record_published(log: str | os.PathLike[str]) -> None:
    """Record the whole of a just-published, fsynced ``log`` as durable (best effort).

    A publish under a name whose old log is gone (a migration target) replaces any record
    left there, so the new log never inherits a stale one.
    """
    path = os.fspath(log)
    try:
        info = os.stat(path)
    except OSError:
        return
    mark = DurableMark(path, (info.st_dev, info.st_ino))
    try:
        mark.record(info.st_size)
    finally:
        mark.close()


def discard_watermark(log: str | os.PathLike[str]) -> None:
    """Remove a record left under ``log``'s name by an earlier log (best effort).

    For a publisher that links a new log without recording it (a migration's output): the
    new log starts with no watermark instead of a stale one.
    """
    with contextlib.suppress(OSError):
        os.unlink(watermark_path(log))
