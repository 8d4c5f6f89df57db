"""Encode and decode ``.jsonl.zstd`` session logs, frame by frame.

The encoding (docs/format.md, "zstd encoding"): frame 0 holds exactly the header line;
every later frame holds one durable batch of whole lines; every frame carries the content
checksum. :class:`FrameEncoder` builds one frame in memory from the batch's bytes, before
any file is touched. :class:`ZstdLogReader` walks a log with
:class:`~dsh_store.jsonl.zstd_frames.FrameScanner` and decompresses each complete frame
with its checksum verified, then decodes a torn final frame incrementally for its complete
lines (without a checksum: its trailer is missing). It yields :class:`FramePlaintext` rows
for the line-level scan and ends with a :class:`ZstdScanOutcome`. On a larger log a worker
thread decodes a bounded amount ahead of the caller (docs/format.md §7, "Read-ahead").

The zstd binding (``zstandard``, the ``dsh-store[zstd]`` extra) is imported on first use,
so ``import dsh_store`` never loads it; without it every entry point raises
:class:`~dsh_store.errors.ZstdUnavailableError`.
"""

from __future__ import annotations

import collections
import io
import os
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..errors import CorruptFrameError, ZstdUnavailableError
from .lines import split_lines
from .zstd_frames import (
    BLOCK_SIZE_MAX,
    MAGIC,
    FrameDefect,
    FrameScanner,
    FrameSpan,
    TornFrame,
    ZeroFill,
    open_log,
)

if TYPE_CHECKING:
    import zstandard

__all__ = [
    "DEFAULT_LEVEL",
    "READ_AHEAD_BYTES",
    "READ_AHEAD_MIN_BYTES",
    "DecodedLog",
    "FrameEncoder",
    "FramePlaintext",
    "ZstdLogReader",
    "ZstdScanOutcome",
    "decode_into",
    "decode_log",
    "encode_log",
]

DEFAULT_LEVEL = 3
"""Compression level of new frames: zstd's default, which DSH's own writer uses too.

Measured with ``scripts/bench_zstd.py`` on the 50 MB benchmark mix in checkpoint-sized
batches: level 3 stores 0.263 of the raw bytes at about 75 µs per batch; level 1 stores
0.282, level 6 0.254 at 2.7 times the encode time, level 9 0.248 at 3.2 times."""


def _zstd(path: str | None = None) -> Any:
    """The ``zstandard`` module, imported on first use."""
    try:
        import zstandard  # the zstd extra: imported on first use
    except ImportError:
        raise ZstdUnavailableError(path) from None
    return zstandard


class FrameEncoder:
    """Build zstd frames (content checksum and content size on) from whole lines.

    One encoder reuses one compression context; it is not thread-safe (a log has one
    writer, which owns its encoder).
    """

    def __init__(self, level: int = DEFAULT_LEVEL) -> None:
        zstd = _zstd()
        self._compressor: zstandard.ZstdCompressor = zstd.ZstdCompressor(
            level=level, write_checksum=True, write_content_size=True
        )

    def header_frame(self, header_line: bytes) -> bytes:
        """The first frame: exactly one line, ending in ``\\n``."""
        if not header_line.endswith(b"\n") or header_line.count(b"\n") != 1:
            raise ValueError("the header frame holds exactly one line ending in \\n")
        return self._compressor.compress(header_line)

    def batch_frame(self, plaintext: bytes) -> bytes:
        """One batch frame from the batch's bytes: one or more whole lines."""
        if not plaintext.endswith(b"\n"):
            raise ValueError("a batch frame holds whole lines: its bytes must end in \\n")
        return self._compressor.compress(plaintext)

    def lines_frame(self, lines: Iterable[bytes]) -> bytes:
        """One batch frame from lines given without their ``\\n``."""
        return self.batch_frame(b"".join(line + b"\n" for line in lines))


def encode_log(
    header_line: bytes, batches: Iterable[bytes], *, level: int = DEFAULT_LEVEL
) -> bytes:
    """A whole ``.jsonl.zstd`` log: the header frame, then one frame per batch."""
    encoder = FrameEncoder(level)
    parts = [encoder.header_frame(header_line)]
    parts.extend(encoder.batch_frame(batch) for batch in batches)
    return b"".join(parts)


class FramePlaintext(NamedTuple):
    """The decoded lines of one frame, without their ``\\n``.

    ``frame`` counts data frames from 0 (the header frame); ``offset``/``end`` are the
    frame's bytes in the file. For a torn final frame (``torn``), ``end`` is the end of
    the file and ``lines`` holds only the complete lines its bytes produced; they were
    never checksum-verified.
    """

    frame: int
    offset: int
    end: int
    lines: list[bytes]
    torn: bool


class ZstdScanOutcome(NamedTuple):
    """What reading a zstd log found.

    ``state`` is ``complete`` (whole frames up to the end of the file), ``torn`` (a crash
    tail from ``tail_offset``: a torn final frame or zero fill, see ``tail_kind``) or
    ``corrupt`` (``defect``). ``committed_size`` is the end of the last valid complete
    frame; ``frames`` counts the valid data frames; ``recovered_lines`` the complete lines
    decoded from a torn final frame; ``skipped`` lists skippable frames as (offset, end);
    ``unchecked`` counts complete frames without a content checksum (DSH always writes one):
    decoded, but nothing verifies their bytes.
    """

    state: str
    file_size: int
    committed_size: int
    frames: int
    tail_offset: int | None
    tail_kind: str | None
    recovered_lines: int
    defect: FrameDefect | None
    defect_frame: int | None
    skipped: tuple[tuple[int, int], ...]
    unchecked: int

    def error(self, path: str) -> CorruptFrameError:
        """The typed error for a ``corrupt`` outcome."""
        if self.defect is None or self.defect_frame is None:
            raise ValueError(f"outcome is {self.state}, not corrupt")
        return CorruptFrameError(
            path,
            self.defect.detail,
            offset=self.defect.offset,
            frame=self.defect_frame,
            rule=self.defect.rule,
        )


READ_AHEAD_BYTES = 8 << 20
"""Plaintext bytes of the batches :class:`ZstdLogReader` hands its worker thread before it
takes the oldest result back."""

READ_AHEAD_MIN_BYTES = 256 << 10
"""Frame bytes after the header frame from which :class:`ZstdLogReader` reads ahead: on a
smaller log, starting a thread costs about what decoding all of it does."""


class ZstdLogReader:
    """Read one ``.jsonl.zstd`` log frame by frame (see the module docstring).

    :meth:`frames` yields a :class:`FramePlaintext` per data frame and stops at the
    first defect; :attr:`outcome` is final once it is exhausted. With ``strict`` (the
    default) a defect raises :class:`~dsh_store.errors.CorruptFrameError` naming the
    frame's byte offset after the frames before it were yielded, as the raw scanner
    raises ``CorruptLogError``.

    With ``read_ahead`` (the default), on a log of :data:`READ_AHEAD_MIN_BYTES` or more
    after the header frame, the binding's batch decompression calls run on a worker thread
    (:class:`_Worker`, which decodes without the GIL) while the caller works on the frames
    before, at most :data:`READ_AHEAD_BYTES` of plaintext ahead; the walk, the verdicts and
    the line split stay in the caller. Memory is then that budget, one batch
    (:data:`_AHEAD_BATCH_BYTES`) and one frame of plaintext, and the read windows the frames
    ahead lie in. The worker ends when the iteration does, however it ends (exhausted,
    closed, an error or an interrupt in the caller). Without it, memory is one decoding
    batch (:data:`_BATCH_BYTES` of plaintext, or one larger frame) and the read windows it
    lies in. Both yield the same frames and end the same way.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | bytes,
        *,
        strict: bool = True,
        read_ahead: bool = True,
    ) -> None:
        self.path = "<bytes>" if isinstance(source, bytes) else os.fspath(source)
        self._source = source
        self._strict = strict
        self._read_ahead = read_ahead
        self.outcome: ZstdScanOutcome | None = None

    def frames(self) -> Generator[FramePlaintext, None, None]:
        """Yield each data frame's lines; raise CorruptFrameError when ``strict``."""
        zstd = _zstd(self.path)
        self.outcome = None
        decoded = self._decode(zstd)
        try:
            yield from decoded
        finally:
            decoded.close()  # its file and its worker, however the iteration ends
        outcome = self.outcome
        assert outcome is not None
        if outcome.defect is not None and self._strict:
            raise outcome.error(self.path)

    def _decode(self, zstd: Any) -> Generator[FramePlaintext, None, None]:
        """Each data frame; sets :attr:`outcome` at the end. It runs in the reader's thread
        (a worker, if any, only makes the binding's batch calls for it)."""
        decompressor = zstd.ZstdDecompressor()
        read = _Reader(self._source)
        scanner = FrameScanner(self._source if read.fd is None else read.fd)
        ahead = read.size if self._read_ahead else None
        index = 0
        skipped: list[tuple[int, int]] = []
        unchecked = 0
        defect: FrameDefect | None = None
        committed = 0
        complete = _complete_frames(decompressor, zstd, scanner.frames_with_bytes(), ahead)
        try:
            for span, plaintext, defect in complete:
                if span.skippable:
                    skipped.append((span.offset, span.end))
                    committed = span.end
                    continue
                if defect is None and index == 0:
                    defect = _lines_defect(plaintext, span.offset, index)
                lines = None if defect is not None else _whole_lines(plaintext)
                if lines is None:
                    if defect is None:
                        defect = _lines_defect(plaintext, span.offset, index)
                    break
                yield FramePlaintext(index, span.offset, span.end, lines, False)
                unchecked += not span.checksum
                committed = span.end
                index += 1
            complete.close()  # the frames it walked ahead of a defect
            torn = scanner.torn if defect is None else None
            if defect is None:
                defect = scanner.defect
            recovered = 0
            if torn is not None:
                later = _complete_frame_within(decompressor, zstd, read, torn)
                if later is not None:
                    defect = FrameDefect(
                        torn.offset,
                        later,
                        "zstd-frame-after-torn",
                        f"the frame at byte {torn.offset} runs past the end of the file, but a "
                        f"complete frame starts at byte {later}: the damage is inside "
                        "committed frames, not a crash tail",
                    )
                    torn = None
            if torn is not None and not torn.skippable:
                lines = _decode_torn(decompressor, zstd, read, torn)
                recovered = len(lines)
                yield FramePlaintext(index, torn.offset, torn.offset + torn.length, lines, True)
        finally:
            complete.close()  # its worker, on an early exit
            read.close()
        tail: TornFrame | ZeroFill | None = torn if torn is not None else scanner.zero_fill
        if defect is not None:
            state = "corrupt"
        elif tail is not None:
            state = "torn"
        else:
            state = "complete"
        self.outcome = ZstdScanOutcome(
            state=state,
            file_size=scanner.file_size,
            committed_size=committed,
            frames=index,
            tail_offset=None if tail is None else tail.offset,
            tail_kind=_tail_kind(tail),
            recovered_lines=recovered,
            defect=defect,
            defect_frame=None if defect is None else index,
            skipped=tuple(skipped),
            unchecked=unchecked,
        )


def _tail_kind(tail: TornFrame | ZeroFill | None) -> str | None:
    if tail is None:
        return None
    return "zero-fill" if isinstance(tail, ZeroFill) else "torn-frame"


class _Reader:
    """Read a frame's bytes from the log (a file opened once, or the bytes themselves)."""

    def __init__(self, source: str | os.PathLike[str] | bytes) -> None:
        self._data: bytes | None = None
        self.fd: int | None = None
        if isinstance(source, bytes):
            self._data = source
            self.size = len(source)
        else:
            self.fd = open_log(os.fspath(source))
            self.size = os.fstat(self.fd).st_size

    def range(self, start: int, end: int) -> bytes:
        if self._data is not None:
            return self._data[start:end]
        assert self.fd is not None
        return os.pread(self.fd, end - start, start)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _decode_complete(
    decompressor: Any, zstd: Any, frame: bytes | memoryview, span: FrameSpan
) -> tuple[bytes, FrameDefect | None]:
    """Decompress one complete frame with its checksum verified; a defect instead on failure.

    ``decompressobj`` (not ``decompress``) because it also takes frames without a declared
    content size, and because it stops at the end of one frame instead of silently
    returning only the first of several.
    """
    # A declared size no larger than its blocks can hold (so never a huge allocation
    # for a damaged header) is decoded in one call into a buffer of that size: the
    # checksum is verified there too, and the span holds exactly one frame.
    size = span.content_size
    stream = None if _one_shot(span) else decompressor.decompressobj()
    try:
        if stream is None:
            plaintext: bytes = decompressor.decompress(frame)
            return plaintext, None if len(plaintext) == size else _size_defect(span)
        plaintext = stream.decompress(frame)
    except zstd.ZstdError as error:
        reason = str(error).removeprefix("zstd decompressor error: ")
        rule = "zstd-checksum" if "checksum" in reason else "zstd-decode"
        return b"", FrameDefect(
            span.offset,
            span.offset,
            rule,
            f"the frame at byte {span.offset} failed validation: {reason}",
        )
    if not stream.eof or stream.unused_data:
        return b"", FrameDefect(
            span.offset,
            span.offset,
            "zstd-decode",
            f"the frame at byte {span.offset} does not decode to one whole frame",
        )
    return plaintext, None


_BATCH_BYTES = 256 << 10  # plaintext of the frames decompressed in one call, at most
_FIRST_AHEAD_BATCH_BYTES = 64 << 10  # the worker's first batch, so the caller starts soon
_AHEAD_BATCH_BYTES = 2 << 20  # the worker's batches grow to this (see _Worker)


def _complete_frames(
    decompressor: Any,
    zstd: Any,
    frames: Iterator[tuple[FrameSpan, memoryview]],
    ahead_of: int | None = None,
) -> Generator[tuple[FrameSpan, bytes | memoryview, FrameDefect | None], None, None]:
    """Each complete frame's plaintext, or the defect that ends the log there, in file
    order (a skippable frame with no plaintext); nothing after the first defect.

    Frames with a declared content size go to the binding in batches of up to
    :data:`_BATCH_BYTES` of plaintext, one call each, which verifies every frame's checksum
    and content size and decompresses without the GIL. A batch that fails anywhere is
    decoded again frame by frame by :func:`_decode_complete`, which finds the first bad
    frame and says why, exactly as without batches. The first frame (the header) is
    decoded alone, so reading only the header decodes only that frame.

    With ``ahead_of`` (the log's size), when the frames after the header hold at least
    :data:`READ_AHEAD_MIN_BYTES`, the batches' decompression calls run on a worker thread
    (:class:`_Worker`) while this generator's caller works on the frames before; the walk,
    the batching and everything after the call stay here, so the results are the same.
    """
    batch: list[tuple[FrameSpan, memoryview]] = []
    size = 0
    first = True
    limit = _BATCH_BYTES
    ahead = False
    worker: _Worker | None = None
    pending: collections.deque[tuple[list[tuple[FrameSpan, memoryview]], int]]
    pending = collections.deque()
    in_flight = 0  # plaintext bytes of the pending batches
    try:
        for span, frame in frames:
            content_size = span.content_size
            if first or span.skippable or not _one_shot(span):
                if first and ahead_of is not None and ahead_of - span.end >= READ_AHEAD_MIN_BYTES:
                    ahead = True  # from the first batch on: a read of the header starts none
                    limit = _FIRST_AHEAD_BATCH_BYTES
                first = False
                if (yield from _drain(decompressor, zstd, worker, pending, batch, size)):
                    return
                batch, size, in_flight = [], 0, 0
                if span.skippable:
                    yield span, b"", None
                    continue
                plaintext, defect = _decode_complete(decompressor, zstd, frame, span)
                yield span, plaintext, defect
                if defect is not None:
                    return
                continue
            assert content_size is not None
            batch.append((span, frame))
            size += content_size
            if size < limit:
                continue
            pending.append((batch, size))
            in_flight += size
            if ahead:
                if worker is None:
                    worker = _Worker(zstd)
                worker.submit(batch)
                limit = min(2 * limit, _AHEAD_BATCH_BYTES)
            batch, size = [], 0
            # Decode (or collect from the worker) the oldest batches once the ones pending
            # hold the read-ahead budget; without a worker, at once.
            while pending and (worker is None or in_flight >= READ_AHEAD_BYTES):
                done = pending.popleft()
                in_flight -= done[1]
                if (yield from _batch_frames(decompressor, zstd, worker, done)):
                    return
        yield from _drain(decompressor, zstd, worker, pending, batch, size)
    finally:
        if worker is not None:
            worker.stop()


def _drain(
    decompressor: Any,
    zstd: Any,
    worker: _Worker | None,
    pending: collections.deque[tuple[list[tuple[FrameSpan, memoryview]], int]],
    batch: list[tuple[FrameSpan, memoryview]],
    size: int,
) -> Generator[tuple[FrameSpan, bytes | memoryview, FrameDefect | None], None, bool]:
    """Queue the batch being formed (``size`` bytes of plaintext; none when empty), then
    yield every pending batch's frames in order; return True after a defect."""
    if batch:
        pending.append((batch, size))
        if worker is not None:
            worker.submit(batch)
    while pending:
        if (yield from _batch_frames(decompressor, zstd, worker, pending.popleft())):
            return True
    return False


def _batch_frames(
    decompressor: Any,
    zstd: Any,
    worker: _Worker | None,
    pending: tuple[list[tuple[FrameSpan, memoryview]], int],
) -> Generator[tuple[FrameSpan, bytes | memoryview, FrameDefect | None], None, bool]:
    """Yield what :func:`_complete_frames` yields for one pending batch (decoded here, or
    by the worker); return True after a defect, which ends the log there."""
    batch = pending[0]
    for decoded in _decode_batch(_delivered(decompressor, worker, len(batch)), zstd, batch):
        yield decoded
        if decoded[2] is not None:
            return True
    return False


def _delivered(decompressor: Any, worker: _Worker | None, frames: int) -> Any:
    """The decompressor :func:`_decode_batch` calls for the next pending batch: the real
    one, or (for a batch the worker decoded) one that hands back the worker's result."""
    if worker is None or frames < 2:
        return decompressor
    return _Delivered(decompressor, worker.result())


class _Delivered:
    """A decompressor whose ``multi_decompress_to_buffer`` returns (or raises) what the
    worker's call on the same frames returned (or raised); the rest is the real one's."""

    def __init__(self, decompressor: Any, outcome: tuple[Any, BaseException | None]) -> None:
        self._decompressor = decompressor
        self._outcome = outcome

    def multi_decompress_to_buffer(self, frames: object) -> Any:
        result, error = self._outcome
        if error is not None:
            raise error
        return result

    def decompress(self, frame: object) -> Any:
        return self._decompressor.decompress(frame)

    def decompressobj(self) -> Any:
        return self._decompressor.decompressobj()


class _Worker:
    """A thread that makes the binding's batch decompression calls, in submission order.

    It runs no other Python code between calls than taking the next batch and handing back
    the result, so it needs the GIL only briefly, once per batch: a thread that has to wait
    for the GIL waits up to the switch interval (5 ms) while the caller parses, so the batches
    it decodes grow to :data:`_AHEAD_BATCH_BYTES` to keep that wait small next to the
    caller's work on one batch. A batch with a single frame is left to the caller.
    """

    def __init__(self, zstd: Any) -> None:
        self._batches: queue.SimpleQueue[list[memoryview] | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run,
            args=(zstd.ZstdDecompressor(), zstd.ZstdError),
            name="dsh-store-zstd-read-ahead",
            daemon=True,
        )
        self._thread.start()

    def submit(self, batch: list[tuple[FrameSpan, memoryview]]) -> None:
        """Queue a batch's frames for decompression (nothing for a single frame)."""
        if len(batch) > 1:
            self._batches.put([frame for _, frame in batch])

    def result(self) -> tuple[Any, BaseException | None]:
        """The oldest submitted batch's decoded segments, or the error its call raised."""
        return self._results.get()

    def stop(self) -> None:
        """End the thread once its current call returns (dropping the batches not begun);
        it has ended when this does."""
        while True:
            try:
                self._batches.get_nowait()
            except queue.Empty:
                break
        self._batches.put(None)
        self._thread.join()

    def _run(self, decompressor: Any, zstd_error: type[BaseException]) -> None:
        batches, results = self._batches, self._results
        decode = decompressor.multi_decompress_to_buffer
        while (frames := batches.get()) is not None:
            try:
                results.put((decode(frames), None))
            except BaseException as failure:  # re-raised in the caller, in order
                results.put((None, failure))
            del frames


def _one_shot(span: FrameSpan) -> bool:
    """Whether a frame declares a content size that its blocks can hold (so decoding into
    a buffer of that size never makes a huge allocation for a damaged header)."""
    size = span.content_size
    return size is not None and 0 < size <= len(span.blocks) * BLOCK_SIZE_MAX


def _decode_batch(
    decompressor: Any, zstd: Any, batch: list[tuple[FrameSpan, memoryview]]
) -> Iterator[tuple[FrameSpan, bytes | memoryview, FrameDefect | None]]:
    """The frames of a batch with their plaintexts, up to and with the first defect."""
    if len(batch) > 1:
        try:
            decoded = decompressor.multi_decompress_to_buffer([frame for _, frame in batch])
        except zstd.ZstdError:
            pass  # a bad frame in the batch: find it, and its reason, one frame at a time
        else:
            for (span, _), segment in zip(batch, decoded, strict=True):
                yield span, memoryview(segment), None  # its lines are split in place
            return
    for span, frame in batch:
        plaintext, defect = _decode_complete(decompressor, zstd, frame, span)
        yield span, plaintext, defect
        if defect is not None:
            return


def _whole_lines_in_python(plaintext: bytes | memoryview) -> list[bytes] | None:
    """The lines of a frame's plaintext without their ``\\n`` when it is empty or ends in
    ``\\n``; None when it ends inside a line. The same as ``dsh_store._zstdwalk.whole_lines``
    (C, which reads the binding's output in place), for an install without a C compiler."""
    if type(plaintext) is not bytes:
        plaintext = bytes(plaintext)
    if plaintext and not plaintext.endswith(b"\n"):
        return None
    lines = split_lines(plaintext)
    lines.pop()  # the empty piece after the final newline (or of an empty plaintext)
    return lines


_whole_lines: Callable[[bytes | memoryview], list[bytes] | None]
try:
    from .._zstdwalk import whole_lines as _whole_lines
except ImportError:  # installed without a C compiler
    _whole_lines = _whole_lines_in_python


def _size_defect(span: FrameSpan) -> FrameDefect:
    return FrameDefect(
        span.offset,
        span.offset,
        "zstd-decode",
        f"the frame at byte {span.offset} does not decode to its declared content size",
    )


_PROBE_BYTES = 16 << 20  # a batch frame holds at most max_batch_bytes (8 MiB) of lines


def _complete_frame_within(
    decompressor: Any, zstd: Any, read: _Reader, torn: TornFrame
) -> int | None:
    """Offset of a complete, checksum-valid frame inside a torn frame's bytes, or None.

    A crash only ever cuts the last frame written, so no valid frame can follow its
    start; one that does shows that damage (e.g. a flipped size bit) made an earlier
    frame look longer than it is. Only a torn frame's bytes are searched, in windows.
    """
    end = torn.offset + torn.length
    position = torn.offset + 1
    window = 1 << 20
    while position < end:
        chunk = read.range(position, min(position + window + 3, end))
        hit = chunk.find(MAGIC)
        while hit >= 0:
            start = position + hit
            probe = read.range(start, min(start + _PROBE_BYTES, end))
            span = next(FrameScanner(probe).frames(), None)
            if (
                span is not None
                and not span.skippable
                and _decode_complete(decompressor, zstd, probe[: span.end], span)[1] is None
            ):
                return start
            hit = chunk.find(MAGIC, hit + 1)
        position += window
    return None


def _lines_defect(plaintext: bytes | memoryview, offset: int, index: int) -> FrameDefect | None:
    """The whole-lines rule: frame 0 is exactly one line; later frames end in ``\\n``."""
    plaintext = bytes(plaintext)  # a copy only where a frame is judged here
    if index == 0:
        if plaintext.endswith(b"\n") and plaintext.count(b"\n") == 1:
            return None
        return FrameDefect(
            offset,
            offset,
            "zstd-header-frame",
            "the first frame does not hold exactly one header line",
        )
    if not plaintext or plaintext.endswith(b"\n"):
        return None
    return FrameDefect(
        offset,
        offset,
        "zstd-frame-lines",
        f"the frame at byte {offset} ends inside a line ({len(plaintext)} bytes, no final \\n)",
    )


def _decode_torn(decompressor: Any, zstd: Any, read: _Reader, torn: TornFrame) -> list[bytes]:
    """The complete lines a torn frame's bytes decode to ("flush, don't finish").

    The frame is fed block by block, so a block that fails to decode loses only itself and
    what follows; no checksum is checked (the trailer is missing).
    """
    stream = decompressor.decompressobj()
    cuts = [*torn.blocks, torn.offset + torn.length]
    parts: list[bytes] = []
    start = torn.offset
    try:
        for cut in cuts:
            if cut > start:
                parts.append(stream.decompress(read.range(start, cut)))
            start = cut
    except zstd.ZstdError:
        pass
    plaintext = b"".join(parts)
    return plaintext[: plaintext.rfind(b"\n") + 1].split(b"\n")[:-1]


class BytesSink(Protocol):
    """Where :func:`decode_into` writes: a binary file, a ``BytesIO``, a pipe."""

    def write(self, data: bytes, /) -> object:
        """Take the next bytes."""


class DecodedLog(NamedTuple):
    """A zstd log as the equivalent raw JSONL bytes, and what the read found."""

    raw: bytes
    outcome: ZstdScanOutcome


def decode_into(source: str | os.PathLike[str] | bytes, sink: BytesSink) -> ZstdScanOutcome:
    """Write the log's plaintext to ``sink``: every valid frame, then a torn final frame's
    complete lines. Never raises for a damaged log: a defect ends the output there and is
    in the outcome. Memory is bounded as :class:`ZstdLogReader` says, whatever the log's
    size."""
    reader = ZstdLogReader(source, strict=False)
    for frame in reader.frames():
        for line in frame.lines:
            sink.write(line)
            sink.write(b"\n")
    assert reader.outcome is not None
    return reader.outcome


def decode_log(source: str | os.PathLike[str] | bytes) -> DecodedLog:
    """:func:`decode_into` a bytes object: the raw JSONL a raw-encoded log would hold."""
    buffer = io.BytesIO()
    outcome = decode_into(source, buffer)
    return DecodedLog(buffer.getvalue(), outcome)
