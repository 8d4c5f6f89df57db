"""SIGKILL at each PostgreSQL failpoint of the write paths, in a real writer process: what
was acknowledged is stored, what was in flight is wholly absent, and the next writer or
repair converges (``pg.append.mid-batch`` is in test_store.py, ``pg.schema.before-commit``
in test_schema.py)."""

from __future__ import annotations

import signal

import pytest

from dsh_store.errors import SessionNotFoundError
from dsh_store.payloads import turn_start
from dsh_store.postgres.store import PostgresStore
from tests.postgres.test_store import _child, _line

pytestmark = pytest.mark.requires("postgres")


def test_a_kill_before_the_first_commit_leaves_no_session(pg_url: str) -> None:
    child = _child(pg_url, "s1", "batches", 10, DSH_STORE_FAILPOINT="pg.publish.before-commit")
    assert child.wait(timeout=60) == -signal.SIGKILL
    store = PostgresStore(pg_url)
    assert store.list() == []
    with pytest.raises(SessionNotFoundError):
        store.inspect("s1")
    with store.new("s1") as live:  # the id is free: nothing half-made holds it
        live.append("turn/start", turn_start(1))
    assert len(store.inspect("s1").events) == 1


@pytest.mark.parametrize("point", ["pg.append.before-transaction", "pg.append.before-commit"])
def test_a_kill_around_a_later_batch_keeps_exactly_the_acknowledged_events(
    pg_url: str, point: str
) -> None:
    child = _child(pg_url, "s1", "batches", 10, DSH_STORE_FAILPOINT=point)
    assert _line(child) == "ACKED 10"
    assert child.wait(timeout=60) == -signal.SIGKILL
    store = PostgresStore(pg_url)
    inspection = store.inspect("s1")
    assert [event.seq for event in inspection.events] == list(range(10))
    assert inspection.torn is None
    with store.open("s1") as live:  # the lock died with the writer; seqs continue
        live.append("turn/start", turn_start(2))
    assert len(store.inspect("s1").events) > 10


def test_a_kill_before_a_repair_commits_leaves_the_log_as_it_was(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    with store.new("s1") as live:
        live.append("turn/start", turn_start(1))  # left open: the next open repairs it
    before = store.inspect("s1")
    assert before.classification == "open-turn"
    child = _child(pg_url, "s1", "open", DSH_STORE_FAILPOINT="pg.repair.before-commit")
    assert child.wait(timeout=60) == -signal.SIGKILL
    after = store.inspect("s1")
    assert (after.revision, after.events) == (before.revision, before.events)
    repaired = store.load("s1")
    assert repaired.classification == "ok"
    assert [event.type for event in repaired.events] == ["turn/start", "turn/end"]
    child = _child(pg_url, "s1", "open")
    assert _line(child) == "OPENED"
    assert child.wait(timeout=60) == 0
