"""The storage seam: the one interface every session-log backend implements.

The use cases (:mod:`dsh_store.store`, restore, repair, verify) reach storage only
through a :class:`StorageBackend`. It sits at the level of DSH's own persistence hooks:
read a stored log with what the committed-region rule found, read from a seq, a revision
token, append one batch durably with the tail check (the first publish materializes the
header and the first batch together), commit a repair, list headers, locate, and take the
single writer's lock. Implementations: raw JSONL (:mod:`dsh_store.jsonl.backend`, whose
encoding is a constructor option) and the in-memory reference (:mod:`dsh_store.memory`).
``docs/architecture.md`` states the crash story each method must give.

Records. The model hands every event over as its canonical record,
:attr:`SessionEvent.line <dsh_store.model.SessionEvent.line>`: the compact canonical JSON
followed by the one ``\\n`` that terminates it in the model's canonical form. A backend
treats the JSON as opaque and owns its framing: raw JSONL writes the bytes as they are
(no copy on the hot path), a frame or row backend stores ``record[:-1]`` and hands back
what it stored with the terminator restored. A backend never re-encodes a record.

Locations. A log is named by a :class:`~pathlib.Path`: a real file for JSONL, a
pseudo-path for other backends (e.g. ``memory:/<id>``), used in messages and as the key
handed back to the backend. The vocabulary a reader reports in (:class:`StoredRow`,
:class:`TornTail`, :class:`HeaderInfo`, :class:`Finding`, defined in
:mod:`dsh_store.records`) is re-exported here, so an implementation imports everything it
needs from this module. This module imports only the model and that vocabulary: every
backend, :mod:`dsh_store.jsonl` included, may import it.

This interface is stable: methods may be added (with a default in this class), never
renamed or given new required parameters.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, NoReturn, Protocol

from .errors import EventValidationError, NotASessionError, UnsupportedVersionError
from .model import SessionEvent
from .records import Finding, HeaderInfo, ScannedRow, TornTail

if TYPE_CHECKING:
    # Annotations only: the verify cold start imports no pathlib (tests/cli/test_import_cost.py).
    from pathlib import Path

__all__ = [
    "Appender",
    "Finding",
    "HeaderEntry",
    "HeaderInfo",
    "RepairOutcome",
    "RepairRequest",
    "StorageBackend",
    "StoredLogReader",
    "StoredRow",
    "TornTail",
    "WriterLock",
    "refuse_misnumbered_batch",
]

StoredRow = ScannedRow
"""One committed row of a stored log: ``value`` (the parsed JSON object), ``raw`` (its
canonical JSON without the terminator), ``line`` / ``offset`` (where a message points:
line number counting the header as 1, and byte offset; a backend without lines numbers
its rows the same way), ``first_seq`` and ``seq_count`` (a packed row of an older
format holds several seqs)."""


class StoredLogReader(Protocol):
    """One forward pass over a stored log (what :meth:`StorageBackend.read` returns).

    Call :meth:`read_header` first, then iterate :meth:`rows` (or :meth:`exhaust`). The
    rows stop at the first defect; a defect followed by a later commit marker
    (``turn/end``) is committed corruption and raises
    :class:`~dsh_store.errors.CorruptLogError` from the iteration. The attributes are
    final once the rows are exhausted.
    """

    @property
    def header(self) -> HeaderInfo | None:
        """The header :meth:`read_header` (or the rows) last decoded, None before."""
        ...

    @property
    def empty(self) -> bool:
        """True for a stored log of no bytes at all (a log that never got its header)."""
        ...

    @property
    def torn(self) -> TornTail | None:
        """The crash tail after the committed region, None when the log ends cleanly."""
        ...

    @property
    def committed_size(self) -> int:
        """Bytes (or the backend's size unit) of header plus accepted rows."""
        ...

    @property
    def file_size(self) -> int:
        """The stored size seen by this pass; an appender opened later must match it."""
        ...

    @property
    def findings(self) -> list[Finding]:
        """Tolerated defects and framing remarks, in log order."""
        ...

    @property
    def revision(self) -> str | None:
        """The revision token of what this pass read (None before :meth:`read_header`)."""
        ...

    def read_header(self) -> HeaderInfo | None:
        """The header row (any format version), None for an empty log.

        :raises NotASessionError: the first record is not a session header.
        :raises UnsupportedVersionError: the header's version is newer than supported.
        """
        ...

    def rows(self) -> Iterator[StoredRow]:
        """The committed rows after the header, in seq order.

        Each row's decoded value is new to this call and held by nothing else: reading an
        older log rewrites those values in place as they are upgraded.
        """
        ...

    def reopen(self) -> StoredLogReader:
        """A fresh reader of the same log (to locate a row after a refusal)."""
        ...


class Appender(Protocol):
    """The append handle of one log, held by its single writer.

    :meth:`append` writes one batch durably: it checks first that the stored log is still
    exactly what this handle last left (the tail check; else
    :class:`~dsh_store.errors.ConcurrentModificationError`, nothing written) and that the
    seqs continue it (else ``append-seq-mismatch``); on any failure the log is rolled back
    to its size before the batch and ``pending`` keeps the batch; a failed rollback marks
    the handle broken (``broken_cause``) and every later call raises
    :class:`~dsh_store.errors.WriterBrokenError`.
    """

    @property
    def broken_cause(self) -> str | None:
        """Why the handle is unusable (a rollback failed), None while it is usable."""
        ...

    @property
    def next_seq(self) -> int:
        """The seq the next batch must start at."""
        ...

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        ...

    def append(self, lines: Sequence[bytes], first_seq: int, last_seq: int) -> None:
        """Append the records of seqs ``first_seq .. last_seq`` durably, or nothing."""
        ...

    def close(self) -> None:
        """Release the handle; idempotent."""
        ...


def refuse_misnumbered_batch(
    path: object, next_seq: int, lines: Sequence[bytes], first_seq: int, last_seq: int
) -> NoReturn:
    """Raise the ``append-seq-mismatch`` refusal of :meth:`Appender.append`: the batch of
    ``lines`` for seqs ``first_seq .. last_seq`` does not continue a log at ``next_seq``
    (or is empty, or holds another number of lines). Nothing was written."""
    raise EventValidationError(
        f"append seq mismatch: the log continues at seq {next_seq}, got a batch "
        f"of {len(lines)} line(s) for seqs {first_seq}..{last_seq}",
        rule="append-seq-mismatch",
        seq=first_seq,
        path=str(path),
    )


class WriterLock(Protocol):
    """The single-writer lock of one session: exclusive, non-blocking, across processes.

    JSONL uses an OS file lock in the session directory; a database backend an advisory
    lock held for the session. A second holder is refused at once with
    :class:`~dsh_store.errors.SessionLockedError`.
    """

    @property
    def is_held(self) -> bool:
        """True while this object holds the lock."""
        ...

    def acquire(self) -> None:
        """Take the lock now or raise :class:`~dsh_store.errors.SessionLockedError`."""
        ...

    def release(self) -> None:
        """Release the lock if held; idempotent."""
        ...

    def __enter__(self) -> WriterLock: ...

    def __exit__(self, *exc_info: object) -> None: ...


class HeaderEntry(NamedTuple):
    """One listed log: where it is, its header row (any version) and its revision."""

    location: Path
    header: HeaderInfo
    revision: str


class RepairRequest(NamedTuple):
    """What a crash repair must make durable, computed by the caller from one read.

    ``events`` are the committed events and ``closers`` the synthetic events that close
    the open turn (possibly none); ``committed_size`` is where the committed region ends
    and ``stored_size`` the size the read saw (the tail check of the repair).
    """

    session_id: str
    events: Sequence[SessionEvent]
    closers: Sequence[SessionEvent]
    committed_size: int
    stored_size: int


class RepairOutcome(NamedTuple):
    """What :meth:`StorageBackend.commit_repair` did (or, in a dry run, would do).

    ``cut_at`` / ``cut_bytes``: the torn tail removed (None / 0 when there was none),
    kept loss-free at ``saved_to``; ``completed_bytes``: bytes of a closer batch an
    interrupted earlier repair had written, which this repair completed instead of
    cutting; ``closers``: how many closer records were appended by this call.
    ``read_back``: the repaired log is not the committed region followed by the closers'
    lines (a zstd log keeps the torn frame's records and frames them anew), so a caller
    that needs its state reads it back instead of deriving it.
    """

    cut_at: int | None
    cut_bytes: int
    saved_to: Path | None
    completed_bytes: int
    closers: int
    applied: bool
    read_back: bool = False


class StorageBackend(abc.ABC):
    """A place where session logs are stored (see the module docstring and
    ``docs/architecture.md`` for each method's crash story)."""

    #: A short name used in messages and test ids (``jsonl``, ``jsonl-zstd``, ``memory``).
    name: str = "backend"

    @property
    def display(self) -> str:
        """How messages name this store (safe to print: never a credential); :attr:`name`
        unless the backend knows better (a database backend: its URL, password masked)."""
        return self.name

    # -- discovery -------------------------------------------------------------------

    @abc.abstractmethod
    def locate(self, session_id: str, cwd: str | None) -> Path:
        """Where the log of ``session_id`` with ``cwd`` lives or will live. Pure."""

    @abc.abstractmethod
    def find(self, session_id: str) -> Path | None:
        """The stored log of ``session_id`` (its newest generation), None when absent.

        :raises AmbiguousSessionError: the id is stored in more than one place.
        """

    @abc.abstractmethod
    def locations(self) -> Iterator[Path]:
        """The location of every stored log, in the backend's walk order (no reads)."""

    def list_headers(self) -> list[HeaderEntry]:
        """The header of every stored log, in walk order, reading headers only.

        A log whose header cannot be read (unreadable, not a session, a newer version)
        is left out; verify reports such logs.
        """
        entries: list[HeaderEntry] = []
        for location in self.locations():
            try:
                reader = self.read(location)
                info = reader.read_header()
            except (NotASessionError, UnsupportedVersionError, OSError):
                continue
            revision = reader.revision
            if info is not None and revision is not None:
                entries.append(HeaderEntry(location, info, revision))
        return entries

    def is_empty(self, location: Path) -> bool:
        """True when a log exists at ``location`` but holds no byte (no header)."""
        return False

    # -- reading ---------------------------------------------------------------------

    @abc.abstractmethod
    def read(self, location: Path) -> StoredLogReader:
        """A reader over the stored log at ``location``; never writes.

        The pass sees one stable state of the log (JSONL: the size taken at the start).
        """

    @abc.abstractmethod
    def revision(self, location: Path) -> str:
        """A token that changes whenever the stored log changes (cheap: no rows read)."""

    def read_from(self, location: Path, from_seq: int) -> Iterator[StoredRow]:
        """The committed rows holding a seq ``>= from_seq``; no closers, never the tail."""
        reader = self.read(location)
        reader.read_header()
        for row in reader.rows():
            if row.first_seq + row.seq_count > from_seq:
                yield row

    # -- writing ---------------------------------------------------------------------

    @abc.abstractmethod
    def lock(self, location: Path, session_id: str, *, create: bool = False) -> WriterLock:
        """The single-writer lock of the session stored at ``location`` (not yet taken).

        With ``create`` the backend first makes the place a new log needs (JSONL: the
        session directory, every new name made durable).
        """

    @abc.abstractmethod
    def publish_first(
        self,
        location: Path,
        header_line: bytes,
        first_batch: Sequence[bytes],
        *,
        session_id: str,
    ) -> Appender:
        """Lazy materialization: store a new log of the header plus its first batch at once.

        After a crash the log either does not exist or holds both. The caller holds the
        session's lock. Returns the appender, expecting seq ``len(first_batch)``.

        :raises SessionExistsError: a log already exists at ``location``; never replaced.
        """

    @abc.abstractmethod
    def open_appender(self, location: Path, *, expected_size: int, next_seq: int) -> Appender:
        """The appender of an existing log the caller just read (lock held).

        :raises ConcurrentModificationError: the stored size is not ``expected_size``.
        """

    @abc.abstractmethod
    def commit_repair(
        self, location: Path, request: RepairRequest, *, dry_run: bool = False
    ) -> RepairOutcome:
        """Make a crash repair durable: cut the torn tail loss-free, then append the
        closers as one batch. Idempotent: after a crash at any point, repeating the same
        request converges on the same log; a balanced, clean log is never written.
        ``dry_run`` reports what would be done and writes nothing. Lock held.

        :raises ConcurrentModificationError: the stored size is not ``stored_size``.
        """

    def close(self) -> None:
        """Release what the backend holds (connections, caches); idempotent."""
        return None
