"""A repair records a zero-filled tail by its length: the sidecar is a hole, not a copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.jsonl.repair import commit_truncation, sidecar_path

from .scan_logs import sparse_tail, store_log, v4_log

GIB = 1 << 30


@pytest.mark.slow
def test_repair_records_a_zero_tail_as_a_hole_not_as_bytes(tmp_path: Path) -> None:
    path = store_log(tmp_path)
    size = sparse_tail(path, 4 * GIB)
    assert commit_truncation(path, size, expected_size=size + 4 * GIB) == sidecar_path(path, size)
    sidecar = sidecar_path(path, size)
    assert sidecar.stat().st_size == 4 * GIB  # it holds exactly the bytes cut...
    assert sidecar.stat().st_blocks * 512 < 1 << 20  # ...as a hole, no disk space
    assert path.stat().st_size == size
    with open(sidecar, "rb") as handle:
        handle.seek(4 * GIB - 4096)
        assert handle.read() == bytes(4096)


def test_a_sidecar_of_mixed_bytes_keeps_them_exactly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = v4_log()
    tail = b"\x00" * (3 << 20) + b"data" + b"\x00" * 5000 + b"end"
    path.write_bytes(good + tail)
    commit_truncation(path, len(good))
    assert sidecar_path(path, len(good)).read_bytes() == tail
    assert path.read_bytes() == good
