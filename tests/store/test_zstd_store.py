"""A zstd-encoded store: frames per durable batch, one encoding per root, loss-free repair
of a torn frame (also under SIGKILL at every step), faults on a frame write."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_store.errors import CorruptLogError, NotASessionError, StoreEncodingError
from dsh_store.jsonl.backend import JsonlBackend
from dsh_store.jsonl.repair import intent_path, sidecar_path
from dsh_store.jsonl.scan import LogScanner
from dsh_store.jsonl.zstd_codec import decode_log
from dsh_store.jsonl.zstd_frames import FrameScanner
from dsh_store.repair import commit_repair, repair_request
from dsh_store.restore import read_log
from dsh_store.store import JsonlStore
from tests.store.test_faults import Faults

pytest.importorskip("zstandard", reason="the zstd extra (zstandard) is not installed")

REPO = Path(__file__).resolve().parents[2]
CLOCK_MS = 1_700_000_000_000


def _record(root: Path, encoding: str) -> Path:
    """Three durable batches: a completed turn and an open one."""
    store = JsonlStore(root, encoding=encoding, window_s=0, clock=lambda: CLOCK_MS)
    with store.new("s", cwd="/w") as live:
        live.append("turn/start", {"turn": 1})
        live.append("step/start", {"turn": 1, "step": 1})
        live.flush()
        live.append("step/end", {"turn": 1, "step": 1})
        live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        live.flush()
        live.append("turn/start", {"turn": 2})
        live.append("step/start", {"turn": 2, "step": 1})
        live.flush()
        return live.path


def _frames(path: Path) -> list[tuple[int, int]]:
    return _frames_of(path.read_bytes())


def _frames_of(data: bytes) -> list[tuple[int, int]]:
    spans = list(FrameScanner(data).frames())
    assert all(span.checksum for span in spans)
    return [(span.offset, span.end) for span in spans]


def test_a_zstd_store_writes_a_header_frame_and_one_frame_per_batch(tmp_path: Path) -> None:
    zlog = _record(tmp_path / "z", "zstd")
    raw = _record(tmp_path / "r", "raw")
    assert zlog.name == "session.v4.jsonl.zstd" and raw.name == "session.v4.jsonl"
    # The header frame, then one frame per durable batch (at least one per flush).
    assert 4 <= len(_frames(zlog)) <= 7
    decoded = decode_log(zlog)
    assert decoded.outcome.state == "complete" and decoded.raw == raw.read_bytes()
    assert [e.line for e in read_log(zlog).events] == [e.line for e in read_log(raw).events]
    assert zlog.with_name(zlog.name + ".durable").exists()


def test_a_root_belongs_to_one_encoding(tmp_path: Path) -> None:
    zlog = _record(tmp_path, "zstd")
    assert JsonlStore(tmp_path).encoding == "zstd"
    with JsonlStore(tmp_path).open("s") as live:  # detected: closes turn 2, appends frames
        live.append("turn/start", {"turn": 3})
    assert read_log(zlog).events[-1].type == "turn/start"
    # The reopened writer's watermark names the log by its decoded header line.
    assert LogScanner(zlog).exhaust().durable_size == zlog.stat().st_size
    before = zlog.read_bytes()
    with pytest.raises(StoreEncodingError) as caught:
        JsonlStore(tmp_path, encoding="raw").open("s")
    assert "encoding='zstd'" in str(caught.value) and str(zlog) in str(caught.value)
    assert zlog.read_bytes() == before
    assert JsonlStore(tmp_path / "fresh").encoding == "raw"


def _torn(tmp_path: Path) -> tuple[Path, bytes, int]:
    """A zstd log whose last frame lost its checksum trailer: (log, bytes, frame start).

    The watermark goes too: it records the last frame as fsynced, so cutting that frame
    would be lost acknowledged data, not a crash tail.
    """
    log = _record(tmp_path, "zstd")
    log.with_name(log.name + ".durable").unlink()
    start = _frames(log)[-1][0]
    data = log.read_bytes()[:-3]
    log.write_bytes(data)
    return log, data, start


def _expected(tmp_path: Path) -> bytes:
    """What an uninterrupted repair of the torn log makes of it."""
    log, _, _ = _torn(tmp_path / "expected")
    commit_repair(read_log(log))
    return log.read_bytes()


def test_repair_of_a_torn_frame_keeps_its_records_in_one_new_frame(tmp_path: Path) -> None:
    log, data, start = _torn(tmp_path)
    torn = read_log(log)
    assert torn.torn is not None and torn.torn.offset == start
    assert [e.type for e in torn.events[-2:]] == ["turn/start", "step/start"]
    repaired = commit_repair(torn)
    assert repaired.classification == "ok"
    assert [e.line for e in repaired.events] == [e.line for e in torn.balanced]
    assert sidecar_path(log, start).read_bytes() == data[start:]
    assert log.read_bytes()[:start] == data[:start]
    # The torn frame became one frame: its records and the closers.
    assert len(_frames(log)) == len(_frames_of(data[:start])) + 1
    assert not intent_path(log, start).exists()
    assert commit_repair(read_log(log)).classification == "ok"  # a rerun writes nothing
    assert log.read_bytes() == _expected(tmp_path)


def test_the_jsonl_backend_owns_the_frame_repair(tmp_path: Path) -> None:
    """The repair of a torn frame runs behind ``JsonlBackend.commit_repair``: a dry run
    writes nothing, the real one writes the log an uninterrupted repair writes and says
    the log must be read back (its closers are not appended as plain lines)."""
    log, data, start = _torn(tmp_path)
    backend = JsonlBackend(log.parent)
    request = repair_request(read_log(log))
    preview = backend.commit_repair(log, request, dry_run=True)
    assert (preview.applied, preview.cut_at, preview.read_back) == (False, start, True)
    assert log.read_bytes() == data and not sidecar_path(log, start).exists()
    outcome = backend.commit_repair(log, request)
    assert outcome.applied and outcome.read_back
    assert log.read_bytes() == _expected(tmp_path)
    assert sidecar_path(log, start).read_bytes() == data[start:]


def test_repair_and_store_leave_framing_to_the_backend() -> None:
    """No zstd branch above the seam: repair.py and store.py never test for the encoding."""
    import dsh_store.repair
    import dsh_store.store

    for module in (dsh_store.repair, dsh_store.store):
        assert "is_zstd_log" not in Path(str(module.__file__)).read_text(), module.__name__


def test_opening_a_torn_zstd_log_resumes_from_the_repaired_frames(tmp_path: Path) -> None:
    log, _, _ = _torn(tmp_path)
    with JsonlStore(tmp_path).open("s") as live:
        live.append("turn/start", {"turn": 3})
    repaired = _expected(tmp_path)
    assert log.read_bytes().startswith(repaired)
    assert read_log(log).events[-1].type == "turn/start"


CHILD = """
import sys
from dsh_store.repair import commit_repair
from dsh_store.restore import read_log
commit_repair(read_log(sys.argv[1]))
"""

KILL_POINTS = [
    ("repair.after-intent", 0),
    ("repair.after-sidecar", 0),
    ("repair.after-truncate", 0),
    ("append.before-write", 0),
    ("append.partial-write", 0),
    ("append.after-write", 0),
    ("append.before-fsync", 0),
    ("append.after-fsync", 0),
]


@pytest.mark.parametrize(("failpoint", "skip"), KILL_POINTS)
def test_a_repair_killed_at_any_step_converges_without_loss(
    tmp_path: Path, failpoint: str, skip: int
) -> None:
    log, data, start = _torn(tmp_path / "killed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_STORE_FAILPOINT")}
    env |= {"DSH_STORE_FAILPOINT": failpoint, "DSH_STORE_FAILPOINT_SKIP": str(skip)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(log)], cwd=REPO, env=env)
    assert child.returncode == -9, "the failpoint was not reached"
    # Nothing lost at the kill: the torn bytes are in the log or in a complete sidecar.
    now = log.read_bytes()
    assert now[:start] == data[:start]
    if now[start:] != data[start:]:
        assert sidecar_path(log, start).read_bytes() == data[start:]
    commit_repair(read_log(log))
    assert log.read_bytes() == _expected(tmp_path)
    assert read_log(log).classification == "ok"
    assert not intent_path(log, start).exists()
    kept = [p.read_bytes() for p in log.parent.iterdir() if ".torn-" in p.name]
    assert data[start:] in kept


def test_every_prefix_of_a_zstd_log_restores_to_its_frames_and_closers(tmp_path: Path) -> None:
    log = _record(tmp_path / "z", "zstd")
    data = log.read_bytes()
    full = read_log(log)
    header_end = _frames(log)[0][1]
    copy = tmp_path / "c" / "s" / "session.v4.jsonl.zstd"
    copy.parent.mkdir(parents=True)
    for cut in range(header_end, len(data)):
        for stale in copy.parent.iterdir():
            stale.unlink()
        copy.write_bytes(data[:cut])
        torn = read_log(copy)
        repaired = commit_repair(torn)
        assert repaired.classification == "ok", cut
        kept = [e.line for e in repaired.events[: len(torn.events)]]
        assert kept == [e.line for e in full.events[: len(torn.events)]], cut
        assert repaired.events[len(torn.events) :] == torn.closers, cut


def test_a_flipped_bit_in_each_frame_is_refused_and_the_file_untouched(tmp_path: Path) -> None:
    log = _record(tmp_path, "zstd")
    data = log.read_bytes()
    for start, end in _frames(log):
        damaged = bytearray(data)
        damaged[end - 5] ^= 0x01  # the checksum trailer
        log.write_bytes(damaged)
        with pytest.raises(CorruptLogError) as caught:
            JsonlStore(tmp_path).open("s")
        assert getattr(caught.value, "offset", None) == start, caught.value
        assert hashlib.sha256(log.read_bytes()).digest() == hashlib.sha256(damaged).digest()


@pytest.mark.parametrize(
    ("call", "code", "times"),
    [("write", errno.ENOSPC, None), ("write", errno.EIO, None), ("fsync", errno.EIO, 1)],
)
def test_a_failed_frame_write_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int, times: int | None
) -> None:
    log = _record(tmp_path, "zstd")
    before = log.read_bytes()
    faults = Faults(monkeypatch)
    store = JsonlStore(tmp_path, window_s=60)  # the batch is written by the flush
    live = store.open("s")
    faults.arm(call, code, times=times, inode=log.stat().st_ino)
    live.append("turn/start", {"turn": 3})
    with pytest.raises(OSError) as caught:
        live.flush()
    assert caught.value.errno == code
    faults.disarm(call)
    assert decode_log(log).outcome.state == "complete"
    assert log.read_bytes().startswith(before)
    live.flush()  # the batch stayed queued: the retry writes it as one frame
    live.close()
    assert read_log(log).events[-1].type == "turn/start"


def test_a_cut_header_frame_is_no_session_even_with_its_line_whole(tmp_path: Path) -> None:
    """Frame 0 is published whole: cut anywhere, also only in its checksum trailer (its
    line decodes whole), the log has no verified header, as DSH's reader says."""
    log = _record(tmp_path / "z", "zstd")
    header_end = _frames(log)[0][1]
    copy = tmp_path / "c" / "session.v4.jsonl.zstd"
    copy.parent.mkdir()
    for cut in range(1, header_end):
        copy.write_bytes(log.read_bytes()[:cut])
        with pytest.raises(NotASessionError):
            read_log(copy)
    copy.write_bytes(log.read_bytes()[:header_end])
    assert read_log(copy).events == ()
