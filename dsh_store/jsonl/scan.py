"""Streaming scan of a session log file under the committed-region rule.

:class:`LogScanner` reads a log in large chunks and yields the rows of its *committed
prefix*: the header followed by every complete, well-formed row whose seq continues the
running count. At the first defect (unparsable line, malformed row, seq gap or duplicate,
a last line without ``\\n``) it stops yielding and only looks ahead for a later complete
line holding a ``turn/end`` event:

- found: the defect lies inside committed history and the scan raises
  :class:`~dsh_store.errors.CorruptLogError` for the first defect;
- not found: the defect and every byte after it are the crash tail (:class:`TornTail`).

Lines ending in CRLF are accepted (the ``\\r`` is dropped from ``raw``) and reported once as
a ``crlf`` finding; a leading UTF-8 BOM is skipped and reported as ``bom``. The scanner never
writes, and it reads at most the size the file had when the scan started, so a concurrent
appender can only make the view shorter, never inconsistent.

Only regular files are read: the file is opened without blocking and checked with
``fstat`` before any read, so a directory, FIFO, socket or device named like a log raises
:class:`~dsh_store.errors.NotASessionError` (naming the path) instead of hanging or failing
with an anonymous ``OSError``. An ``OSError`` of a read names the file as well.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ..errors import (
    CorruptLogError,
    DshStoreError,
    LoneSurrogateError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from ..jsonvalue import duplicate_key
from ..records import Finding, HeaderInfo, PassResults, ScannedRow, TornTail
from .lines import split_lines
from .rows import (
    CURRENT_VERSION,
    LONG_LINE_BYTES,
    PACKED_ROW_TYPES,
    decode_long_line,
    framing_findings,
    lone_surrogate,
    packed_row_count,
    read_header_line,
    replace_lone_surrogates,
    row_problem,
    unparsable_reason,
)
from .watermark import Watermark, header_crc, read_watermark, watermark_path
from .zstd_frames import MAGIC

if TYPE_CHECKING:
    from .zstd_codec import FramePlaintext

__all__ = [
    "CRASH_SPAN_BYTES",
    "DEFAULT_CHUNK_SIZE",
    "MAX_HEADER_BYTES",
    "Finding",
    "LogScanner",
    "ScannedRow",
    "TornTail",
    "header_version",
    "revision_of",
]

DEFAULT_CHUNK_SIZE = 1 << 20
"""Bytes per read; memory use is about one chunk plus the longest line."""
MAX_HEADER_BYTES = 1 << 20
"""Longest first line :meth:`LogScanner.read_header` accepts as a session header (1 MiB)."""

CRASH_SPAN_BYTES = 8 << 20
"""Most bytes a crash can leave after a zero-filled run and still be one torn batch.

Without a durable watermark, valid rows that end further than this past the start of a
run of NUL bytes are committed history, not the rest of the write in flight
(``docs/format.md`` §3.1). It is the writer's default batch cap (``max_batch_bytes``).
"""

_TURN_END_MARK = b'"turn/end"'
_LONG_LINE = LONG_LINE_BYTES
_PACKED = PACKED_ROW_TYPES


class _Elided(bytes):
    """Stands in for a line whose bytes are never kept: one that spans chunks and holds a
    NUL byte (never JSON; a zero-filled tail may be gigabytes), or an unterminated last
    line longer than a chunk (only its length is reported).

    ``size`` is the length of the line it replaces, without its ``\\n``; ``nul`` whether
    it holds a NUL byte.
    """

    size: int
    nul: bool


_UNREAD: Any = object()
"""What a line the decoder refused reads as when nothing can read it (not JSON)."""


def _elided(size: int, *, nul: bool = True) -> _Elided:
    line = _Elided(b"\x00")
    line.size = size
    line.nul = nul
    return line


def _size(raw: bytes) -> int:
    """Length of a line as it is in the file (an elided line's real length)."""
    return raw.size if type(raw) is _Elided else len(raw)


class _Defect(NamedTuple):
    rule: str
    message: str
    line: int
    offset: int
    seq: int

    def committed(self, path: str, evidence: str, *, offset: int | None = None) -> CorruptLogError:
        """The refusal of this defect as committed corruption; ``evidence`` (which starts
        with its own separator) says what shows the region was committed."""
        return CorruptLogError(
            path,
            f"{self.message} [{self.rule}]{evidence}",
            line=self.line,
            offset=self.offset if offset is None else offset,
            seq=self.seq,
            rule=self.rule,
        )


class LogScanner(PassResults):
    """Stream the committed prefix of one session log file (see the module docstring).

    Nothing is opened until :meth:`rows` or :meth:`read_header` is called. The summary
    properties (:attr:`torn`, :attr:`committed_size`, :attr:`event_count`,
    :attr:`findings`) are final once :meth:`rows` has been exhausted; each call of
    :meth:`rows` rescans the file from the start. Those every reader shares are
    :class:`~dsh_store.records.PassResults`' (here ``file_size`` is the file's size when
    the scan opened it, and the findings are the header's shape, BOM, CRLF and the crash
    tail); :attr:`empty` and :attr:`revision` are the file's own.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        report: bool = False,
    ):
        """``report`` (the reporter mode): committed corruption ends :meth:`rows` like the
        end of the file and is recorded in :attr:`corruption`, instead of raised."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        self.path = os.fspath(path)
        self._chunk_size = chunk_size
        self._report = report
        self.on_lone_surrogates: Callable[[int, int, list[tuple[str, str]]], None] | None = None
        """Set by the lenient opt-in: an older log's line holding lone surrogates is then
        read with each replaced by U+FFFD, and this is called with (seq, line, the
        ``(JSON path, code unit)`` of each) instead of raising LoneSurrogateError."""
        self._reset()

    def _reset(self) -> None:
        self._begin_pass()
        self._event_count = 0
        self._stat: os.stat_result | None = None
        self._finished = False
        self._watermark: Watermark | None = None
        self._durable_size: int | None = None
        self._encoding = "raw"
        self._recovered_events = 0
        self._corruption: CorruptLogError | None = None

    # -- results -----------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        """True when the file was 0 bytes long at the last scan (never materialized)."""
        return self._stat is not None and self._file_size == 0

    @property
    def event_count(self) -> int:
        """Logical events in the committed prefix (packed rows count all their members)."""
        return self._event_count

    @property
    def durable_size(self) -> int | None:
        """Bytes the log's watermark proves acknowledged, or None without a valid one.

        Set by :meth:`rows` once the header is read: the size recorded in ``<log>.durable``
        when that record is intact and names this file (its inode and header line).
        """
        return self._durable_size

    @property
    def encoding(self) -> str:
        """``raw`` or ``zstd`` (a ``*.zstd`` name or the zstd magic), known once the file
        was opened."""
        return self._encoding

    @property
    def recovered_events(self) -> int:
        """Events of a zstd log decoded from its torn final frame (docs/format.md §7).

        They are part of :attr:`event_count` and were yielded by :meth:`rows`, but their
        bytes lie in the crash tail, at and after :attr:`committed_size`; always 0 for raw.
        """
        return self._recovered_events

    @property
    def revision(self) -> str | None:
        """:func:`revision_of` the file as the last read opened it (None before any read)."""
        info = self._stat
        return None if info is None else revision_of(info)

    @property
    def stat(self) -> os.stat_result | None:
        """``fstat`` of the file taken when the last scan opened it."""
        return self._stat

    @property
    def corruption(self) -> CorruptLogError | None:
        """The committed corruption the last scan met, or None.

        The scan stops yielding at its first defect and reads on only for commit evidence
        (a later ``turn/end`` or seq-continuing row, the durable watermark, a complete zstd
        frame): without it the defect starts the crash tail (:attr:`torn`); with it, this
        is the error naming the defect, its rule, line, offset and seq and the evidence.
        A scanner made with ``report=True`` records it here and ends :meth:`rows`; else
        :meth:`rows` raises it. What it means is its caller's policy: restore refuses the
        log, verify reports it, salvage keeps the rows before it.
        """
        return self._corruption

    @property
    def finished(self) -> bool:
        """True once :meth:`rows` ran to the end of the file without raising."""
        return self._finished

    # -- reading -----------------------------------------------------------------------

    def read_header(self) -> HeaderInfo | None:
        """Read and decode only the first line; None for an empty file.

        The read is bounded: a first line longer than :data:`MAX_HEADER_BYTES` is not a
        session header (real ones are a few hundred bytes), so listing or classifying a
        store never reads a huge file whole.

        Raises NotASessionError / UnsupportedVersionError like :meth:`rows`.
        """
        self._reset()
        fd = self._open()
        try:
            if self._file_size == 0:
                return None
            if self._detect_zstd(fd):
                return self._read_zstd_header()
            parts: list[bytes] = []
            remaining = min(self._file_size, MAX_HEADER_BYTES + 1)
            step = min(self._chunk_size, 64 * 1024)
            while remaining > 0:
                block = self._read(fd, min(step, remaining))
                if not block:
                    break
                remaining -= len(block)
                cut = block.find(b"\n")
                if cut >= 0:
                    parts.append(block[: cut + 1])
                    break
                parts.append(block)
        finally:
            os.close(fd)
        if sum(map(len, parts)) > MAX_HEADER_BYTES:
            raise NotASessionError(
                self.path, f"the first line is longer than {MAX_HEADER_BYTES} bytes: no header"
            )
        self._header = self._read_header_line(b"".join(parts))
        self._findings.extend(self._header.findings)
        return self._header

    def _read_header_line(self, line: bytes) -> HeaderInfo:
        """:func:`read_header_line`; for an unsupported version, the line's BOM and CRLF
        findings are kept in :attr:`findings` before the error propagates."""
        try:
            return read_header_line(line, path=self.path)
        except UnsupportedVersionError:
            self._findings.extend(framing_findings(line))
            raise

    def reopen(self) -> LogScanner:
        """A new scanner of the same file (its own pass, state and findings)."""
        return LogScanner(self.path, chunk_size=self._chunk_size, report=self._report)

    def exhaust(self) -> LogScanner:
        """Scan the whole file, discarding rows (for summaries only); returns self."""
        for _ in self.rows():
            pass
        return self

    def rows(self) -> Iterator[ScannedRow]:
        """Yield the committed rows; at committed corruption, raise it (or, made with
        ``report=True``, record it in :attr:`corruption` and stop)."""
        self._reset()
        # Before the open's fstat: the log only grows past a record, so the size seen
        # then is never below the recorded one unless acknowledged bytes were lost.
        watermark = read_watermark(self.path)
        fd = self._open()
        self._watermark = watermark
        try:
            if self._file_size == 0:
                self._finished = True
                return
            yield from self._scan(fd, _ZstdFrames(self) if self._detect_zstd(fd) else None)
        except CorruptLogError as error:
            self._corruption = error
            if not self._report:
                raise
        finally:
            os.close(fd)

    def _open(self) -> int:
        """Open the log for reading and record its ``fstat``; only a regular file passes.

        ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer (it changes
        nothing for a regular file), and the ``fstat`` refuses everything else before a
        single byte is read.

        :raises NotASessionError: the path is a directory, FIFO, socket or device.
        :raises OSError: the open or the ``fstat`` failed (``filename`` is the path).
        """
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            if error.errno == errno.ENXIO:  # what open() says for a Unix socket
                kind = _special_kind(self.path)
                if kind is not None:
                    raise NotASessionError(self.path, f"{kind} is not a regular file") from None
            raise
        try:
            try:
                info = os.fstat(fd)
            except OSError as error:
                raise OSError(error.errno, error.strerror, self.path) from error
            if not stat.S_ISREG(info.st_mode):
                raise NotASessionError(self.path, f"{_kind_of(info.st_mode)} is not a regular file")
        except BaseException:
            os.close(fd)
            raise
        self._stat = info
        self._file_size = info.st_size
        return fd

    def _read(self, fd: int, size: int) -> bytes:
        """``os.read``, with an ``OSError`` that names the file (``filename`` is the path)."""
        try:
            return os.read(fd, size)
        except OSError as error:
            raise OSError(error.errno, error.strerror, self.path) from error

    def _chunks(self, fd: int) -> Iterator[bytes]:
        remaining = self._file_size
        size = self._chunk_size
        while remaining > 0:
            block = self._read(fd, min(size, remaining))
            if not block:  # the file shrank under us; what was read stays consistent
                self._file_size -= remaining
                return
            remaining -= len(block)
            yield block

    def _pread(self, fd: int, size: int, offset: int) -> bytes:
        """Exactly ``size`` bytes at ``offset`` (fewer only if the file shrank meanwhile)."""
        parts: list[bytes] = []
        while size > 0:
            try:
                block = os.pread(fd, size, offset)
            except OSError as error:
                raise OSError(error.errno, error.strerror, self.path) from error
            if not block:
                break
            parts.append(block)
            size -= len(block)
            offset += len(block)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _batches(self, fd: int, tail: list[bytes]) -> Iterator[tuple[list[bytes], bool]]:
        """Yield the complete lines of each chunk (without ``\\n``) and whether any has a CR.

        The unterminated rest of the file is left in ``tail``. One list per chunk keeps the
        per-line cost of the hot loop to the parse itself.

        Memory stays at about one chunk plus the longest line: a line that outgrows one
        chunk is not collected piece by piece but read again whole, with one ``pread``,
        once its end is found; a line that spans chunks and holds a NUL byte (never JSON,
        e.g. a zero-filled tail), and an unterminated last line longer than a chunk, are
        never kept at all, only measured (:class:`_Elided`).
        """
        chunk_size = self._chunk_size
        pending: list[bytes] = []  # pieces of the unterminated line, at most one chunk
        pending_size = 0
        line_start = 0  # file offset of the unterminated line
        streaming = False  # longer than a chunk: its pieces are dropped, it is read again
        has_nul = False
        position = 0
        for block in self._chunks(fd):
            position += len(block)
            cut = block.find(b"\n")
            if cut < 0:
                if not has_nul and (b"\0" in block or (pending and b"\0" in pending[0])):
                    has_nul, streaming, pending = True, False, []
                pending_size += len(block)
                if has_nul or streaming:
                    continue
                if pending_size > chunk_size:
                    streaming, pending = True, []
                    continue
                pending.append(block)
                continue
            parts = split_lines(block)
            joined = pending_size > 0
            if joined:
                head_size = pending_size + cut
                if has_nul or (streaming and block.find(b"\0", 0, cut) >= 0):
                    parts[0] = _elided(head_size)
                elif streaming:
                    parts[0] = self._pread(fd, head_size, line_start)
                else:
                    pending.append(parts[0])
                    parts[0] = b"".join(pending)
            rest = parts.pop()
            pending = [rest] if rest else []
            pending_size = len(rest)
            line_start = position - len(rest)
            streaming = has_nul = False
            # JSON text never holds a raw CR, so lines only need a CRLF check when one shows up
            # (in this block, or at the end of a line that began in an earlier one).
            yield parts, b"\r" in block or (joined and parts[0].endswith(b"\r"))
        if has_nul or streaming:  # a torn last line: only its length matters
            tail.append(_elided(pending_size, nul=has_nul))
        else:
            tail.append(b"".join(pending))

    def _scan(self, fd: int, frames: _ZstdFrames | None = None) -> Iterator[ScannedRow]:
        tail: list[bytes] = []
        batches = self._batches(fd, tail) if frames is None else frames.batches(tail)
        first_batch = next(batches, None)
        if first_batch is None:
            header = self._read_header_line(tail[0])
        else:
            first_line = first_batch[0][0] + b"\n"
            header = self._read_header_line(first_line)
            batches = chain([(first_batch[0][1:], first_batch[1])], batches)
            self._check_watermark(first_line)
        self._header = header
        # CRLF is reported once for the whole file (docs/format.md §3): a header ending in
        # CRLF is counted with the other lines, in one finding at the header's place.
        crlf_slot: int | None = None
        for finding in header.findings:
            if finding.rule == "crlf":
                crlf_slot = len(self._findings)
            self._findings.append(finding)
        version = header.version
        old_rows = version < CURRENT_VERSION
        loads = orjson.loads
        long_line = _LONG_LINE
        dumps = orjson.dumps
        decode_error = orjson.JSONDecodeError
        new_row = tuple.__new__
        offset = header.size
        line_no = 1
        expected = 0
        crlf_count = 0 if crlf_slot is None else 1
        crlf_first: tuple[int, int] | None = None if crlf_slot is None else (1, 0)
        defect: _Defect | None = None
        defect_size = 0
        defect_nul = False
        defect_closes_turn = False
        rest: list[bytes] = []
        # A zstd log's rows all sit at their frame's offset (docs/format.md §7): there,
        # lines do not advance it.
        stride = 1 if frames is None else 0
        batch_expected = 0
        for parts, has_cr in batches:
            batch_start = line_no
            batch_expected = expected
            if frames is not None:
                offset = frames.offset
            for raw in parts:
                line_no += 1
                length = len(raw) + 1
                if has_cr and raw.endswith(b"\r"):
                    raw = raw[:-1]
                    crlf_count += 1
                    if crlf_first is None:
                        crlf_first = (line_no, offset)
                try:
                    value = loads(raw) if len(raw) < long_line else decode_long_line(raw)
                except decode_error:
                    value = _UNREAD
                    if type(raw) is not _Elided:
                        value = self._refuse_lone_surrogate(raw, line_no, offset, expected, version)
                    if value is _UNREAD:
                        defect_size = _size(raw) + (length - len(raw))
                        defect_nul = type(raw) is _Elided or b"\0" in raw
                        message = "line is not valid JSON" if defect_nul else unparsable_reason(raw)
                        if defect_nul:
                            message += " (it holds NUL bytes, as a zero-filled region does)"
                        defect = _Defect("unparsable-line", message, line_no, offset, expected)
                        break
                # Fast path for an ordinary event row; anything unusual takes row_problem().
                if (
                    type(value) is dict
                    and type(seq := value.get("seq")) is int
                    and seq == expected
                    and type(kind := value.get("type")) is str
                    and type(value.get("time")) is int
                    and "data" in value
                    and kind not in _PACKED
                ):
                    if old_rows and dumps(value) != raw:
                        self._refuse_duplicate_keys(raw, line_no, offset, expected)
                    yield new_row(ScannedRow, (line_no, offset, raw, value, expected, 1))
                    expected += 1
                    offset += length * stride
                    continue
                defect_size = length
                problem = row_problem(value, version)
                if problem is not None:
                    defect = _Defect(problem[0], problem[1], line_no, offset, expected)
                    break
                packed = value.get("type") in _PACKED
                first_seq = value["seq0"] if packed else value["seq"]
                if first_seq != expected:
                    rule = "seq-gap" if first_seq > expected else "seq-duplicate"
                    message = f"expected seq {expected}, found {first_seq}"
                    defect = _Defect(rule, message, line_no, offset, expected)
                    defect_closes_turn = value.get("type") == "turn/end"
                    break
                if old_rows and dumps(value) != raw:
                    self._refuse_duplicate_keys(raw, line_no, offset, expected)
                count = packed_row_count(value) if packed else 1
                yield ScannedRow(line_no, offset, raw, value, expected, count)
                expected += count
                offset += length * stride
            if defect is not None:
                rest = parts[line_no - batch_start :]
                break

        self._committed_size = offset
        self._event_count = expected
        # Before the look for a commit: committed corruption still leaves this finding.
        if crlf_first is not None:
            crlf = Finding(
                "crlf",
                f"{crlf_count} line(s) end in CRLF; DSH writes LF only (accepted)",
                crlf_first[0],
                crlf_first[1],
            )
            if crlf_slot is None:
                self._findings.append(crlf)
            else:
                self._findings[crlf_slot] = crlf
        if frames is not None and frames.torn:
            self._recovered_events = expected - batch_expected  # the torn frame is the last
        if defect is not None and frames is not None:
            # A zstd frame is all or nothing: no look-ahead, the frame decides (§7).
            frames.line_defect(defect, batches)
            self._finished = True
            return
        if defect is not None:
            self._refuse_below_watermark(defect)
            later = chain(rest, chain.from_iterable(parts for parts, _ in batches))
            self._look_for_commit(
                later, defect, line_no, defect.offset + defect_size, defect_nul, version
            )
            if defect_closes_turn:  # after the later evidence, which the message names first
                self._refuse_misnumbered_turn_end(defect)
        if frames is not None:
            frames.finish(None)
            self._finished = True
            return
        fragment = tail[0] if first_batch is not None else b""
        if defect is None and fragment:
            zeros = fragment.nul if type(fragment) is _Elided else b"\0" in fragment
            defect = _Defect(
                "torn-line",
                f"the last line has no newline ({_size(fragment)} byte(s) cut off)"
                + (" (it holds NUL bytes, as a zero-filled region does)" if zeros else ""),
                line_no + 1,
                offset,
                expected,
            )
            self._refuse_below_watermark(defect)
        self._refuse_lost_bytes()
        if defect is not None:
            self._torn = TornTail(
                offset=defect.offset,
                length=self._file_size - defect.offset,
                line=defect.line,
                reason=defect.message,
                seq=defect.seq,
                rule=defect.rule,
            )
            self._findings.append(
                Finding(
                    "torn-tail",
                    f"crash tail of {self._file_size - defect.offset} byte(s) from line "
                    f"{defect.line}: {defect.message} [{defect.rule}]",
                    defect.line,
                    defect.offset,
                    defect.seq,
                )
            )
        self._finished = True

    # -- zstd -------------------------------------------------------------------------

    def _detect_zstd(self, fd: int) -> bool:
        """Whether the log is zstd-encoded: named ``*.zstd`` or starting with the magic."""
        self._encoding = (
            "zstd" if self.path.endswith(".zstd") or self._pread(fd, 4, 0) == MAGIC else "raw"
        )
        return self._encoding == "zstd"

    def _read_zstd_header(self) -> HeaderInfo:
        """Decode only frame 0 of a zstd log, the header line."""
        # only for a zstd log: the codec off a raw log's read
        from .zstd_codec import ZstdLogReader

        first = None
        for frame in ZstdLogReader(self.path).frames():
            first = frame
            break  # the generator (and its file) is closed as the loop drops it
        if first is None or not first.lines:
            raise NotASessionError(self.path, "the first zstd frame holds no complete header line")
        if first.torn:  # published whole, so never torn by a crash; unverified without it
            raise NotASessionError(
                self.path,
                "the first zstd frame (the header) is cut off before its end: no "
                "checksum-verified header line",
            )
        if len(first.lines[0]) > MAX_HEADER_BYTES:
            raise NotASessionError(
                self.path, f"the first line is longer than {MAX_HEADER_BYTES} bytes: no header"
            )
        self._header = self._read_header_line(first.lines[0] + b"\n")
        self._findings.extend(self._header.findings)
        return self._header

    def _check_watermark(self, first_line: bytes) -> None:
        """Adopt the watermark read before the open if it names this log; refuse a log
        shorter than it (acknowledged bytes are gone)."""
        watermark = self._watermark
        info = self._stat
        if watermark is None or info is None or not watermark.binds(info, header_crc(first_line)):
            return
        self._durable_size = watermark.size

    def _refuse_lost_bytes(self) -> None:
        """Raise CorruptLogError when the log is shorter than its durable watermark.

        Checked after the scan, so a defect inside the remaining bytes is reported first
        (with its line): it is the more precise finding.
        """
        durable = self._durable_size
        if durable is not None and durable > self._file_size:
            watermark = durable
            raise CorruptLogError(
                self.path,
                f"the log is {self._file_size} bytes long, but its writer saw "
                f"{watermark} bytes fsynced ({watermark_path(self.path)}): acknowledged "
                "events are missing from its end",
                offset=self._file_size,
                rule="durable-size",
            )

    def _refuse_below_watermark(self, defect: _Defect) -> None:
        """Raise CorruptLogError when the defect starts below the durable watermark."""
        durable = self._durable_size
        if durable is not None and defect.offset < durable:
            raise defect.committed(
                self.path,
                f"; it lies below byte {durable}, which its "
                "writer saw fsynced, so it was acknowledged and cannot be a crash tail",
            )

    def _refuse_duplicate_keys(self, raw: bytes, line_no: int, offset: int, seq: int) -> None:
        """Raise CorruptLogError if a (non-canonical) row holds a key twice in one object."""
        key = duplicate_key(raw)
        if key is not None:
            raise CorruptLogError(
                self.path,
                f"the row holds the key {key!r} twice in one object; JSON readers that keep "
                "the first and those that keep the last disagree on what it says",
                line=line_no,
                offset=offset,
                seq=seq,
                rule="duplicate-key",
            )

    def _refuse_lone_surrogate(
        self, raw: bytes, line_no: int, offset: int, seq: int, version: int
    ) -> Any:
        """Raise LoneSurrogateError if ``raw`` is valid JSON holding a lone surrogate;
        return :data:`_UNREAD` when it holds none (it is unparsable).

        Wherever it is (docs/format.md §3): the line is complete, so it is no crash's
        remains, and cutting it as a tail would drop an event its writer acknowledged.
        An older log's line is returned decoded, each lone surrogate replaced by U+FFFD,
        when :attr:`on_lone_surrogates` is set (the lenient opt-in), which it is told.
        """
        found = lone_surrogate(raw)
        if found is None:
            return _UNREAD
        if version < CURRENT_VERSION and self.on_lone_surrogates is not None:
            replaced = replace_lone_surrogates(raw)
            if replaced is not None:
                self.on_lone_surrogates(seq, line_no, replaced[1])
                return replaced[0]
        if version < CURRENT_VERSION:
            remedy = (
                "DSH, which writes such strings, still reads it; dsh-store reads text only as "
                "Unicode characters: `dsh-store migrate --lenient` migrates the log with "
                "U+FFFD in place of each lone surrogate"
            )
        else:
            remedy = (
                "no v4 writer produces such a line; to keep the events before it, salvage the "
                "log (`dsh-store repair --salvage --output OUT`)"
            )
        raise LoneSurrogateError(
            self.path,
            line=line_no,
            offset=offset,
            seq=seq,
            json_path=found[0],
            code_unit=found[1],
            remedy=remedy,
        )

    def _refuse_misnumbered_turn_end(self, defect: _Defect) -> None:
        """Raise CorruptLogError for a defect that is a complete ``turn/end`` row whose only
        fault is its seq (docs/format.md §3.1): a crash leaves a prefix of what a writer
        wrote, never a whole line with a seq that writer did not give it, and this line is
        itself the marker of a closed turn, which DSH also refuses as committed."""
        raise defect.committed(
            self.path,
            "; the line is a complete turn/end row with a "
            "wrong seq, which no interrupted write leaves, so this region was committed",
        )

    def _look_for_commit(
        self,
        lines: Iterable[bytes],
        defect: _Defect,
        line_no: int,
        offset: int,
        defect_nul: bool,
        version: int,
    ) -> None:
        """Raise CorruptLogError if the complete lines after the defect show it committed.

        ``offset`` is where the line after the defect starts. Evidence (docs/format.md
        §3.1): a later ``turn/end``; or a later valid row that continues the seqs, after a
        defect that is no crash artifact (it holds no NUL byte), or ending more than
        :data:`CRASH_SPAN_BYTES` past a zero-filled defect.
        """
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        bound = defect.offset + CRASH_SPAN_BYTES
        for raw in lines:
            line_no += 1
            offset += _size(raw) + 1
            if type(raw) is _Elided:
                continue
            need_row = not defect_nul or offset > bound
            if not need_row and _TURN_END_MARK not in raw:
                continue
            try:
                value = loads(raw)
            except decode_error:
                continue
            if type(value) is not dict:
                continue
            if value.get("type") == "turn/end":
                raise defect.committed(
                    self.path,
                    f"; the turn/end at line {line_no} shows this region was committed",
                )
            if not need_row or row_problem(value, version) is not None:
                continue
            seq = value["seq0"] if value.get("type") in _PACKED else value["seq"]
            if seq < defect.seq:  # an older row repeated: not a continuation
                continue
            why = (
                f"it ends more than {CRASH_SPAN_BYTES} bytes past the start of the zero-filled "
                "region, farther than one interrupted write reaches"
                if defect_nul
                else "a crash leaves no valid line after damage that holds no NUL byte"
            )
            raise defect.committed(
                self.path,
                f"; line {line_no} is a complete, valid row "
                f"continuing the seqs (seq {seq}) and {why}, so this region was committed",
            )


class _ZstdFrames:
    """Feed a zstd log's frames to :meth:`LogScanner._scan` as batches of lines and map
    what the line scan finds back to file offsets (docs/format.md §7).

    A complete frame carries a checksum-verified copy of what its writer wrote, so a
    line defect inside it is committed corruption at the frame's offset, with no
    look-ahead; in the torn final frame it ends the recovered lines there. The crash
    tail (a torn frame or zero fill) always starts at a frame boundary.
    """

    def __init__(self, scanner: LogScanner) -> None:
        # only for a zstd log: the codec off a raw log's read
        from .zstd_codec import ZstdLogReader

        self.scanner = scanner
        self.reader = ZstdLogReader(scanner.path)
        self.current: FramePlaintext | None = None
        self.first_line = 1  # line number of the current frame's first line
        self.lines = 0  # lines decoded so far

    def batches(self, tail: list[bytes]) -> Iterator[tuple[list[bytes], bool]]:
        tail.append(b"")  # frames hold whole lines: there is never a fragment
        for frame in self.reader.frames():
            if frame.frame == 0 and (not frame.lines or frame.torn):
                return  # a torn header frame: no header line, as in an empty raw log
            self.current = frame
            self.first_line = self.lines + 1
            self.lines += len(frame.lines)
            yield frame.lines, True

    @property
    def offset(self) -> int:
        """The current frame's offset, where its rows sit."""
        frame = self.current
        return 0 if frame is None else frame.offset

    @property
    def torn(self) -> bool:
        """Whether the current frame is the torn final one."""
        frame = self.current
        return frame is not None and frame.torn

    def line_defect(self, defect: _Defect, rest: Iterator[tuple[list[bytes], bool]]) -> None:
        """Refuse a defect in a complete frame; end the recovered lines at one in the torn
        frame (which is the last frame, so ``rest`` holds nothing more to decode)."""
        frame = self.current
        assert frame is not None
        if not frame.torn:
            raise defect.committed(
                self.scanner.path,
                f", inside the complete frame {frame.frame} "
                f"at byte {frame.offset}: its checksum shows the writer wrote these bytes, so "
                "they are committed, not a crash tail",
                offset=frame.offset,
            )
        for _ in rest:
            pass
        self.finish(defect)

    def finish(self, defect: _Defect | None) -> None:
        """Set the scanner's summary from the reader's outcome, in file offsets."""
        scanner = self.scanner
        outcome = self.reader.outcome
        assert outcome is not None
        scanner._file_size = outcome.file_size
        offset = outcome.tail_offset
        if offset is None:
            scanner._committed_size = outcome.file_size
            scanner._refuse_lost_bytes()
            return
        scanner._committed_size = offset
        durable = scanner._durable_size
        if durable is not None and offset < durable:
            raise CorruptLogError(
                scanner.path,
                f"the zstd frames end at byte {offset} in a {outcome.tail_kind} tail, below "
                f"byte {durable}, which their writer saw fsynced: acknowledged frames are "
                "damaged",
                offset=offset,
                rule="durable-size",
            )
        scanner._refuse_lost_bytes()
        rule = outcome.tail_kind or "torn-frame"
        recovered = scanner._recovered_events
        if rule == "zero-fill":
            reason = "only zero bytes follow the last complete frame"
        else:
            reason = (
                "the last zstd frame is cut off by the end of the file; "
                f"{recovered} event(s) decoded from its complete lines"
            )
            if defect is not None:
                reason += f", up to {defect.message} [{defect.rule}] at line {defect.line}"
        current = self.current
        line = self.first_line if current is not None and current.torn else self.lines + 1
        scanner._torn = TornTail(
            offset=offset,
            length=outcome.file_size - offset,
            line=line,
            reason=reason,
            seq=scanner._event_count,
            rule=rule,
        )
        scanner._findings.append(
            Finding(
                "torn-tail",
                f"crash tail of {outcome.file_size - offset} byte(s) from byte {offset}: "
                f"{reason} [{rule}]",
                line,
                offset,
                scanner._event_count,
            )
        )


def _kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, for a message (``"a FIFO"``, ...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def _special_kind(path: str) -> str | None:
    """:func:`_kind_of` the file at ``path`` when it is not a regular file, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind_of(mode)


def revision_of(info: os.stat_result) -> str:
    """A token that changes whenever the file changes: ``dev:ino:size:mtime_ns:ctime_ns``."""
    return f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def header_version(path: str | os.PathLike[str]) -> int | None:
    """The format version in a file's header line, or None when it has no readable header.

    For reports about files that could not be restored; never raises for a bad file.
    """
    try:
        info = LogScanner(path).read_header()
    except (DshStoreError, OSError):
        return None
    return None if info is None else info.version


@contextlib.contextmanager
def corruption_first(rows: Iterator[object]) -> Iterator[None]:
    """Report committed corruption before a refusal (DESIGN §6.3 precedence).

    Rows flow lazily, so a migration edge may refuse an early event before the scan
    reaches a later committed defect. On a refusal, the rest of the same pass ``rows``
    (the iterator the refused events came from, left where the refusal stopped it) is
    read to its end, rows discarded, and a :class:`CorruptLogError` it raises wins. No
    byte is read twice, and the reader's findings cover the whole log.
    """
    try:
        yield
    except MigrationRefusedError:
        for _ in rows:  # raises CorruptLogError on committed corruption
            pass
        raise
