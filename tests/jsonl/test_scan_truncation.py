"""Every byte prefix of a multi-turn v4 log scans to its complete lines and repairs loss-free."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_store.errors import NotASessionError
from dsh_store.jsonl.repair import commit_truncation, sidecar_path
from dsh_store.jsonl.scan import LogScanner

from .scan_logs import line_ends, v4_events, v4_log

LOG = v4_log()
ENDS = line_ends(LOG)
HEADER_SIZE = ENDS[0]


def complete_prefix(size: int) -> int:
    """Bytes of the complete lines inside the first ``size`` bytes of LOG."""
    return max((end for end in ENDS if end <= size), default=0)


def test_the_log_has_the_shapes_the_sweep_needs() -> None:
    types = [e["type"] for e in v4_events()]
    assert "tool/call" in types and "tool/result" in types
    assert types.count("turn/start") == types.count("turn/end") + 1  # the last turn is open
    assert any(isinstance(e.get("surfaceOp"), dict) for e in v4_events())
    assert len(LOG) > 1500


def test_every_prefix_scans_to_its_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    events = v4_events()
    for size in range(len(LOG) + 1):
        path.write_bytes(LOG[:size])
        scanner = LogScanner(path, chunk_size=61)
        if 0 < size < HEADER_SIZE:
            with pytest.raises(NotASessionError):
                list(scanner.rows())
            continue
        rows = list(scanner.rows())
        committed = complete_prefix(size)
        count = max(0, LOG.count(b"\n", 0, committed) - 1)
        assert [r.value for r in rows] == events[:count], size
        assert scanner.committed_size == committed, size
        assert scanner.event_count == count
        if committed == size:
            assert scanner.torn is None, size
        else:
            torn = scanner.torn
            assert torn is not None, size
            assert (torn.offset, torn.length, torn.rule, torn.seq) == (
                committed,
                size - committed,
                "torn-line",
                count,
            )
            assert torn.line == count + 2


def test_every_prefix_repairs_to_its_complete_lines_loss_free(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    for size in range(HEADER_SIZE, len(LOG) + 1):
        prefix = LOG[:size]
        path.write_bytes(prefix)
        scanner = LogScanner(path).exhaust()
        committed = complete_prefix(size)
        sidecar = commit_truncation(path, scanner.committed_size, expected_size=scanner.file_size)
        assert path.read_bytes() == LOG[:committed], size
        if committed == size:
            assert sidecar is None
            continue
        assert sidecar == sidecar_path(path, committed)
        assert path.read_bytes() + sidecar.read_bytes() == prefix, size
        assert sidecar.stat().st_mode & 0o777 == 0o600
        # A second scan finds nothing to repair and a second commit changes nothing.
        again = LogScanner(path).exhaust()
        assert again.torn is None and again.committed_size == committed
        stamp = (path.stat().st_mtime_ns, sidecar.stat().st_mtime_ns)
        assert commit_truncation(path, committed) is None
        assert path.read_bytes() == LOG[:committed]
        assert (path.stat().st_mtime_ns, sidecar.stat().st_mtime_ns) == stamp
        assert sorted(os.listdir(tmp_path)) == sorted([path.name, sidecar.name])
        sidecar.unlink()
