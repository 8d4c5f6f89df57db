"""``dsh-store copy SRC DST``: sessions from one store into another, never overwriting.

A store is a JSONL store root (raw or zstd logs) or a PostgreSQL URL, on either side. A
session is copied as its canonical bytes: the header line as dsh-store encodes it, then
every committed event's line byte for byte as the store reads it (framed as dsh-store
frames lines: no ``\r`` before the newline, no byte-order mark), what
:meth:`PostgresStore.iter_records` and a ``session.v4.jsonl`` hold for the same appends;
so JSONL → PostgreSQL → JSONL gives back identical files.

Only sessions a load would leave unchanged are copied: a format-4 session that verifies
``ok``. One that needs a repair (a torn tail, an open turn), a migration (an older
format) or holds committed corruption is ``refused`` with the reason and the command
that fixes it; copying the repaired view instead would put events in DST that SRC does
not hold.

Each session is published in DST in one atomic step that never overwrites, so a copy
killed at any point leaves every session in DST complete or absent, and a rerun finishes
the job: a session DST already holds with identical content is ``present`` (skipped as
done), one it holds with other content is a ``conflict`` and left alone.

- PostgreSQL: :meth:`PostgresStore.import_log`, one transaction (header row and events).
- JSONL: the session lock, then the backend's first publish
  (:func:`dsh_store.jsonl.files.materialize`: temp file, fsync, ``link``, directory
  fsync); a kill can leave an orphan ``*.tmp`` beside the session, which readers ignore
  and ``dsh-store repair`` deletes once it is 10 minutes old.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import DshStoreError, SessionExistsError, SessionNotFoundError
from .jsonl import layout
from .jsonl.layout import decode_session_id
from .model import SESSION_FORMAT_VERSION
from .postgres.url import is_postgres_url

if TYPE_CHECKING:
    from .inspection import Inspection
    from .model import SessionEvent, SessionHeader
    from .postgres.store import PostgresStore
    from .store import JsonlStore

__all__ = ["COPY_STATUSES", "copy_sessions", "log_bytes"]

R = TypeVar("R")
Progress = Callable[[Iterable[R], int], Iterable[R]]

COPY_STATUSES = ("copied", "would-copy", "present", "conflict", "refused")
"""Every ``status`` of a copy result (docs/schemas/copy.schema.json)."""


def log_bytes(inspection: Inspection) -> bytes:
    """The canonical bytes of a restored log: its header line, then its committed lines."""
    return inspection.header.encode() + b"".join(event.line for event in inspection.events)


class _Store:
    """One side of a copy: a JSONL root or a PostgreSQL URL."""

    def __init__(self, where: str, *, encoding: str | None = None) -> None:
        self.where = where
        self.pg: PostgresStore | None = None
        self.jsonl: JsonlStore | None = None
        if is_postgres_url(where):
            from .database import open_store  # the postgres modules only for a URL

            self.pg = open_store(where)
        else:
            from .store import JsonlStore  # the JSONL store only for a root

            self.jsonl = JsonlStore(where, encoding=encoding)

    def close(self) -> None:
        if self.pg is not None:
            self.pg.close()

    def session_ids(self) -> list[str]:
        """Every session id the store holds, sorted (damaged sessions too)."""
        if self.pg is not None:
            return [row.session_id for row in self.pg.backend.stored_sessions()]
        assert self.jsonl is not None
        ids = set()
        for log in self.jsonl.backend.locations():
            ids.add(decode_session_id(log.parent.name) or log.parent.name)
        return sorted(ids)

    def inspect(self, session_id: str) -> Inspection:
        store = self.pg if self.pg is not None else self.jsonl
        assert store is not None
        return store.inspect(session_id)

    def name(self, session_id: str, inspection: Inspection | None = None) -> str:
        """How results name the session in this store (a path, or ``URL#id``)."""
        if self.pg is not None:
            from .database import session_name  # as in __init__: only for a URL

            return session_name(self.where, session_id)
        assert self.jsonl is not None
        if inspection is not None:
            return str(inspection.path)
        return str(self.jsonl.locate(session_id))

    def target(self, header: SessionHeader) -> str:
        """Where a new copy of the session with ``header`` goes."""
        if self.pg is not None:
            return self.name(header.id)
        assert self.jsonl is not None
        directory = layout.session_dir(self.jsonl.root, header.id, header.cwd)
        name = layout.generation_name(SESSION_FORMAT_VERSION, self.jsonl.encoding)
        return str(directory / name)

    def publish(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Store the whole log as a new session in one atomic step; never overwrites.

        :raises SessionExistsError: the store already holds this id.
        """
        if self.pg is not None:
            self.pg.import_log(header, events)
            return
        assert self.jsonl is not None
        backend = self.jsonl.backend
        location = Path(self.target(header))
        with backend.lock(location, header.id, create=True):
            if backend.find(header.id) is not None:
                raise SessionExistsError(header.id, str(location))
            backend.publish_first(
                location,
                header.encode(),
                [event.line for event in events],
                session_id=header.id,
            ).close()


def _result(
    session_id: str,
    status: str,
    *,
    source: str,
    target: str | None = None,
    events: int | None = None,
    size: int | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """One copy result in its stable JSON shape (docs/schemas/copy.schema.json)."""
    return {
        "session": session_id,
        "status": status,
        "source": source,
        "target": target,
        "events": events,
        "bytes": size,
        "reason": reason,
    }


def _one_line(error: BaseException) -> str:
    from .bulk import one_line  # only for a session that failed: bulk off the copy's start

    return one_line(error)


_REFUSALS = {
    "torn-tail": "it has a torn tail: run `dsh-store repair` on SRC (or load it), then copy again",
    "open-turn": "its last turn is open (a crash or a live writer): run `dsh-store repair` on "
    "SRC once no writer has it open, then copy again",
    "needs-migration": "it is an older format: run `dsh-store migrate` on SRC to publish its "
    "format-4 upgrade, then copy again",
}


def _copy_one(source: _Store, target: _Store, session_id: str, *, dry_run: bool) -> dict[str, Any]:
    """Copy one session; every outcome but a failure of a store itself is a result."""
    try:
        inspection = source.inspect(session_id)
    except SessionNotFoundError:
        return _result(
            session_id,
            "refused",
            source=source.name(session_id),
            reason=f"SRC holds no session {session_id!r}",
        )
    except DshStoreError as error:
        if isinstance(error, OSError):
            raise
        return _result(
            session_id, "refused", source=source.name(session_id), reason=_one_line(error)
        )
    where = source.name(session_id, inspection)
    events = len(inspection.events)
    if inspection.header.id != session_id:
        return _result(
            session_id,
            "refused",
            source=where,
            events=events,
            reason=f"misfiled: its header names session {inspection.header.id!r}; "
            "`dsh-store verify` on SRC reports it",
        )
    if inspection.classification != "ok":
        why = _REFUSALS.get(inspection.classification, inspection.classification)
        return _result(
            session_id,
            "refused",
            source=where,
            events=events,
            reason=f"not copied as it is: {why}",
        )
    data = log_bytes(inspection)
    if target.jsonl is not None and not inspection.events:
        return _result(
            session_id,
            "refused",
            source=where,
            events=0,
            size=len(data),
            reason="a session without events has no JSONL log (a log is never empty)",
        )

    def outcome(status: str, where_to: str, reason: str | None = None) -> dict[str, Any]:
        return _result(
            session_id,
            status,
            source=where,
            target=where_to,
            events=events,
            size=len(data),
            reason=reason,
        )

    present = _present(target, session_id, data)
    if present is not None:
        return outcome(*present)
    destination = target.target(inspection.header)
    if dry_run:
        return outcome("would-copy", destination)
    try:
        target.publish(inspection.header, inspection.events)
    except SessionExistsError:
        # Created meanwhile, by another copy or a writer: judge what is there now.
        present = _present(target, session_id, data)
        if present is None:
            raise
        return outcome(*present)
    return outcome("copied", destination)


def _present(target: _Store, session_id: str, data: bytes) -> tuple[str, str, str | None] | None:
    """``(status, where, reason)`` when DST holds ``session_id`` already, else None."""
    try:
        existing = target.inspect(session_id)
    except SessionNotFoundError:
        return None
    except DshStoreError as error:
        if isinstance(error, OSError):
            raise
        reason = f"DST holds a session of this id that does not read cleanly: {_one_line(error)}"
        return "conflict", target.name(session_id), reason
    where = target.name(session_id, existing)
    if existing.classification == "ok" and log_bytes(existing) == data:
        return "present", where, None
    if existing.classification != "ok":
        detail = f"it is {existing.classification}"
    else:
        detail = f"{len(existing.events)} events, {len(log_bytes(existing))} bytes"
    reason = (
        f"DST already holds session {session_id!r} with other content ({detail}); "
        "it is never overwritten: remove or rename one of them, then copy again"
    )
    return "conflict", where, reason


def copy_sessions(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    sessions: Sequence[str] | None = None,
    encoding: str | None = None,
    dry_run: bool = False,
    progress: Progress[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Copy every session of ``source`` (or those named in ``sessions``) into ``target``.

    ``source`` and ``target`` are JSONL store roots or PostgreSQL URLs. ``encoding`` is
    the encoding of new logs in a JSONL ``target`` (``raw`` or ``zstd``; default: the
    root's own, ``raw`` for a new root). One result per session, by id, with ``status``
    ``copied`` (``would-copy`` under ``dry_run``, which writes nothing), ``present`` (DST
    holds it with identical content), ``conflict`` (DST holds other content under the id;
    left alone) or ``refused`` (SRC's session cannot be copied as it is; ``reason`` says
    why and what to run).

    :raises DatabaseError: a PostgreSQL store cannot be reached or failed a statement.
    :raises OSError: a JSONL store's disk refused (the session under way is absent).
    :raises FileNotFoundError: a JSONL ``source`` root does not exist.
    """
    source_text = os.fspath(source)
    if not is_postgres_url(source_text) and not os.path.isdir(source_text):
        raise FileNotFoundError(2, "no such store root", source_text)
    origin = _Store(source_text)
    try:
        destination = _Store(os.fspath(target), encoding=encoding)
        try:
            ids = list(dict.fromkeys(sessions)) if sessions is not None else origin.session_ids()
            results: Iterator[dict[str, Any]] = (
                _copy_one(origin, destination, session_id, dry_run=dry_run) for session_id in ids
            )
            return list(results if progress is None else progress(results, len(ids)))
        finally:
            destination.close()
    finally:
        origin.close()
