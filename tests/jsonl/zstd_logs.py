"""Turn a raw session log into its zstd encoding, as DSH writes it: a header frame, then
one frame per batch of lines."""

from __future__ import annotations

from pathlib import Path

from dsh_store.jsonl.zstd_codec import FrameEncoder


def zstd_frames(raw: bytes, lines_per_frame: int = 2) -> list[bytes]:
    """The frames of ``raw`` (a whole raw log): the header line, then batches of lines."""
    lines = raw.splitlines(keepends=True)
    encoder = FrameEncoder()
    frames = [encoder.header_frame(lines[0])]
    for start in range(1, len(lines), lines_per_frame):
        frames.append(encoder.batch_frame(b"".join(lines[start : start + lines_per_frame])))
    return frames


def frame_offsets(frames: list[bytes]) -> list[int]:
    """Byte offset of every frame in their concatenation."""
    offsets = []
    position = 0
    for frame in frames:
        offsets.append(position)
        position += len(frame)
    return offsets


def to_zstd(log: Path, lines_per_frame: int = 2) -> Path:
    """Replace the raw ``log`` by ``<log>.zstd`` (same lines); its watermark goes too."""
    target = log.with_name(log.name + ".zstd")
    target.write_bytes(b"".join(zstd_frames(log.read_bytes(), lines_per_frame)))
    log.unlink()
    log.with_name(log.name + ".durable").unlink(missing_ok=True)
    return target
