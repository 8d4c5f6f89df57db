"""``PostgresStore``: the session store of a PostgreSQL database, with ``JsonlStore``'s API.

The write path is the JSONL store's: the same :class:`~dsh_store.live.LiveSession` and
:class:`~dsh_store.live.AsyncLiveSession`, the same write-behind controller and the same
model validation at ``append``; only the sink differs: one transaction per batch on the
connection that holds the session's advisory lock (:mod:`dsh_store.postgres.backend`).
Restore reads the records back through the same decoder, row rules and model checks
(:func:`dsh_store.restore` helpers), closes a turn a crash left open with the same closers,
and commits that repair in one transaction.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from ..errors import (
    EventValidationError,
    NeedsMigrationError,
    SessionExistsError,
    SessionNotFoundError,
)
from ..inspection import Inspection
from ..jsonl.layout import check_session_id
from ..jsonl.writebehind import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_BATCH_EVENTS,
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_WINDOW_S,
)
from ..live import AsyncLiveSession, AsyncOpening, LiveSession, WriterHandle
from ..model import (
    SESSION_FORMAT_VERSION,
    Session,
    SessionEvent,
    SessionHeader,
    interrupted_closers,
)
from ..records import Finding
from .backend import AdvisoryLock, PostgresAppender, PostgresBackend, PostgresLogReader

__all__ = ["PostgresStore"]

Clock = Callable[[], int]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PostgresStore:
    """Session logs in a PostgreSQL database, with the API of :class:`~dsh_store.JsonlStore`.

    :param url: a libpq URL; the tables live in its connection's current schema (a URL
        picks one with ``?options=-csearch_path%3Dname``) and are created on first write
        (or by :meth:`init`, ``dsh-store pg init URL``).

    The other parameters are :class:`~dsh_store.JsonlStore`'s.
    """

    def __init__(
        self,
        url: str,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_batch_events: int | None = DEFAULT_MAX_BATCH_EVENTS,
        max_batch_bytes: int | None = DEFAULT_MAX_BATCH_BYTES,
        max_pending_bytes: int | None = DEFAULT_MAX_PENDING_BYTES,
        clock: Clock | None = None,
    ) -> None:
        self.backend = PostgresBackend(url)
        self._writer_options: dict[str, Any] = {
            "window_s": window_s,
            "max_batch_events": max_batch_events,
            "max_batch_bytes": max_batch_bytes,
            "max_pending_bytes": max_pending_bytes,
        }
        self._clock: Clock = clock or _wall_clock_ms

    @property
    def url(self) -> str:
        """The store's URL, with any password replaced by ``***`` (safe to print)."""
        return self.backend.display

    def init(self) -> tuple[int, int]:
        """Create or upgrade the schema; ``(version before, version after)``. Idempotent."""
        return self.backend.init()

    def close(self) -> None:
        """Close the store's shared connection (live sessions keep their own)."""
        self.backend.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- discovery and reading ---------------------------------------------------------

    def locate(self, session_id: str, cwd: str | None = None) -> Path:
        """The session's location, ``pg:/<encodedId>`` (pure)."""
        return self.backend.locate(session_id, cwd)

    def _require(self, session_id: str) -> Path:
        location = self.backend.find(session_id)
        if location is None:
            raise SessionNotFoundError(session_id, self.url)
        return location

    def inspect(self, session_id: str) -> Inspection:
        """The balanced view of a session: closers in memory; never writes."""
        return self._read(self._require(session_id))

    def _read(self, location: Path) -> Inspection:
        from .. import restore

        reader = self.backend.read(location)
        info = reader.read_header()
        assert info is not None
        path = str(location)
        if info.version != SESSION_FORMAT_VERSION:
            raise NeedsMigrationError(path, info.version, "copy it from an upgraded store")
        header = restore.header_from_row(info.value, path)
        events = restore.current_events(reader.rows(), path)
        try:
            session = Session.from_restore(header, events)
        except EventValidationError as error:
            raise restore.model_error(error, path, info.version) from None
        restored = tuple(session.events)
        closers = tuple(interrupted_closers(restored))
        scanner = cast(Any, reader)
        findings: tuple[Finding, ...] = restore.log_findings(
            scanner, info.version, balanced=not closers, event_count=len(restored)
        )
        return Inspection(
            path=location,
            header=header,
            events=restored,
            closers=closers,
            source_version=info.version,
            torn=reader.torn,
            committed_size=reader.committed_size,
            file_size=reader.file_size,
            findings=findings,
            classification=restore.classification_of(reader.torn, not closers, info.version),
            revision=reader.revision or "",
        )

    def load(self, session_id: str) -> Inspection:
        """Restore a session and commit its repair (in one transaction); idempotent."""
        location = self._require(session_id)
        with self.backend.lock(location, session_id):
            return self._repair(self._read(location))

    def _repair(self, inspection: Inspection) -> Inspection:
        """Commit the repair ``inspection`` calls for (the lock is held); the result."""
        from ..backend import RepairRequest

        if not inspection.needs_repair:
            return inspection
        self.backend.commit_repair(
            inspection.path,
            RepairRequest(
                inspection.header.id,
                inspection.events,
                inspection.closers,
                inspection.committed_size,
                inspection.file_size,
            ),
        )
        return self._read(inspection.path)

    def read_from(self, session_id: str, from_seq: int) -> builtins.list[SessionEvent]:
        """Stored events with ``seq >= from_seq`` (no closers), streamed from the server."""
        if type(from_seq) is not int or from_seq < 0:
            raise EventValidationError(
                f"read_from needs a non-negative integer seq, got {from_seq!r}",
                rule="read-from-seq",
            )
        return list(self.inspect(session_id).events[from_seq:])

    def iter_records(self, session_id: str) -> Iterator[bytes]:
        """The stored log as JSONL, record by record: the header line, then every event's
        record, exactly the bytes the JSONL backend writes for the same appends."""
        location = self._require(session_id)
        reader: PostgresLogReader = self.backend.read(location)
        info = reader.read_header()
        assert info is not None
        yield info.raw + b"\n"
        for row in reader.rows():
            yield row.raw + b"\n"

    def list(self) -> builtins.list[SessionHeader]:
        """Headers of every stored session, sorted by id (header rows only)."""
        return [header for header, _ in self.snapshots()]

    def snapshots(self) -> builtins.list[tuple[SessionHeader, str]]:
        """``(header, revision)`` per stored session; the revision changes with the log."""
        result: builtins.list[tuple[SessionHeader, str]] = []
        for entry in self.backend.list_headers():
            if entry.header.version != SESSION_FORMAT_VERSION:
                continue
            try:
                header = SessionHeader.from_json(entry.header.value)
            except EventValidationError:
                continue
            result.append((header, entry.revision))
        return result

    # -- writing ---------------------------------------------------------------------

    def new(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        parent_session: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        agent_preset: str | None = None,
    ) -> LiveSession:
        """Create a session; nothing is stored until its first batch commits.

        :raises SessionExistsError: the store already holds this id.
        """
        return LiveSession(
            self._new_handle(
                session_id, cwd, parent_session, origin, delegation_depth, agent_preset
            )
        )

    def anew(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        parent_session: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        agent_preset: str | None = None,
    ) -> AsyncOpening:
        """The asyncio twin of :meth:`new`."""

        async def start() -> AsyncLiveSession:
            handle = await asyncio.get_running_loop().run_in_executor(
                None,
                self._new_handle,
                session_id,
                cwd,
                parent_session,
                origin,
                delegation_depth,
                agent_preset,
            )
            return AsyncLiveSession(handle)

        return AsyncOpening(start)

    def _new_handle(
        self,
        session_id: str,
        cwd: str | None,
        parent_session: str | None,
        origin: str | None,
        delegation_depth: int,
        agent_preset: str | None,
    ) -> WriterHandle:
        check_session_id(session_id)
        existing = self.backend.find(session_id)
        if existing is not None:
            raise SessionExistsError(session_id, f"{self.url} {existing}")
        header = SessionHeader(
            id=session_id,
            created_at=self._clock(),
            is_seeded=False,
            delegation_depth=delegation_depth,
            cwd=cwd,
            parent_session=parent_session,
            origin=origin,
            agent_preset=agent_preset,
        )
        session = Session.create(session_id, header=header, clock=self._clock)
        return _PgHandle(self, session, None, None)

    def open(self, session_id: str) -> LiveSession:
        """Open a stored session for writing: lock, restore, repair, then resume.

        :raises SessionLockedError: another writer (any process, any host) holds it.
        """
        return LiveSession(self._open_handle(session_id))

    def aopen(self, session_id: str) -> AsyncOpening:
        """The asyncio twin of :meth:`open` (locking, restore and repair in the executor)."""

        async def start() -> AsyncLiveSession:
            loop = asyncio.get_running_loop()
            handle = await loop.run_in_executor(None, self._open_handle, session_id)
            return AsyncLiveSession(handle)

        return AsyncOpening(start)

    def _open_handle(self, session_id: str) -> WriterHandle:
        location = self._require(session_id)
        lock = self.backend.lock(location, session_id)
        lock.acquire()
        try:
            inspection = self._repair(self._read(location))
            session = Session.from_restore(
                inspection.header, inspection.events, resume=True, clock=self._clock
            )
            appender = self.backend.open_appender(
                location, expected_size=inspection.file_size, next_seq=len(inspection.events)
            )
        except BaseException:
            lock.release()
            raise
        return _PgHandle(self, session, lock, appender, written=len(inspection.events))

    def append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Append already-built events to a stored session durably, in one transaction.

        The first seq must continue the stored log and the whole log with the batch must
        validate (the model's checks). An empty batch does nothing.
        """
        check_session_id(session_id)
        if not events:
            return
        location = self._require(session_id)
        with self.backend.lock(location, session_id):
            inspection = self._read(location)
            expected = len(inspection.events)
            for index, event in enumerate(events):
                if event.seq != expected + index:
                    raise EventValidationError(
                        f"append seq mismatch: expected seq {expected + index} at batch index "
                        f"{index}, got {event.seq}",
                        rule="append-seq-mismatch",
                        seq=event.seq,
                        event_type=event.type,
                        path=str(location),
                    )
            Session.from_restore(inspection.header, [*inspection.events, *events])
            appender = self.backend.open_appender(
                location, expected_size=inspection.file_size, next_seq=expected
            )
            appender.append([event.line for event in events], expected, expected + len(events) - 1)

    def import_log(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Store a whole log (header and events) as a new session in one transaction.

        :raises SessionExistsError: the store already holds this id (never overwritten).
        """
        Session.from_restore(header, events)  # the log must itself be valid
        location = self.backend.locate(header.id, header.cwd)
        lock = self.backend.lock(location, header.id, create=True)
        with lock:
            if self.backend.find(header.id) is not None:
                raise SessionExistsError(header.id, f"{self.url} {location}")
            self.backend.publish_first(
                location, header.encode(), [event.line for event in events], session_id=header.id
            ).close()


class _PgHandle(WriterHandle):
    """The live session's core with a PostgreSQL sink: lock and appender of one session."""

    def __init__(
        self,
        store: PostgresStore,
        session: Session,
        lock: AdvisoryLock | None,
        appender: PostgresAppender | None,
        *,
        written: int = 0,
    ) -> None:
        import os

        self.store = store
        self.session = session
        self.path = store.backend.locate(session.id, session.header.cwd)
        self.root = self.path.parent
        self.backend = store.backend
        self.pg_lock = lock
        self.appender = appender
        self.lock = None
        self.writer = None
        self.written = written
        self.options = store._writer_options
        self.owner_pid = os.getpid()

    def initial_durable_seq(self) -> int | None:
        """The highest seq already stored when the handle was made (None: nothing)."""
        return self.written - 1 if self.appender is not None and self.written > 0 else None

    def require_usable(self) -> None:
        """Never broken: a failed transaction needs no rollback by hand."""
        return None

    def sink(self, lines: Sequence[bytes], first_seq: int, last_seq: int) -> None:
        """Commit one batch: the first one creates the session (lock taken then)."""
        if self.appender is None:
            if first_seq != 0:
                raise EventValidationError(
                    f"the first batch of a new log must start at seq 0, got {first_seq}",
                    rule="append-seq-mismatch",
                    seq=first_seq,
                    path=str(self.path),
                )
            backend = self.store.backend
            if self.pg_lock is None:
                lock = backend.lock(self.path, self.session.id, create=True)
                lock.acquire()
                self.pg_lock = lock
            self.appender = backend.publish_first(
                self.path, self.session.header.encode(), list(lines), session_id=self.session.id
            )
            return
        self.appender.append(lines, first_seq, last_seq)

    def release(self) -> None:
        """Close the appender and release the advisory lock; idempotent."""
        try:
            if self.appender is not None:
                self.appender.close()
        finally:
            if self.pg_lock is not None:
                self.pg_lock.release()
