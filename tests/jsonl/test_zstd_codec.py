"""Decoding and encoding zstd session logs: checksums, torn frames, faults, round trips."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.errors import (
    CorruptFrameError,
    CorruptLogError,
    NotASessionError,
    ZstdUnavailableError,
)
from dsh_store.jsonl.zstd_codec import (
    FrameEncoder,
    ZstdLogReader,
    decode_into,
    decode_log,
    encode_log,
)
from dsh_store.jsonl.zstd_frames import FrameScanner
from tests.conftest import REPO
from tests.jsonl.zstd_helpers import HEADER, build_log, event_line, raw_frame, small_batches

DATA = Path(__file__).parent / "zstd_data"
PLAIN = HEADER + b"".join(small_batches())


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


# -- complete logs ------------------------------------------------------------------------


def test_a_log_decodes_to_its_raw_jsonl_frame_by_frame(tmp_path: Path) -> None:
    log, spans = build_log()
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(log)
    reader = ZstdLogReader(path)
    frames = list(reader.frames())
    assert [(frame.offset, frame.end) for frame in frames] == spans
    assert [frame.frame for frame in frames] == list(range(5))
    assert frames[0].lines == [HEADER[:-1]]
    assert [line for frame in frames for line in frame.lines] == _lines(PLAIN)
    assert reader.outcome is not None
    assert (reader.outcome.state, reader.outcome.frames, reader.outcome.committed_size) == (
        "complete",
        5,
        len(log),
    )
    decoded = decode_log(path)
    assert decoded.raw == PLAIN and decoded.outcome == reader.outcome


def test_the_header_frame_is_separate_and_every_frame_has_a_checksum() -> None:
    log, _ = build_log()
    frames = FrameScanner(log).scan()
    assert all(frame.checksum for frame in frames)
    assert len(frames) == 1 + len(small_batches())
    assert frames[0].content_size == len(HEADER)


def test_the_encoder_takes_only_whole_lines() -> None:
    encoder = FrameEncoder()
    with pytest.raises(ValueError, match="whole lines"):
        encoder.batch_frame(b'{"a":1}')
    with pytest.raises(ValueError, match="exactly one line"):
        encoder.header_frame(HEADER + HEADER)
    assert decode_log(encoder.header_frame(HEADER) + encoder.lines_frame([b"1", b"2"])).raw == (
        HEADER + b"1\n2\n"
    )


# -- checksums and bit flips --------------------------------------------------------------


def test_a_checksum_flip_in_each_frame_is_refused_with_the_frames_offset(tmp_path: Path) -> None:
    log, spans = build_log()
    path = tmp_path / "session.jsonl.zstd"
    for index, (_offset, end) in enumerate(spans):
        damaged = bytearray(log)
        damaged[end - 1] ^= 0x01  # the last byte of the checksum trailer
        path.write_bytes(bytes(damaged))
        reader = ZstdLogReader(path)
        with pytest.raises(CorruptFrameError) as raised:
            list(reader.frames())
        error = raised.value
        assert isinstance(error, CorruptLogError)
        assert (error.offset, error.frame, error.rule) == (spans[index][0], index, "zstd-checksum")
        assert f"byte {spans[index][0]}" in str(error)
        assert path.read_bytes() == bytes(damaged)  # reading never writes


def test_every_single_bit_flip_is_refused_within_its_frame_or_harmless() -> None:
    """Each of the log's bits flipped in turn: refused inside the flipped frame, or read as
    the very same checksum-verified lines (a flip of the single-segment flag turns the
    content-size byte into a window descriptor; some bits of a compressed block change
    nothing the decoder produces). Never different lines. Only in the last frame, a flip
    that makes it look longer (a block size, the last-block flag) reads as a torn frame:
    a crash tail, whose bytes a repair keeps."""
    log, spans = build_log()
    torn_reads = harmless = 0
    for position in range(len(log)):
        frame = next(i for i, (start, end) in enumerate(spans) if start <= position < end)
        for bit in range(8):
            damaged = bytearray(log)
            damaged[position] ^= 1 << bit
            decoded = decode_log(bytes(damaged))
            outcome = decoded.outcome
            if outcome.state == "complete":
                assert decoded.raw == PLAIN, (position, bit)
                harmless += 1
                continue
            if outcome.state == "torn" and frame == len(spans) - 1:
                assert outcome.tail_offset == spans[frame][0]
                torn_reads += 1
                continue
            assert outcome.state == "corrupt", (position, bit)
            assert outcome.defect is not None
            assert spans[frame][0] <= outcome.defect.offset <= spans[frame][1], (position, bit)
    assert harmless < len(log)  # a few bits per frame at most
    assert torn_reads < 8 * (spans[-1][1] - spans[-1][0]) // 4


def test_a_size_flip_in_a_middle_frame_is_not_read_as_a_crash_tail() -> None:
    # A raw block whose size bit is flipped upward swallows the frames after it: the later
    # complete frames show that the damage is inside committed history.
    log = raw_frame([b"x\n"], descriptor=0x24, fields=b"\x02", checksum=b"\0\0\0\0")
    good, spans = build_log()
    damaged = bytearray(good)
    block_header = spans[1][0] + 6  # magic + descriptor + 1-byte content size
    size_bits = int.from_bytes(damaged[block_header : block_header + 3], "little")
    damaged[block_header : block_header + 3] = (size_bits | (1 << 14)).to_bytes(3, "little")
    outcome = decode_log(bytes(damaged)).outcome
    assert outcome.state == "corrupt" and outcome.defect is not None
    assert (outcome.defect.rule, outcome.defect.offset) == ("zstd-frame-after-torn", spans[1][0])
    assert log  # the hand-made frame only documents the layout assumed above


# -- truncation ---------------------------------------------------------------------------


def test_every_prefix_is_complete_frames_and_a_torn_final_frame() -> None:
    log, spans = build_log()
    original = _lines(PLAIN)
    for cut in range(len(log) + 1):
        decoded = decode_log(log[:cut])
        outcome = decoded.outcome
        assert outcome.state in ("complete", "torn"), cut
        complete = [end for _start, end in spans if end <= cut]
        assert outcome.committed_size == (complete[-1] if complete else 0)
        assert outcome.frames == len(complete)
        if cut in (0, *complete):
            assert outcome.state == "complete"
        else:
            assert (outcome.tail_offset, outcome.tail_kind) == (
                outcome.committed_size,
                "torn-frame",
            )
        recovered = _lines(decoded.raw)
        assert recovered == original[: len(recovered)], cut
        whole = sum(len(_lines(batch)) for batch in [HEADER, *small_batches()][: len(complete)])
        assert len(recovered) >= whole


def test_a_torn_frame_cut_in_its_checksum_recovers_all_its_lines() -> None:
    log, spans = build_log()
    decoded = decode_log(log[: spans[-1][1] - 2])
    assert decoded.raw == PLAIN
    assert decoded.outcome.recovered_lines == 1
    assert decoded.outcome.state == "torn"


def test_a_torn_multi_block_frame_recovers_its_complete_lines_without_the_checksum() -> None:
    batch = b"".join(
        event_line(seq, "assistant/chunk", delta=hashlib.sha256(b"%d" % seq).hexdigest())
        for seq in range(9000)
    )
    log, spans = build_log([batch])
    start, end = spans[1]
    assert end - start > 300_000  # several 128 KiB blocks
    for cut in (start + 40_000, start + (end - start) // 2, end - 5):
        decoded = decode_log(log[:cut])
        recovered = _lines(decoded.raw)[1:]
        assert recovered == _lines(batch)[: len(recovered)]
        assert decoded.outcome.recovered_lines == len(recovered)
    assert decode_log(log[: end - 5]).outcome.recovered_lines < 9000  # the last block is cut
    assert decode_log(log[: end - 4]).outcome.recovered_lines == 9000  # only the checksum


# -- zero fill, garbage, skippable frames -------------------------------------------------


def test_zero_fill_after_the_last_frame_is_a_crash_tail_recorded_by_length() -> None:
    log, _ = build_log()
    decoded = decode_log(log + bytes(8192))
    assert decoded.raw == PLAIN
    outcome = decoded.outcome
    assert (outcome.state, outcome.tail_kind, outcome.tail_offset) == (
        "torn",
        "zero-fill",
        len(log),
    )
    assert outcome.file_size - len(log) == 8192


@pytest.mark.parametrize("garbage", [b"\xff", b"garbage!", b"\x00\x00\x00\x07", b"\n" * 10])
def test_garbage_after_the_last_frame_is_corruption_at_its_offset(garbage: bytes) -> None:
    log, spans = build_log()
    reader = ZstdLogReader(log + garbage)
    with pytest.raises(CorruptFrameError) as raised:
        list(reader.frames())
    assert raised.value.offset == len(log) and raised.value.frame == len(spans)
    decoded = decode_log(log + garbage)
    assert decoded.raw == PLAIN and decoded.outcome.state == "corrupt"


def test_skippable_frames_are_skipped_and_listed() -> None:
    log, spans = build_log()
    skippable = b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc"
    at = spans[2][0]
    decoded = decode_log(log[:at] + skippable + log[at:])
    assert decoded.raw == PLAIN
    assert decoded.outcome.skipped == ((at, at + len(skippable)),)
    assert decoded.outcome.state == "complete"


# -- whole lines --------------------------------------------------------------------------


def test_a_frame_ending_inside_a_line_is_refused() -> None:
    import zstandard

    compressor = zstandard.ZstdCompressor(write_checksum=True)
    good, spans = build_log()
    log = good + compressor.compress(b'{"type":"x"}')
    with pytest.raises(CorruptFrameError) as raised:
        list(ZstdLogReader(log).frames())
    assert (raised.value.rule, raised.value.offset) == ("zstd-frame-lines", len(good))
    two_headers = compressor.compress(HEADER + HEADER) + good[spans[0][1] :]
    with pytest.raises(CorruptFrameError) as header_error:
        list(ZstdLogReader(two_headers).frames())
    assert (header_error.value.rule, header_error.value.offset) == ("zstd-header-frame", 0)


def test_an_empty_batch_frame_holds_no_lines_and_is_accepted() -> None:
    import zstandard

    log, _ = build_log()
    empty = zstandard.ZstdCompressor(write_checksum=True).compress(b"")
    assert decode_log(log + empty).outcome.state == "complete"


# -- the reference encoder ----------------------------------------------------------------


def _expected_sha256() -> dict[str, str]:
    loaded: dict[str, str] = json.loads((DATA / "plaintext.sha256.json").read_text())
    return loaded


@pytest.mark.parametrize("name", ["node-sync.jsonl.zstd", "node-stream.jsonl.zstd"])
def test_logs_written_by_nodes_zstd_decode_exactly(name: str) -> None:
    decoded = decode_log(DATA / name)
    assert decoded.outcome.state == "complete"
    assert hashlib.sha256(decoded.raw).hexdigest() == _expected_sha256()[name]


def _zstd_node() -> tuple[str | None, str]:
    """A node whose node:zlib has zstd (Node >= 22.15), or None and why there is none.

    ``$DSH_STORE_NODE`` when set; else the Node 22 the interop installer puts in its cache
    (``tests/interop/upstream.py``, installed now through npm if it is not there yet);
    else a ``node`` on PATH.
    """
    from tests.interop.upstream import UpstreamUnavailable, install

    reason = "DSH_STORE_NODE is unset"
    candidates = [os.environ.get("DSH_STORE_NODE")]
    if candidates[0] is None:
        try:
            candidates.append(str(install().node))
        except UpstreamUnavailable as error:
            reason = f"the interop installer has no Node 22: {error.reason}"
        candidates.append(shutil.which("node"))
    for node in filter(None, candidates):
        probe = subprocess.run(
            [
                node,
                "-e",
                "process.exit(typeof require('node:zlib').zstdCompressSync === 'function' ? 0 : 3)",
            ],
            capture_output=True,
            check=False,
            timeout=60,
        )
        if probe.returncode == 0:
            return node, ""
        reason = f"{node} has no zstd in node:zlib (needs Node >= 22.15)"
    return None, reason


@pytest.mark.requires("upstream")
def test_logs_node_writes_now_decode_and_ours_decode_in_node(tmp_path: Path) -> None:
    node, reason = _zstd_node()
    if node is None:
        pytest.skip(f"needs a node with zstd in node:zlib: {reason}")
    subprocess.run([node, str(DATA / "make_node_logs.js"), str(tmp_path)], check=True, timeout=120)
    expected = json.loads((tmp_path / "plaintext.sha256.json").read_text())
    for name, digest in expected.items():
        assert hashlib.sha256(decode_log(tmp_path / name).raw).hexdigest() == digest
    ours = tmp_path / "ours.jsonl.zstd"
    ours.write_bytes(encode_log(HEADER, small_batches()))
    # Node's one-shot decoder stops after the first frame (as DSH's reader knows), so each
    # frame is decoded on its own, as DSH's reader does.
    ranges = json.dumps([[span.offset, span.end] for span in FrameScanner(ours).scan()])
    script = (
        "const z=require('node:zlib');const b=require('fs').readFileSync(process.argv[1]);"
        "for (const [s,e] of JSON.parse(process.argv[2]))"
        " process.stdout.write(z.zstdDecompressSync(b.subarray(s,e)))"
    )
    done = subprocess.run(
        [node, "-e", script, str(ours), ranges], capture_output=True, check=True, timeout=60
    )
    assert done.stdout == PLAIN


def test_the_zstd_cli_reads_our_logs_and_checks_each_frame(tmp_path: Path) -> None:
    cli = shutil.which("zstd")
    if cli is None:
        pytest.skip("needs the zstd command (Debian package zstd)")
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(encode_log(HEADER, small_batches()))
    done = subprocess.run([cli, "-dc", str(path)], capture_output=True, check=True, timeout=60)
    assert done.stdout == PLAIN
    listing = subprocess.run([cli, "-lv", str(path)], capture_output=True, text=True, check=True)
    assert "Frames: 5" in listing.stdout and "XXH64" in listing.stdout


# -- round trips --------------------------------------------------------------------------

_line = st.binary(max_size=300).map(lambda data: data.replace(b"\n", b" "))
_batch = st.lists(_line, min_size=1, max_size=8).map(
    lambda lines: b"".join(x + b"\n" for x in lines)
)


@given(st.lists(_batch, max_size=12), st.integers(min_value=-1, max_value=5))
def test_random_batches_round_trip_through_frames(batches: list[bytes], level: int) -> None:
    log = encode_log(HEADER, batches, level=level)
    decoded = decode_log(log)
    assert decoded.raw == HEADER + b"".join(batches)
    assert decoded.outcome.state == "complete"
    assert decoded.outcome.frames == 1 + len(batches)
    frames = list(ZstdLogReader(log).frames())
    assert [b"".join(x + b"\n" for x in frame.lines) for frame in frames[1:]] == batches


@given(st.lists(_batch, min_size=1, max_size=6), st.data())
def test_random_prefixes_recover_a_prefix_of_the_lines(
    batches: list[bytes], data: st.DataObject
) -> None:
    log = encode_log(HEADER, batches)
    cut = data.draw(st.integers(min_value=0, max_value=len(log)))
    decoded = decode_log(log[:cut])
    assert decoded.outcome.state in ("complete", "torn")
    plain = HEADER + b"".join(batches)
    assert plain.startswith(decoded.raw)


def test_decode_into_streams_to_a_file(tmp_path: Path) -> None:
    log, _ = build_log()
    out = tmp_path / "session.jsonl"
    with out.open("wb") as sink:
        outcome = decode_into(log + bytes(10), sink)
    assert out.read_bytes() == PLAIN and outcome.tail_kind == "zero-fill"


# -- the binding is optional --------------------------------------------------------------


def test_errors_pickle_with_their_facts() -> None:
    for error in (
        CorruptFrameError(
            "/s/session.jsonl.zstd", "checksum", offset=83, frame=2, rule="zstd-checksum"
        ),
        ZstdUnavailableError("/s/session.jsonl.zstd"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert copy.__dict__ == error.__dict__
    assert "pip install 'dsh-store[zstd]'" in str(ZstdUnavailableError())


def test_import_dsh_store_does_not_import_the_binding_and_a_missing_one_is_named() -> None:
    probe = (
        "import sys\n"
        "import dsh_store, dsh_store.jsonl.zstd_codec, dsh_store.jsonl.zstd_frames\n"
        "assert 'zstandard' not in sys.modules, 'imported the binding'\n"
        "sys.modules['zstandard'] = None  # as if it were not installed\n"
        "from dsh_store.errors import ZstdUnavailableError\n"
        "from dsh_store.jsonl.zstd_codec import decode_log\n"
        "try:\n"
        "    decode_log(b'')\n"
        "except ZstdUnavailableError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=60,
    )
    assert "pip install 'dsh-store[zstd]'" in done.stdout


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl.zstd"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(NotASessionError, match="not a regular file"):
            decode_log(path)


def test_a_torn_write_followed_by_zero_fill_reads_as_a_torn_frame() -> None:
    # A power cut after the size of an append reached the disk but only its first page did:
    # the frame's start, then zeros. Zero block headers never end a frame, so it is torn.
    batch = b"".join(
        event_line(seq, "assistant/chunk", delta=hashlib.sha256(b"%d" % seq).hexdigest())
        for seq in range(3000)
    )
    log, spans = build_log([event_line(0), batch])
    start, end = spans[2]
    damaged = log[: start + 4096] + bytes(end - start - 4096)
    decoded = decode_log(damaged)
    assert (decoded.outcome.state, decoded.outcome.tail_offset) == ("torn", start)
    assert (
        _lines(decoded.raw)
        == _lines(HEADER + event_line(0))[:2] + _lines(batch)[: decoded.outcome.recovered_lines]
    )


def test_frames_without_a_checksum_are_decoded_and_counted() -> None:
    import zstandard

    log, _ = build_log()
    plain = zstandard.ZstdCompressor(write_checksum=False).compress(b"1\n")
    outcome = decode_log(log + plain).outcome
    assert (outcome.state, outcome.unchecked, outcome.frames) == ("complete", 1, 6)


def test_an_empty_file_decodes_to_nothing_and_garbage_at_byte_zero_is_corrupt() -> None:
    empty = decode_log(b"")
    assert (empty.raw, empty.outcome.state, empty.outcome.frames) == (b"", "complete", 0)
    garbage = decode_log(b'{"type":"session"}\n').outcome
    assert garbage.state == "corrupt" and garbage.defect is not None
    assert (garbage.defect.offset, garbage.defect.rule, garbage.defect_frame) == (
        0,
        "zstd-bad-magic",
        0,
    )
