"""The structural frame scanner: frame boundaries, torn frames and defects, no decoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.jsonl.zstd_codec import FrameEncoder
from dsh_store.jsonl.zstd_frames import BLOCK_SIZE_MAX, FrameScanner, FrameSpan
from tests.jsonl.zstd_helpers import build_log, raw_frame

DATA = Path(__file__).parent / "zstd_data"


def test_a_multi_frame_log_scans_to_its_frame_ranges() -> None:
    log, spans = build_log()
    scanner = FrameScanner(log)
    found = scanner.scan()
    assert [(frame.offset, frame.end) for frame in found] == spans
    assert all(frame.checksum and not frame.skippable for frame in found)
    assert scanner.end == len(log)
    assert (scanner.torn, scanner.zero_fill, scanner.defect) == (None, None, None)


def test_the_file_scan_matches_the_bytes_scan(tmp_path: Path) -> None:
    log, _ = build_log()
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(log + log[:7])
    from_file = FrameScanner(path)
    assert from_file.scan() == FrameScanner(log + log[:7]).scan()
    assert from_file.torn is not None and from_file.torn.offset == len(log)


def test_descriptor_variants_are_read() -> None:
    payload = b"x\n"
    variants = {
        "single segment, 1-byte size": raw_frame([payload], descriptor=0x20, fields=b"\x02"),
        "2-byte size": raw_frame([payload], descriptor=0x60, fields=b"\x00\x00"),
        "4-byte size": raw_frame([payload], descriptor=0xA0, fields=(2).to_bytes(4, "little")),
        "8-byte size": raw_frame([payload], descriptor=0xE0, fields=(2).to_bytes(8, "little")),
        "window, no size": raw_frame([payload], descriptor=0x00, fields=b"\x00"),
        "window, dictionary id 0": raw_frame([payload], descriptor=0x01, fields=b"\x00\x00"),
    }
    for name, frame in variants.items():
        scanner = FrameScanner(frame)
        assert [span.end for span in scanner.scan()] == [len(frame)], name
        assert scanner.defect is None, name
    assert FrameScanner(variants["8-byte size"]).scan()[0].content_size == 2
    assert FrameScanner(variants["window, no size"]).scan()[0].content_size is None


def test_rle_and_multi_block_frames_from_the_encoder() -> None:
    encoder = FrameEncoder()
    rle = encoder.batch_frame(b"a" * 5000 + b"\n")
    big = encoder.batch_frame(bytes(range(256)) * 2000 + b"\n")  # 512 KiB: several blocks
    for frame in (rle, big):
        spans = FrameScanner(frame).scan()
        assert [span.end for span in spans] == [len(frame)]
    assert len(FrameScanner(big).scan()[0].blocks) >= 4
    # A hand-made RLE block: header type 1, regenerated size 9, one payload byte.
    hand = b"\x28\xb5\x2f\xfd\x20\x09" + ((9 << 3) | 0b011).to_bytes(3, "little") + b"z"
    assert FrameScanner(hand).scan() == [FrameSpan(0, len(hand), False, 9, False, (len(hand),))]


@pytest.mark.parametrize(
    ("cut", "where"),
    [
        (2, "magic"),
        (4, "header"),
        (5, "header"),
        (7, "block-header"),
        (9, "block"),
        (12, "checksum"),
    ],
)
def test_the_end_of_the_file_inside_each_part_is_a_torn_frame(cut: int, where: str) -> None:
    frame = raw_frame([b"ab\n"], descriptor=0x24, fields=b"\x03", checksum=b"\x01\x02\x03\x04")
    assert len(frame) == 6 + 3 + 3 + 4
    scanner = FrameScanner(frame[:cut])
    assert scanner.scan() == []
    assert scanner.torn is not None
    assert (scanner.torn.offset, scanner.torn.length, scanner.torn.where) == (0, cut, where)
    assert scanner.defect is None


@pytest.mark.parametrize(
    ("frame", "rule", "at"),
    [
        (raw_frame([b"x\n"], descriptor=0x28), "zstd-reserved-bit", 4),
        (raw_frame([b"x\n"], descriptor=0x30), "zstd-reserved-bit", 4),
        (raw_frame([b"x\n"], descriptor=0x21, fields=b"\x07\x02"), "zstd-dictionary", 5),
        (b"\x28\xb5\x2f\xfd\x20\x02" + (0b110).to_bytes(3, "little"), "zstd-reserved-block", 6),
        (
            b"\x28\xb5\x2f\xfd\x20\x02" + ((BLOCK_SIZE_MAX + 1) << 3 | 1).to_bytes(3, "little"),
            "zstd-block-size",
            6,
        ),
        (b"\x27\xb5\x2f\xfd" + raw_frame([b"x\n"])[4:], "zstd-bad-magic", 0),
    ],
)
def test_structural_defects_are_refused_with_their_offsets(
    frame: bytes, rule: str, at: int
) -> None:
    good, _ = build_log()
    scanner = FrameScanner(good + frame)
    assert len(scanner.scan()) == 5
    assert scanner.defect is not None
    assert (scanner.defect.rule, scanner.defect.offset, scanner.defect.at) == (
        rule,
        len(good),
        len(good) + at,
    )
    assert scanner.torn is None and scanner.zero_fill is None


def test_zero_fill_to_the_end_is_recorded_by_length_and_zeros_before_data_are_a_defect() -> None:
    good, _ = build_log()
    for length in (1, 3, 4, 4096, 3 << 20):  # the last crosses the scanner's read window
        scanner = FrameScanner(good + bytes(length))
        assert len(scanner.scan()) == 5
        assert scanner.zero_fill is not None
        assert (scanner.zero_fill.offset, scanner.zero_fill.length) == (len(good), length)
    scanner = FrameScanner(good + bytes(4096) + good)
    scanner.scan()
    assert scanner.defect is not None
    assert (scanner.defect.rule, scanner.defect.offset, scanner.defect.at) == (
        "zstd-zero-run",
        len(good),
        len(good) + 4096,
    )


def test_skippable_frames_are_stepped_over_and_listed() -> None:
    good, spans = build_log()
    skippable = b"\x5a\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"hello"
    log = good[: spans[1][0]] + skippable + good[spans[1][0] :]
    found = FrameScanner(log).scan()
    assert [span.skippable for span in found] == [False, True, False, False, False, False]
    assert found[1].offset == spans[1][0] and found[1].end == spans[1][0] + len(skippable)
    torn = FrameScanner(good + skippable[:10])
    torn.scan()
    assert torn.torn is not None and torn.torn.skippable and torn.torn.offset == len(good)


def test_node_written_logs_scan_to_their_frame_count() -> None:
    assert len(FrameScanner(DATA / "node-sync.jsonl.zstd").scan()) == 5
    stream = FrameScanner(DATA / "node-stream.jsonl.zstd").scan()
    assert len(stream) == 3  # the header, a frame without a content size, an empty end frame
    assert stream[1].content_size is None
