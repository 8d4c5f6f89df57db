"""The versioned schema of a PostgreSQL store, and its upgrade path.

The tables live in the connection's current schema (the first of ``search_path``; a URL
picks another with ``?options=-csearch_path%3Dname``). ``dsh_schema_version`` holds one row
per applied step; :func:`ensure_schema` applies the missing steps of :data:`STEPS` in one
transaction under a transaction-level advisory lock, so concurrent ``init`` calls apply each
step once, and an interrupted upgrade leaves the previous version intact (DDL is
transactional in PostgreSQL). A schema newer than this code is refused, never touched.

Tables (docs/postgres.md):

- ``dsh_sessions``: one row per session: ``session_id``, ``project_key`` (DSH's key of the
  cwd, ``_no-cwd`` without one), ``header`` (the header record as stored, its line bytes),
  ``created_at`` (the header's ``createdAt``), ``next_seq`` (events stored), ``stored_bytes``
  (header plus event records: the size of the same log as JSONL) and ``revision`` (from
  the ``dsh_revision`` sequence, new on every change).
- ``dsh_events``: one row per event, keyed by ``(session_id, seq)``; ``record`` holds the
  event's canonical line bytes exactly, its terminating newline included, so an export is
  the header followed by the records, byte for byte what the JSONL backend writes.
- ``dsh_cut_records``: rows a repair cut off past the committed region (kept, never lost).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import SchemaVersionError
from ._driver import database_errors
from .url import redact

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SCHEMA_VERSION",
    "STEPS",
    "advisory_key",
    "ensure_schema",
    "stored_schema_version",
]

STEPS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            "CREATE SEQUENCE dsh_revision",
            """CREATE TABLE dsh_sessions (
                session_id text PRIMARY KEY,
                project_key text NOT NULL,
                header bytea NOT NULL,
                created_at bigint NOT NULL,
                next_seq bigint NOT NULL CHECK (next_seq >= 0),
                stored_bytes bigint NOT NULL CHECK (stored_bytes >= 0),
                revision bigint NOT NULL DEFAULT nextval('dsh_revision')
            )""",
            "CREATE INDEX dsh_sessions_by_project ON dsh_sessions (project_key, session_id)",
            """CREATE TABLE dsh_events (
                session_id text NOT NULL REFERENCES dsh_sessions (session_id) ON DELETE CASCADE,
                seq bigint NOT NULL CHECK (seq >= 0),
                record bytea NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
            """CREATE TABLE dsh_cut_records (
                session_id text NOT NULL,
                seq bigint NOT NULL,
                record bytea NOT NULL,
                cut_at timestamptz NOT NULL DEFAULT now()
            )""",
        ),
    ),
)
"""Every schema version's DDL, in order: ``(version, statements)``. Append, never edit."""

SCHEMA_VERSION = STEPS[-1][0]
"""The schema version this code reads and writes."""

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS dsh_schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


def advisory_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (stable across processes and hosts)."""
    digest = hashlib.blake2b("\0".join(("dsh-store", *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def stored_schema_version(connection: psycopg.Connection[Any], url: str) -> int:
    """The store's schema version: 0 when it has no ``dsh_schema_version`` table. Reads only."""
    with database_errors("reading the schema version", url):
        row = connection.execute("SELECT to_regclass('dsh_schema_version') IS NOT NULL").fetchone()
        if row is None or not row[0]:
            return 0
        found = connection.execute("SELECT max(version) FROM dsh_schema_version").fetchone()
    return int(found[0]) if found is not None and found[0] is not None else 0


def ensure_schema(
    connection: psycopg.Connection[Any],
    url: str,
    *,
    steps: Sequence[tuple[int, Sequence[str]]] = STEPS,
) -> tuple[int, int]:
    """Apply the steps the store lacks; ``(version before, version after)``. Idempotent.

    Runs in its own transaction (the connection must not be in one) and commits it.

    :raises SchemaVersionError: the store's schema is newer than ``steps`` know.
    :raises DatabaseError: the server refused a statement (e.g. no CREATE privilege).
    """
    supported = steps[-1][0]
    with database_errors("creating or upgrading the schema", url), connection.transaction():
        schema = connection.execute("SELECT current_schema()").fetchone()
        key = advisory_key("schema", "" if schema is None else str(schema[0]))
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        connection.execute(_VERSION_TABLE)
        row = connection.execute("SELECT max(version) FROM dsh_schema_version").fetchone()
        before = int(row[0]) if row is not None and row[0] is not None else 0
        if before > supported:
            raise SchemaVersionError(redact(url), before, supported)
        for version, statements in steps:
            if version <= before:
                continue
            for statement in statements:
                connection.execute(statement)
            connection.execute("INSERT INTO dsh_schema_version (version) VALUES (%s)", (version,))
    return before, max(before, supported)
