"""Reading one log file into a validated v4 view: the restore and verify use case.

This module composes the physical scanner (:mod:`dsh_store.jsonl.scan`), the migration
chain (:mod:`dsh_store.migrations`) and the model (:mod:`dsh_store.model`). It never
writes. :func:`read_log` raises the typed error for a log that cannot be restored;
:func:`examine` never raises for a damaged file and reports one classification plus every
finding instead (DESIGN §6.3).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ._lazy import lazy_module_getattr
from .errors import (
    CorruptLogError,
    DshStoreError,
    EventValidationError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from .jsonl.rows import Finding
from .jsonl.scan import LogScanner, ScannedRow, TornTail, header_version
from .jsonl.scan import corruption_first as corruption_first  # re-exported
from .jsonl.scan import revision_of as revision_of  # re-exported: restore.revision_of
from .model import (
    SESSION_FORMAT_VERSION,
    Session,
    SessionEvent,
    SessionHeader,
)
from .model.stream_check import StreamCheck
from .upgrading import Locate, lenient_source, model_refusal, upgrade_located, with_source_line

if TYPE_CHECKING:
    from .backend import StoredLogReader
    from .inspection import Inspection
    from .migrations._lenient import LenientLog

__all__ = [
    "CLASSIFICATIONS",
    "FileReport",
    "Finding",
    "Inspection",
    "ReadOutcome",
    "Verdict",
    "classify",
    "decide",
    "examine",
    "read_log",
    "read_outcome",
]

CLASSIFICATIONS: Final = (
    "not-a-session",
    "empty",
    "unsupported-version",
    "corrupt",
    "refused",
    "torn-tail",
    "open-turn",
    "needs-migration",
    "ok",
)
"""Every classification, in precedence order: a file gets the first that applies."""


class FileReport(NamedTuple):
    """The verdict on one file: never raised, always reported (see :func:`examine`).

    ``path`` is the file's path as a string, spelled as it was given or walked (the same
    spelling every error's ``.path`` uses); ``pathlib.Path(report.path)`` when a
    :class:`~pathlib.Path` is wanted.
    """

    path: str
    classification: str
    version: int | None
    events: int | None
    findings: tuple[Finding, ...]
    lenient_would_migrate: bool | None = None
    """For a ``refused`` file whose refusal the lenient opt-in lifts (or a ``corrupt``
    older log refused for a lone surrogate): whether the lenient chain migrates it (None
    when the opt-in does not apply)."""

    def to_json(self) -> dict[str, Any]:
        """The stable ``--json`` shape documented in docs/cli.md."""
        out: dict[str, Any] = {
            "path": self.path,
            "classification": self.classification,
            "version": self.version,
            "events": self.events,
            "findings": [finding_json(finding) for finding in self.findings],
        }
        if self.lenient_would_migrate is not None:
            out["lenientWouldMigrate"] = self.lenient_would_migrate
        return out


def finding_json(finding: Finding) -> dict[str, Any]:
    """A finding as ``{rule, message, line, eventLine, offset, seq}``.

    ``line`` is the physical line, the header being line 1; ``eventLine`` the same line
    counted as DSH counts event lines (the first line after the header is 1), None for
    the header line itself.
    """
    line = finding.line
    return {
        "rule": finding.rule,
        "message": finding.message,
        "line": line,
        "eventLine": None if line is None or line < 2 else line - 1,
        "offset": finding.offset,
        "seq": finding.seq,
    }


def read_log(
    path: str | os.PathLike[str],
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    lenient: bool = False,
) -> Inspection:
    """Restore ``path`` in memory: scan, upgrade, validate, compute closers. Never writes.

    :param child_headers: header rows of sessions naming this one as parent (used when
        an older log is upgraded; None when unknown, e.g. a loose file).
    :param lenient: upgrade an older log with the lenient opt-in of
        :func:`dsh_store.migrate.upgrade` (the events then end in its ``migration/note``).
    :raises NotASessionError: the first line is not a session header (or the file is empty).
    :raises UnsupportedVersionError: the header's version is newer than 4 (or invalid).
    :raises CorruptLogError: committed corruption (with line and byte offset), including a
        committed v4 event that breaks a model rule.
    :raises MigrationRefusedError: an older log that cannot be upgraded faithfully.
    """
    return read_stored(LogScanner(path), path, child_headers=child_headers, lenient=lenient)


def read_stored(
    reader: StoredLogReader,
    path: str | os.PathLike[str],
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    lenient: bool = False,
) -> Inspection:
    """:func:`read_log` over any backend's ``reader`` of the log at ``path``.

    The reader is read once: a header it already read is not read again.
    """
    return restore_stored(reader, path, child_headers=child_headers, lenient=lenient)[0]


def restore_stored(
    reader: StoredLogReader,
    path: str | os.PathLike[str],
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    lenient: bool = False,
    resume: bool = False,
    clock: Callable[[], int] | None = None,
) -> tuple[Inspection, Session]:
    """:func:`read_stored`, and the validated :class:`Session` it built.

    With ``resume`` the session is the one a writer continues: the closers are validated
    into it right after the committed events, then the ``session/end-seed`` marker is
    added (``clock`` stamps it and later appends). One read and one validation serve
    the view, the repair and the resumed session alike.
    """
    # All kept off the verify cold start: a dataclass, pathlib (with the urllib,
    # ipaddress and fnmatch modules it imports) for the Path in Inspection.path, and the
    # closers' module.
    from pathlib import Path

    from .inspection import Inspection
    from .model import interrupted_closers

    log = Path(path)
    scanner, version, header, events, locate, rows = open_located(
        log, child_headers, reader, lenient=lenient
    )
    committed: list[SessionEvent] = []
    closing: list[SessionEvent] = []
    if resume:
        events = _then_closers(events, committed, closing)
    with source_located(log), corruption_first(rows), collector_paused():
        try:
            session = Session.from_restore(header, events, resume=resume, clock=clock)
        except EventValidationError as error:
            raise model_error(error, log, version, locate, reader) from None
    if resume:
        restored, closers = tuple(committed), tuple(closing)
    else:
        restored = tuple(session.events)
        closers = tuple(interrupted_closers(restored))
    revision = scanner.revision
    assert revision is not None
    inspection = Inspection(
        path=log,
        header=header,
        events=restored,
        closers=closers,
        source_version=version,
        torn=scanner.torn,
        committed_size=scanner.committed_size,
        file_size=scanner.file_size,
        findings=log_findings(scanner, version, balanced=not closers, event_count=len(restored)),
        classification=classification_of(scanner.torn, not closers, version),
        revision=revision,
    )
    return inspection, session


def _then_closers(
    events: Iterable[SessionEvent], committed: list[SessionEvent], closers: list[SessionEvent]
) -> Iterator[SessionEvent]:
    """``events``, then the closers of the open turn they leave (collected on the way)."""
    from .model import interrupted_closers  # as in restore_stored

    for event in events:
        committed.append(event)
        yield event
    closers.extend(interrupted_closers(committed))
    yield from closers


def open_events(
    log: str | os.PathLike[str],
    child_headers: tuple[Mapping[str, Any], ...] | None,
    scanner: LogScanner | None = None,
) -> tuple[StoredLogReader, int, SessionHeader, Iterator[SessionEvent]]:
    """Read the header (version first) and return a lazy stream of v4 events.

    ``scanner`` (a new one on ``log`` when None) lets a caller read the findings it
    collected even when this, or the stream, raises.
    """
    opened = open_located(log, child_headers, scanner)
    return opened.reader, opened.version, opened.header, opened.events


def open_located(
    log: str | os.PathLike[str],
    child_headers: tuple[Mapping[str, Any], ...] | None,
    scanner: StoredLogReader | None = None,
    *,
    lenient: bool = False,
) -> OpenedLog:
    """:func:`open_events`, plus the migration's locator of an upgraded log (upgraded
    seq -> source seq, see :data:`dsh_store.upgrading.Locate`; None for a v4 log) and the
    reader's pass of rows the events come from (for :func:`corruption_first`).

    A header ``scanner`` already read is used as read (the rows re-read its line anyway).
    """
    if scanner is None:
        scanner = LogScanner(log)
    info = scanner.header if scanner.header is not None else scanner.read_header()
    if info is None:
        raise NotASessionError(os.fspath(log), "the file is empty (0 bytes)")
    rows = scanner.rows()
    if info.version == SESSION_FORMAT_VERSION:
        events = current_events(rows, log)
        header = header_from_row(info.value, log)
        return OpenedLog(scanner, info.version, header, events, None, rows)
    reading = lenient_source(scanner, lenient)
    with corruption_first(rows):  # a refused header: committed corruption further on wins
        header, events, locate = _upgraded(info.value, rows, log, child_headers, reading)
    return OpenedLog(scanner, info.version, header, events, locate, rows)


class OpenedLog(NamedTuple):
    """A log opened for reading by :func:`open_located`: nothing past the header read yet."""

    reader: StoredLogReader
    version: int
    header: SessionHeader
    events: Iterator[SessionEvent]
    locate: Locate | None
    rows: Iterator[ScannedRow]
    """The one pass of the reader's rows that ``events`` consumes."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during a bulk load or a streamed check.

    A restore allocates a few acyclic objects per event; with the collector running, its
    generational passes re-traverse the growing event list again and again (10-20% of a
    large restore), and a streamed check of an older log pays for passes over the
    upgrade's short-lived rows (about 8% of a ``verify``). Nothing either builds is
    cyclic, so pausing frees no less memory.

    On resume, what the load kept would meet a young collection at the next allocation:
    one pass over every object made during the pause (about 1 µs each, 15-40 ms for the
    10,000 events of the 50 MB benchmark mix, all of them live). Instead, when that many
    were made and nothing is frozen, every tracked object is handed to the oldest
    generation unexamined (``gc.freeze()`` then ``gc.unfreeze()``, two list splices), where
    full collections see it as they see any long-lived data. That also ages the caller's
    own young objects (at most a young generation's worth): cyclic garbage among them is
    freed by the next full collection instead of the next young one. Objects the caller
    froze are never thawed: with any frozen, the collector resumes as it was.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0 and gc.get_count()[0] >= gc.get_threshold()[0]:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


@contextlib.contextmanager
def source_located(log: str | os.PathLike[str]) -> Iterator[None]:
    """Give a refusal by the v4 model's check of an upgraded log its source line and type.

    Such a refusal already names the source seq (see :func:`model_error`); its line is
    found by one more scan of ``log``, only on a refusal, as ``dsh-store migrate`` does.
    Use it outside :func:`corruption_first`, so committed corruption still wins first.
    """
    try:
        yield
    except MigrationRefusedError as error:
        # Both kept off the verify cold start (migrate imports pathlib).
        from pathlib import Path

        raise with_source_line(error, Path(log)) from None


def log_findings(
    scanner: StoredLogReader, version: int, *, balanced: bool, event_count: int
) -> tuple[Finding, ...]:
    findings = list(scanner.findings)
    if not balanced:
        # Where the closers go: in a v4 log (one line per seq, no blank lines) the line
        # after the last committed one; an upgraded log's seqs have no line of their own.
        current = version == SESSION_FORMAT_VERSION
        findings.append(
            Finding(
                "open-turn",
                "the last turn never ended; restore closes it with synthetic events ending "
                "in turn/end {reason: interrupted}",
                line=event_count + 2 if current else None,
                offset=scanner.committed_size if current else None,
                seq=event_count,
            )
        )
    if version < SESSION_FORMAT_VERSION:
        findings.append(
            Finding(
                "needs-migration",
                f"format version {version}; `dsh-store migrate` upgrades it to "
                f"{SESSION_FORMAT_VERSION}",
                line=1,
                offset=0,
            )
        )
    return tuple(findings)


def classification_of(torn: TornTail | None, balanced: bool, version: int) -> str:
    if torn is not None:
        return "torn-tail"
    if not balanced:
        return "open-turn"
    if version < SESSION_FORMAT_VERSION:
        return "needs-migration"
    return "ok"


def header_from_row(value: Mapping[str, Any], log: str | os.PathLike[str]) -> SessionHeader:
    try:
        return SessionHeader.from_json(value)
    except EventValidationError as error:
        raise CorruptLogError(
            os.fspath(log), f"invalid header: {error.detail}", line=1, offset=0, rule=error.rule
        ) from None


def current_events(
    rows: Iterable[ScannedRow], log: str | os.PathLike[str]
) -> Iterator[SessionEvent]:
    from_json = SessionEvent.from_json
    for row in rows:
        try:
            yield from_json(row[3], line=row[2])  # row.value, row.raw (no attribute lookups)
        except (EventValidationError, LosslessJsonError) as error:
            raise _row_error(error, log, row) from None


def _row_error(
    error: DshStoreError, log: str | os.PathLike[str], row: ScannedRow
) -> CorruptLogError:
    rule = getattr(error, "rule", "not-lossless-json")
    detail = getattr(error, "detail", None) or str(error)
    return CorruptLogError(
        os.fspath(log),
        f"committed event {row.value.get('type')!r} is invalid: {detail}",
        line=row.line,
        offset=row.offset,
        seq=row.first_seq,
        rule=rule,
    )


def model_error(
    error: EventValidationError,
    log: str | os.PathLike[str],
    version: int,
    locate: Locate | None = None,
    reader: StoredLogReader | None = None,
) -> CorruptLogError | MigrationRefusedError:
    """A model rule broken by a committed event: corruption in a v4 log (located by line
    and byte offset), a refusal when the event came out of the migration chain.

    With the upgrade's ``locate`` the refusal is the one ``dsh-store migrate`` raises
    (edge ``model``, the source seq); :func:`source_located` then adds its line.
    """
    if version != SESSION_FORMAT_VERSION and locate is not None:
        return model_refusal(
            f"the upgraded log breaks a v4 rule: {error.detail}",
            error.rule,
            os.fspath(log),
            error.seq,
            error.event_type,
            locate,
        )
    if version != SESSION_FORMAT_VERSION:
        return MigrationRefusedError(
            f"the upgraded log breaks a v4 rule: {error.detail}",
            rule=error.rule,
            path=os.fspath(log),
            seq=error.seq,
            event_type=error.event_type,
        )
    line = offset = None
    if error.seq is not None:
        # A fresh pass over the same log (of whichever backend) finds the event's row.
        for row in (LogScanner(log) if reader is None else reader.reopen()).rows():
            if row.first_seq == error.seq:
                line, offset = row.line, row.offset
                break
    return CorruptLogError(
        os.fspath(log),
        f"committed event is invalid: {error.detail}",
        line=line,
        offset=offset,
        seq=error.seq,
        rule=error.rule,
    )


def _upgraded(
    header_row: dict[str, Any],
    rows: Iterable[ScannedRow],
    log: str | os.PathLike[str],
    child_headers: tuple[Mapping[str, Any], ...] | None,
    lenient: bool | LenientLog = False,
) -> tuple[SessionHeader, Iterator[SessionEvent], Locate | None]:
    try:
        return upgrade_located(
            header_row,
            (row.value for row in rows),
            os.fspath(log),
            child_headers,
            None,
            fresh_dicts=True,  # the scanner's rows, each used once
            lenient=lenient,
        )
    except EventValidationError as error:
        raise MigrationRefusedError(
            f"the upgraded header is not valid v4: {error.detail}",
            rule=error.rule,
            path=os.fspath(log),
            line=1,
        ) from None


def examine(
    path: str | os.PathLike[str],
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    lenient: bool = False,
) -> FileReport:
    """Classify one file and list every finding; never raises for a damaged file, never writes.

    It applies exactly the checks of :func:`read_log` but streams: the events are
    validated one at a time and not kept, so memory does not grow with the log. I/O errors
    that are not about the log's content (permission denied, a directory) are reported as
    ``not-a-session`` with an ``unreadable`` finding.

    A file that cannot be restored (``unsupported-version``, ``corrupt``, ``refused``)
    keeps the findings the scanner collected before the error (BOM, CRLF, header shape...,
    in file order), followed by the finding of the error itself.

    The report's ``path`` is ``path`` as a string (``os.fspath``), not normalized.

    ``lenient`` reads an older log with the lenient opt-in of
    :func:`dsh_store.migrate.upgrade`. Without it, a file refused for a reason the opt-in
    lifts is checked once more with it: the finding then says whether ``--lenient`` would
    migrate it, and ``lenient_would_migrate`` holds the answer.

    The read records what it meets (:func:`read_outcome`), :func:`decide` picks the one
    defect that classifies the file, and the report words it.
    """
    outcome = read_outcome(path, child_headers=child_headers, lenient=lenient)
    return _report(outcome, decide(outcome), child_headers=child_headers, lenient=lenient)


ReadFailure = (
    NotASessionError
    | UnsupportedVersionError
    | CorruptLogError
    | MigrationRefusedError
    | EventValidationError
    | LosslessJsonError
    | OSError
)
"""What can stop the streamed read of a log before its end (:attr:`ReadOutcome.failure`)."""

_READ_FAILURES: Final = (
    NotASessionError,
    UnsupportedVersionError,
    CorruptLogError,
    MigrationRefusedError,
    EventValidationError,
    LosslessJsonError,
    OSError,
)


class ReadOutcome(NamedTuple):
    """What one streamed read of a log recorded (:func:`read_outcome`), as values.

    The scanner reports (it is made with ``report=True``): its committed corruption,
    crash tail and findings are in ``scanner``. The read stops at the first failure of
    the header, the upgrade or the model check (``failure``); a refusal of the migration
    chain or of the upgraded log is the one exception: the rest of the rows is read after
    it, so that the scanner's report covers the whole log.
    """

    log: str
    scanner: LogScanner
    version: int | None
    """The header's format version; None when the header was not read."""
    failure: ReadFailure | None
    """What stopped the read, located (line, offset, source seq); None when it ended."""
    checked: StreamCheck | None
    """The model's check of every event; None when the read stopped before its end."""
    last: tuple[SessionEvent, ...] = ()
    """The last event of a lenient upgrade (its ``migration/note``, if it made one)."""


class Verdict(NamedTuple):
    """The classification :func:`decide` gives a :class:`ReadOutcome`, and why."""

    classification: str
    defect: ReadFailure | None
    """The recorded defect the classification stands on; None for a readable log."""


def read_outcome(
    path: str | os.PathLike[str],
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    lenient: bool = False,
) -> ReadOutcome:
    """Read ``path`` once as :func:`examine` does and record what the read met; never writes.

    Nothing is decided here: a failure is kept as a value, located as :func:`read_log`
    raises it. A failure of another type (none is expected) propagates.
    """
    log = os.fspath(path)
    scanner = LogScanner(log, report=True)  # committed corruption ends the rows, recorded
    try:
        _, version, header, events, locate, rows = open_located(
            log, child_headers, scanner, lenient=lenient
        )
    except _READ_FAILURES as error:
        return ReadOutcome(log, scanner, None, error, None)
    last: list[SessionEvent] = []
    if lenient and locate is not None:
        events = _keeping_last(events, last)
    failure: ReadFailure | None = None
    checked = None
    try:
        # The streamed check keeps no event and makes no cycle: no collector passes.
        with collector_paused():
            checked = check_stream_session(header, events)
    except EventValidationError as error:  # the model refuses an event or the whole log
        # Its row is found by a fresh pass of a report-mode scanner: it stops at the row.
        failure = _recorded(model_error, error, log, version, locate, scanner)
    except _READ_FAILURES as error:
        failure = error
    if isinstance(failure, MigrationRefusedError):
        # The rest of the same pass, rows discarded: the report then holds any committed
        # corruption further on (no byte is read twice). An I/O error there wins.
        failure = _recorded(_drained, rows) or failure
    return ReadOutcome(log, scanner, version, failure, checked, tuple(last))


def _recorded(function: Callable[..., ReadFailure | None], *args: Any) -> ReadFailure | None:
    """``function(*args)``, or the read failure it raised."""
    try:
        return function(*args)
    except _READ_FAILURES as error:
        return error


def _drained(rows: Iterator[ScannedRow]) -> None:
    for _ in rows:
        pass


def decide(outcome: ReadOutcome) -> Verdict:
    """The one classification of a log read as ``outcome``: the precedence of its defects.

    Pure: it only looks at what the read recorded. The read stops at its first failure, so
    a defect further on was never seen (in a v4 log the first defect in file order
    decides); of the defects recorded together, this order decides (docs/format.md, "How
    a file is classified"):

    1. no session header (``empty``, ``not-a-session``) or a newer format
       (``unsupported-version``): nothing after the header was read;
    2. the scanner's committed corruption (``corrupt``). It wins over a refusal of an
       older log (the rows are read to their end after one) and over a model rule
       checked at the end of the log (the rows ended at the corruption);
    3. an I/O error (``not-a-session``, finding ``unreadable``);
    4. a committed v4 header or event the decoder or the v4 model refuses (``corrupt``);
    5. the migration chain's or the v4 model's refusal of an older log (``refused``);
    6. a log read to its end: ``torn-tail``, ``open-turn``, ``needs-migration``, ``ok``
       (:func:`classification_of`).
    """
    failure = outcome.failure
    scanner = outcome.scanner
    if isinstance(failure, NotASessionError):
        return Verdict("empty" if scanner.empty else "not-a-session", failure)
    if isinstance(failure, UnsupportedVersionError):
        return Verdict("unsupported-version", failure)
    corruption = scanner.corruption
    if corruption is not None:
        return Verdict("corrupt", corruption)
    if isinstance(failure, OSError):
        return Verdict("not-a-session", failure)
    if isinstance(failure, CorruptLogError | EventValidationError | LosslessJsonError):
        return Verdict("corrupt", failure)
    if isinstance(failure, MigrationRefusedError):
        return Verdict("refused", failure)
    checked = outcome.checked
    assert checked is not None and outcome.version is not None
    return Verdict(classification_of(scanner.torn, checked.is_balanced, outcome.version), None)


def _report(
    outcome: ReadOutcome,
    verdict: Verdict,
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    lenient: bool,
) -> FileReport:
    """How :func:`examine` reports ``verdict``: the scanner's findings, then the defect's."""
    log, scanner = outcome.log, outcome.scanner
    classification, defect = verdict
    if defect is None:
        checked = outcome.checked
        assert checked is not None and outcome.version is not None
        findings = log_findings(
            scanner, outcome.version, balanced=checked.is_balanced, event_count=checked.seq
        )
        return FileReport(
            log,
            classification,
            outcome.version,
            checked.seq,
            findings + _lenient_findings(list(outcome.last)),
        )
    if isinstance(defect, NotASessionError):
        return FileReport(
            log,
            classification,
            None,
            None,
            (Finding(classification, defect.message, line=1, offset=0),),
        )
    if isinstance(defect, UnsupportedVersionError):
        return FileReport(
            log,
            classification,
            _int_or_none(defect.version),
            None,
            (*scanner.findings, Finding(classification, defect.message, line=1, offset=0)),
        )
    if isinstance(defect, CorruptLogError):
        return _corrupt_report(log, scanner, defect, child_headers, lenient=lenient)
    if isinstance(defect, OSError):
        return FileReport(
            log,
            classification,
            None,
            None,
            (Finding("unreadable", f"{log}: cannot read: {defect.strerror or defect}"),),
        )
    if isinstance(defect, MigrationRefusedError):
        return _refused_report(log, scanner, defect, child_headers, lenient=lenient)
    return FileReport(  # a value the decoder refuses outside any committed row
        log,
        classification,
        header_version(log),
        None,
        (*scanner.findings, Finding(getattr(defect, "rule", "invalid"), str(defect))),
    )


def _corrupt_report(
    log: str,
    scanner: LogScanner,
    error: CorruptLogError,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    *,
    lenient: bool,
) -> FileReport:
    found_version = header_version(log)
    text = f"committed corruption: {error.detail}; the file is left as it is"
    would = None
    if not lenient and error.rule == "lone-surrogate" and found_version != SESSION_FORMAT_VERSION:
        # The opt-in reads an older log's lone surrogates as U+FFFD.
        would = _lenient_reads(log, child_headers)
        text += (
            "; `--lenient` would migrate it, replacing each lone surrogate by U+FFFD"
            if would
            else "; `--lenient` would not migrate it either"
        )
    return FileReport(
        log,
        "corrupt",
        found_version,
        None,
        (*scanner.findings, Finding(error.rule, text, error.line, error.offset, error.seq)),
        would,
    )


def _refused_report(
    log: str,
    scanner: LogScanner,
    error: MigrationRefusedError,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    *,
    lenient: bool,
) -> FileReport:
    # A refusal naming a source seq gets that event's line by one more scan, as
    # `dsh-store migrate` words it (pathlib kept off the verify cold start).
    from pathlib import Path

    error = with_source_line(error, Path(log))
    would = None if lenient else _lenient_would_migrate(log, error, child_headers)
    text = refusal_text(error)
    if would is not None:
        text += (
            "; `--lenient` would migrate it, recording each deviation in a migration/note event"
            if would
            else "; `--lenient` would not migrate it either"
        )
    return FileReport(
        log,
        "refused",
        header_version(log),
        None,
        (*scanner.findings, Finding(f"refused: {error.rule}", text, error.line, None, error.seq)),
        would,
    )


def _keeping_last(
    events: Iterator[SessionEvent], last: list[SessionEvent]
) -> Iterator[SessionEvent]:
    for event in events:
        last[:] = (event,)
        yield event


def _lenient_findings(last: list[SessionEvent]) -> tuple[Finding, ...]:
    """A ``lenient-migration`` finding when a lenient upgrade ended in its note."""
    if not last:  # no lenient read: the chain's modules stay off a v4 verify's cold start
        return ()
    from .migrations._lenient import NOTE_TYPE  # the chain's module: off `cat` and `export`

    if last[0].type != NOTE_TYPE or not last[0].ignorable:
        return ()
    changes = last[0].data.get("changes", [])
    listed = ", ".join(
        f"{change.get('change')} at source seq {change.get('sourceSeq')}" for change in changes[:5]
    )
    more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""
    return (
        Finding(
            "lenient-migration",
            f"readable only with the lenient opt-in: {listed}{more}; `dsh-store migrate "
            "--lenient` lists them in a trailing migration/note event",
        ),
    )


def check_stream_session(header: SessionHeader, events: Iterable[SessionEvent]) -> StreamCheck:
    """Validate a whole log as :meth:`Session.from_restore` does, keeping no events."""
    checked = StreamCheck.from_restore(header, events)
    assert isinstance(checked, StreamCheck)
    return checked


def _lenient_would_migrate(
    log: str, error: MigrationRefusedError, child_headers: tuple[Mapping[str, Any], ...] | None
) -> bool | None:
    """Whether the lenient chain reads ``log``, refused with ``error`` by the default one;
    None when the opt-in does not address that refusal."""
    from .migrations._lenient import LENIENT_RULES  # the chain, only on a refusal

    if error.rule not in LENIENT_RULES:
        return None
    return _lenient_reads(log, child_headers)


def _lenient_reads(log: str, child_headers: tuple[Mapping[str, Any], ...] | None) -> bool:
    """Whether the lenient chain reads ``log``."""
    report = examine(log, child_headers=child_headers, lenient=True)
    return report.classification in ("ok", "torn-tail", "open-turn", "needs-migration")


def refusal_text(error: MigrationRefusedError) -> str:
    """How a report words the migration chain's refusal of a log."""
    where = f" at edge {error.edge}" if error.edge else ""
    kind = f" ({error.event_type})" if error.event_type else ""
    return f"the migration chain refuses this log{where}{kind}: {error.detail}"


def classify(path: str | os.PathLike[str]) -> str:
    """The classification of one file (DESIGN §6.3); never raises for damage, never writes."""
    return examine(path).classification


def _int_or_none(value: object) -> int | None:
    """A header's version as reported: a format version is an integer >= 0, else None
    (the finding says what the header holds)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


# ``restore.Inspection`` stays importable; it lives in its own module so that
# ``dsh-store verify`` does not pay for building a dataclass at start-up.
__getattr__ = lazy_module_getattr(__name__, {"Inspection": "dsh_store.inspection"}, globals())
