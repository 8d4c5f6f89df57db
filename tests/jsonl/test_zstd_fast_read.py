"""Reading zstd logs fast: the structural walk's fast path and the read-ahead worker thread.

Both must change nothing a reader finds: the fast walk is compared with the precise walk
over every prefix and every bit flip of a log, the read-ahead reader with the plain one
over damage in frames the worker decodes; the worker must end with the iteration (closed,
failed, interrupted by a real SIGINT) and stay within its memory budget.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store.errors import CorruptFrameError
from dsh_store.jsonl import zstd_codec, zstd_frames
from dsh_store.jsonl.zstd_codec import (
    READ_AHEAD_BYTES,
    READ_AHEAD_MIN_BYTES,
    FrameEncoder,
    FramePlaintext,
    ZstdLogReader,
)
from dsh_store.jsonl.zstd_frames import FrameScanner, FrameSpan, _plain_frames_in_python
from tests.c_build import skip_without_c_compiler
from tests.conftest import REPO
from tests.jsonl.zstd_helpers import HEADER, build_log, event_line, raw_frame

WORKER = "dsh-store-zstd-read-ahead"


def _workers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == WORKER]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _noisy_batches(count: int, seed: int = 7, padding: int = 0) -> list[bytes]:
    """``count`` batches of two events whose text barely compresses (random hex), so the
    log's frames reach the read-ahead threshold; ``padding`` adds repetitive text."""
    rng = random.Random(seed)
    batches = []
    for index in range(count):
        seq = 2 * index
        text = rng.randbytes(1200).hex() + "ab" * padding
        batches.append(
            event_line(seq, "user/message", text=text) + event_line(seq + 1, "step/end", turn=1)
        )
    return batches


def _encode(batches: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    encoder = FrameEncoder()
    frames = [encoder.header_frame(HEADER), *map(encoder.batch_frame, batches)]
    spans, offset = [], 0
    for frame in frames:
        spans.append((offset, offset + len(frame)))
        offset += len(frame)
    return b"".join(frames), spans


@pytest.fixture(scope="module")
def big_log() -> tuple[bytes, list[tuple[int, int]]]:
    """A log whose frames after the header exceed the read-ahead threshold."""
    log, spans = _encode(_noisy_batches(400))
    assert log and len(log) - spans[0][1] >= 2 * READ_AHEAD_MIN_BYTES
    return log, spans


@pytest.fixture(scope="module")
def long_log() -> bytes:
    """A log of more than three read-ahead budgets of plaintext: a worker that keeps to its
    budget is still running (waiting for room) when the caller has taken a few frames."""
    batches = _noisy_batches(1300, padding=9000)
    assert sum(map(len, batches)) > 3 * READ_AHEAD_BYTES
    return _encode(batches)[0]


def _summary(scanner: FrameScanner) -> tuple[object, ...]:
    return (scanner.end, scanner.file_size, scanner.torn, scanner.zero_fill, scanner.defect)


RUN_WALKERS: dict[str, Callable[[bytes, int, int, int], tuple[list[FrameSpan], int]]] = {
    "python": zstd_frames._plain_frames_in_python
}
try:
    from dsh_store._zstdwalk import plain_frames as _c_plain_frames
except ImportError:  # an install without a C compiler: the Python walk alone
    pass
else:
    RUN_WALKERS["c"] = lambda window, start, base, most: _c_plain_frames(
        window, start, base, most, FrameSpan
    )


def _no_run(window: bytes, start: int, base: int, most: int) -> tuple[list[FrameSpan], int]:
    return [], start


def _walks(
    data: bytes,
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    windows: tuple[int, ...] = (7, 40, 150),
) -> None:
    """The fast walk (a run of plain frames in C and in Python, then the fast path for one
    frame) over bytes and over a file read through small windows (so frames cross them and
    outgrow them) finds exactly what the precise walk finds."""
    with monkeypatch.context() as patch:
        patch.setattr(zstd_frames, "_plain_frame", lambda source, start: None)
        patch.setattr(zstd_frames, "_plain_frames", _no_run)
        precise = FrameScanner(data)
        precise_spans = precise.scan()
    expected = [(span, data[span.offset : span.end]) for span in precise_spans]
    if windows:
        path.write_bytes(data)
    for name, walker in [("one frame at a time", _no_run), *RUN_WALKERS.items()]:
        with monkeypatch.context() as patch:
            patch.setattr(zstd_frames, "_plain_frames", walker)
            fast = FrameScanner(data)
            assert fast.scan() == precise_spans, name
            assert _summary(fast) == _summary(precise), name
            for window in windows:
                patch.setattr(zstd_frames, "_READ_WINDOW", window)
                windowed = FrameScanner(path)
                assert windowed.scan() == precise_spans, (name, window)
                assert _summary(windowed) == _summary(precise), (name, window)
                framed = FrameScanner(path)
                views = [(span, bytes(view)) for span, view in framed.frames_with_bytes()]
                assert views == expected, (name, window)
                assert _summary(framed) == _summary(precise), (name, window)


def test_the_fast_walk_takes_plain_frames_without_the_precise_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, spans = build_log()
    calls: list[int] = []
    precise = zstd_frames._frame

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return precise(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zstd_frames, "_frame", counted)
    assert [(span.offset, span.end) for span in FrameScanner(log).scan()] == spans
    assert calls == []  # every frame of an ordinary log took the fast path
    FrameScanner(log + log[:9]).scan()
    assert calls == [1]  # the torn final frame went to the precise walk


def test_the_fast_walk_finds_what_the_precise_walk_finds_at_every_cut_and_bit_flip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = build_log()
    path = tmp_path / "session.jsonl.zstd"
    for cut in range(len(log) + 1):
        _walks(log[:cut], path, monkeypatch)
    for position in range(len(log)):
        for bit in range(9):  # the 8 bits one by one (bytes only), then all 8 (a file too)
            damaged = bytearray(log)
            damaged[position] ^= (1 << bit) if bit < 8 else 0xFF
            _walks(bytes(damaged), path, monkeypatch, () if bit < 8 else (40,))


def test_the_fast_walk_agrees_on_frames_it_leaves_to_the_precise_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = b"x\n"
    encoder = FrameEncoder()
    variants = [
        raw_frame([payload], descriptor=0x20, fields=b"\x02"),
        raw_frame([payload], descriptor=0x60, fields=b"\x00\x00"),
        raw_frame([payload], descriptor=0xE0, fields=(2).to_bytes(8, "little")),
        raw_frame([payload], descriptor=0x00, fields=b"\x00"),
        raw_frame([payload], descriptor=0x01, fields=b"\x00\x00"),  # dictionary id 0
        raw_frame([payload], descriptor=0x21, fields=b"\x07\x02"),  # dictionary id 7
        b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc",  # skippable
        encoder.batch_frame(b"a" * 5000 + b"\n"),  # RLE
        encoder.batch_frame(bytes(range(256)) * 2000 + b"\n"),  # several blocks
        bytes(300),  # zero fill
    ]
    log, _ = build_log()
    for variant in variants:
        for data in (log + variant, variant + log, log + variant + log):
            _walks(data, path=tmp_path / "v.zstd", monkeypatch=monkeypatch)
            _walks(data[:-5], path=tmp_path / "v.zstd", monkeypatch=monkeypatch)


def _read(source: Path | bytes, read_ahead: bool) -> tuple[list[FramePlaintext], object]:
    """Every frame a strict reader yields, and the error it ends with (or its outcome)."""
    reader = ZstdLogReader(source, read_ahead=read_ahead)
    frames: list[FramePlaintext] = []
    try:
        frames.extend(reader.frames())
    except CorruptFrameError as error:
        message = str(error).replace(reader.path, "<log>", 1)
        return frames, (type(error), message, error.offset, error.frame, error.rule)
    return frames, reader.outcome


@pytest.mark.parametrize("walker", sorted(RUN_WALKERS))
def test_a_defect_in_a_frame_the_worker_decodes_reports_as_without_it(
    tmp_path: Path,
    big_log: tuple[bytes, list[tuple[int, int]]],
    monkeypatch: pytest.MonkeyPatch,
    walker: str,
) -> None:
    """With the walk in C and in Python, with and without the worker: the same frames, the
    same error or outcome."""
    monkeypatch.setattr(zstd_frames, "_plain_frames", RUN_WALKERS[walker])
    log, spans = big_log
    path = tmp_path / "session.jsonl.zstd"
    refused = 0
    for index in (2, 3, 40, len(spans) - 2, len(spans) - 1):
        start, end = spans[index]
        for position, mask in ((end - 1, 0x01), ((start + end) // 2, 0x10), (start, 0xFF)):
            damaged = bytearray(log)
            damaged[position] ^= mask
            path.write_bytes(bytes(damaged))
            plain = _read(path, read_ahead=False)
            assert _read(path, read_ahead=True) == plain, (index, position)
            assert _read(bytes(damaged), read_ahead=True) == plain, (index, position)
            frames, ending = plain
            assert [frame.frame for frame in frames] == list(range(len(frames)))
            if isinstance(ending, tuple):  # refused: at the damaged frame, after the others
                refused += 1
                assert (ending[2], ending[3]) == (start, index), (index, position)
                assert len(frames) == index
    assert refused >= 13  # a flip inside a block may decode to the same checksummed bytes
    # A torn final frame, zero fill and garbage after the last frame end alike too.
    for tail in (log[spans[-1][0] : spans[-1][0] + 300], bytes(64), b"garbage"):
        path.write_bytes(log + tail)
        assert _read(path, read_ahead=True) == _read(path, read_ahead=False)


def test_the_worker_starts_after_the_header_frame_and_ends_when_the_reader_is_closed(
    tmp_path: Path, long_log: bytes
) -> None:
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(long_log)
    before = _open_fds()
    frames = ZstdLogReader(path).frames()
    assert next(frames).frame == 0
    assert _workers() == []  # a read of the header alone starts no thread
    assert next(frames).frame == 1
    assert len(_workers()) == 1
    frames.close()
    assert _workers() == []
    assert _open_fds() == before
    # A small log is read without a thread.
    small, _ = build_log()
    seen = []
    for frame in ZstdLogReader(small).frames():
        seen.append(_workers())
        assert frame.lines
    assert seen and seen[-1] == []


def test_an_error_in_the_caller_ends_the_worker(tmp_path: Path, long_log: bytes) -> None:
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(long_log)
    before = _open_fds()

    def consume() -> None:
        for frame in ZstdLogReader(path).frames():
            if frame.frame == 5:
                assert len(_workers()) == 1
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        consume()
    assert _workers() == []
    assert _open_fds() == before


def test_a_failure_in_the_worker_reaches_the_caller_after_the_frames_before_it(
    monkeypatch: pytest.MonkeyPatch, big_log: tuple[bytes, list[tuple[int, int]]]
) -> None:
    """What the worker's decompression call raises (other than a zstd error, which sends
    the batch to the frame-by-frame decoding) is raised in the caller's thread once the
    frames of the batches before it were yielded; the worker has ended."""
    import zstandard

    failure = MemoryError("no room for the batch")
    calls: list[int] = []

    class FailingThird:
        def multi_decompress_to_buffer(self, frames: list[bytes | bytearray | memoryview]) -> Any:
            calls.append(len(frames))
            if len(calls) == 3:
                raise failure
            return zstandard.ZstdDecompressor().multi_decompress_to_buffer(frames)

    start_worker = zstd_codec._Worker.__init__
    failing = SimpleNamespace(ZstdDecompressor=FailingThird, ZstdError=zstandard.ZstdError)
    monkeypatch.setattr(
        zstd_codec._Worker, "__init__", lambda worker, zstd: start_worker(worker, failing)
    )
    log, _ = big_log
    seen = []
    with pytest.raises(MemoryError) as raised:
        for frame in ZstdLogReader(log).frames():
            seen.append(frame.frame)
    assert raised.value is failure
    assert len(calls) >= 3
    assert seen == list(range(1 + calls[0] + calls[1]))  # the header, the first two batches
    assert _workers() == []


_INTERRUPTED_CHILD = """
import os, signal, sys, threading, time
from dsh_store.jsonl.zstd_codec import ZstdLogReader
signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with it ignored
path = sys.argv[1]
before = len(os.listdir("/proc/self/fd"))
told = False
try:
    while True:  # until interrupted, mostly with a worker running
        for frame in ZstdLogReader(path).frames():
            if frame.frame == 3 and not told:
                alive = [t for t in threading.enumerate() if t.name == "dsh-store-zstd-read-ahead"]
                print("reading", len(alive), flush=True)
                told = True
            time.sleep(0.002)
except KeyboardInterrupt:
    workers = [t for t in threading.enumerate() if t.name == "dsh-store-zstd-read-ahead"]
    print("interrupted", len(workers), len(os.listdir("/proc/self/fd")) - before, flush=True)
"""


def test_a_real_sigint_while_reading_ends_the_worker_and_closes_the_file(
    tmp_path: Path, long_log: bytes
) -> None:
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(long_log)
    child = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "reading 1\n"  # a worker is running
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert out == "interrupted 0 0\n"


def _slowly(frames: Iterator[FramePlaintext]) -> Iterator[FramePlaintext]:
    """Yield the frames, pausing once after the second so the worker can run ahead as far
    as its budget lets it."""
    for frame in frames:
        yield frame
        if frame.frame == 1:
            time.sleep(0.5)


def test_the_read_ahead_stays_within_its_memory_budget_on_a_large_log(tmp_path: Path) -> None:
    """A 90 MB plaintext log of 3,000 frames, read by a caller that keeps nothing: the
    memory Python holds stays near the budget, never the log (an unbounded read-ahead
    would fill memory with decoded frames while the caller pauses)."""
    batches = _noisy_batches(3000, padding=15_000)
    log, spans = _encode(batches)
    plaintext = len(HEADER) + sum(map(len, batches))
    assert plaintext > 80_000_000 and len(log) - spans[0][1] >= READ_AHEAD_MIN_BYTES
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(log)
    del log, batches
    largest = 2 * 1200 + 30_000 + 400
    batch = 256 << 10  # plaintext decoded in one call of the binding
    bound = 2 * (READ_AHEAD_BYTES + largest) + 2 * batch + 3 * largest + 2 * (1 << 20)
    tracemalloc.start()
    try:
        count = 0
        for frame in _slowly(ZstdLogReader(path).frames()):
            count += 1
            del frame
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == len(spans)
    assert peak < bound, (peak, bound)
    assert bound < plaintext // 4  # far below what an unbounded read-ahead would hold


def test_reading_only_the_header_decodes_only_the_header_frame(
    monkeypatch: pytest.MonkeyPatch, big_log: tuple[bytes, list[tuple[int, int]]]
) -> None:
    """A store lists sessions by their header lines: each must cost one tiny frame, not a
    whole batch of the frames after it."""
    decoded: list[int] = []
    one, batch = zstd_codec._decode_complete, zstd_codec._decode_batch

    def decode_one(decompressor: Any, zstd: Any, frame: Any, span: FrameSpan) -> Any:
        decoded.append(span.offset)
        return one(decompressor, zstd, frame, span)

    def decode_batch(decompressor: Any, zstd: Any, frames: Any) -> Any:
        decoded.extend(span.offset for span, _ in frames)
        return batch(decompressor, zstd, frames)

    monkeypatch.setattr(zstd_codec, "_decode_complete", decode_one)
    monkeypatch.setattr(zstd_codec, "_decode_batch", decode_batch)
    log, spans = big_log
    frames = ZstdLogReader(log).frames()
    assert next(frames).lines == [HEADER.rstrip(b"\n")]
    frames.close()
    assert decoded == [0]
    assert len(list(ZstdLogReader(log).frames())) == len(spans)
    assert sorted(set(decoded)) == [start for start, _ in spans]  # the spy saw every frame


@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.builds(
                lambda size, byte: byte * size, st.integers(0, 3000), st.sampled_from([b"a", b"\r"])
            ),
        ).map(lambda line: line.replace(b"\n", b"")),
        max_size=40,
    )
)
def test_a_frames_lines_are_its_plaintext_split_at_each_newline(lines: list[bytes]) -> None:
    """The line split of a frame (newlines found by ``find``, or by ``split`` for short
    lines) gives exactly ``split``'s pieces, for any mix of short and long lines."""
    plaintext = b"".join(line + b"\n" for line in lines)
    assert zstd_codec._whole_lines_in_python(plaintext) == plaintext.split(b"\n")[:-1] == lines


# -- the run walk in C against the one in Python, on hostile input ---------------------------

_LOG, _ = build_log()
_VARIANTS = [  # frames the walk must stop at or step over, spliced between real ones
    raw_frame([b"x\n"], descriptor=0xE0, fields=(2).to_bytes(8, "little")),
    raw_frame([b"x\n"], descriptor=0x60, fields=b"\x00\x00"),
    raw_frame([b"x\n", b"y\n"], descriptor=0x00, fields=b"\x00"),
    raw_frame([b"x\n"], descriptor=0x21, fields=b"\x07\x02"),  # dictionary id 7
    b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc",  # skippable
    b"\x28\xb5\x2f\xfd\x24\x05\x01\x00\x00\x61\x00\x00\x00\x00",  # an RLE block, checksum
    raw_frame([b"x" * 40 + b"\n"], descriptor=0x20, fields=b"\x29"),  # no checksum
    bytes(12),
]


@st.composite
def hostile_windows(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """Real frames, spliced variants, flipped and random bytes, cut anywhere; a start
    anywhere in (or at the end of) the result, any base, any bound on the run."""
    parts = draw(
        st.lists(
            st.one_of(
                st.just(_LOG),
                st.sampled_from(_VARIANTS),
                st.binary(max_size=64),
                st.builds(lambda tail: b"\x28\xb5\x2f\xfd" + tail, st.binary(max_size=40)),
            ),
            min_size=1,
            max_size=5,
        )
    )
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 4))):
        if data:
            position = draw(st.integers(0, len(data) - 1))
            data[position] ^= draw(st.integers(1, 255))
    cut = max(0, len(data) - draw(st.integers(0, 6))) if draw(st.booleans()) else len(data)
    cut = draw(st.integers(0, len(data))) if draw(st.booleans()) else cut
    start = draw(st.integers(0, cut))
    base = draw(st.sampled_from([0, 1, 4096, 1 << 40]))
    most = draw(st.integers(-1, 8))
    return bytes(data[:cut]), start, base, most


@settings(max_examples=400)
@given(hostile_windows())
def test_the_c_run_walk_finds_what_the_python_run_walk_finds(
    case: tuple[bytes, int, int, int],
) -> None:
    if "c" not in RUN_WALKERS:
        pytest.skip("dsh_store._zstdwalk is not built here (no C compiler at install)")
    window, start, base, most = case
    assert RUN_WALKERS["c"](window, start, base, most) == _plain_frames_in_python(
        window, start, base, most
    )


@settings(max_examples=400)
@given(hostile_windows())
def test_the_c_run_walk_never_reads_past_the_end_of_its_window(
    case: tuple[bytes, int, int, int],
) -> None:
    """The window is a view into a longer buffer whose next bytes complete the frame the
    window cuts off: a read past the window's end would accept that frame, which the walk
    over the window alone must not."""
    if "c" not in RUN_WALKERS:
        pytest.skip("dsh_store._zstdwalk is not built here (no C compiler at install)")
    window, start, base, most = case
    whole = window + _LOG
    for cut in range(max(start, len(window) - 5), len(window) + 1):
        view = memoryview(whole)[:cut]
        expected = _plain_frames_in_python(whole[:cut], start, base, most)
        assert _c_plain_frames(view, start, base, most, FrameSpan) == expected


def test_the_c_run_walk_agrees_at_every_cut_and_start_of_spliced_logs() -> None:
    """Every variant between two logs, cut at every byte and walked from every byte before
    the cut: the window view ends there inside a longer buffer, so a read past its end
    would show as a disagreement."""
    if "c" not in RUN_WALKERS:
        pytest.skip("dsh_store._zstdwalk is not built here (no C compiler at install)")
    for variant in _VARIANTS:
        whole = _LOG + variant + _LOG
        for cut in range(len(_LOG) - 60, len(_LOG) + len(variant) + 60):
            window = memoryview(whole)[:cut]
            for start in range(len(_LOG) - 60, cut + 1):
                expected = _plain_frames_in_python(whole[:cut], start, 7, 4)
                assert _c_plain_frames(window, start, 7, 4, FrameSpan) == expected, (cut, start)


def test_the_c_run_walk_refuses_a_start_or_base_outside_its_window() -> None:
    if "c" not in RUN_WALKERS:
        pytest.skip("dsh_store._zstdwalk is not built here (no C compiler at install)")
    for start, base in ((-1, 0), (len(_LOG) + 1, 0), (0, -1), (0, sys.maxsize)):
        with pytest.raises(ValueError, match="start must lie in the window"):
            _c_plain_frames(_LOG, start, base, 8, FrameSpan)
    with pytest.raises(TypeError, match="span_type"):
        _c_plain_frames(_LOG, 0, 0, 8, dict)  # type: ignore[type-var]
    spans, stop = _c_plain_frames(_LOG, len(_LOG), 0, 8, FrameSpan)
    assert (spans, stop) == ([], len(_LOG))


def test_the_c_run_walk_is_built_where_a_c_compiler_is() -> None:
    skip_without_c_compiler("the Python walk")
    assert "c" in RUN_WALKERS, "dsh_store._zstdwalk was not built; run scripts/setup-venv"
    assert zstd_frames._plain_frames is not zstd_frames._plain_frames_in_python


LINE_SPLITTERS: dict[str, Callable[[bytes | memoryview], list[bytes] | None]] = {
    "python": zstd_codec._whole_lines_in_python
}
try:
    from dsh_store._zstdwalk import whole_lines as _c_whole_lines
except ImportError:  # an install without a C compiler: the Python split alone
    pass
else:
    LINE_SPLITTERS["c"] = _c_whole_lines


@pytest.mark.parametrize("splitter", sorted(LINE_SPLITTERS))
@given(
    st.lists(st.binary(max_size=700).map(lambda line: line.replace(b"\n", b"")), max_size=30),
    st.binary(max_size=8),
)
def test_a_frames_lines_are_split_in_place_as_split_does(
    splitter: str, lines: list[bytes], tail: bytes
) -> None:
    """Whole lines (from bytes or from a view that ends inside a longer buffer) give
    ``split``'s pieces; a plaintext that ends inside a line gives None."""
    split = LINE_SPLITTERS[splitter]
    plaintext = b"".join(line + b"\n" for line in lines)
    assert split(plaintext) == lines
    assert split(memoryview(plaintext + b"more\n")[: len(plaintext)]) == lines
    if tail and not tail.endswith(b"\n"):
        assert split(plaintext + tail) is None
        assert split(memoryview(plaintext + tail + b"\n")[: len(plaintext) + len(tail)]) is None
