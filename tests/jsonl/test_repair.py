"""commit_truncation: sidecar first, then truncate; repeats converge; conflicts refuse."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_store.errors import ConcurrentModificationError
from dsh_store.jsonl.repair import commit_truncation, sidecar_path

from .scan_logs import v4_log

GOOD = v4_log()
TAIL = b'{"type":"step/end","seq":13,"ti'


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(GOOD + TAIL)
    return path


def state(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_tail_moves_to_a_private_sidecar_then_the_log_is_cut(log: Path) -> None:
    sidecar = commit_truncation(log, len(GOOD), expected_size=len(GOOD) + len(TAIL))
    assert sidecar == log.with_name(f"session.v4.jsonl.torn-{len(GOOD)}")
    assert sidecar == sidecar_path(str(log), len(GOOD))
    assert log.read_bytes() == GOOD
    assert sidecar.read_bytes() == TAIL
    assert sidecar.stat().st_mode & 0o777 == 0o600
    assert state(log.parent).keys() == {log.name, sidecar.name}


def test_repeat_is_a_no_op(log: Path) -> None:
    commit_truncation(log, len(GOOD))
    before = state(log.parent)
    stamp = log.stat().st_mtime_ns
    assert commit_truncation(log, len(GOOD), expected_size=len(GOOD) + len(TAIL)) is None
    assert state(log.parent) == before
    assert log.stat().st_mtime_ns == stamp


def test_a_large_tail_is_copied_in_blocks(log: Path) -> None:
    tail = os.urandom(2_500_000)
    log.write_bytes(GOOD + tail)
    sidecar = commit_truncation(log, len(GOOD))
    assert sidecar is not None and sidecar.read_bytes() == tail
    assert log.read_bytes() == GOOD


def test_size_changed_since_the_scan_refuses_untouched(log: Path) -> None:
    before = state(log.parent)
    with pytest.raises(ConcurrentModificationError) as caught:
        commit_truncation(log, len(GOOD), expected_size=len(GOOD) + 1)
    assert str(caught.value) == (
        f"{log}: log changed under this writer: it is {len(GOOD) + len(TAIL)} bytes long, the "
        f"scan saw {len(GOOD) + 1}; nothing was written — reopen the session to continue from "
        "what is on disk"
    )
    assert state(log.parent) == before


def test_log_shorter_than_the_offset_refuses(log: Path) -> None:
    before = state(log.parent)
    with pytest.raises(ConcurrentModificationError, match="shorter than the committed prefix"):
        commit_truncation(log, len(GOOD) + len(TAIL) + 5)
    assert state(log.parent) == before


def test_negative_offset_is_a_caller_bug(log: Path) -> None:
    with pytest.raises(ValueError, match="offset must be non-negative, got -1"):
        commit_truncation(log, -1)


def test_identical_sidecar_from_an_earlier_crash_is_reused(log: Path) -> None:
    existing = sidecar_path(log, len(GOOD))
    existing.write_bytes(TAIL)
    assert commit_truncation(log, len(GOOD)) == existing
    assert log.read_bytes() == GOOD and existing.read_bytes() == TAIL


@pytest.mark.parametrize("other", [b"", TAIL[:-1], TAIL[:-1] + b"X", TAIL + b"\n"])
def test_different_tail_at_the_same_offset_goes_to_the_next_sidecar(
    log: Path, other: bytes
) -> None:
    existing = sidecar_path(log, len(GOOD))
    existing.write_bytes(other)
    second = sidecar_path(log, len(GOOD), 2)
    assert second.name == f"{log.name}.torn-{len(GOOD)}.2"
    assert commit_truncation(log, len(GOOD)) == second
    assert state(log.parent) == {
        log.name: GOOD,
        existing.name: other,
        second.name: TAIL,
    }
    # A repeat after a crash finds its own copy again: nothing new is written.
    log.write_bytes(GOOD + TAIL)
    assert commit_truncation(log, len(GOOD)) == second
    assert sorted(state(log.parent)) == sorted([log.name, existing.name, second.name])


def test_stale_scratch_from_a_crash_is_replaced(log: Path) -> None:
    scratch = log.with_name(f"{log.name}.torn-{len(GOOD)}.partial")
    scratch.write_bytes(b"half-written junk from a killed run" * 10)
    sidecar = commit_truncation(log, len(GOOD))
    assert sidecar is not None and sidecar.read_bytes() == TAIL
    assert not scratch.exists()


def test_stale_scratch_beside_a_published_sidecar_is_removed(log: Path) -> None:
    scratch = log.with_name(f"{log.name}.torn-{len(GOOD)}.partial")
    scratch.write_bytes(TAIL)
    sidecar_path(log, len(GOOD)).write_bytes(TAIL)
    commit_truncation(log, len(GOOD))
    assert not scratch.exists() and log.read_bytes() == GOOD


def _fail_on(monkeypatch: pytest.MonkeyPatch, name: str, suffix: str, code: int) -> list[int]:
    """Make ``os.<name>`` fail once with ``code`` on a descriptor whose path ends in suffix."""
    real: Callable[..., object] = getattr(os, name)
    hits: list[int] = []

    def failing(fd: int, *args: object) -> object:
        if not hits and os.readlink(f"/proc/self/fd/{fd}").endswith(suffix):
            hits.append(fd)
            raise OSError(code, os.strerror(code))
        return real(fd, *args)

    monkeypatch.setattr(os, name, failing)
    return hits


def test_enospc_while_copying_leaves_the_log_alone_and_a_retry_converges(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = _fail_on(monkeypatch, "write", ".partial", errno.ENOSPC)
    with pytest.raises(OSError) as caught:
        commit_truncation(log, len(GOOD))
    assert caught.value.errno == errno.ENOSPC and hits
    assert log.read_bytes() == GOOD + TAIL
    assert not sidecar_path(log, len(GOOD)).exists()
    monkeypatch.undo()
    assert commit_truncation(log, len(GOOD)) == sidecar_path(log, len(GOOD))
    assert state(log.parent) == {log.name: GOOD, sidecar_path(log, len(GOOD)).name: TAIL}


def test_eio_on_the_log_fsync_surfaces_and_a_retry_fsyncs_again(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = _fail_on(monkeypatch, "fsync", log.name, errno.EIO)
    with pytest.raises(OSError) as caught:
        commit_truncation(log, len(GOOD))
    assert caught.value.errno == errno.EIO and hits
    monkeypatch.undo()
    synced: list[int] = []
    real_fsync = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting)
    assert commit_truncation(log, len(GOOD)) is None
    assert synced, "the repeat must fsync the already-cut log"
    assert state(log.parent) == {log.name: GOOD, sidecar_path(log, len(GOOD)).name: TAIL}
