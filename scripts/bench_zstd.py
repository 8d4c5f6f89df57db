"""Benchmark primitives of the zstd encoding: frame encode and decode throughput, size ratio.

Run ``python scripts/bench_zstd.py [--quick] [--levels 1,3,6] [--compare-bindings]``; nothing
here asserts a time. The input is the 50 MB v4 mix of ``bench/limits.py`` (10 MB with
``--quick``) cut into batches where DSH flushes: after each ``request/header``, ``tool/call``,
``step/end`` and ``turn/end`` (its semantic checkpoints), one frame per batch. Rows:

- encode: plaintext MB/s of :class:`FrameEncoder` building every frame, per level;
- decode: plaintext MB/s of :func:`decode_into` reading the whole log file (structural scan,
  checksummed decoding, line split), and the same time as a ratio to the raw
  :class:`LogScanner` pass over the raw file (a lower bound of what zstd adds to a restore);
- size: bytes on disk zstd ÷ raw, per level, and for one frame per event (the worst case);
- restore: ``read_log`` of the raw log ÷ of the zstd log (time ratio, so > 1 is faster),
  the two run alternately, medians;
- durable append: the first 300 checkpoint batches (100 with ``--quick``) published and
  appended with one fsync each through ``LogWriter``, raw time ÷ zstd time (alternately);
- with ``--compare-bindings``: the same encode/decode with ``backports.zstd`` (the
  standard library's ``compression.zstd`` API, which ``pyzstd`` 0.20 wraps) when installed;
- peer rows, against DSH rc.8's own backend in its default zstd encoding (installed as
  ``tests/interop/upstream.py`` installs it; skipped, with the reason, without npm): DSH
  writes ``PEER_TURNS`` scripted turns as ``session.jsonl.zstd`` (``scripts/bench_dsh.py``
  ``write_conversation``), dsh-store migrates that file to ``session.v4.jsonl.zstd``, so both
  sides hold the same conversation in their own format; then, alternating and taking
  medians, DSH's ``Session.append`` of every event + ``flush`` against ``LiveSession.append``
  of every v4 event + ``flush`` into a zstd store, and DSH's ``load`` against ``read_log``
  of the zstd v4 file. Ratios are DSH time ÷ ours (target ≥ 1: faster than DSH).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Report, write_v4_log

from dsh_store.jsonl.files import materialize
from dsh_store.jsonl.scan import LogScanner
from dsh_store.jsonl.zstd_codec import DEFAULT_LEVEL, FrameEncoder, decode_into
from dsh_store.restore import read_log

CHECKPOINTS = (
    b'"type":"request/header"',
    b'"type":"tool/call"',
    b'"type":"step/end"',
    b'"type":"turn/end"',
)


class _Null:
    """A sink that only counts (decoding is measured, not writing)."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)


def checkpoint_batches(raw: bytes) -> tuple[bytes, list[bytes]]:
    """The header line and the batches of a raw log, cut after each DSH checkpoint event."""
    header, _, body = raw.partition(b"\n")
    batches: list[bytes] = []
    current: list[bytes] = []
    for line in body.split(b"\n")[:-1]:
        current.append(line + b"\n")
        if any(mark in line[:48] for mark in CHECKPOINTS):
            batches.append(b"".join(current))
            current = []
    if current:
        batches.append(b"".join(current))
    return header + b"\n", batches


def encode_frames(header: bytes, batches: list[bytes], level: int) -> list[bytes]:
    """Every frame of the log, built with one :class:`FrameEncoder`."""
    encoder = FrameEncoder(level)
    return [encoder.header_frame(header), *map(encoder.batch_frame, batches)]


def _best_of(runs: int, work: Callable[[], object]) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _alternating(
    runs: int, first: Callable[[], object], second: Callable[[], object]
) -> tuple[float, float]:
    """Median seconds of ``first`` and of ``second``, run alternately ``runs`` times each
    (so a change of the machine's load hits both sides alike)."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for side, work in zip(samples, (first, second), strict=True):
            side.append(_best_of(1, work))
    return statistics.median(samples[0]), statistics.median(samples[1])


def decode_seconds(path: Path) -> float:
    """Seconds for :func:`decode_into` to read the whole log (complete frames only)."""
    start = time.perf_counter()
    outcome = decode_into(path, _Null())
    elapsed = time.perf_counter() - start
    if outcome.state != "complete":
        raise RuntimeError(f"{path}: {outcome}")
    return elapsed


def _backports_codec() -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]] | None:
    """(encode, decode) of one frame with backports.zstd, or None when not installed."""
    try:
        zstd: Any = importlib.import_module("backports.zstd")
    except ImportError:
        return None
    parameter = zstd.CompressionParameter
    compressor = zstd.ZstdCompressor(
        options={parameter.compression_level: DEFAULT_LEVEL, parameter.checksum_flag: 1}
    )

    def encode(data: bytes) -> bytes:
        frame: bytes = compressor.compress(data, mode=zstd.ZstdCompressor.FLUSH_FRAME)
        return frame

    def decode(frame: bytes) -> bytes:
        decompressor = zstd.ZstdDecompressor()  # one per frame: it cannot be reused
        plaintext: bytes = decompressor.decompress(frame)
        if not decompressor.eof or decompressor.unused_data:
            raise RuntimeError("not one whole frame")
        return plaintext

    return encode, decode


def _compare_bindings(
    report: Report, header: bytes, batches: list[bytes], megabytes: float, rounds: int
) -> None:
    """Decode and encode the same frames with both bindings, alternating, medians of rounds."""
    codec = _backports_codec()
    if codec is None:
        report.value("backports.zstd", "not installed")
        return
    encode_one, decode_one = codec
    zstandard: Any = importlib.import_module("zstandard")
    decompressor = zstandard.ZstdDecompressor()
    encoder = FrameEncoder()
    frames = [encoder.header_frame(header), *map(encoder.batch_frame, batches)]
    if [decode_one(frame) for frame in frames] != [header, *batches]:
        raise RuntimeError("backports.zstd decoded other bytes")
    sides: dict[str, Callable[[], object]] = {
        "decode, zstandard (one context reused)": lambda: [
            decompressor.decompressobj().decompress(frame) for frame in frames
        ],
        "decode, backports.zstd (one decompressor per frame)": lambda: [
            decode_one(frame) for frame in frames
        ],
        "encode, zstandard": lambda: [encoder.batch_frame(batch) for batch in batches],
        "encode, backports.zstd": lambda: [encode_one(batch) for batch in batches],
    }
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, work in sides.items():
            samples[name].append(_best_of(1, work))
    for name, times in samples.items():
        report.value(
            f"{name}, level {DEFAULT_LEVEL}", f"{megabytes / statistics.median(times):.0f} MB/s"
        )


PEER_TURNS, QUICK_PEER_TURNS = 1500, 40
PEER_APPEND = ("zstd live append: DSH ÷ dsh-store", "DSH zstd Session.append + flush", ">= 1.0x")
PEER_LOAD = ("zstd open: DSH load() ÷ dsh-store read_log", "DSH zstd load()", ">= 1.0x")


def peer_rows(report: Report, quick: bool, runs: int) -> None:
    """The rows against DSH's own zstd backend (see the module docstring)."""
    import bench_dsh

    from dsh_store.migrate import migrate_file
    from tests.interop.upstream import UpstreamUnavailable, install

    try:
        upstream = install()
    except UpstreamUnavailable as error:
        for name, baseline, target in (PEER_APPEND, PEER_LOAD):
            report.skipped(name, baseline, target, error.reason)
        return
    turns = QUICK_PEER_TURNS if quick else PEER_TURNS
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as name:
        scratch = Path(name)
        source = bench_dsh.write_conversation(upstream, scratch / "dsh", turns, "zstd")
        v4 = scratch / "v4" / "session.v4.jsonl.zstd"
        v4.parent.mkdir()
        migrate_file(source, output=v4)
        ours_events = read_log(v4).events
        theirs_events = bench_dsh.dsh_events(upstream, scratch / "dsh", "zstd")
        report.value(
            "peer: DSH zstd log (format 0) / the same conversation in v4 zstd",
            f"{source.stat().st_size / 1e6:.1f} MB, {len(theirs_events)} events / "
            f"{v4.stat().st_size / 1e6:.1f} MB, {len(ours_events)} events",
        )
        samples: dict[str, list[float]] = {key: [] for key in ("ao", "at", "lo", "lt")}
        for run_index in range(runs):
            samples["ao"].append(bench_dsh.ours_append(ours_events, scratch / "ours", "zstd"))
            command = {
                "op": "append",
                "root": str(scratch / "dsh-append"),
                "cwd": "/home/dev/project",
                "compression": "zstd",
                "id": f"a{run_index}",
                "runs": 2,  # the first warms the node process up
                "events": theirs_events,
            }
            samples["at"].append(bench_dsh._timer(upstream, command)["seconds"][-1])
            samples["lo"].append(bench_dsh.ours_load(v4))
            command = {
                "op": "load",
                "root": str(scratch / "dsh"),
                "id": bench_dsh.SESSION,
                "compression": "zstd",
                "runs": 2,
            }
            samples["lt"].append(bench_dsh._timer(upstream, command)["seconds"][-1])
        median = {key: statistics.median(values) for key, values in samples.items()}
        report.value("dsh-store zstd LiveSession.append + flush", f"{median['ao']:.3f} s")
        report.value("DSH zstd Session.append + flush", f"{median['at']:.3f} s")
        report.ratio(
            PEER_APPEND[0], median["at"], median["ao"], PEER_APPEND[2], baseline_name=PEER_APPEND[1]
        )
        report.value("dsh-store read_log of the zstd v4 file", f"{median['lo']:.3f} s")
        report.value("DSH load() of its zstd file", f"{median['lt']:.3f} s")
        report.ratio(
            PEER_LOAD[0], median["lt"], median["lo"], PEER_LOAD[2], baseline_name=PEER_LOAD[1]
        )


def run(
    quick: bool,
    levels: tuple[int, ...] = (1, DEFAULT_LEVEL, 6),
    compare: bool = False,
    peer: bool = True,
) -> None:
    """Measure and print the zstd table."""
    runs = 3 if quick else 5
    report = Report("zstd")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as scratch:
        raw_path = Path(scratch) / "session.v4.jsonl"
        write_v4_log(raw_path, 10_000_000 if quick else 50_000_000, "bench-zstd")
        raw = raw_path.read_bytes()
        megabytes = len(raw) / 1e6
        header, batches = checkpoint_batches(raw)
        report.value("log", f"{megabytes:.1f} MB", f"{len(batches)} checkpoint batches")
        zstd_path = Path(scratch) / "session.v4.jsonl.zstd"
        raw_scan = _best_of(runs, lambda: LogScanner(raw_path).exhaust())
        for level in levels:
            frames = encode_frames(header, batches, level)
            if level == DEFAULT_LEVEL:
                zstd_path.write_bytes(b"".join(frames))
            encode = _best_of(runs, functools.partial(encode_frames, header, batches, level))
            size = sum(map(len, frames))
            report.value(f"encode, level {level}", f"{megabytes / encode:.0f} MB/s")
            report.value(f"size zstd / raw, level {level}", f"{size / len(raw):.3f}x", "<= 0.3x")
            report.value(
                f"encode per batch, level {level}", f"{encode / len(batches) * 1e6:.0f} us"
            )
        decode = _best_of(runs, lambda: decode_seconds(zstd_path))
        report.value(
            f"decode (scan + checksum + lines), level {DEFAULT_LEVEL}",
            f"{megabytes / decode:.0f} MB/s",
        )
        report.ratio("decode time / raw LogScanner time", decode, raw_scan, "(restore adds this)")
        per_event = FrameEncoder()
        one_each = sum(len(per_event.batch_frame(line + b"\n")) for line in raw.split(b"\n")[1:-1])
        report.value(
            "size zstd / raw, one frame per event", f"{one_each / len(raw):.3f}x", "worst case"
        )
        raw_restore, zstd_restore = _alternating(
            runs, lambda: read_log(raw_path), lambda: read_log(zstd_path)
        )
        report.ratio("restore (read_log) speed zstd / raw", raw_restore, zstd_restore, ">= 0.8x")
        appended = batches[: 100 if quick else 300]
        raw_append, zstd_append = _alternating(
            runs,
            lambda: append_seconds(scratch, "raw", header, appended),
            lambda: append_seconds(scratch, "zstd", header, appended),
        )
        report.ratio(
            f"durable append speed zstd / raw ({len(appended)} fsynced batches)",
            raw_append,
            zstd_append,
            "",
        )
        if compare:
            _compare_bindings(report, header, batches, megabytes, 2 * runs + 1)
    if peer:
        peer_rows(report, quick, runs)
    report.print()


def append_seconds(scratch: str, encoding: str, header: bytes, batches: list[bytes]) -> float:
    """Seconds to publish a log and append ``batches`` durably (one fsync each) through
    :class:`LogWriter` in ``encoding``: the store's write path below the model."""
    name = "session.v4.jsonl.zstd" if encoding == "zstd" else "session.v4.jsonl"
    path = Path(scratch) / f"append-{encoding}" / name
    if path.exists():
        path.unlink()
    first = batches[0].splitlines(keepends=True)
    start = time.perf_counter()
    with materialize(path, header, first, session_id="bench") as writer:
        seq = len(first)
        for batch in batches[1:]:
            lines = batch.splitlines(keepends=True)
            writer.append(lines, seq, seq + len(lines) - 1)
            seq += len(lines)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10 MB instead of 50 MB, 3 runs")
    parser.add_argument("--levels", default=f"1,{DEFAULT_LEVEL},6", help="comma-separated")
    parser.add_argument("--compare-bindings", action="store_true")
    parser.add_argument("--no-peer", action="store_true", help="skip the rows against DSH")
    args = parser.parse_args(argv)
    levels = tuple(int(level) for level in args.levels.split(","))
    if DEFAULT_LEVEL not in levels:
        levels = (*levels, DEFAULT_LEVEL)
    run(args.quick, levels, args.compare_bindings, peer=not args.no_peer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
