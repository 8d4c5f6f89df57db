"""The PostgreSQL storage backend: the :class:`~dsh_store.backend.StorageBackend` of a database.

A log is one ``dsh_sessions`` row and one ``dsh_events`` row per event holding the event's
canonical record bytes (:mod:`dsh_store.postgres.schema`). Locations are pseudo-paths
``pg:/<encodedId>`` (the JSONL layout's injective id encoding).

Crash stories, one per write path (docs/postgres.md):

- first write: the session row and the first batch are inserted in one transaction — after
  a crash the session does not exist or holds both;
- later writes: one transaction per batch, whose first statement is the tail check (the
  session row's ``next_seq`` and ``stored_bytes`` must be what this writer last committed)
  — after a crash the log is its acknowledged prefix plus at most the batch whose commit
  was in flight, never part of a batch;
- repair: cut rows (if any) are copied to ``dsh_cut_records``, deleted, and the closers
  inserted, in one transaction.

The single writer holds a session-level advisory lock on its own connection, the one its
batches are committed on: when that connection dies the server releases the lock, and the
writer reconnects, takes the lock again (or fails with ``SessionLockedError``) and settles
a batch whose commit it never heard about before it writes again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ..backend import (
    Appender,
    Finding,
    HeaderEntry,
    RepairOutcome,
    RepairRequest,
    StorageBackend,
    StoredRow,
    TornTail,
    WriterLock,
)
from ..errors import (
    ConcurrentModificationError,
    CorruptLogError,
    DatabaseError,
    DshStoreError,
    EventValidationError,
    NotASessionError,
    SchemaVersionError,
    SessionExistsError,
    SessionLockedError,
    WriterBrokenError,
)
from ..jsonl.failpoints import failpoint
from ..jsonl.layout import check_session_id, decode_session_id, encode_session_id, project_key
from ..jsonl.rows import read_header_line, row_problem, unparsable_reason
from ..records import HeaderInfo, PassResults
from ._driver import connect, database_errors, driver
from .schema import SCHEMA_VERSION, SchemaInit, advisory_key, ensure_schema
from .url import redact

if TYPE_CHECKING:
    import psycopg

__all__ = ["LOCATION_PREFIX", "PostgresBackend", "StoredSession"]

LOCATION_PREFIX = "pg:"
"""Locations are ``pg:/<encodedId>``."""

READ_BATCH_ROWS = 2000
"""Rows a streaming read fetches per round trip (the server-side cursor's ``itersize``)."""


class StoredSession(NamedTuple):
    """One session row as :meth:`PostgresBackend.stored_sessions` lists it."""

    session_id: str
    header: bytes
    """The header line as stored (its newline included)."""
    events: int
    """Events stored (``next_seq``)."""


class PostgresBackend(StorageBackend):
    """Session logs in a PostgreSQL database (the current schema of ``url``'s connection).

    :param url: a libpq URL (``postgresql://user:password@host:port/database``); it is never
        printed with its password (:func:`dsh_store.postgres.url.redact`).
    """

    name = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url
        self._display = redact(url)
        self._meta: psycopg.Connection[tuple[Any, ...]] | None = None
        self._meta_mutex = threading.Lock()
        self._schema_name: str | None = None
        self._schema_ready = False
        # The writer locks this object holds, by session id: the appender of a session
        # commits on its lock's connection.
        self.held: dict[str, AdvisoryLock] = {}
        self.held_mutex = threading.Lock()

    @property
    def display(self) -> str:
        """The store's URL with any password replaced by ``***`` (how messages name it)."""
        return self._display

    # -- connections -----------------------------------------------------------------

    def connect(
        self, operation: str, *, autocommit: bool = True
    ) -> psycopg.Connection[tuple[Any, ...]]:
        """A new connection to the store."""
        return connect(self.url, operation, autocommit=autocommit)

    def _query(self, operation: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read-only statement on the shared metadata connection.

        A connection the server ended (a restart) is replaced and the read tried once more:
        a read changes nothing, so repeating it is safe.
        """
        driver(self.url)  # a missing extra is a typed error, not an ImportError from here
        import psycopg  # the postgres extra: imported on first use

        with self._meta_mutex:
            for attempt in (1, 2):
                if self._meta is None or self._meta.closed:
                    self._meta = self.connect(operation)
                try:
                    with database_errors(operation, self.url):
                        try:
                            return self._meta.execute(sql, params).fetchall()
                        except psycopg.OperationalError:
                            if attempt == 1 and self._meta.broken:
                                self._meta.close()
                                self._meta = None
                                continue
                            raise
                finally:
                    if self._meta is not None and self._meta.broken:
                        self._meta.close()
                        self._meta = None
            raise AssertionError("unreachable")  # pragma: no cover

    def schema_version(self) -> int:
        """The stored schema version (0: none yet). Reads only."""
        rows = self._query(
            "reading the schema version", "SELECT to_regclass('dsh_schema_version') IS NOT NULL"
        )
        if not rows or not rows[0][0]:
            return 0
        found = self._query(
            "reading the schema version", "SELECT max(version) FROM dsh_schema_version"
        )
        return int(found[0][0]) if found and found[0][0] is not None else 0

    def _readable(self) -> bool:
        """Whether the store has tables to read: False when none were made yet.

        :raises SchemaVersionError: the schema is of another version than this code's.
        """
        if self._schema_ready:
            return True
        found = self.schema_version()
        if found == 0:
            return False
        if found != SCHEMA_VERSION:
            raise SchemaVersionError(self.display, found, SCHEMA_VERSION)
        self._schema_ready = True
        return True

    def init(self) -> SchemaInit:
        """Create or upgrade the schema (``dsh-store pg init``); what it found and did.

        :raises SchemaVersionError: the schema is newer than this code knows (untouched).
        """
        with self.connect("creating the schema", autocommit=True) as connection:
            result = ensure_schema(connection, self.url)
        self._schema_ready = True
        return result

    def schema_name(self) -> str:
        """The database schema the store's tables live in (part of every lock key)."""
        if self._schema_name is None:
            rows = self._query("reading the current schema", "SELECT current_schema()")
            name = rows[0][0] if rows else None
            if name is None:
                raise DatabaseError(
                    "finding the current schema",
                    self.display,
                    "no schema of the search_path exists",
                    sqlstate=None,
                )
            self._schema_name = str(name)
        return self._schema_name

    # -- discovery -------------------------------------------------------------------

    def locate(self, session_id: str, cwd: str | None) -> Path:
        """``pg:/<encodedId>``: the session's pseudo-path (the cwd plays no part)."""
        check_session_id(session_id)
        return Path(f"{LOCATION_PREFIX}/{encode_session_id(session_id)}")

    def session_id_of(self, location: Path) -> str:
        """The session id a location names."""
        decoded = decode_session_id(location.name)
        if decoded is None or str(location.parent) != LOCATION_PREFIX:
            raise NotASessionError(str(location), "not a location of a PostgreSQL store")
        return decoded

    def find(self, session_id: str) -> Path | None:
        """The session's location when it is stored, else None."""
        check_session_id(session_id)
        if not self._readable():
            return None
        rows = self._query(
            "looking up a session",
            "SELECT 1 FROM dsh_sessions WHERE session_id = %s",
            (session_id,),
        )
        return self.locate(session_id, None) if rows else None

    def locations(self) -> Iterator[Path]:
        """The location of every stored session, sorted by id."""
        for session_id in self.session_ids():
            yield self.locate(session_id, None)

    def list_headers(self) -> list[HeaderEntry]:
        """Every session's header row and revision, sorted by id."""
        if not self._readable():
            return []
        entries: list[HeaderEntry] = []
        for session_id, header, revision in self._query(
            "listing sessions",
            "SELECT session_id, header, revision FROM dsh_sessions ORDER BY session_id",
        ):
            location = self.locate(str(session_id), None)
            try:
                info = read_header_line(bytes(header), path=str(location))
            except DshStoreError:
                continue  # verify reports it
            entries.append(HeaderEntry(location, info, str(revision)))
        return entries

    def session_ids(self) -> list[str]:
        """Every stored session id, sorted."""
        if not self._readable():
            return []
        rows = self._query(
            "listing sessions", "SELECT session_id FROM dsh_sessions ORDER BY session_id"
        )
        return [str(row[0]) for row in rows]

    def stored_sessions(self, session_ids: Sequence[str] | None = None) -> list[StoredSession]:
        """The session rows (id, header as stored, events stored), sorted by id: every one,
        or those of ``session_ids`` that exist.

        One statement over the session rows only: no event is read. A header that does
        not parse is returned as stored (``dsh-store verify`` reports it).
        """
        if not self._readable():
            return []
        sql = "SELECT session_id, header, next_seq FROM dsh_sessions"
        params: tuple[Any, ...] = ()
        if session_ids is not None:
            sql += " WHERE session_id = ANY(%s)"
            params = (list(session_ids),)
        rows = self._query("listing sessions", sql + " ORDER BY session_id", params)
        return [StoredSession(str(row[0]), bytes(row[1]), int(row[2])) for row in rows]

    # -- reading ---------------------------------------------------------------------

    def read(self, location: Path) -> PostgresLogReader:
        """A streaming pass over the stored log (one REPEATABLE READ snapshot)."""
        return PostgresLogReader(self, location)

    def revision(self, location: Path) -> str:
        """The session row's revision (new on every committed change)."""
        session_id = self.session_id_of(location)
        rows = (
            self._query(
                "reading a revision",
                "SELECT revision FROM dsh_sessions WHERE session_id = %s",
                (session_id,),
            )
            if self._readable()
            else []
        )
        if not rows:
            raise NotASessionError(str(location), "no such session in the store")
        return str(rows[0][0])

    # -- writing ---------------------------------------------------------------------

    def lock(self, location: Path, session_id: str, *, create: bool = False) -> AdvisoryLock:
        """The session's advisory lock (not yet taken); ``create`` makes the schema first."""
        if create:
            self.ensure_writable()
        return AdvisoryLock(self, session_id)

    def ensure_writable(self) -> None:
        """Create the schema before the first write to a database without one (idempotent).

        An existing schema of another version is never changed here: an older one is
        upgraded only by :meth:`init` (``dsh-store pg init``), the operator's step, since
        hosts still running an older dsh-store stop working on the upgraded schema.

        :raises SchemaVersionError: the schema is older or newer than this code's.
        """
        if self._schema_ready:
            return
        found = self.schema_version()
        if found == 0:
            self.init()
        elif found != SCHEMA_VERSION:
            raise SchemaVersionError(self.display, found, SCHEMA_VERSION)
        self._schema_ready = True

    def publish_first(
        self,
        location: Path,
        header_line: bytes,
        first_batch: Sequence[bytes],
        *,
        session_id: str,
    ) -> PostgresAppender:
        """Insert the session row and its first batch in one transaction."""
        self.ensure_writable()
        lock = AdvisoryLock.held_by(self, session_id)
        header = read_header_line(header_line, path=str(location))
        cwd = header.value.get("cwd")
        created = header.value.get("createdAt")
        size = len(header_line) + sum(len(line) for line in first_batch)
        connection = lock.connection()
        with database_errors(f"creating session {session_id!r}", self.url):
            try:
                with connection.transaction():
                    inserted = connection.execute(
                        "INSERT INTO dsh_sessions (session_id, project_key, header, created_at,"
                        " next_seq, stored_bytes) VALUES (%s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (session_id) DO NOTHING RETURNING revision",
                        (
                            session_id,
                            project_key(cwd if isinstance(cwd, str) else None),
                            header_line,
                            created if isinstance(created, int) else 0,
                            len(first_batch),
                            size,
                        ),
                    ).fetchone()
                    if inserted is None:
                        raise _Exists
                    _write_records(connection, session_id, 0, first_batch)
                    failpoint("pg.publish.before-commit")
            except _Exists:
                # A retry of a first commit whose answer was lost finds its own rows.
                if not _same_log(connection, session_id, header_line, first_batch):
                    raise SessionExistsError(session_id, f"{self.display} {location}") from None
            except BaseException:
                lock.check_connection()
                raise
        state = _tail_state(connection, session_id, self.url)
        return PostgresAppender(self, lock, session_id, *state)

    def open_appender(
        self, location: Path, *, expected_size: int, next_seq: int
    ) -> PostgresAppender:
        """The appender of a log just read; its stored size must be ``expected_size``."""
        session_id = self.session_id_of(location)
        lock = AdvisoryLock.held_by(self, session_id)
        stored_seq, stored_bytes = _tail_state(lock.connection(), session_id, self.url)
        if (stored_seq, stored_bytes) != (next_seq, expected_size):
            raise ConcurrentModificationError(
                f"{self.display} {location}",
                f"the stored log has {stored_seq} events ({stored_bytes} bytes), expected "
                f"{next_seq} ({expected_size} bytes)",
            )
        return PostgresAppender(self, lock, session_id, stored_seq, stored_bytes)

    def commit_repair(
        self, location: Path, request: RepairRequest, *, dry_run: bool = False
    ) -> RepairOutcome:
        """Cut stored rows past the committed region (kept in ``dsh_cut_records``) and
        insert the closers, in one transaction; a clean, balanced log is never written."""
        session_id = self.session_id_of(location)
        events = len(request.events)
        cut_bytes = request.stored_size - request.committed_size
        cut = cut_bytes > 0
        closer_lines = [event.line for event in request.closers]
        saved = Path(f"{location}#dsh_cut_records") if cut else None
        if dry_run or (not cut and not closer_lines):
            return RepairOutcome(
                request.committed_size if cut else None,
                cut_bytes,
                saved,
                0,
                len(closer_lines),
                False,
            )
        lock = AdvisoryLock.held_by(self, session_id)
        connection = lock.connection()
        with database_errors(f"repairing session {session_id!r}", self.url):
            try:
                with connection.transaction():
                    updated = connection.execute(
                        "UPDATE dsh_sessions SET next_seq = %s, stored_bytes = %s,"
                        " revision = nextval('dsh_revision')"
                        " WHERE session_id = %s AND stored_bytes = %s RETURNING 1",
                        (
                            events + len(closer_lines),
                            request.committed_size + sum(len(line) for line in closer_lines),
                            session_id,
                            request.stored_size,
                        ),
                    ).fetchone()
                    if updated is None:
                        raise ConcurrentModificationError(
                            f"{self.display} {location}",
                            f"the stored log is no longer {request.stored_size} bytes",
                        )
                    if cut:
                        connection.execute(
                            "INSERT INTO dsh_cut_records (session_id, seq, record)"
                            " SELECT session_id, seq, record FROM dsh_events"
                            " WHERE session_id = %s AND seq >= %s",
                            (session_id, events),
                        )
                        connection.execute(
                            "DELETE FROM dsh_events WHERE session_id = %s AND seq >= %s",
                            (session_id, events),
                        )
                    _write_records(connection, session_id, events, closer_lines)
                    failpoint("pg.repair.before-commit")
            except BaseException:
                lock.check_connection()
                raise
        return RepairOutcome(
            request.committed_size if cut else None,
            cut_bytes,
            saved,
            0,
            len(closer_lines),
            True,
        )

    def close(self) -> None:
        """Close the shared metadata connection; idempotent."""
        with self._meta_mutex:
            if self._meta is not None:
                self._meta.close()
                self._meta = None


class _Exists(Exception):
    """Internal signal: the session row already exists (rolls the transaction back)."""


COPY_MIN_ROWS = 32
"""Batches of at least this many rows are written with one binary ``COPY``, smaller ones
with one multi-row ``INSERT``: the faster of the two at each size as measured
(``scripts/bench.py pg``, docs/postgres.md). Below the multi-row INSERT's parameter limit."""


def _write_records(
    connection: psycopg.Connection[tuple[Any, ...]],
    session_id: str,
    first_seq: int,
    lines: Sequence[bytes],
) -> None:
    """Insert ``lines`` as seqs ``first_seq...`` (inside the caller's transaction): one
    multi-row ``INSERT`` below :data:`COPY_MIN_ROWS` rows, one binary ``COPY`` from there.

    The ``pg.append.mid-batch`` failpoint fires with half the rows sent (COPY) or bound
    into the statement not yet sent (INSERT).
    """
    if not lines:
        return
    half = len(lines) // 2
    if len(lines) < COPY_MIN_ROWS:
        params: list[Any] = []
        for index, line in enumerate(lines):
            if index == half:
                failpoint("pg.append.mid-batch")
            params += (session_id, first_seq + index, line)
        connection.execute(
            "INSERT INTO dsh_events (session_id, seq, record) VALUES "
            + ", ".join(["(%s, %s, %s)"] * len(lines)),
            params,
        )
        return
    with (
        connection.cursor() as cursor,
        cursor.copy("COPY dsh_events (session_id, seq, record) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["text", "int8", "bytea"])
        for index, line in enumerate(lines):
            if index == half:
                failpoint("pg.append.mid-batch")
            copy.write_row((session_id, first_seq + index, line))


def _tail_state(
    connection: psycopg.Connection[tuple[Any, ...]], session_id: str, url: str
) -> tuple[int, int]:
    """``(next_seq, stored_bytes)`` of a stored session."""
    with database_errors(f"reading the tail of session {session_id!r}", url):
        row = connection.execute(
            "SELECT next_seq, stored_bytes FROM dsh_sessions WHERE session_id = %s",
            (session_id,),
        ).fetchone()
    if row is None:
        raise ConcurrentModificationError(
            f"{redact(url)} session {session_id!r}", "the session is no longer stored"
        )
    return int(row[0]), int(row[1])


def _stored_records(
    connection: psycopg.Connection[tuple[Any, ...]], session_id: str, first: int, last: int
) -> list[bytes]:
    rows = connection.execute(
        "SELECT record FROM dsh_events WHERE session_id = %s AND seq BETWEEN %s AND %s"
        " ORDER BY seq",
        (session_id, first, last),
    ).fetchall()
    return [bytes(row[0]) for row in rows]


def _same_log(
    connection: psycopg.Connection[tuple[Any, ...]],
    session_id: str,
    header_line: bytes,
    first_batch: Sequence[bytes],
) -> bool:
    """Whether the stored session is exactly this header and first batch (a lost answer)."""
    row = connection.execute(
        "SELECT header, next_seq FROM dsh_sessions WHERE session_id = %s", (session_id,)
    ).fetchone()
    if row is None or bytes(row[0]) != header_line or int(row[1]) != len(first_batch):
        return False
    return _stored_records(connection, session_id, 0, len(first_batch) - 1) == list(first_batch)


class AdvisoryLock(WriterLock):
    """The single-writer lock of one session: ``pg_try_advisory_lock`` on its own connection.

    Session-level: held for as long as the connection lives; the server releases it when the
    connection ends, however the holder ended. The same connection commits the writer's
    batches, so a writer that lost the lock cannot write without taking it again.
    """

    def __init__(self, backend: PostgresBackend, session_id: str) -> None:
        self.backend = backend
        self.session_id = session_id
        self.key = advisory_key("session", backend.schema_name(), session_id)
        self._connection: psycopg.Connection[tuple[Any, ...]] | None = None
        self._held = False
        self._mutex = threading.RLock()

    @property
    def where(self) -> str:
        """The lock as a message names it."""
        return f"advisory lock {self.key} in {self.backend.display}"

    @property
    def is_held(self) -> bool:
        """True while this object holds (or, after a lost connection, will retake) the lock."""
        return self._held

    @classmethod
    def held_by(cls, backend: PostgresBackend, session_id: str) -> AdvisoryLock:
        """The lock this backend object holds for ``session_id`` (the caller took it)."""
        with backend.held_mutex:
            lock = backend.held.get(session_id)
        if lock is None or not lock.is_held:
            raise SessionLockedError(session_id, f"(not held) {backend.display}")
        return lock

    def acquire(self) -> None:
        """Take the lock now or raise :class:`SessionLockedError`."""
        with self._mutex:
            if self._held:
                raise SessionLockedError(self.session_id, self.where)
            self._connection = self._take()
            self._held = True
        with self.backend.held_mutex:
            self.backend.held[self.session_id] = self

    def _take(self) -> psycopg.Connection[tuple[Any, ...]]:
        connection = self.backend.connect(f"locking session {self.session_id!r}")
        try:
            with database_errors(f"locking session {self.session_id!r}", self.backend.url):
                row = connection.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        except BaseException:
            connection.close()
            raise
        if row is None or not row[0]:
            connection.close()
            raise SessionLockedError(self.session_id, self.where)
        return connection

    def connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The lock's connection; after it died, a new one that took the lock again.

        :raises SessionLockedError: another writer took the lock meanwhile.
        :raises DatabaseError: the server cannot be reached.
        """
        with self._mutex:
            if not self._held:
                raise SessionLockedError(self.session_id, f"(released) {self.where}")
            if self._connection is None or self._connection.closed:
                self._connection = self._take()
            return self._connection

    def check_connection(self) -> None:
        """After a failed statement: drop a broken connection (the lock went with it)."""
        with self._mutex:
            connection = self._connection
            if connection is not None and (connection.broken or connection.closed):
                connection.close()
                self._connection = None

    def release(self) -> None:
        """Release the lock (closing its connection); idempotent."""
        with self._mutex:
            connection, self._connection = self._connection, None
            was_held, self._held = self._held, False
        if was_held:
            with self.backend.held_mutex:
                if self.backend.held.get(self.session_id) is self:
                    del self.backend.held[self.session_id]
        if connection is not None:
            try:
                if not connection.broken and not connection.closed:
                    connection.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            except Exception:
                pass
            finally:
                connection.close()

    def __enter__(self) -> AdvisoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class PostgresAppender(Appender):
    """Appends batches of one session, each in one transaction with the tail check in SQL.

    A batch whose commit failed stays the caller's to retry. When the connection died, the
    outcome of that commit is unknown: the next append first reads the stored tail and
    counts the rows of its own batch already there (their records must equal its own) as
    written, so a retry never stores a seq twice.
    """

    def __init__(
        self,
        backend: PostgresBackend,
        lock: AdvisoryLock,
        session_id: str,
        next_seq: int,
        stored_bytes: int,
    ) -> None:
        self.backend = backend
        self.lock = lock
        self.session_id = session_id
        self._next_seq = next_seq
        self._stored_bytes = stored_bytes
        self._unsettled = False
        self._closed = False

    @property
    def broken_cause(self) -> str | None:
        """Never broken: a failed transaction leaves nothing to roll back by hand."""
        return None

    @property
    def next_seq(self) -> int:
        """The seq the next batch must start at."""
        return self._next_seq

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def where(self) -> str:
        """The session as a message names it."""
        return f"{self.backend.display} session {self.session_id!r}"

    def append(self, lines: Sequence[bytes], first_seq: int, last_seq: int) -> None:
        """Commit seqs ``first_seq .. last_seq`` in one transaction, or nothing."""
        if self._closed:
            raise WriterBrokenError(self.where, "the appender is closed")
        if first_seq != self._next_seq or last_seq - first_seq + 1 != len(lines):
            raise EventValidationError(
                f"append seq mismatch: the next batch must start at seq {self._next_seq} and "
                f"hold seqs {first_seq}..{last_seq}, got {len(lines)} records at {first_seq}",
                rule="append-seq-mismatch",
                seq=first_seq,
                path=self.where,
            )
        connection = self.lock.connection()
        if self._unsettled:
            lines, first_seq = self._settle(connection, lines, first_seq)
            if not lines:
                return
        size = sum(len(line) for line in lines)
        failpoint("pg.append.before-transaction")
        try:
            with (
                database_errors(
                    f"appending seqs {first_seq}..{last_seq} to session {self.session_id!r}",
                    self.backend.url,
                ),
                connection.transaction(),
            ):
                # The tail check: the first statement, and the row lock it takes orders
                # this batch after any other transaction on the session.
                updated = connection.execute(
                    "UPDATE dsh_sessions SET next_seq = %s, stored_bytes = stored_bytes + %s,"
                    " revision = nextval('dsh_revision')"
                    " WHERE session_id = %s AND next_seq = %s AND stored_bytes = %s"
                    " RETURNING 1",
                    (last_seq + 1, size, self.session_id, first_seq, self._stored_bytes),
                ).fetchone()
                if updated is None:
                    raise self._changed(connection)
                _write_records(connection, self.session_id, first_seq, lines)
                failpoint("pg.append.before-commit")
        except DatabaseError:
            self._unsettled = True  # the commit may have happened: settle before writing
            self.lock.check_connection()
            raise
        self._next_seq = last_seq + 1
        self._stored_bytes += size

    def _changed(self, connection: psycopg.Connection[tuple[Any, ...]]) -> DshStoreError:
        row = connection.execute(
            "SELECT next_seq, stored_bytes FROM dsh_sessions WHERE session_id = %s",
            (self.session_id,),
        ).fetchone()
        if row is None:
            detail = "the session is no longer stored"
        else:
            detail = (
                f"the stored log has {row[0]} events ({row[1]} bytes), this writer left "
                f"{self._next_seq} ({self._stored_bytes} bytes)"
            )
        return ConcurrentModificationError(self.where, detail)

    def _settle(
        self,
        connection: psycopg.Connection[tuple[Any, ...]],
        lines: Sequence[bytes],
        first_seq: int,
    ) -> tuple[Sequence[bytes], int]:
        """After a failure of unknown outcome: skip this batch's rows already committed."""
        with database_errors(f"settling session {self.session_id!r}", self.backend.url):
            stored_seq, stored_bytes = _tail_state(connection, self.session_id, self.backend.url)
            done = stored_seq - first_seq
            if done < 0 or done > len(lines):
                raise self._changed(connection)
            if done and _stored_records(
                connection, self.session_id, first_seq, stored_seq - 1
            ) != list(lines[:done]):
                raise self._changed(connection)
            if stored_bytes != self._stored_bytes + sum(len(line) for line in lines[:done]):
                raise self._changed(connection)
        self._unsettled = False
        self._next_seq = stored_seq
        self._stored_bytes = stored_bytes
        return lines[done:], stored_seq

    def close(self) -> None:
        """Stop appending (the lock is released by its owner); idempotent."""
        self._closed = True


class PostgresLogReader(PassResults):
    """One pass over a stored log: the header row, then the records by seq through a
    server-side cursor, all in one REPEATABLE READ snapshot.

    The rows are checked as JSONL's scanner checks lines (same decoder, same row rules, the
    same committed-region rule): the first defect ends the committed region; a later
    ``turn/end`` makes it committed corruption (:class:`CorruptLogError`), otherwise the
    defect and what follows are reported as the torn tail.
    """

    def __init__(self, backend: PostgresBackend, location: Path) -> None:
        self.backend = backend
        self.location = location
        self.session_id = backend.session_id_of(location)
        self._connection: psycopg.Connection[tuple[Any, ...]] | None = None
        self._begin_pass()

    def reopen(self) -> PostgresLogReader:
        """A new pass over the same log."""
        return PostgresLogReader(self.backend, self.location)

    def read_header(self) -> HeaderInfo | None:
        """The header row of the session.

        :raises NotASessionError: no such session is stored.
        """
        path = str(self.location)
        if not self.backend._readable():
            raise NotASessionError(path, "no such session in the store (it has no tables yet)")
        connection = self.backend.connect(f"reading session {self.session_id!r}")
        self._connection = connection
        try:
            with database_errors(f"reading session {self.session_id!r}", self.backend.url):
                connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = connection.execute(
                    "SELECT header, stored_bytes, revision FROM dsh_sessions WHERE session_id = %s",
                    (self.session_id,),
                ).fetchone()
        except BaseException:
            self._close()
            raise
        if row is None:
            self._close()
            raise NotASessionError(path, "no such session in the store")
        header = bytes(row[0])
        self._file_size = int(row[1])
        self._revision = str(row[2])
        try:
            info = read_header_line(header, path=path)
        except BaseException:
            self._close()
            raise
        self._header = info
        self._committed_size = info.size
        self._findings.extend(info.findings)
        return info

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def rows(self) -> Iterator[StoredRow]:
        """The accepted rows, streamed by seq."""
        if self._header is None:
            self.read_header()
        assert self._header is not None
        connection = self._connection
        if connection is None:
            return
        path = str(self.location)
        version = self._header.version
        offset = self._header.size
        expected = 0
        defect: Finding | None = None
        defect_offset = 0
        try:
            with (
                database_errors(f"reading session {self.session_id!r}", self.backend.url),
                connection.cursor(name="dsh_read", binary=True) as cursor,
            ):
                cursor.itersize = READ_BATCH_ROWS
                cursor.execute(
                    "SELECT seq, record FROM dsh_events WHERE session_id = %s ORDER BY seq",
                    (self.session_id,),
                )
                for seq, stored in cursor:
                    record = bytes(stored)
                    line_no = expected + 2
                    if defect is not None:
                        if _holds_turn_end(record):
                            raise CorruptLogError(
                                path,
                                f"{defect.message}, and a later committed turn/end (line "
                                f"{line_no}) shows it is not a crash tail",
                                line=defect.line,
                                offset=defect.offset,
                                seq=defect.seq,
                                rule=defect.rule,
                            )
                        expected += 1
                        continue
                    problem = _record_problem(record, seq, expected, version)
                    if problem is not None:
                        defect = Finding(problem[0], problem[1], line_no, offset, expected)
                        defect_offset = offset
                        expected += 1
                        continue
                    raw = record[:-1]
                    value = orjson.loads(raw)
                    yield StoredRow(line_no, offset, raw, value, expected, 1)
                    offset += len(record)
                    expected += 1
        finally:
            self._close()
        self._committed_size = offset
        if defect is not None:
            self._findings.append(defect)
            self._torn = TornTail(
                defect_offset,
                self._file_size - defect_offset,
                defect.line or 0,
                defect.message,
                defect.seq or 0,
                defect.rule,
            )

    def exhaust(self) -> PostgresLogReader:
        """Read every row (for the attributes), discarding them."""
        for _ in self.rows():
            pass
        return self


def _record_problem(record: bytes, seq: int, expected: int, version: int) -> tuple[str, str] | None:
    """Why a stored record is not the next row of the log, or None."""
    if not record.endswith(b"\n") or b"\n" in record[:-1]:
        return "bad-record", "stored record is not exactly one newline-terminated line"
    raw = record[:-1]
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "unparsable-line", unparsable_reason(raw)
    problem = row_problem(value, version)
    if problem is not None:
        return problem
    if seq != expected or value.get("seq") != expected:
        return "seq-gap", f"expected seq {expected}, the row holds {value.get('seq')!r}"
    return None


def _holds_turn_end(record: bytes) -> bool:
    try:
        value = orjson.loads(record[:-1] if record.endswith(b"\n") else record)
    except orjson.JSONDecodeError:
        return False
    return type(value) is dict and value.get("type") == "turn/end"
