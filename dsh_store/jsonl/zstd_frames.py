"""Structural scan of a ``.jsonl.zstd`` log: frame boundaries without decompressing.

A zstd session log is a concatenation of independent zstd frames (RFC 8878 §3.1). This
module walks each frame's magic number, frame header descriptor, optional window
descriptor, dictionary id and content size, every 3-byte block header (skipping over the
block payloads) and the optional 4-byte checksum trailer. It never decompresses, so it
needs no zstd binding, and it holds at most one read window of the file (1 MiB, or one
frame when that is larger). A plain complete frame is read in one pass over the window
(:func:`_parse_plain`), a run of them in one call (``dsh_store._zstdwalk``, C, where it
was compiled); anything else takes the precise walk (:func:`_frame`), which says what it
is.

What the scan of the bytes after the last complete frame finds (docs/format.md, "zstd
encoding"):

- nothing: the log ends on a frame boundary;
- a frame cut off by the end of the file anywhere (inside its magic, header, a block
  header, a block payload or the checksum trailer): a torn final frame (:class:`TornFrame`),
  a crash tail;
- only zero bytes up to the end of the file: zero fill (:class:`ZeroFill`), a crash tail
  (a file size that reached the disk before the data did);
- anything else: a :class:`FrameDefect` (wrong magic at a frame boundary, a reserved or
  unused header bit, a dictionary id, a reserved block type, an oversized block, zero
  bytes followed by data), corruption at that byte offset.

Skippable frames (magic ``0x184D2A50``-``0x184D2A5F``) hold no log data: they are
stepped over and listed as :class:`FrameSpan` with ``skippable=True``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from ..errors import NotASessionError

__all__ = [
    "BLOCK_SIZE_MAX",
    "MAGIC",
    "FrameDefect",
    "FrameScanner",
    "FrameSpan",
    "TornFrame",
    "ZeroFill",
    "is_zstd_log",
    "open_log",
]

MAGIC = b"\x28\xb5\x2f\xfd"
"""The zstd frame magic number 0xFD2FB528, little-endian as it is on disk."""
_SKIPPABLE_MAGIC_TAIL = b"\x2a\x4d\x18"  # bytes 1-3 of 0x184D2A5?; byte 0 is 0x50-0x5F
BLOCK_SIZE_MAX = 128 * 1024
"""Largest block size RFC 8878 allows (Block_Maximum_Size is at most 128 KiB)."""
_READ_WINDOW = 1 << 20
_FCS_SIZES = (0, 2, 4, 8)  # by Frame_Content_Size_Flag; flag 0 + single segment = 1 byte
_DICT_ID_SIZES = (0, 1, 2, 4)
_BLOCK_TYPES = ("raw", "rle", "compressed")


class FrameSpan(NamedTuple):
    """One complete frame: bytes ``[offset, end)``.

    ``blocks`` holds the end offset of every block (for a skippable frame, empty);
    ``content_size`` is the declared Frame_Content_Size, or None when the header has none;
    ``checksum`` says whether the frame carries the 4-byte content checksum trailer.
    """

    offset: int
    end: int
    skippable: bool
    content_size: int | None
    checksum: bool
    blocks: tuple[int, ...]


class TornFrame(NamedTuple):
    """A final frame the end of the file cuts off: bytes ``[offset, file end)``.

    ``where`` names the part the cut fell in (``magic``, ``header``, ``block-header``,
    ``block``, ``checksum``); ``blocks`` the end offsets of its complete blocks, so a
    decoder can be fed block by block.
    """

    offset: int
    length: int
    where: str
    skippable: bool
    blocks: tuple[int, ...]


class ZeroFill(NamedTuple):
    """Only zero bytes from ``offset`` (a frame boundary) to the end of the file."""

    offset: int
    length: int


class FrameDefect(NamedTuple):
    """Bytes that are neither a frame, a frame cut off by the end of the file, nor zero fill.

    ``offset`` is the frame boundary where the damage starts (what a salvage keeps before),
    ``at`` the byte that is wrong, ``rule`` a stable name, ``detail`` a readable sentence.
    """

    offset: int
    at: int
    rule: str
    detail: str


class _Torn(Exception):
    """The end of the file came inside the frame being read."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class _Bad(Exception):
    def __init__(self, at: int, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.at = at
        self.rule = rule
        self.detail = detail


class _Source:
    """Positioned reads over a file descriptor (through one read window) or a bytes object."""

    def __init__(self, fd: int | None, data: bytes | None, size: int) -> None:
        self._fd = fd
        self._data = data
        self.size = size
        self.window = b"" if data is None else data
        self.base = 0

    def get(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""
        if self._data is not None:
            return self._data[offset : offset + length]
        start = offset - self.base
        if start < 0 or start + length > len(self.window):
            self.refill(offset, length)
            start = 0
        return self.window[start : start + length]

    def refill(self, offset: int, length: int = 0) -> None:
        """Read the window anew from ``offset``: at least ``length`` bytes where the file has
        them (for bytes, the window is always all of them)."""
        if self._data is None:
            assert self._fd is not None
            self.window = os.pread(self._fd, max(length, _READ_WINDOW), offset)
            self.base = offset

    def covers(self, offset: int, end: int) -> bool:
        """Whether the window holds all of bytes ``[offset, end)``."""
        return self.base <= offset and end <= self.base + len(self.window)

    def view(self, offset: int, end: int) -> memoryview:
        """Bytes ``[offset, end)`` (inside the file) as a view of the window, read first when
        the window does not hold them all: no copy of bytes already read."""
        if not self.covers(offset, end):
            self.refill(offset, end - offset)
        start = offset - self.base
        return memoryview(self.window)[start : start + end - offset]


class FrameScanner:
    """Walk the frames of one zstd log, from a path or from bytes (see the module docstring).

    :meth:`frames` yields every complete :class:`FrameSpan` in file order; once it is
    exhausted, :attr:`end` is the end of the last complete frame and at most one of
    :attr:`torn`, :attr:`zero_fill` and :attr:`defect` says what follows it. The scan stops
    at a defect. Reads never go past the size the file had when the scan opened it.
    """

    def __init__(self, source: str | os.PathLike[str] | bytes | int) -> None:
        self._fd: int | None = None
        self._data: bytes | None = None
        self.path: str | None = None
        if isinstance(source, bytes):
            self._data = source
        elif isinstance(source, int):
            self._fd = source  # the caller's open descriptor; it stays open
        else:
            self.path = os.fspath(source)
        self._reset()

    def _reset(self) -> None:
        self.end = 0
        self.file_size = 0
        self.torn: TornFrame | None = None
        self.zero_fill: ZeroFill | None = None
        self.defect: FrameDefect | None = None
        self.finished = False

    def frames(self) -> Iterator[FrameSpan]:
        """Yield each complete frame; the summary attributes are final afterwards."""
        for span, _ in self._frames(with_bytes=False):
            yield span

    def frames_with_bytes(self) -> Iterator[tuple[FrameSpan, memoryview]]:
        """:meth:`frames`, each with the frame's bytes: a view of the read window, valid
        until the caller lets go of it (the window is never written to, only replaced)."""
        for span, frame in self._frames(with_bytes=True):
            assert frame is not None
            yield span, frame

    def scan(self) -> list[FrameSpan]:
        """All complete frames as a list (for small logs and tests)."""
        return list(self.frames())

    def _frames(self, with_bytes: bool) -> Iterator[tuple[FrameSpan, memoryview | None]]:
        self._reset()
        if self._data is not None:
            yield from self._walk(_Source(None, self._data, len(self._data)), with_bytes)
            return
        if self._fd is not None:
            source = _Source(self._fd, None, os.fstat(self._fd).st_size)
            yield from self._walk(source, with_bytes)
            return
        assert self.path is not None
        fd = open_log(self.path)
        try:
            yield from self._walk(_Source(fd, None, os.fstat(fd).st_size), with_bytes)
        finally:
            os.close(fd)

    def _walk(
        self, source: _Source, with_bytes: bool
    ) -> Iterator[tuple[FrameSpan, memoryview | None]]:
        self.file_size = size = source.size
        offset = 0
        while offset < size:
            # A run of plain complete frames in the window, in one call (C where built).
            base, window = source.base, source.window
            if 0 <= offset - base < len(window):
                run, _ = _plain_frames(window, offset - base, base, _RUN_FRAMES)
                if run:
                    view = memoryview(window) if with_bytes else None
                    for span in run:
                        self.end = offset = span.end
                        frame = None if view is None else view[span.offset - base : offset - base]
                        yield span, frame
                    continue
            plain = _plain_frame(source, offset)
            if plain is not None:
                span = plain
            else:
                # Anything but a plain complete frame (a torn one, a defect, a skippable
                # frame, a dictionary id field) takes the precise walk, which names it.
                blocks: list[int] = []
                state = {"skippable": False}
                try:
                    span = _frame(source, offset, blocks, state)
                except _Torn as torn:
                    self.torn = TornFrame(
                        offset, size - offset, torn.where, state["skippable"], tuple(blocks)
                    )
                    break
                except _Bad as bad:
                    self._classify_non_frame(source, offset, bad)
                    break
            self.end = offset = span.end
            yield span, source.view(span.offset, span.end) if with_bytes else None
        self.finished = True

    def _classify_non_frame(self, source: _Source, offset: int, bad: _Bad) -> None:
        """Zero fill to the end of the file, or a defect (docs/format.md, "zstd encoding")."""
        first_nonzero = _first_nonzero(source, offset)
        if first_nonzero is None:
            self.zero_fill = ZeroFill(offset, source.size - offset)
        elif first_nonzero > offset:
            self.defect = FrameDefect(
                offset,
                first_nonzero,
                "zstd-zero-run",
                f"{first_nonzero - offset} zero byte(s) at a frame boundary are followed by "
                f"data at byte {first_nonzero}: not a crash tail",
            )
        else:
            self.defect = FrameDefect(offset, bad.at, bad.rule, bad.detail)


def is_zstd_log(path: str | os.PathLike[str], fd: int | None = None) -> bool:
    """Whether a log is zstd-encoded: its name ends in ``.zstd`` or it starts with
    :data:`MAGIC` (read through ``fd`` when given; a file that cannot be read is not)."""
    if os.fspath(path).endswith(".zstd"):
        return True
    try:
        if fd is not None:
            return os.pread(fd, 4, 0) == MAGIC
        with open(path, "rb") as log:
            return log.read(4) == MAGIC
    except OSError:
        return False


def open_log(path: str) -> int:
    """Open a log for reading; only a regular file passes (a FIFO never blocks the open).

    :raises NotASessionError: the path is a directory, FIFO, socket or device.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotASessionError(path, "not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _first_nonzero(source: _Source, offset: int) -> int | None:
    """Offset of the first non-zero byte at or after ``offset``, or None (all zero)."""
    position = offset
    while position < source.size:
        block = source.get(position, min(_READ_WINDOW, source.size - position))
        stripped = block.lstrip(b"\0")
        if stripped:
            return position + len(block) - len(stripped)
        position += len(block)
    return None


_HEADER_MAX = 4 + 1 + 1 + 4 + 8  # magic, descriptor, window, dictionary id, content size


def _plain_frame(source: _Source, start: int) -> FrameSpan | None:
    """The frame at ``start`` when it is a plain complete zstd frame, else None.

    The fast path of the walk for one frame (:func:`_parse_plain`), read from the frame's
    start once when the window ends inside it; a None sends the frame to :func:`_frame`,
    which finds what it is.
    """
    if not source.covers(start, min(start + _HEADER_MAX, source.size)):
        source.refill(start)
    for attempt in (0, 1):
        base = source.base
        span = _parse_plain(source.window, start - base, base)
        if not isinstance(span, _Crosses):
            return span
        # The window ended inside the frame: read it from the frame's start, once.
        if attempt or base == start or base + len(source.window) >= source.size:
            return None
        source.refill(start)
    return None


class _Crosses:
    """The window ends inside the frame (:func:`_parse_plain`)."""


_CROSSES: Final = _Crosses()


def _parse_plain(window: bytes, i: int, base: int) -> FrameSpan | _Crosses | None:
    """The plain complete frame at ``window[i]`` (``base`` is the window's file offset),
    ``None`` when it is not one, :data:`_CROSSES` when the window ends inside its blocks
    or trailer.

    In one pass over the window, with no exceptions and no per-field reads: it accepts
    only what :func:`_frame` accepts and builds the same span from it (magic, no reserved
    or unused bit, no dictionary id field, blocks of the types and sizes RFC 8878 allows,
    all bytes up to the checksum trailer present). ``dsh_store._zstdwalk.plain_frames``
    (C) walks a run of such frames exactly as :func:`_plain_frames_in_python` does with
    this function.
    """
    limit = len(window)
    if window[i : i + 4] != MAGIC or i + 5 > limit:
        return None
    descriptor = window[i + 4]
    if descriptor & 0x1B:  # reserved bit, unused bit or a dictionary id field
        return None
    fcs_flag = descriptor >> 6
    window_size = 0 if descriptor & 0x20 else 1
    fcs_size = 1 if fcs_flag == 0 and not window_size else _FCS_SIZES[fcs_flag]
    position = i + 5 + window_size + fcs_size
    content_size: int | None = None
    if fcs_size:
        content_size = int.from_bytes(window[i + 5 + window_size : position], "little")
        if fcs_size == 2:
            content_size += 256
    blocks: list[int] = []
    while position + 3 <= limit:
        block_header = window[position] | window[position + 1] << 8 | window[position + 2] << 16
        block_type = (block_header >> 1) & 3
        block_size = block_header >> 3
        if block_type == 3 or block_size > BLOCK_SIZE_MAX:
            return None
        position += 3 + (1 if block_type == 1 else block_size)
        blocks.append(base + position)
        if block_header & 1:
            if descriptor & 0x04:
                position += 4
            if position > limit:
                break
            return FrameSpan(
                base + i,
                base + position,
                False,
                content_size,
                bool(descriptor & 0x04),
                tuple(blocks),
            )
    return _CROSSES


def _plain_frames_in_python(
    window: bytes, start: int, base: int, most: int
) -> tuple[list[FrameSpan], int]:
    """The plain complete frames that follow one another from ``window[start]`` and lie
    wholly in the window (at most ``most``), and the window index where that run ends.

    What ``dsh_store._zstdwalk.plain_frames`` returns, for an install without a C compiler.
    """
    spans: list[FrameSpan] = []
    while len(spans) < most:
        span = _parse_plain(window, start, base)
        if type(span) is not FrameSpan:
            break
        spans.append(span)
        start = span.end - base
    return spans, start


_PlainFrames = Callable[[bytes, int, int, int], tuple[list[FrameSpan], int]]
_plain_frames: _PlainFrames
try:
    from .._zstdwalk import plain_frames as _plain_frames_in_c
except ImportError:  # installed without a C compiler
    _plain_frames = _plain_frames_in_python
else:

    def _plain_frames(
        window: bytes, start: int, base: int, most: int
    ) -> tuple[list[FrameSpan], int]:
        return _plain_frames_in_c(window, start, base, most, FrameSpan)


_RUN_FRAMES = 512  # frames one call of _plain_frames finds at most (a bound on its list)


def _need(source: _Source, offset: int, length: int, where: str) -> bytes:
    data = source.get(offset, length)
    if len(data) < length:
        raise _Torn(where)
    return data


def _frame(source: _Source, start: int, blocks: list[int], state: dict[str, bool]) -> FrameSpan:
    """Parse the frame at ``start``; raise _Torn at the end of the file, _Bad for a defect."""
    magic = source.get(start, 4)
    if magic != MAGIC:
        if len(magic) == 4 and magic[1:] == _SKIPPABLE_MAGIC_TAIL and magic[0] & 0xF0 == 0x50:
            state["skippable"] = True
            length = int.from_bytes(_need(source, start + 4, 4, "header"), "little")
            end = start + 8 + length
            if end > source.size:
                raise _Torn("block")
            return FrameSpan(start, end, True, None, False, ())
        if len(magic) < 4 and _is_magic_prefix(magic):
            raise _Torn("magic")
        raise _Bad(start, "zstd-bad-magic", f"no zstd frame magic number at byte {start}")
    descriptor = _need(source, start + 4, 1, "header")[0]
    if descriptor & 0x08:
        raise _Bad(start + 4, "zstd-reserved-bit", "the frame header's reserved bit is set")
    if descriptor & 0x10:
        # RFC 8878 calls this bit unused; no encoder sets it, so here it is a flipped bit.
        raise _Bad(start + 4, "zstd-reserved-bit", "the frame header's unused bit is set")
    fcs_flag = descriptor >> 6
    single_segment = bool(descriptor & 0x20)
    checksum = bool(descriptor & 0x04)
    dict_id_size = _DICT_ID_SIZES[descriptor & 0x03]
    fcs_size = 1 if fcs_flag == 0 and single_segment else _FCS_SIZES[fcs_flag]
    window_size = 0 if single_segment else 1
    header = _need(source, start + 5, window_size + dict_id_size + fcs_size, "header")
    dict_id = int.from_bytes(header[window_size : window_size + dict_id_size], "little")
    if dict_id:
        raise _Bad(
            start + 5 + window_size,
            "zstd-dictionary",
            f"the frame needs dictionary {dict_id}; session logs use none",
        )
    content_size: int | None = None
    if fcs_size:
        content_size = int.from_bytes(header[window_size + dict_id_size :], "little")
        if fcs_size == 2:
            content_size += 256
    position = start + 5 + len(header)
    while True:
        block_header = int.from_bytes(_need(source, position, 3, "block-header"), "little")
        last = block_header & 1
        block_type = (block_header >> 1) & 3
        block_size = block_header >> 3
        if block_type == 3:
            raise _Bad(position, "zstd-reserved-block", "a block header has the reserved type 3")
        if block_size > BLOCK_SIZE_MAX:
            raise _Bad(
                position,
                "zstd-block-size",
                f"a {_BLOCK_TYPES[block_type]} block declares {block_size} bytes, "
                f"more than the {BLOCK_SIZE_MAX} a block may hold",
            )
        payload = 1 if block_type == 1 else block_size
        position += 3 + payload
        if position > source.size:
            raise _Torn("block")
        blocks.append(position)
        if last:
            break
    if checksum:
        position += 4
        if position > source.size:
            raise _Torn("checksum")
    return FrameSpan(start, position, False, content_size, checksum, tuple(blocks))


def _is_magic_prefix(data: bytes) -> bool:
    """True for the first 1-3 bytes of a zstd or skippable frame's magic number."""
    if MAGIC.startswith(data):
        return True
    return bool(data) and data[0] & 0xF0 == 0x50 and _SKIPPABLE_MAGIC_TAIL.startswith(data[1:])
