"""The versioned schema of a PostgreSQL store, and its upgrade path.

The tables live in the connection's current schema (the first of ``search_path``; a URL
picks another with ``?options=-csearch_path%3Dname``). ``dsh_schema_version`` holds one row
per applied migration; :func:`ensure_schema` applies the missing ones of :data:`MIGRATIONS`,
in order, in one transaction under a transaction-level advisory lock, so concurrent ``init``
calls apply each migration once, and an interrupted upgrade leaves the previous version
intact (DDL is transactional in PostgreSQL). A schema newer than this code is refused
(:class:`~dsh_store.errors.SchemaVersionError`), never touched.

Tables (docs/postgres.md):

- ``dsh_sessions``: one row per session: ``session_id``, ``project_key`` (DSH's key of the
  cwd, ``_no-cwd`` without one), ``header`` (the header record as stored, its line bytes),
  ``created_at`` (the header's ``createdAt``), ``next_seq`` (events stored), ``stored_bytes``
  (header plus event records: the size of the same log as JSONL) and ``revision`` (from
  the ``dsh_revision`` sequence, new on every change).
- ``dsh_events``: one row per event, keyed by ``(session_id, seq)``; ``record`` holds the
  event's canonical line bytes exactly, its terminating newline included, so an export is
  the header followed by the records, byte for byte what the JSONL backend writes.
- ``dsh_cut_records``: rows a repair cut off past the committed region (kept, never lost),
  indexed by ``(session_id, seq)`` from version 2.

From version 3 the ``record`` columns compress with lz4 where the server supports it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import SchemaVersionError
from ..jsonl.failpoints import failpoint
from ._driver import database_errors
from .url import redact

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "SchemaInit",
    "advisory_key",
    "ensure_schema",
    "stored_schema_version",
]


@dataclass(frozen=True)
class Migration:
    """One schema version: the DDL that takes the schema from ``version - 1`` to it."""

    version: int
    summary: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions, events and cut-records tables",
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
    Migration(
        2,
        "index the cut records by session and seq",
        ("CREATE INDEX dsh_cut_records_by_session ON dsh_cut_records (session_id, seq)",),
    ),
    Migration(
        3,
        "compress new event records with lz4 where the server supports it",
        (
            # lz4 writes (and reads) records several times faster than the default pglz at
            # the same size on the benchmark mix (docs/postgres.md); PostgreSQL 14 and later
            # have it when built with lz4. Existing records keep their compression (both
            # read alike); a server without lz4 keeps pglz.
            """DO $$
            BEGIN
                IF current_setting('server_version_num')::int >= 140000 THEN
                    BEGIN
                        EXECUTE 'ALTER TABLE dsh_events ALTER COLUMN record SET COMPRESSION lz4';
                        EXECUTE 'ALTER TABLE dsh_cut_records'
                            ' ALTER COLUMN record SET COMPRESSION lz4';
                    EXCEPTION WHEN feature_not_supported THEN
                        NULL;
                    END;
                END IF;
            END $$""",
        ),
    ),
)
"""Every schema version's DDL, in order (versions 1, 2, ...). Append, never edit: a store
made by an older dsh-store is upgraded by exactly the migrations after its version."""

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The schema version this code reads and writes."""

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS dsh_schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True)
class SchemaInit:
    """What :func:`ensure_schema` found and did (``dsh-store pg init`` renders it).

    ``url`` is printable (password masked); ``schema`` the database schema the tables
    live in; ``before`` / ``after`` the schema versions (0: no tables); ``applied`` the
    migrations this call ran, in order (none when the schema was current).
    """

    url: str
    schema: str
    before: int
    after: int
    applied: tuple[Migration, ...]

    @property
    def action(self) -> str:
        """``created`` (there was no schema), ``upgraded`` or ``unchanged``."""
        if not self.applied:
            return "unchanged"
        return "created" if self.before == 0 else "upgraded"


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
    migrations: Sequence[Migration] = MIGRATIONS,
) -> SchemaInit:
    """Apply the migrations the store lacks, in order, in one transaction. Idempotent.

    The connection must not be in a transaction (autocommit); this commits its own. The
    transaction first takes an advisory lock of the schema, so concurrent calls (any
    process, any host) run one after the other and the later ones find nothing to do. A
    crash or failure before the commit leaves the schema as it was.

    :raises SchemaVersionError: the store's schema is newer than ``migrations`` know;
        nothing is changed.
    :raises DatabaseError: the server refused a statement (e.g. no CREATE privilege).
    """
    _check_sequence(migrations)
    supported = migrations[-1].version
    printable = redact(url)
    with database_errors("creating or upgrading the schema", url), connection.transaction():
        found = connection.execute("SELECT current_schema()").fetchone()
        schema = "" if found is None or found[0] is None else str(found[0])
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("schema", schema),))
        connection.execute(_VERSION_TABLE)
        row = connection.execute("SELECT max(version) FROM dsh_schema_version").fetchone()
        before = int(row[0]) if row is not None and row[0] is not None else 0
        if before > supported:
            raise SchemaVersionError(printable, before, supported)
        applied = tuple(migration for migration in migrations if migration.version > before)
        for migration in applied:
            for statement in migration.statements:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO dsh_schema_version (version) VALUES (%s)", (migration.version,)
            )
        if applied:
            failpoint("pg.schema.before-commit")
    return SchemaInit(printable, schema, before, max(before, supported), applied)


def _check_sequence(migrations: Sequence[Migration]) -> None:
    """Migrations are numbered 1, 2, ... without a gap (a programming error otherwise)."""
    versions = [migration.version for migration in migrations]
    if not versions or versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"schema migrations must be numbered 1, 2, ...; got {versions}")
