"""Keep the peer rows of ``scripts/bench_migrate.py`` runnable: each timed child runs.

Only checks that the children still run against the public API and report a positive
time and peak RSS, and (with the upstream installed) that a tiny DSH-written log is one
DSH's own ``load`` and our ``read_log`` both read; no time is asserted.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO
from tests.migrations import bigv0


@pytest.fixture(scope="module")
def bench_migrate() -> ModuleType:
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("bench_migrate")


@pytest.mark.parametrize("op", ["read_log", "verify", "migrate_file"])
def test_each_timed_child_runs(bench_migrate: ModuleType, op: str, tmp_path: Path) -> None:
    source = bigv0.write(tmp_path / "session.jsonl", 20_000, chunks=100, packed=True)
    seconds, peak = bench_migrate.timed_child(op, source, tmp_path / "out.v4.jsonl")
    assert seconds > 0 and peak > 0


@pytest.mark.requires("upstream")
def test_a_tiny_peer_log_is_written_and_loaded(
    bench_migrate: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench_peer

    from dsh_store.restore import read_log

    monkeypatch.setenv("DSH_STORE_BENCH_CACHE", str(tmp_path / "cache"))
    try:
        upstream, log = bench_peer.peer_log(2)
    except bench_peer.UpstreamUnavailable as error:
        pytest.skip(f"upstream DSH packages unavailable: {error.reason}")
    seconds, events, peak = bench_peer.dsh_load(upstream, log, 1)
    assert seconds[0] > 0 and events > 0 and peak > 0
    assert b'"text-chunks"' in log.path.read_bytes()  # packed rows, as DSH writes them
    assert read_log(log.path).source_version == 0
