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

from dsh_store.errors import EventValidationError, LosslessJsonError
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


@pytest.mark.requires("shared")  # bench/limits.py
def test_linger_baseline_returns_a_positive_rate(bench_store: ModuleType, tmp_path: Path) -> None:
    limits = bench_store.load_limits()
    rate = bench_store.baseline_linger(limits, _one_turn(), tmp_path / "l.log", 0.01, 0.001)
    assert rate > 0
    assert not (tmp_path / "l.log").exists()


@pytest.mark.requires("shared")  # bench/limits.py
def test_validated_baselines_run_the_model_and_leave_no_file(
    bench_store: ModuleType, tmp_path: Path
) -> None:
    mix = bench_store.load_limits().make_mix(5)
    assert len(mix) > 64  # the producer looks at the clock every 64 events
    group = tmp_path / "g.log"
    assert bench_store.baseline_group_commit_validated(mix, group, 0.0) > 0
    each = tmp_path / "e.log"
    assert bench_store.baseline_fsync_each_validated(_one_turn(), each, 60.0) > 0
    assert not group.exists() and not each.exists()
    # They validate like Session.append: an event breaking a model rule is refused.
    broken = [{**_one_turn()[0], "data": {"turn": "one"}}]
    with pytest.raises(EventValidationError):
        bench_store.baseline_fsync_each_validated(broken, tmp_path / "x.log", 60.0)
    with pytest.raises(EventValidationError):
        bench_store.baseline_group_commit_validated(broken, tmp_path / "y.log", 60.0)
    with pytest.raises(RuntimeError, match="ran out"):
        bench_store.baseline_group_commit_validated(_one_turn(), tmp_path / "z.log", 60.0)
    assert sorted(tmp_path.iterdir()) == []  # every baseline removed its file


def test_checked_load_baseline_runs_the_lossless_check(
    bench_store: ModuleType, tmp_path: Path
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_bytes(b'{"a": 1.5}\n{"b": [1, 2]}\n')
    assert bench_store.baseline_load_lines_checked(good) > 0
    negative_zero = tmp_path / "bad.jsonl"
    negative_zero.write_bytes(b'{"a": 1.5}\n{"b": -0.0}\n')
    with pytest.raises(LosslessJsonError):
        bench_store.baseline_load_lines_checked(negative_zero)
