"""``verify``, ``list``, ``inspect``, ``cat``, ``export`` and ``repair`` of a PostgreSQL store.

The command line takes a ``postgresql://`` (or ``postgres://``) URL wherever it takes a
store root; these functions return exactly the shapes the JSONL commands return (a
:class:`~dsh_store.restore.FileReport` per session, the ``list`` and ``inspect`` dicts, the
``repair`` results), so the output, the exit codes and the JSON schemas are the same.

A session of a database has no file: reports name it ``<store URL>#<session id>`` (the
URL with its password masked, :func:`dsh_store.postgres.url.redact`) and give each
finding its seq, never a line or byte offset. The store is read only through
:class:`~dsh_store.postgres.store.PostgresStore` (``inspect`` and ``load``), so the
classification, the findings and the repair are the store's own; nothing here writes
except :func:`repair_store` outside a dry run, through ``load`` (one transaction per
session).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import (
    CorruptLogError,
    DshStoreError,
    EventValidationError,
    LosslessJsonError,
    MigrationRefusedError,
    NeedsMigrationError,
    NotASessionError,
    PostgresUnavailableError,
    SessionNotFoundError,
    UnsupportedVersionError,
)
from .jsonl.rows import read_header_line
from .model import SESSION_FORMAT_VERSION
from .postgres.url import redact
from .records import Finding

if TYPE_CHECKING:
    from .bulk import RepairOutcome
    from .inspection import Inspection
    from .postgres.backend import StoredSession
    from .postgres.store import PostgresStore
    from .restore import FileReport

__all__ = [
    "CUT_RECORDS",
    "list_sessions",
    "open_store",
    "repair_store",
    "session_events",
    "session_name",
    "spooled_log",
    "summarize_session",
    "verify_store",
]

R = TypeVar("R")
Progress = Callable[[Iterable[R], int], Iterable[R]]

CUT_RECORDS = "dsh_cut_records"
"""The table a repair keeps the rows it cut in (``sidecar`` of a repair result)."""


def open_store(url: str) -> PostgresStore:
    """The store at ``url`` (no connection is made until it is read).

    :raises PostgresUnavailableError: psycopg (the ``postgres`` extra) is not installed
        (the message holds the URL with its password masked).
    """
    try:
        import psycopg  # noqa: F401 - only whether the extra is there
    except ImportError:
        raise PostgresUnavailableError(redact(url)) from None
    from .postgres.store import PostgresStore  # once the extra is known to be there

    return PostgresStore(url)


def session_name(url: str, session_id: str) -> str:
    """How a report names a session of the store at ``url``: ``<URL>#<id>``, password masked."""
    return f"{redact(url)}#{session_id}"


# A location in a message, as errors.py renders it: ``LOC``, ``LOC:LINE``, then perhaps
# `` (byte N, seq S, type 'T')``. The line and the byte offset are of no file here.
_EXTRAS = r"(?: \(([^()]*)\))?"


def _located(text: str, location: str, name: str) -> str:
    """``text`` with the store's pseudo-path ``location`` named ``name``, line and byte
    offset dropped (they locate nothing in a database; the seq stays)."""
    if location not in text:
        return text
    pattern = re.compile(re.escape(location) + r"(?::\d+)?(?![^\s:,;)])" + _EXTRAS)

    def rename(match: re.Match[str]) -> str:
        extras = match.group(1)
        if extras is None:
            return name
        kept = [part for part in extras.split(", ") if not re.fullmatch(r"byte \d+", part)]
        return f"{name} ({', '.join(kept)})" if kept else name

    return pattern.sub(rename, text)


@contextlib.contextmanager
def _named(location: str, name: str) -> Iterator[None]:
    """Let a library error raised inside name the session ``name`` instead of ``location``."""
    try:
        yield
    except DshStoreError as error:
        renamed = _located(error.message, location, name)
        if renamed != error.message:
            error.message = renamed
            error.args = (renamed,)
        raise


def _location(store: PostgresStore, session_id: str) -> str:
    """The pseudo-path the store's own messages name the session by (pure)."""
    return str(store.backend.locate(session_id, None))


def _finding(finding: Finding, location: str, name: str) -> Finding:
    return Finding(finding.rule, _located(finding.message, location, name), None, None, finding.seq)


def _header_version(row: StoredSession) -> int | None:
    try:
        return read_header_line(row.header, path="").version
    except DshStoreError:
        return None


def _examine(
    store: PostgresStore, row: StoredSession, url: str
) -> tuple[FileReport, Inspection | None]:
    """The verdict on one session, as :func:`dsh_store.restore.examine` gives one on a file.

    Never raises for a damaged session; a failure of the server (``DatabaseError``) does.
    """
    from .restore import FileReport, refusal_text  # the file classifier only for `verify URL`

    name = session_name(url, row.session_id)
    location = _location(store, row.session_id)

    def report(
        classification: str, version: int | None, finding: Finding
    ) -> tuple[FileReport, None]:
        return (
            FileReport(name, classification, version, None, (_finding(finding, location, name),)),
            None,
        )

    try:
        inspection = store.inspect(row.session_id)
    except NotASessionError as error:
        return report("not-a-session", None, Finding("not-a-session", error.message))
    except UnsupportedVersionError as error:
        version = error.version if type(error.version) is int else None
        return report("unsupported-version", version, Finding("unsupported-version", str(error)))
    except NeedsMigrationError as error:
        return report(
            "needs-migration", _header_version(row), Finding("needs-migration", str(error))
        )
    except CorruptLogError as error:
        detail = f"committed corruption: {error.detail}; the session is left as it is"
        return report("corrupt", _header_version(row), Finding(error.rule, detail, seq=error.seq))
    except MigrationRefusedError as error:
        finding = Finding(f"refused: {error.rule}", refusal_text(error), seq=error.seq)
        return report("refused", _header_version(row), finding)
    except (EventValidationError, LosslessJsonError) as error:
        rule = getattr(error, "rule", "invalid")
        return report("corrupt", _header_version(row), Finding(rule, str(error)))
    findings = tuple(_finding(finding, location, name) for finding in inspection.findings)
    verdict = FileReport(
        name,
        inspection.classification,
        inspection.source_version,
        len(inspection.events),
        findings,
    )
    return verdict, inspection


def _rows(store: PostgresStore, sessions: Iterable[str] | None = None) -> list[StoredSession]:
    """The session rows to work on: all of them, or those named (an unknown id is an error)."""
    if sessions is None:
        return store.backend.stored_sessions()
    wanted = list(dict.fromkeys(sessions))
    by_id = {row.session_id: row for row in store.backend.stored_sessions(wanted)}
    missing = [session_id for session_id in wanted if session_id not in by_id]
    if missing:
        raise SessionNotFoundError(missing[0], store.url)
    return [by_id[session_id] for session_id in wanted]


def _each(items: Iterator[R], length: int, progress: Progress[R] | None) -> list[R]:
    return list(items if progress is None else progress(items, length))


def verify_store(url: str, *, progress: Progress[FileReport] | None = None) -> list[FileReport]:
    """One report per stored session, sorted by id (``dsh-store verify URL``). Never writes.

    :raises DatabaseError: the server cannot be reached or refused a read.
    """
    with open_store(url) as store:
        rows = _rows(store)
        reports = (_examine(store, row, url)[0] for row in rows)
        return _each(reports, len(rows), progress)


def list_sessions(url: str) -> list[dict[str, Any]]:
    """The ``dsh-store list`` rows of the store at ``url``, sorted by id; reads only the
    session rows (header and event count), no event.

    ``misfiled`` is True for a row whose header names another id than the row's key.
    """
    from .summary import blank_list_row  # only for `list URL`

    rows: list[dict[str, Any]] = []
    with open_store(url) as store:
        for stored in store.backend.stored_sessions():
            name = session_name(url, stored.session_id)
            row = blank_list_row(name)
            try:
                info = read_header_line(stored.header, path=name)
            except UnsupportedVersionError:
                row["status"] = "unsupported-version"
            except DshStoreError:
                pass
            else:
                header_id = info.value.get("id")
                if not isinstance(header_id, str):
                    continue  # a header without a string id names no session (as for JSONL)
                cwd = info.value.get("cwd")
                created = info.value.get("createdAt")
                current = info.version == SESSION_FORMAT_VERSION
                row.update(
                    id=header_id,
                    cwd=cwd if isinstance(cwd, str) else None,
                    created=created
                    if isinstance(created, int) and not isinstance(created, bool)
                    else None,
                    version=info.version,
                    events=stored.events,
                    status="current" if current else "needs-migration",
                    misfiled=header_id != stored.session_id,
                )
            rows.append(row)
    rows.sort(key=lambda row: (str(row["id"]), row["path"]))
    return rows


def summarize_session(
    url: str, session_id: str, *, events: bool = False, messages: bool = False
) -> dict[str, Any]:
    """The ``dsh-store inspect`` summary of one session (:func:`dsh_store.summary.summarize`'s
    shape). Never writes.

    :raises SessionNotFoundError: the store holds no such session.
    """
    from .summary import inspection_summary  # only for `inspect URL`

    with open_store(url) as store:
        (row,) = _rows(store, [session_id])
        report, inspection = _examine(store, row, url)
    summary: dict[str, Any] = report.to_json()
    del summary["events"]
    summary.pop("lenientWouldMigrate", None)
    if inspection is None:
        return summary
    return inspection_summary(summary, inspection, events=events, messages=messages)


def session_events(url: str, session_id: str) -> Iterator[tuple[str, int, bytes]]:
    """``(type, seq, line)`` of every committed event of one session, after the whole
    session was checked as a restore checks it (``dsh-store cat URL``).

    :raises CorruptLogError: committed corruption; nothing is yielded then.
    :raises SessionNotFoundError: the store holds no such session.
    """
    with open_store(url) as store:
        location = _location(store, session_id)
        with _named(location, session_name(url, session_id)):
            inspection = store.inspect(session_id)
    for event in inspection.events:
        yield event.type, event.seq, event.line


@contextlib.contextmanager
def spooled_log(url: str, session_id: str) -> Iterator[str]:
    """A private temp file holding the session as JSONL (header and records, byte for byte
    what the store holds), removed afterwards: for the readers that take a file
    (``dsh-store export URL``). Its path is in no message: errors name the session.
    """
    # only for `export URL`: off the other commands' start (shutil imports fnmatch)
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="dsh-store-pg-")
    spooled = os.path.join(directory, "session.v4.jsonl")
    name = session_name(url, session_id)
    try:
        with open_store(url) as store:
            location = _location(store, session_id)
            with _named(location, name), open(spooled, "xb") as copy:
                for record in store.iter_records(session_id):
                    copy.write(record)
        with _named(spooled, name):
            yield spooled
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def repair_store(
    url: str,
    *,
    dry_run: bool = False,
    progress: Progress[RepairOutcome] | None = None,
) -> list[RepairOutcome]:
    """Repair (or plan the repair of) every stored session: ``dsh-store repair URL``.

    One :class:`dsh_store.bulk.RepairOutcome` per session, sorted by id. A session that
    needs a repair (rows past the committed region, a turn left open) is repaired by
    :meth:`PostgresStore.load`, in one transaction under the session's advisory lock: cut
    rows are kept in ``dsh_cut_records`` (the result's ``sidecar``), the closers appended.
    A session open for writing elsewhere, or with committed corruption, is refused and
    left as it is. ``dry_run`` only reads.

    :raises DatabaseError: the server cannot be reached or refused a read.
    """
    from .bulk import RepairOutcome, one_line  # only for `repair URL`

    def repaired(store: PostgresStore, row: StoredSession) -> RepairOutcome:
        name = session_name(url, row.session_id)
        location = _location(store, row.session_id)
        report, inspection = _examine(store, row, url)
        if inspection is None:
            reason = " ".join(report.findings[-1].message.split())
            return RepairOutcome(
                name, "refused", classification=report.classification, reason=reason
            )
        if not inspection.needs_repair:
            return RepairOutcome(name, "clean", classification=inspection.classification)
        status = "would-repair"
        if not dry_run:
            try:
                with _named(location, name):
                    store.load(row.session_id)
            except DshStoreError as error:
                if isinstance(error, OSError):  # the server: not this session's verdict
                    raise
                return RepairOutcome(
                    name,
                    "refused",
                    classification=inspection.classification,
                    reason=one_line(error),
                )
            status = "repaired"
        torn = inspection.torn
        return RepairOutcome(
            name,
            status,
            classification=inspection.classification,
            torn_bytes=0 if torn is None else torn.length,
            sidecar=None if torn is None else CUT_RECORDS,
            closers=tuple(event.type for event in inspection.closers),
        )

    with open_store(url) as store:
        rows = _rows(store)
        results = (repaired(store, row) for row in rows)
        return _each(results, len(rows), progress)
