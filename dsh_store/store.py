"""``JsonlStore``: the durable session store over a root directory (DESIGN §4–§6).

The store composes the physical layer (:mod:`dsh_store.jsonl`), the model and the
restore use case. Writers go through a :class:`LiveSession` (sync, background writer
thread) or an :class:`AsyncLiveSession` (asyncio, disk I/O in the loop's executor); both
hold the session's exclusive OS lock from open (or first write) to close.

Crash stories, one per write path:

- first write: header + first batch are published by temp file, fsync, ``link``,
  directory fsync — after a crash the log either does not exist or is complete;
- later writes: one write + fsync per batch, truncated back on failure — after a crash
  the file is its committed prefix plus at most one torn batch, which restore discards;
- repair on open/load: torn bytes are copied to a fsynced sidecar before the truncate,
  and the closers are one appended batch — a crash at any step converges on the next load.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .backend import HeaderEntry, StorageBackend
from .binding import BINDING_RULE, binding_in, row_binding
from .children import children_index, migration_children
from .errors import (
    AmbiguousSessionError,
    CorruptLogError,
    DshStoreError,
    EncodingConversionPendingError,
    EventValidationError,
    NeedsMigrationError,
    SessionExistsError,
    SessionNotFoundError,
    StoreEncodingError,
)
from .inspection import Inspection
from .jsonl import layout
from .jsonl.backend import JsonlBackend, newest_generation
from .jsonl.files import storage_errors
from .jsonl.rows import HeaderInfo
from .jsonl.writebehind import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_BATCH_EVENTS,
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_WINDOW_S,
)
from .live import AsyncLiveSession, AsyncOpening, LiveSession, WriterHandle
from .migrate import publish_upgrade
from .model import (
    SESSION_FORMAT_VERSION,
    Session,
    SessionEvent,
    SessionHeader,
    build_fork_seed,
)
from .repair import RepairPlan, commit_repair, commit_repair_with, repair_file, repair_request
from .restore import read_log, restore_stored
from .salvage import SalvagePlan, SalvageRefusedError, salvage_file

__all__ = [
    "AmbiguousSessionError",
    "AsyncLiveSession",
    "AsyncOpening",
    "JsonlStore",
    "LiveSession",
    "NeedsMigrationError",
    "RepairPlan",
    "SalvagePlan",
    "SalvageRefusedError",
    "SessionStore",
    "commit_repair",
    "newest_generation",
    "repair_file",
    "salvage_file",
]

Clock = Callable[[], int]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class SessionStore:
    """A durable session store over any :class:`~dsh_store.backend.StorageBackend`.

    Every use case of the store (inspect, load, read_from, list, new, open, append,
    fork) reaches storage only through ``backend``. :class:`JsonlStore` is this store
    over the JSONL backend, with the JSONL-only extras (older generations, the
    directory walk, identity binding).

    :param backend: where the logs are stored.
    :param window_s: the write-behind window (fixed, not reset by later events).
    :param max_batch_events: a batch starts early once this many events wait.
    :param max_batch_bytes: a batch starts early once this many bytes wait.
    :param max_pending_bytes: at this many unwritten bytes ``append`` blocks (sync) or
        awaits (async) until the writer catches up.
    :param clock: epoch milliseconds for new events and headers (tests inject one).
    """

    def __init__(
        self,
        backend: StorageBackend,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_batch_events: int | None = DEFAULT_MAX_BATCH_EVENTS,
        max_batch_bytes: int | None = DEFAULT_MAX_BATCH_BYTES,
        max_pending_bytes: int | None = DEFAULT_MAX_PENDING_BYTES,
        clock: Clock | None = None,
    ) -> None:
        self.backend = backend
        self._writer_options: dict[str, Any] = {
            "window_s": window_s,
            "max_batch_events": max_batch_events,
            "max_batch_bytes": max_batch_bytes,
            "max_pending_bytes": max_pending_bytes,
        }
        self._clock: Clock = clock or _wall_clock_ms
        # Log location -> its revision right after this store's last append() to it.
        self._appended: dict[str, str] = {}

    # -- hooks a backend-specific store refines ---------------------------------------

    @property
    def _where(self) -> str:
        """How messages name the store (the root of a JSONL store, the backend's
        :attr:`~dsh_store.backend.StorageBackend.display` otherwise)."""
        return self.backend.display

    def _check_identity(self, inspection: Inspection, session_id: str) -> None:
        """Refuse a log whose header names another session than the one looked up."""
        _check_identity(inspection, session_id, None)

    def _misfiled(self, entry: HeaderEntry) -> bool:
        """Whether a listed log is filed where its header does not lead (left out)."""
        return False

    def _read(self, log: Path) -> Inspection:
        return self._restore(log)[0]

    def _restore(self, log: Path, *, resume: bool = False) -> tuple[Inspection, Session]:
        """One read of the log: the view and its validated session (see restore_stored)."""
        return restore_stored(self.backend.read(log), log, resume=resume, clock=self._clock)

    def _new_log_path(self, session_id: str, cwd: str | None) -> Path:
        """Where a new log of ``session_id`` is written."""
        return self.backend.locate(session_id, cwd)

    def _check_encoding(self, log: Path) -> None:
        """Refuse to write a log this store would not have written (JSONL: its encoding)."""

    def _upgrade_for_write(self, inspection: Inspection, log: Path) -> Inspection:
        """Publish the v4 upgrade of an older log (only JSONL stores hold older ones)."""
        raise NeedsMigrationError(str(inspection.path), inspection.source_version, "open")

    # -- discovery -------------------------------------------------------------------

    def locate(self, session_id: str, cwd: str | None = None) -> Path:
        """Where the log of ``session_id`` lives (or will live). Pure calculation when
        ``cwd`` is given; otherwise the existing session's log is looked up.
        """
        if cwd is not None:
            return self.backend.locate(session_id, cwd)
        found = self._find(session_id)
        if found is not None:
            return found
        return self.backend.locate(session_id, None)

    def _find(self, session_id: str) -> Path | None:
        """The stored log of ``session_id``, or None; duplicates are refused."""
        return self.backend.find(session_id)

    def _require(self, session_id: str) -> Path:
        log = self._find(session_id)
        if log is None:
            raise SessionNotFoundError(session_id, self._where)
        return log

    # -- reading ---------------------------------------------------------------------

    def inspect(self, session_id: str) -> Inspection:
        """The balanced view of a session: closers in memory, torn tail untouched, no write."""
        log = self._require(session_id)
        with storage_errors(f"reading session {session_id!r}", log, then="read it again"):
            inspection = self._read(log)
        self._check_identity(inspection, session_id)
        return inspection

    def load(self, session_id: str) -> Inspection:
        """Restore a session and commit its repair durably (sidecar, truncate, closers).

        A second load changes nothing. Takes the session lock for the repair, so it fails
        with :class:`SessionLockedError` while a writer has the session open.

        :raises StorageError: the OS refused a read or write (e.g. permission denied).
        """
        log = self._require(session_id)
        lock = self.backend.lock(log, session_id)
        with storage_errors(f"loading session {session_id!r}", log, then="load it again"), lock:
            inspection = self._read(log)
            self._check_identity(inspection, session_id)
            if inspection.source_version != SESSION_FORMAT_VERSION:
                return inspection
            return self._commit_repair(inspection)

    def _commit_repair(self, inspection: Inspection) -> Inspection:
        """:func:`commit_repair` through this store's backend, re-reading the result."""
        return commit_repair_with(self.backend, inspection, lambda: self._read(inspection.path))

    def read_from(self, session_id: str, from_seq: int) -> builtins.list[SessionEvent]:
        """Stored events with ``seq >= from_seq``: no closers, never the torn fragment."""
        if type(from_seq) is not int or from_seq < 0:
            raise EventValidationError(
                f"read_from needs a non-negative integer seq, got {from_seq!r}",
                rule="read-from-seq",
            )
        inspection = self.inspect(session_id)
        return list(inspection.events[from_seq:])

    def list(self) -> list[SessionHeader]:
        """Headers of every stored session (reads first lines only), sorted by id.

        A session whose directory or log cannot be read (permission denied, not a
        session), or whose log is misfiled (its header's id and cwd derive another
        directory, :mod:`dsh_store.binding`), is left out rather than failing the listing;
        ``dsh-store verify`` reports such files.
        """
        return [header for header, _ in self.snapshots()]

    def snapshots(self) -> builtins.list[tuple[SessionHeader, str]]:
        """``(header, revision)`` per stored session; the revision changes with the file."""
        result: builtins.list[tuple[SessionHeader, str]] = []
        for entry in self.backend.list_headers():
            if self._misfiled(entry):
                continue  # misfiled: its header's id does not lead here (verify reports it)
            header = _header_only(entry.header.value, entry.location)
            if header is None:
                continue
            result.append((header, entry.revision))
        result.sort(key=lambda item: item[0].id)
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
        """Create a session. Nothing touches disk until the first event is written.

        :raises SessionExistsError: a log with this id already exists in the store.

        The first write (``flush``, ``close`` or a background batch) raises
        :class:`StorageError` when the OS refuses to create the session's directories,
        lock or log (e.g. permission denied); the events stay queued.
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
        """The asyncio twin of :meth:`new`: ``await`` it or use ``async with``."""

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
        """The handle of a new session; nothing touches disk until its first write."""
        existing = self._find(session_id)
        if existing is not None:
            raise SessionExistsError(
                session_id, str(existing), empty=self.backend.is_empty(existing)
            )
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
        path = self._new_log_path(session_id, cwd)
        session = Session.create(session_id, header=header, clock=self._clock)
        return WriterHandle(self._writer_options, session, path, backend=self.backend)

    def open(self, session_id: str) -> LiveSession:
        """Open a stored session for writing: lock, restore, repair, then resume.

        The resumed session's first write is ``session/end-seed {}`` (unless the log
        already ends in a marker); seqs continue.

        :raises SessionLockedError: another writer holds the session.
        :raises StorageError: the OS refused a read or write (e.g. permission denied).
        """
        return LiveSession(self._open_handle(session_id))

    def aopen(self, session_id: str) -> AsyncOpening:
        """The asyncio twin of :meth:`open`: ``await`` it or use ``async with``.

        Locking, restore and repair run in the loop's executor.
        """

        async def start() -> AsyncLiveSession:
            loop = asyncio.get_running_loop()
            handle = await loop.run_in_executor(None, self._open_handle, session_id)
            return AsyncLiveSession(handle)

        return AsyncOpening(start)

    def _open_handle(self, session_id: str) -> WriterHandle:
        log = self._require(session_id)
        self._check_encoding(log)
        with storage_errors(
            f"opening session {session_id!r} for writing", log, then="open it again"
        ):
            return self._open_handle_at(log, session_id)

    def _open_handle_at(self, log: Path, session_id: str) -> WriterHandle:
        lock = self.backend.lock(log, session_id)
        lock.acquire()
        try:
            inspection, session = self._resume(log, session_id)
            writer = self.backend.open_appender(
                inspection.path,
                expected_size=inspection.file_size,
                next_seq=len(inspection.events),
            )
        except BaseException:
            lock.release()
            raise
        return WriterHandle(
            self._writer_options,
            session,
            inspection.path,
            backend=self.backend,
            lock=lock,
            writer=writer,
            written=len(inspection.events),
        )

    def _resume(self, log: Path, session_id: str) -> tuple[Inspection, Session]:
        """Read and validate the log once, commit its repair, return the resumed session.

        The session validated by the read already holds the closers and the end-seed, so
        the repaired log is not read back: the repair wrote exactly the closers' records
        after the committed region, and the appender's tail check (the size below) refuses
        to continue a log that is anything else. An older log is upgraded first, which
        reads the published upgrade (``_restore_for_write``).
        """
        inspection, session = self._restore(log, resume=True)
        self._check_identity(inspection, session_id)
        if inspection.source_version != SESSION_FORMAT_VERSION:
            upgraded = self._upgrade_for_write(inspection, log)
            return upgraded, Session.from_restore(
                upgraded.header, upgraded.events, resume=True, clock=self._clock
            )
        if not inspection.needs_repair:
            return inspection, session
        outcome = self.backend.commit_repair(inspection.path, repair_request(inspection))
        if outcome.read_back:  # e.g. a torn zstd frame's records kept in a new frame
            repaired = self._read(inspection.path)
            return repaired, Session.from_restore(
                repaired.header, repaired.events, resume=True, clock=self._clock
            )
        repaired = dataclasses.replace(
            inspection,
            events=inspection.balanced,
            closers=(),
            torn=None,
            committed_size=inspection.committed_size
            + sum(len(event.line) for event in inspection.closers),
            findings=tuple(
                finding
                for finding in inspection.findings
                if finding.rule not in ("torn-tail", "open-turn")
            ),
            classification="ok",
            revision=self.backend.revision(inspection.path),
        )
        return dataclasses.replace(repaired, file_size=repaired.committed_size), session

    def _restore_for_write(
        self, log: Path, session_id: str, *, continuing: bool = False
    ) -> Inspection:
        """Read, check identity, then make the log a balanced v4 log (lock held).

        The identity check comes before any write, so a log filed under the wrong id is
        never repaired; an older log is upgraded by publishing ``session.v4.jsonl``.
        With ``continuing``, a log exactly as this store's last :meth:`append` left it is
        returned as read: a turn open there is that append's, not a crash's.
        """
        inspection = self._read(log)
        self._check_identity(inspection, session_id)
        if (
            continuing
            and inspection.torn is None
            and self._appended.get(str(inspection.path)) == inspection.revision
        ):
            return inspection
        if inspection.source_version != SESSION_FORMAT_VERSION:
            return self._upgrade_for_write(inspection, log)
        return self._commit_repair(inspection)

    def append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Append already-built events to a stored session, durably, in one batch.

        The first event's seq must equal the stored next seq (after any crash repair,
        which this commits first) and the batch must be contiguous; the whole log with the
        batch must validate. An empty batch does nothing.

        A turn may span several calls: the crash repair (which closes an open turn) runs
        only when the log is not exactly as this store object's previous append left it,
        i.e. on its first append to the session, or after any other change to the file.
        """
        layout.check_session_id(session_id)  # a bad id is refused even with nothing to add
        if not events:
            return
        log = self._require(session_id)
        with self.backend.lock(log, session_id):
            inspection = self._restore_for_write(log, session_id, continuing=True)
            expected = len(inspection.events)
            for index, event in enumerate(events):
                if event.seq != expected + index:
                    raise EventValidationError(
                        f"append seq mismatch: expected seq {expected + index} at batch index "
                        f"{index}, got {event.seq}",
                        rule="append-seq-mismatch",
                        seq=event.seq,
                        event_type=event.type,
                        path=str(inspection.path),
                    )
            Session.from_restore(inspection.header, [*inspection.events, *events])
            writer = self.backend.open_appender(
                inspection.path, expected_size=inspection.file_size, next_seq=expected
            )
            try:
                writer.append(
                    [event.line for event in events], expected, expected + len(events) - 1
                )
            finally:
                writer.close()
            self._appended[str(inspection.path)] = self.backend.revision(inspection.path)

    def fork(
        self, session_id: str, boundary: int | None = None, child_id: str | None = None
    ) -> str:
        """Create a seeded child from a prefix of ``session_id`` and write it durably.

        The child holds the source's events through ``boundary`` (inclusive; default: the
        whole committed log), a ``session/end-seed {inherited: true}`` marker at the cut,
        and ``forked`` closers if a turn was open there. Returns the child's id.

        :raises StorageError: the OS refused a read or write (e.g. permission denied).
        """
        child = child_id if child_id is not None else str(uuid.uuid4())
        with storage_errors(
            f"forking session {session_id!r} as {child!r}", self._where, then="fork it again"
        ):
            return self._fork(session_id, boundary, child)

    def _fork(self, session_id: str, boundary: int | None, child: str) -> str:
        source = self.inspect(session_id)
        seed = build_fork_seed(source.events, boundary)
        parent = source.header
        header = SessionHeader(
            id=child,
            created_at=self._clock(),
            is_seeded=True,
            delegation_depth=parent.delegation_depth,
            cwd=parent.cwd,
            origin=parent.origin,
            agent_preset=parent.agent_preset,
        )
        self.import_log(header, seed)
        return child

    def import_log(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Store a whole log (header and events) as a new session, published at once.

        The log must itself validate; after a crash it is absent or complete (the backend's
        first publish).

        :raises SessionExistsError: the store already holds this id (never overwritten).
        """
        Session.from_restore(header, events)  # the log must itself be valid
        path = self._new_log_path(header.id, header.cwd)
        if self._find(header.id) is not None:
            raise SessionExistsError(header.id, str(path))
        # create=True also makes durable the levels a killed writer made.
        with self.backend.lock(path, header.id, create=True):
            self.backend.publish_first(
                path, header.encode(), [event.line for event in events], session_id=header.id
            ).close()

    def iter_records(self, session_id: str) -> Iterator[bytes]:
        """The stored log as JSONL, record by record: the header line, then each committed
        record (never a torn tail), each with its ``\\n``. For a log this store wrote, the
        bytes of the raw JSONL log the same appends make, whatever the backend."""
        log = self._require(session_id)
        reader = self.backend.read(log)
        info = reader.read_header()
        if info is None:
            return
        yield info.raw + b"\n"
        for row in reader.rows():
            yield row.raw + b"\n"


class JsonlStore(SessionStore):
    """A directory of session logs in DSH's raw-JSONL layout (DESIGN §4).

    :param root: the store root; created on first write (0700), never required to exist.
    :param window_s: the write-behind window (fixed, not reset by later events).
    :param max_batch_events: a batch starts early once this many events wait.
    :param max_batch_bytes: a batch starts early once this many bytes wait.
    :param max_pending_bytes: at this many unwritten bytes ``append`` blocks (sync) or
        awaits (async) until the writer catches up.
    :param clock: epoch milliseconds for new events and headers (tests inject one).
    :param encoding: ``raw`` (``session.v4.jsonl``) or ``zstd`` (``session.v4.jsonl.zstd``,
        one frame per batch); ``None`` takes the root's (see :attr:`encoding`).
    """

    backend: JsonlBackend

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_batch_events: int | None = DEFAULT_MAX_BATCH_EVENTS,
        max_batch_bytes: int | None = DEFAULT_MAX_BATCH_BYTES,
        max_pending_bytes: int | None = DEFAULT_MAX_PENDING_BYTES,
        clock: Clock | None = None,
        encoding: str | None = None,
    ) -> None:
        if encoding not in (None, "raw", "zstd"):
            raise ValueError(f"encoding is 'raw' or 'zstd', got {encoding!r}")
        self._encoding = encoding
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"store root {self.root} is not a directory")
        super().__init__(
            JsonlBackend(self.root),
            window_s=window_s,
            max_batch_events=max_batch_events,
            max_batch_bytes=max_batch_bytes,
            max_pending_bytes=max_pending_bytes,
            clock=clock,
        )

    # -- the JSONL refinements of the store's hooks ------------------------------------

    @property
    def encoding(self) -> str:
        """``raw`` or ``zstd``: how this store writes logs (docs/format.md §7.2).

        The one passed to the constructor; otherwise that of the first session log found
        under the root, or ``raw`` for a root without one. Detected once.
        """
        if self._encoding is None:
            self._encoding = layout.root_encoding(str(self.root)) or "raw"
        return self._encoding

    def _new_log_path(self, session_id: str, cwd: str | None) -> Path:
        name = layout.generation_name(SESSION_FORMAT_VERSION, self.encoding)
        return layout.session_dir(self.root, session_id, cwd) / name

    def _check_encoding(self, log: Path) -> None:
        """Refuse to read or write a log of the other encoding than the store's, or one
        whose directory also holds the other encoding's (an interrupted conversion)."""
        found = layout.encoding_of(log.name)
        if found != self.encoding:
            raise StoreEncodingError(str(log), found, self.encoding)
        twin = layout.encoding_twin(str(log))
        if twin is not None:
            raise EncodingConversionPendingError(str(log), twin)

    def _find(self, session_id: str) -> Path | None:
        """The stored log of ``session_id``, refused when it is not in the store's encoding."""
        log = self.backend.find(session_id)
        if log is not None:
            self._check_encoding(log)
        return log

    @property
    def _where(self) -> str:
        return str(self.root)

    def _check_identity(self, inspection: Inspection, session_id: str) -> None:
        """Also refuse a log whose header and cwd derive another directory (binding)."""
        _check_identity(inspection, session_id, self.root)

    def _misfiled(self, entry: HeaderEntry) -> bool:
        """Also refuses (raises) a listed log of the other encoding than the store's."""
        self._check_encoding(entry.location)
        location = entry.location
        return (
            row_binding(self.root, location.parent, entry.header.value, path=location) is not None
        )

    def _restore(self, log: Path, *, resume: bool = False) -> tuple[Inspection, Session]:
        reader = self.backend.read(log)
        # One header read serves both the version check and the child evidence.
        children = self.migration_children(reader.read_header())
        return restore_stored(reader, log, child_headers=children, resume=resume, clock=self._clock)

    def _upgrade_for_write(self, inspection: Inspection, log: Path) -> Inspection:
        # The same child-session evidence inspect() upgraded with, so the published
        # log is the one inspect showed.
        published = read_log(
            publish_upgrade(
                inspection,
                child_headers=self.migration_children(self.backend.read(log).read_header()),
            )
        )
        # Migration invents no event: a turn the crash left open is open in the upgrade
        # too, and is closed now, as for a v4 log, before the writer resumes.
        return commit_repair(published)

    # -- discovery -------------------------------------------------------------------

    def locate(self, session_id: str, cwd: str | None = None) -> Path:
        """Where the v4 log of ``session_id`` lives (or will live). Pure path calculation
        when ``cwd`` is given; otherwise the existing session's directory is looked up.
        """
        if cwd is not None:
            return self._new_log_path(session_id, cwd)
        found = self._find(session_id)
        if found is not None:
            encoding = layout.encoding_of(found.name)
            return found.parent / layout.generation_name(SESSION_FORMAT_VERSION, encoding)
        return self._new_log_path(session_id, None)

    def session_dirs(self) -> Iterator[Path]:
        """Every session directory under the root (symlinked directories are skipped).

        A directory that cannot be listed (permission denied) is skipped like a
        non-directory: one unreadable entry never hides the rest of the store.
        """
        return self.backend.session_dirs()

    def session_logs(self) -> Iterator[Path]:
        """The log of every session directory (its :func:`newest_generation`), in walk order."""
        return self.backend.locations()

    def child_headers(self, parent_id: str) -> tuple[Mapping[str, Any], ...]:
        """Header rows of the sessions that name ``parent_id`` as their parent.

        The evidence the 3->4 migration edge needs to complete a ``subagent/catalog``;
        reads first lines only.
        """
        return self.children_index().get(parent_id, ())

    def migration_children(
        self,
        info: HeaderInfo | None,
        index: Mapping[str, tuple[Mapping[str, Any], ...]] | None = None,
    ) -> tuple[Mapping[str, Any], ...] | None:
        """The child evidence the migration chain needs for a log whose header is ``info``
        (:func:`dsh_store.children.migration_children` over this store's backend)."""
        return migration_children(info, self.backend, index)

    def children_index(self) -> dict[str, tuple[Mapping[str, Any], ...]]:
        """Parent id -> header rows of its child sessions, for the whole root (one pass)."""
        return children_index(self.backend)


def _header_only(value: dict[str, Any], log: Path) -> SessionHeader | None:
    """A header row of any supported version as a v4 header, reading no events."""
    version = value.get("version")
    try:
        if version != SESSION_FORMAT_VERSION:
            # the chain only for an older header: off a v4 writer's start
            from .migrations import EDGES, MigrationContext

            context = MigrationContext(path=str(log), session_id=value.get("id"))
            for source in range(int(version), SESSION_FORMAT_VERSION):  # type: ignore[arg-type]
                value = EDGES[source].header(value, context)
        return SessionHeader.from_json(value)
    except (DshStoreError, KeyError, TypeError, ValueError):
        return None


def _check_identity(inspection: Inspection, session_id: str, root: Path | None) -> None:
    """Refuse a log filed in the wrong place: its header must name ``session_id`` and, with
    its cwd, derive the directory the log is in (see :mod:`dsh_store.binding`)."""
    header = inspection.header
    directory = inspection.path.parent
    misfiled = (
        None
        if root is None
        else binding_in(root, directory, header.id, header.cwd, path=inspection.path)
    )
    if header.id != session_id:
        where = "" if misfiled is None or misfiled.expected is None else f" ({misfiled.expected})"
        detail = (
            f"the header names session {header.id!r}, but the log is filed as session "
            f"{session_id!r} in {directory}; move it to its own session directory{where}"
        )
    elif misfiled is not None:
        detail = misfiled.message
    else:
        return
    raise CorruptLogError(str(inspection.path), detail, line=1, offset=0, rule=BINDING_RULE)
