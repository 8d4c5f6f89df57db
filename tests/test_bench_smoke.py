"""Keep ``scripts/bench_store.py`` importable and runnable: one tiny measurement each.

These only check that the measurement functions still run against the public API and
return a positive rate; no time is asserted.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dsh_store.restore import read_log
from dsh_store.store import JsonlStore
from tests.conftest import REPO


@pytest.fixture(scope="module")
def bench_store() -> ModuleType:
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("bench_store")


def _one_turn() -> list[dict[str, Any]]:
    """A minimal complete v4 turn in the envelope shape of the limits.py event mix."""
    message = {
        "role": "user",
        "id": "msg-1",
        "content": [{"type": "text", "text": "hello"}],
        "source": {"kind": "user"},
    }
    return [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
        {"type": "user/message", "seq": 2, "time": 3, "data": message, "surfaceOp": "append"},
        {"type": "step/end", "seq": 3, "time": 4, "data": {"turn": 1, "step": 1}},
        {
            "type": "turn/end",
            "seq": 4,
            "time": 5,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]


def test_store_saturation_returns_a_positive_rate(bench_store: ModuleType, tmp_path: Path) -> None:
    rate = bench_store.store_saturation(_one_turn(), tmp_path)
    assert rate > 0
    (log,) = tmp_path.glob("_no-cwd/*/session.v4.jsonl")
    assert len(read_log(log).events) == 5


def test_flush_each_and_restore_return_positive_numbers(
    bench_store: ModuleType, tmp_path: Path
) -> None:
    assert bench_store.store_flush_each(_one_turn(), tmp_path, seconds=60.0) > 0
    (log,) = tmp_path.glob("_no-cwd/*/session.v4.jsonl")
    assert bench_store.store_restore(log) > 0


def test_baseline_fsync_each_returns_a_positive_rate(
    bench_store: ModuleType, tmp_path: Path
) -> None:
    assert bench_store.baseline_fsync_each(_one_turn(), tmp_path / "b.log", 0.01) > 0
    assert JsonlStore(tmp_path).list() == []  # the baseline leaves no session behind


def test_time_bounded_saturation_refuses_a_mix_too_short_for_its_duration(
    bench_store: ModuleType, tmp_path: Path
) -> None:
    # A run that exhausts its mix would time less than the baselines it is compared with.
    with pytest.raises(RuntimeError, match="ran out"):
        bench_store.store_saturation(_one_turn(), tmp_path, seconds=60.0)


def test_linger_baseline_returns_a_positive_rate(bench_store: ModuleType, tmp_path: Path) -> None:
    limits = bench_store.load_limits()
    rate = bench_store.baseline_linger(limits, _one_turn(), tmp_path / "l.log", 0.01, 0.001)
    assert rate > 0
    assert not (tmp_path / "l.log").exists()
