"""The one error hierarchy of dsh-store.

Every failure a caller can meet derives from :class:`DshStoreError`. Each class
states the condition it reports; each instance carries the facts needed to act
on it (path, 1-based line, byte offset, seq, event type) as attributes, and a
message that says what happened, where, and what to do. Errors pickle cleanly so
they survive ``--jobs`` worker processes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .jsonl.rows import Finding

__all__ = [
    "AmbiguousSessionError",
    "ConcurrentModificationError",
    "CorruptFrameError",
    "CorruptLogError",
    "DatabaseError",
    "DemoRootError",
    "DshStoreError",
    "DuplicateKeyError",
    "EncodingConversionPendingError",
    "EventValidationError",
    "ForkedSessionError",
    "InvalidSessionIdError",
    "LoneSurrogateError",
    "LosslessJsonError",
    "MigrationOptionsError",
    "MigrationRefusedError",
    "NeedsMigrationError",
    "NoLogsError",
    "NotASessionDirectoryError",
    "NotASessionError",
    "PostgresUnavailableError",
    "SalvageRefusedError",
    "SchemaVersionError",
    "SessionExistsError",
    "SessionLockedError",
    "SessionNotFoundError",
    "StorageError",
    "StoreEncodingError",
    "UnsupportedVersionError",
    "WriterBrokenError",
    "ZstdUnavailableError",
    "ZstdWriteUnsupportedError",
]


def location_text(
    path: str | os.PathLike[str] | None = None,
    line: int | None = None,
    offset: int | None = None,
    seq: int | None = None,
    event_type: str | None = None,
) -> str:
    """Render the location facts that are known as ``path:line (byte N, seq S, type T)``."""
    head = os.fspath(path) if path is not None else ""
    if line is not None:
        head = f"{head}:{line}" if head else f"line {line}"
    extras = []
    if offset is not None:
        extras.append(f"byte {offset}")
    if seq is not None:
        extras.append(f"seq {seq}")
    if event_type is not None:
        extras.append(f"type {event_type!r}")
    if extras:
        head = f"{head} ({', '.join(extras)})" if head else ", ".join(extras)
    return head


class DshStoreError(Exception):
    """Base class of every error raised by dsh-store.

    Subclasses keep their constructor keywords as attributes; ``__reduce__``
    rebuilds them from those keywords so an error raised in a worker process
    arrives intact in the parent.
    """

    def __init__(self, message: str, **facts: Any) -> None:
        super().__init__(message)
        self.message = message
        self._facts = facts
        for key, value in facts.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self._facts))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[DshStoreError], message: str, facts: dict[str, Any]) -> DshStoreError:
    error = cls.__new__(cls)
    DshStoreError.__init__(error, message, **facts)
    return error


class LosslessJsonError(DshStoreError, ValueError):
    """A value is not lossless JSON (NaN, -0.0, unsafe int, non-str key, foreign object, ...).

    ``json_path`` is the dotted/indexed path of the bad value, e.g.
    ``data.message.content[2].text``; ``event_type`` names the event when known, and
    ``seq`` the seq the refused event would have had (None outside a session).
    """

    json_path: str
    event_type: str | None
    reason: str
    seq: int | None

    def __init__(
        self,
        reason: str,
        *,
        json_path: str,
        event_type: str | None = None,
        seq: int | None = None,
    ) -> None:
        where = f" in event {event_type!r}" if event_type else ""
        if seq is not None:
            where += f" (seq {seq})"
        super().__init__(
            f"not lossless JSON at {json_path}{where}: {reason}; "
            "convert it to plain JSON (dict with str keys, list, str, int, float, bool, None) "
            "before appending",
            json_path=json_path,
            event_type=event_type,
            reason=reason,
            seq=seq,
        )

    def at_seq(self, seq: int) -> LosslessJsonError:
        """The same refusal, naming the seq of the event it was raised for."""
        return LosslessJsonError(
            self.reason, json_path=self.json_path, event_type=self.event_type, seq=seq
        )


class EventValidationError(DshStoreError, ValueError):
    """An event breaks an envelope, lifecycle or vocabulary rule of the v4 model.

    ``rule`` is a short stable rule name that tests and tools can match; ``detail`` is
    the message without the location prefix.
    """

    rule: str
    seq: int | None
    event_type: str | None
    path: str | None
    line: int | None
    offset: int | None
    detail: str

    def __init__(
        self,
        message: str,
        *,
        rule: str,
        seq: int | None = None,
        event_type: str | None = None,
        path: str | None = None,
        line: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = location_text(path, line, offset, seq, event_type)
        super().__init__(
            f"{where}: {message} [rule: {rule}]" if where else f"{message} [rule: {rule}]",
            rule=rule,
            seq=seq,
            event_type=event_type,
            path=path,
            line=line,
            offset=offset,
            detail=message,
        )


class NotASessionError(DshStoreError):
    """The file's first line is not a session header (no ``type: "session"`` or no version)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"{path}: not a session log: {reason}; pass a session.jsonl / session.vN.jsonl file",
            path=path,
            reason=reason,
        )


class CorruptLogError(DshStoreError):
    """Committed corruption: a defect followed by later committed work (e.g. a ``turn/end``).

    The file is left byte-identical; nothing is repaired automatically, because the
    damaged region holds acknowledged events.
    """

    path: str
    line: int | None
    offset: int | None
    seq: int | None
    rule: str
    detail: str

    def __init__(
        self,
        path: str,
        detail: str,
        *,
        line: int | None = None,
        offset: int | None = None,
        seq: int | None = None,
        rule: str = "corrupt",
    ) -> None:
        where = location_text(path, line, offset, seq)
        super().__init__(
            f"{where}: corrupt session log: {detail}; the file was not modified — restore it "
            "from a backup or inspect it with `dsh-store inspect`",
            path=path,
            line=line,
            offset=offset,
            seq=seq,
            rule=rule,
            detail=detail,
        )


class UnsupportedVersionError(DshStoreError):
    """The log's format version is newer than this library (or older with no upgrade path)."""

    path: str
    version: object
    supported: int

    def __init__(self, path: str, version: object, supported: int) -> None:
        if isinstance(version, int) and not isinstance(version, bool) and version > supported:
            advice = "written by a newer writer; upgrade dsh-store"
        else:
            advice = "no upgrade path exists for this version"
        super().__init__(
            f"{path}: session format version {version!r} is not supported "
            f"(this dsh-store reads versions 0-{supported}): {advice}",
            path=path,
            version=version,
            supported=supported,
        )


class MigrationRefusedError(DshStoreError):
    """An older log cannot be upgraded faithfully; nothing was written.

    ``rule`` is the refusal rule (e.g. ``surface before first step``), ``seq`` and
    ``event_type`` locate the offending source event, ``edge`` names the step (``"2->3"``).
    """

    rule: str
    path: str | None
    seq: int | None
    event_type: str | None
    edge: str | None
    line: int | None
    detail: str

    def __init__(
        self,
        detail: str,
        *,
        rule: str,
        path: str | None = None,
        seq: int | None = None,
        event_type: str | None = None,
        edge: str | None = None,
        line: int | None = None,
    ) -> None:
        where = location_text(path, line, None, seq, event_type)
        edge_text = f" at edge {edge}" if edge else ""
        super().__init__(
            f"{where}: migration refused{edge_text}: {detail} [rule: {rule}]; the source log is "
            "unchanged and still readable by the version that wrote it",
            rule=rule,
            path=path,
            seq=seq,
            event_type=event_type,
            edge=edge,
            line=line,
            detail=detail,
        )


class InvalidSessionIdError(DshStoreError, ValueError):
    """A session id that cannot name a session: it is not a ``str``, or it is empty.

    Still a :class:`ValueError`, so callers that caught the old bare error keep working.
    ``session_id`` is the rejected value as given, ``rule`` the rule it breaks
    (``not-a-str`` or ``empty``) and ``detail`` the message without the id.
    """

    session_id: object
    rule: str
    detail: str

    _SHOWN_MAX = 80

    def __init__(self, session_id: object, detail: str, *, rule: str) -> None:
        shown = repr(session_id)
        if len(shown) > self._SHOWN_MAX:
            shown = f"{shown[: self._SHOWN_MAX - 3]}..."
        super().__init__(
            f"invalid session id {shown}: {detail} [rule: {rule}]; "
            "pass a non-empty string as the session id",
            session_id=session_id,
            rule=rule,
            detail=detail,
        )


class SessionNotFoundError(DshStoreError, KeyError):
    """No session with this id exists in the store root."""

    def __init__(self, session_id: str, root: str) -> None:
        super().__init__(
            f"session {session_id!r} not found under {root}; `dsh-store list {root}` shows the "
            "sessions it holds",
            session_id=session_id,
            root=root,
        )


class SessionExistsError(DshStoreError):
    """A session with this id already exists; ``new`` never overwrites.

    ``empty`` is True when the existing log is a 0-byte file: it holds nothing, and
    ``dsh-store repair`` removes it.
    """

    session_id: str
    path: str
    empty: bool

    def __init__(self, session_id: str, path: str, *, empty: bool = False) -> None:
        if empty:
            advice = (
                " as an empty file (0 bytes: no header, nothing was ever committed to it); "
                f"`dsh-store repair {path}` removes it (once it is 10 minutes old), then create "
                "the session again"
            )
        else:
            advice = "; open it instead of creating it"
        super().__init__(
            f"session {session_id!r} already exists at {path}{advice}",
            session_id=session_id,
            path=path,
            empty=empty,
        )


class SessionLockedError(DshStoreError):
    """Another writer (this or another process) holds the session's exclusive lock."""

    def __init__(self, session_id: str, lock_path: str) -> None:
        super().__init__(
            f"session {session_id!r} is open for writing elsewhere (lock {lock_path} is held); "
            "close the other writer first — reading with inspect or read_from needs no lock",
            session_id=session_id,
            lock_path=lock_path,
        )


class ConcurrentModificationError(DshStoreError):
    """The log changed under an open writer (size, identity or tail differ from what it wrote)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"{path}: log changed under this writer: {detail}; nothing was written — reopen the "
            "session to continue from what is on disk",
            path=path,
            detail=detail,
        )


class WriterBrokenError(DshStoreError):
    """A failed write could not be rolled back; the handle refuses all further writes.

    The unwritten events stay readable from memory (``pending``); reopening the
    session restores from what is durable and repairs the tail.
    """

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(
            f"{path}: writer is broken after a failed rollback ({cause}); no further writes are "
            "accepted — reopen the session, which repairs the tail",
            path=path,
            cause=cause,
        )


class StorageError(DshStoreError, OSError):
    """The disk refused a write-path operation (ENOSPC, EIO, EACCES, ...).

    Still an :class:`OSError` (``errno``, ``strerror`` and ``filename`` are those of the
    cause), so callers can match the errno; the message says which operation failed on
    which file, that nothing acknowledged was lost, and what to do again once the disk is
    fixed: ``then`` (``"flush again"`` for a write path; ``"open it again"``, ...).
    """

    operation: str
    path: str
    then: str

    def __init__(
        self, operation: str, path: str, cause: OSError, *, then: str = "flush again"
    ) -> None:
        reason = cause.strerror or str(cause)
        super().__init__(
            f"{path}: {operation} failed: {reason} (errno {cause.errno}); nothing acknowledged "
            "was lost and the file is back to its last durable state — fix the disk (free space, "
            f"permissions) and {then}",
            operation=operation,
            path=path,
            then=then,
        )
        self.errno = cause.errno
        self.strerror = cause.strerror
        self.filename = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_storage, (self.message, self._facts, self.errno, self.strerror))


def _rebuild_storage(
    message: str, facts: dict[str, Any], errno: int | None, strerror: str | None
) -> StorageError:
    error = StorageError.__new__(StorageError)
    DshStoreError.__init__(error, message, **facts)
    error.errno = errno
    error.strerror = strerror
    error.filename = facts.get("path")
    return error


class NeedsMigrationError(DshStoreError):
    """A log of an older format was asked to take v4 bytes (a repair or an append).

    Older logs are never appended to: ``dsh-store migrate`` (or ``JsonlStore.open``)
    publishes the v4 upgrade beside them. Migration invents no event, so a turn a crash
    left open is still open in the upgrade; repairing the v4 log closes it (``open`` does
    that right after publishing).
    """

    def __init__(self, path: str, version: int, action: str) -> None:
        super().__init__(
            f"{path}: cannot {action} a format-{version} log in place; run `dsh-store migrate` "
            "to publish its v4 upgrade (the source stays untouched), then retry",
            path=path,
            version=version,
            action=action,
        )


class AmbiguousSessionError(DshStoreError):
    """One session id is filed under several project directories of the store root."""

    def __init__(self, session_id: str, logs: Sequence[str | os.PathLike[str]]) -> None:
        super().__init__(
            f"session {session_id!r} appears in {len(logs)} project directories "
            f"({', '.join(os.path.dirname(os.fspath(log)) for log in logs)}); keep one and "
            "move the others out of the store root",
            session_id=session_id,
            paths=tuple(os.fspath(log) for log in logs),
        )


class SalvageRefusedError(DshStoreError):
    """Salvage cannot produce a valid log (or may not write where asked); nothing is written.

    ``rule`` names the reason: ``needs-migration``, ``nothing-to-salvage``,
    ``output-is-source``, ``output-exists`` or ``source-changed``; ``stop`` is the defect
    that left nothing to keep, when there is one.
    """

    path: str
    rule: str
    detail: str
    stop: Finding | None

    def __init__(self, path: str, detail: str, *, rule: str, stop: Finding | None = None) -> None:
        super().__init__(
            f"{path}: cannot salvage: {detail}", path=path, detail=detail, rule=rule, stop=stop
        )


class NoLogsError(DshStoreError):
    """A PATH argument holds no session log at all (a typo, or the wrong directory)."""

    path: str

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path}: no .jsonl session logs found (pass a store root, a session directory "
            "or a .jsonl file)",
            path=path,
        )


class NotASessionDirectoryError(DshStoreError):
    """A directory given where one log is read holds no log of its own session."""

    path: str
    reason: str
    instead: str

    def __init__(self, path: str, reason: str, instead: str) -> None:
        super().__init__(
            f"{path}: not a session directory: {reason}; {instead}",
            path=path,
            reason=reason,
            instead=instead,
        )


class DemoRootError(DshStoreError):
    """The directory given to work in exists and is not empty (the demo never reuses one)."""

    path: str
    reason: str

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"{path}: {reason}; pass a new or empty directory as --root", path=path, reason=reason
        )


class MigrationOptionsError(DshStoreError, ValueError):
    """The migration options do not fit the files given (a usage error, nothing written).

    Still a :class:`ValueError`, as it always was. ``path`` names the file the options do
    not fit, when one does.
    """

    path: str | None

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message, path=path)


class ForkedSessionError(DshStoreError):
    """A live session was used in a process forked from the one that opened it.

    Its writer, seqs and lock belong to the opening process; the child's copy refuses
    every ``append``, ``flush`` and ``close`` at once and leaves the parent's file and lock
    alone. ``owner_pid`` opened the session, ``pid`` is the process that tried to use it.
    """

    session_id: str
    owner_pid: int
    pid: int

    def __init__(self, session_id: str, owner_pid: int, pid: int) -> None:
        super().__init__(
            f"session {session_id!r} was opened by process {owner_pid} and cannot be used in "
            f"process {pid}, a fork of it: its writer, seqs and lock stay with the parent, which "
            "is unaffected — hand events to the parent, or open the session in this process "
            "once the parent has closed it",
            session_id=session_id,
            owner_pid=owner_pid,
            pid=pid,
        )


class ZstdUnavailableError(DshStoreError, ImportError):
    """A ``.jsonl.zstd`` log was to be decoded or encoded, but no zstd binding is installed."""

    path: str | None

    def __init__(self, path: str | None = None) -> None:
        what = f"{path}: " if path else ""
        super().__init__(
            f"{what}reading or writing zstd session logs needs the zstd extra: "
            "pip install 'dsh-store[zstd]'",
            path=path,
        )


class CorruptFrameError(CorruptLogError):
    """A complete zstd frame failed validation, or bytes at a frame boundary are no frame.

    ``offset`` is the byte offset of the frame (where a salvage would cut), ``frame`` its
    0-based index among the log's frames, ``rule`` names the check (``zstd-checksum``,
    ``zstd-bad-magic``, ``zstd-frame-lines``, ...). The file is left byte-identical.
    """

    frame: int

    def __init__(self, path: str, detail: str, *, offset: int, frame: int, rule: str) -> None:
        DshStoreError.__init__(
            self,
            f"{path} (byte {offset}, frame {frame}): corrupt session log: {detail} [{rule}]; "
            f"the file was not modified and the frames before byte {offset} are intact",
            path=path,
            line=None,
            offset=offset,
            seq=None,
            rule=rule,
            detail=detail,
            frame=frame,
        )


class DuplicateKeyError(LosslessJsonError):
    """A line read from disk holds one key twice in one JSON object (rule ``duplicate-key``).

    Readers that keep the first value and readers that keep the last disagree on what such
    a line says, so it is refused rather than read one way. ``key`` is the repeated key.
    """

    key: str
    rule: str
    detail: str

    def __init__(self, key: str, *, event_type: str | None = None, seq: int | None = None) -> None:
        detail = (
            f"the key {key!r} appears twice in one object; JSON readers that keep the first "
            "value and those that keep the last disagree on what the line says"
        )
        where = f" in event {event_type!r}" if event_type else ""
        if seq is not None:
            where += f" (seq {seq})"
        DshStoreError.__init__(
            self,
            f"duplicate key{where}: {detail}",
            key=key,
            json_path="$",
            event_type=event_type,
            reason=detail,
            seq=seq,
            rule="duplicate-key",
            detail=detail,
        )


class ZstdWriteUnsupportedError(DshStoreError):
    """A write dsh-store does not do to a ``.jsonl.zstd`` log yet (salvage).

    The file is left as it is; ``operation`` names what was refused.
    """

    path: str
    operation: str

    def __init__(self, path: str, operation: str) -> None:
        super().__init__(
            f"{path}: {operation} of a zstd-encoded log is not supported yet (it is read, "
            "appended to, repaired and migrated); the file was not modified",
            path=path,
            operation=operation,
        )


class StoreEncodingError(DshStoreError):
    """A store was asked to read or write a log of the other encoding than its own.

    A store root holds logs of one encoding (``raw`` ``session.v4.jsonl`` or ``zstd``
    ``session.v4.jsonl.zstd``); ``found`` is the log's, ``expected`` the store's.
    """

    path: str
    found: str
    expected: str

    def __init__(self, path: str, found: str, expected: str) -> None:
        super().__init__(
            f"{path}: this is a {found} log, but the store's logs are {expected}; a store "
            f"root belongs to one encoding: open it with JsonlStore(root, encoding={found!r}), "
            f"or convert this log with `dsh-store migrate --encoding {expected} {path}`",
            path=path,
            found=found,
            expected=expected,
        )


class LoneSurrogateError(CorruptLogError):
    """A complete line holds a lone UTF-16 surrogate escape (rule ``lone-surrogate``).

    The line is valid JSON (DSH's writer produces ``"\\ud800"`` for a string holding half
    of a surrogate pair), but the escape encodes no Unicode character, so the text cannot
    be carried as it is. ``json_path`` names the string (``$.data.content[0].text``) and
    ``code_unit`` the surrogate (``U+D800``). Never a crash tail: the line was written
    whole. The file is left byte-identical.
    """

    json_path: str
    code_unit: str

    def __init__(
        self,
        path: str,
        *,
        line: int,
        offset: int,
        seq: int,
        json_path: str,
        code_unit: str,
        remedy: str,
    ) -> None:
        detail = (
            f"the string at {json_path} holds a lone UTF-16 surrogate ({code_unit}), half of "
            "a pair that encodes no character"
        )
        DshStoreError.__init__(
            self,
            f"{location_text(path, line, offset, seq)}: unreadable text in a session log: {detail} "
            f"[lone-surrogate]; the file was not modified — {remedy}",
            path=path,
            line=line,
            offset=offset,
            seq=seq,
            rule="lone-surrogate",
            detail=detail,
            json_path=json_path,
            code_unit=code_unit,
            remedy=remedy,
        )


class PostgresUnavailableError(DshStoreError, ImportError):
    """A PostgreSQL store was named, but the psycopg driver (the postgres extra) is absent."""

    url: str | None

    def __init__(self, url: str | None = None) -> None:
        what = f"{url}: " if url else ""
        super().__init__(
            f"{what}PostgreSQL stores need the postgres extra (psycopg 3): "
            "pip install 'dsh-store[postgres]'",
            url=url,
        )


class DatabaseError(DshStoreError, OSError):
    """The PostgreSQL server refused or failed an operation (unreachable, connection lost,
    permission denied, ...). ``url`` never holds a password; ``sqlstate`` is the server's
    error code when it sent one. An :class:`OSError`, as a failed write to a disk is, so a
    caller handles a failed commit and a failed fsync alike.

    A failed batch stays queued in the writer, exactly as after a failed fsync: nothing
    acknowledged was lost, and the next flush retries on a new connection.
    """

    operation: str
    url: str
    detail: str
    sqlstate: str | None

    def __init__(self, operation: str, url: str, detail: str, *, sqlstate: str | None) -> None:
        code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
        super().__init__(
            f"{url}: {operation} failed: {detail}{code}; nothing acknowledged was lost — check "
            "that the server is up and reachable with these credentials, then retry "
            "(a live writer retries on its next flush)",
            operation=operation,
            url=url,
            detail=detail,
            sqlstate=sqlstate,
        )


class SchemaVersionError(DshStoreError):
    """A PostgreSQL store's schema is at another version than this dsh-store works with.

    ``found`` newer than ``supported``: a newer dsh-store made it (upgrade dsh-store).
    Older (or absent, 0) for a write: ``dsh-store pg init URL`` upgrades it.
    """

    url: str
    found: int
    supported: int

    def __init__(self, url: str, found: int, supported: int) -> None:
        if found > supported:
            advice = (
                f"written by a newer dsh-store (schema {found}, this one knows up to "
                f"{supported}); upgrade dsh-store"
            )
        else:
            advice = (
                f"schema {found} is older than this dsh-store's {supported}; run "
                f"`dsh-store pg init {url}` to upgrade it"
            )
        super().__init__(f"{url}: {advice}", url=url, found=found, supported=supported)


class EncodingConversionPendingError(DshStoreError):
    """A session directory holds its v4 log in both encodings: a conversion was interrupted.

    ``migrate --encoding`` publishes the re-encoded log beside its source before it retires
    the source; a crash in between leaves both (the same events). ``path`` is the log the
    store found, ``twin`` the other encoding's; nothing is read or written until a rerun
    of the conversion retires one of them.
    """

    path: str
    twin: str

    def __init__(self, path: str, twin: str) -> None:
        directory = os.path.dirname(path) or "."
        super().__init__(
            f"{directory}: holds this session's v4 log in both encodings ({path} and "
            f"{twin}): an encoding conversion stopped before it retired its source; finish "
            f"it with `dsh-store migrate --encoding raw {directory}` (or `--encoding zstd`)",
            path=path,
            twin=twin,
        )
