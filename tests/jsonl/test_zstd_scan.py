"""The committed-region rule over zstd frames: LogScanner reading ``.jsonl.zstd`` logs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from dsh_store.errors import CorruptLogError, NotASessionError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.jsonl.zstd_codec import FrameEncoder
from tests.cli.conftest import record_session
from tests.jsonl.zstd_logs import frame_offsets, zstd_frames

pytest.importorskip("zstandard", reason="the zstd extra (zstandard) is not installed")


@pytest.fixture(scope="module")
def raw_log(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A v4 log of two completed turns and an open one, 16 lines."""
    root = tmp_path_factory.mktemp("raw")
    return record_session(root, "z", turns=2, open_turn=True).read_bytes()


def _rows(path: Path) -> tuple[LogScanner, list[dict[str, object]]]:
    scanner = LogScanner(path)
    return scanner, [row.value for row in scanner.rows()]


def _write(tmp_path: Path, data: bytes, name: str = "session.v4.jsonl.zstd") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_zstd_log_yields_the_rows_of_its_raw_twin(tmp_path: Path, raw_log: bytes) -> None:
    frames = zstd_frames(raw_log, 3)
    log = _write(tmp_path, b"".join(frames))
    raw = _write(tmp_path, raw_log, "session.v4.jsonl")
    scanner, rows = _rows(log)
    raw_scanner, raw_rows = _rows(raw)
    assert rows == raw_rows and scanner.header == LogScanner(log).read_header()
    assert scanner.encoding == "zstd" and raw_scanner.encoding == "raw"
    assert scanner.torn is None and scanner.recovered_events == 0
    assert scanner.committed_size == scanner.file_size == log.stat().st_size
    assert scanner.event_count == raw_scanner.event_count
    offsets = frame_offsets(frames)
    assert {row.offset for row in LogScanner(log).rows()} <= set(offsets[1:])


def test_the_zstd_magic_is_recognised_under_any_name(tmp_path: Path, raw_log: bytes) -> None:
    log = _write(tmp_path, b"".join(zstd_frames(raw_log)), "session.v4.jsonl")
    scanner, rows = _rows(log)
    assert scanner.encoding == "zstd" and len(rows) == raw_log.count(b"\n") - 1


def test_every_prefix_keeps_the_complete_frames_and_the_torn_frames_lines(
    tmp_path: Path, raw_log: bytes
) -> None:
    frames = zstd_frames(raw_log, 3)
    data = b"".join(frames)
    offsets = [*frame_offsets(frames), len(data)]
    raw_lines = raw_log.splitlines()
    log = tmp_path / "session.v4.jsonl.zstd"
    for cut in range(offsets[1], len(data)):
        log.write_bytes(data[:cut])
        scanner, rows = _rows(log)
        frame = max(index for index, start in enumerate(offsets) if start <= cut)
        lines_before = 3 * (frame - 1)  # complete lines in frames 1 .. frame-1
        assert scanner.committed_size == offsets[frame], cut
        if cut == offsets[frame]:
            assert scanner.torn is None and len(rows) == lines_before
            continue
        assert scanner.torn is not None and scanner.torn.offset == offsets[frame]
        assert scanner.torn.rule == "torn-frame" and scanner.torn.length == cut - offsets[frame]
        # The torn frame's complete lines are recovered: a prefix of the frame's lines.
        assert len(rows) == lines_before + scanner.recovered_events
        assert [orjson.dumps(row) for row in rows] == [
            orjson.dumps(orjson.loads(line)) for line in raw_lines[1 : len(rows) + 1]
        ]


def test_a_flipped_bit_in_each_frame_is_refused_at_that_frame(
    tmp_path: Path, raw_log: bytes
) -> None:
    frames = zstd_frames(raw_log, 3)
    data = b"".join(frames)
    offsets = frame_offsets(frames)
    log = tmp_path / "session.v4.jsonl.zstd"
    for index, (start, frame) in enumerate(zip(offsets, frames, strict=True)):
        damaged = bytearray(data)
        damaged[start + len(frame) - 6] ^= 0x10  # inside the last block's payload
        log.write_bytes(damaged)
        digest = hashlib.sha256(damaged).hexdigest()
        with pytest.raises(CorruptLogError) as caught:
            _rows(log)
        assert caught.value.offset == start, index
        assert f"byte {start}" in str(caught.value)
        assert hashlib.sha256(log.read_bytes()).hexdigest() == digest


def test_zero_fill_after_the_last_frame_is_a_crash_tail(tmp_path: Path, raw_log: bytes) -> None:
    data = b"".join(zstd_frames(raw_log))
    log = _write(tmp_path, data + b"\0" * 5000)
    scanner, rows = _rows(log)
    assert len(rows) == raw_log.count(b"\n") - 1
    assert scanner.torn is not None and scanner.torn.rule == "zero-fill"
    assert (scanner.torn.offset, scanner.torn.length) == (len(data), 5000)
    assert scanner.committed_size == len(data)


def test_garbage_after_the_last_frame_is_corruption(tmp_path: Path, raw_log: bytes) -> None:
    data = b"".join(zstd_frames(raw_log))
    log = _write(tmp_path, data + b'{"type":"turn/start"}\n')
    with pytest.raises(CorruptLogError) as caught:
        _rows(log)
    assert caught.value.offset == len(data) and caught.value.rule == "zstd-bad-magic"


def test_a_bad_line_in_a_complete_frame_is_committed_corruption(
    tmp_path: Path, raw_log: bytes
) -> None:
    lines = raw_log.splitlines(keepends=True)
    encoder = FrameEncoder()
    frames = [encoder.header_frame(lines[0]), encoder.batch_frame(b"".join(lines[1:3]))]
    # seq 2 is missing: a seq gap inside a checksum-valid frame, with no later turn/end.
    frames.append(encoder.batch_frame(b"".join(lines[4:6])))
    log = _write(tmp_path, b"".join(frames))
    with pytest.raises(CorruptLogError) as caught:
        _rows(log)
    error = caught.value
    assert (error.rule, error.offset, error.line, error.seq) == (
        "seq-gap",
        len(frames[0]) + len(frames[1]),
        4,
        2,
    )
    assert "complete frame 2" in str(error)


def test_a_bad_line_in_the_torn_frame_ends_the_recovered_lines(
    tmp_path: Path, raw_log: bytes
) -> None:
    lines = raw_log.splitlines(keepends=True)
    encoder = FrameEncoder()
    head = encoder.header_frame(lines[0]) + encoder.batch_frame(b"".join(lines[1:3]))
    last = encoder.batch_frame(lines[3] + b"not json\n" + lines[4])
    log = _write(tmp_path, head + last[:-2])  # the checksum trailer is cut off
    scanner, rows = _rows(log)
    assert len(rows) == 3 and scanner.recovered_events == 1
    assert scanner.torn is not None and scanner.torn.offset == len(head)
    assert "unparsable-line" in scanner.torn.reason
    assert scanner.committed_size == len(head)


def test_a_torn_header_frame_reads_as_a_log_without_a_header(
    tmp_path: Path, raw_log: bytes
) -> None:
    frames = zstd_frames(raw_log)
    log = _write(tmp_path, frames[0][:5])
    with pytest.raises(NotASessionError, match="header"):
        _rows(log)
