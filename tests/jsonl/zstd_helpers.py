"""Shared builders for the zstd tests: a small multi-frame log and hand-made frames."""

from __future__ import annotations

import orjson

from dsh_store.jsonl.zstd_codec import FrameEncoder

HEADER = b'{"type":"session","version":4,"id":"z","createdAt":1760000000000,"delegationDepth":0}\n'


def event_line(seq: int, kind: str = "turn/start", **data: object) -> bytes:
    """One JSONL event line (with its newline)."""
    return (
        orjson.dumps({"type": kind, "seq": seq, "time": 1760000000000 + seq, "data": data}) + b"\n"
    )


def small_batches() -> list[bytes]:
    """Four batches: a one-liner, a repetitive one (an RLE-friendly run), text, a one-liner."""
    return [
        event_line(0, turn=1),
        b"".join(event_line(seq, "step/start", turn=1, step=seq) for seq in range(1, 4)),
        event_line(4, "user/message", text="a" * 300) + event_line(5, "step/end", turn=1),
        event_line(6, "turn/end", turn=1),
    ]


def build_log(batches: list[bytes] | None = None) -> tuple[bytes, list[tuple[int, int]]]:
    """A header frame plus one frame per batch; the bytes and every frame's (offset, end)."""
    encoder = FrameEncoder()
    frames = [encoder.header_frame(HEADER)]
    frames += [encoder.batch_frame(batch) for batch in batches or small_batches()]
    spans = []
    offset = 0
    for frame in frames:
        spans.append((offset, offset + len(frame)))
        offset += len(frame)
    return b"".join(frames), spans


def raw_frame(
    payloads: list[bytes], *, descriptor: int = 0x20, fields: bytes = b"\x00", checksum: bytes = b""
) -> bytes:
    """A frame of raw blocks, made by hand (for header variants the encoder never makes).

    The default descriptor is single segment with a 1-byte content size (``fields``) and
    no checksum; pass ``descriptor | 0x04`` and a 4-byte ``checksum`` for a trailer.
    """
    out = bytearray(b"\x28\xb5\x2f\xfd" + bytes([descriptor]) + fields)
    for index, payload in enumerate(payloads):
        last = 1 if index == len(payloads) - 1 else 0
        out += ((len(payload) << 3) | last).to_bytes(3, "little") + payload
    return bytes(out + checksum)
