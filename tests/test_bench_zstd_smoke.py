"""Keep ``scripts/bench_zstd.py`` importable and runnable on a tiny log; no time is asserted."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from dsh_store.jsonl.zstd_codec import decode_log
from tests.conftest import REPO
from tests.jsonl.zstd_helpers import HEADER, event_line


def test_checkpoint_batches_frame_and_decode(tmp_path: Path) -> None:
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    bench = importlib.import_module("bench_zstd")
    lines = [
        event_line(0),
        event_line(1, "request/header"),
        event_line(2, "assistant/message"),
        event_line(3, "tool/call"),
        event_line(4, "turn/end"),
        event_line(5),
    ]
    header, batches = bench.checkpoint_batches(HEADER + b"".join(lines))
    assert header == HEADER
    assert batches == [b"".join(lines[:2]), b"".join(lines[2:4]), lines[4], lines[5]]
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(b"".join(bench.encode_frames(header, batches, 3)))
    assert decode_log(path).raw == HEADER + b"".join(lines)
    assert bench.decode_seconds(path) > 0


@pytest.mark.requires("upstream")
def test_the_peer_rows_time_dsh_and_dsh_store_on_one_conversation() -> None:
    """The rows against DSH's own zstd backend are measured (not skipped) and are ratios."""
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    bench = importlib.import_module("bench_zstd")
    benchlib = importlib.import_module("benchlib")
    report = benchlib.Report("zstd")
    bench.peer_rows(report, True, 1)
    kinds = {row.name: row.kind for row in report.rows}
    if kinds.get(bench.PEER_APPEND[0]) == "skipped":
        pytest.skip(next(row.text for row in report.rows if row.kind == "skipped"))
    assert kinds[bench.PEER_APPEND[0]] == kinds[bench.PEER_LOAD[0]] == "ratio"
