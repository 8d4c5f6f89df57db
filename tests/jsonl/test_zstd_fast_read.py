"""The structural walk's fast path: it finds exactly what the precise walk finds.

The fast walk is compared with the precise walk over every prefix and every bit flip of a
log, over bytes and over a file read through small windows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.jsonl import zstd_frames
from dsh_store.jsonl.zstd_codec import FrameEncoder
from dsh_store.jsonl.zstd_frames import FrameScanner
from tests.jsonl.zstd_helpers import build_log, raw_frame


def _summary(scanner: FrameScanner) -> tuple[object, ...]:
    return (scanner.end, scanner.file_size, scanner.torn, scanner.zero_fill, scanner.defect)


def _walks(
    data: bytes,
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    windows: tuple[int, ...] = (7, 40, 150),
) -> None:
    """The fast walk over bytes and over a file read through small windows (so frames
    cross them and outgrow them) finds exactly what the precise walk finds."""
    with monkeypatch.context() as patch:
        patch.setattr(zstd_frames, "_plain_frame", lambda source, start: None)
        precise = FrameScanner(data)
        precise_spans = precise.scan()
    expected = [(span, data[span.offset : span.end]) for span in precise_spans]
    fast = FrameScanner(data)
    assert fast.scan() == precise_spans
    assert _summary(fast) == _summary(precise)
    if windows:
        path.write_bytes(data)
    for window in windows:
        with monkeypatch.context() as patch:
            patch.setattr(zstd_frames, "_READ_WINDOW", window)
            windowed = FrameScanner(path)
            assert windowed.scan() == precise_spans, window
            assert _summary(windowed) == _summary(precise), window
            framed = FrameScanner(path)
            views = [(span, bytes(view)) for span, view in framed.frames_with_bytes()]
            assert views == expected, window
            assert _summary(framed) == _summary(precise), window


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
