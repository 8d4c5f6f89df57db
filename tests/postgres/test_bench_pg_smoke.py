"""Keep ``scripts/bench_pg.py`` runnable: each measurement once, tiny, against the test
server (no time is asserted; the rates only have to be positive and the stores right)."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import orjson
import pytest

from dsh_store.postgres.store import PostgresStore
from tests.conftest import REPO
from tests.test_bench_smoke import _one_turn

pytestmark = pytest.mark.requires("postgres")


@pytest.fixture(scope="module")
def bench_pg() -> ModuleType:
    scripts = str(REPO / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("bench_pg")


def test_the_store_measurements_write_whole_sessions(bench_pg: ModuleType, pg_url: str) -> None:
    store = PostgresStore(pg_url, window_s=0)
    assert bench_pg.saturation(store, _one_turn(), 60.0) > 0
    assert bench_pg.flush_each(PostgresStore(pg_url), _one_turn(), 60.0) > 0
    sessions = [header.id for header in store.list()]
    assert len(sessions) == 2
    for session_id in sessions:
        assert len(store.inspect(session_id).events) == 5
        assert bench_pg.restore_seconds(store, session_id) > 0


@pytest.mark.parametrize("method", ["copy", "insert"])
def test_the_baselines_and_the_batch_write_return_positive_rates(
    bench_pg: ModuleType, pg_url: str, method: str
) -> None:
    events = _one_turn()
    records = [orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE) for event in events]
    assert bench_pg.naive_per_event(pg_url, events, 0.01) > 0
    assert bench_pg.naive_batched(pg_url, events, 0.01) > 0
    for size in (1, 40):
        assert bench_pg.batch_write(pg_url, records, size, method, 0.01) > 0
