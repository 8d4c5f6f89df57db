"""The contract suite's harness for the PostgreSQL backend: damage and faults done in SQL."""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

import pytest

from dsh_store.errors import DatabaseError
from dsh_store.postgres import backend as pg_backend
from dsh_store.postgres.backend import PostgresBackend
from dsh_store.store import SessionStore
from tests.contract.conftest import Harness
from tests.postgres.server import create_schema, drop_schema, postgres_missing_reason


def postgres_harness(monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> Harness:
    """A store in a new schema (dropped at exit); skips without a server."""
    import psycopg

    reason = postgres_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    schema, url = create_schema()
    atexit.register(drop_schema, schema)
    backend = PostgresBackend(url)
    store = SessionStore(backend, **options)

    def sql(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as connection:
            cursor = connection.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def tear(location: Path, fragment: bytes) -> None:
        session_id = backend.session_id_of(location)
        sql(
            "WITH s AS (UPDATE dsh_sessions SET next_seq = next_seq + 1,"
            " stored_bytes = stored_bytes + %s WHERE session_id = %s RETURNING next_seq - 1 AS seq)"
            " INSERT INTO dsh_events SELECT %s, seq, %s FROM s",
            (len(fragment), session_id, session_id, fragment),
        )

    def replace_row(location: Path, index: int, record: bytes) -> None:
        session_id = backend.session_id_of(location)
        sql(
            "WITH old AS (SELECT octet_length(record) AS size FROM dsh_events"
            " WHERE session_id = %s AND seq = %s),"
            " s AS (UPDATE dsh_sessions SET stored_bytes = stored_bytes - (SELECT size FROM old)"
            " + %s WHERE session_id = %s)"
            " UPDATE dsh_events SET record = %s WHERE session_id = %s AND seq = %s",
            (session_id, index, len(record) + 1, session_id, record + b"\n", session_id, index),
        )

    def fail_next_append(location: Path) -> None:
        original = pg_backend._write_records
        armed = [True]

        def failing(*args: Any) -> None:
            if armed[0]:
                armed[0] = False
                raise DatabaseError("appending", backend.display, "injected", sqlstate="58030")
            original(*args)

        monkeypatch.setattr(pg_backend, "_write_records", failing)

    def cut_tails(location: Path) -> list[bytes]:
        session_id = backend.session_id_of(location)
        rows = sql(
            "SELECT record FROM dsh_cut_records WHERE session_id = %s ORDER BY seq", (session_id,)
        )
        return [b"".join(bytes(row[0]) for row in rows)] if rows else []

    return Harness(store, tear, replace_row, fail_next_append, cut_tails)
