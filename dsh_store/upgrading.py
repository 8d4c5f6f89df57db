"""The read side of migration: header classification, in-memory upgrade, refusal location.

Every reader of an older log goes through here: :mod:`dsh_store.restore` (``read_log``,
``examine`` and so ``verify``), :mod:`dsh_store.summary` and the write side,
:mod:`dsh_store.migrate` (publish, in place, dry run). This module never writes. It
composes the migration chain (:mod:`dsh_store.migrations`), the v4 model and, to find a
refused event's line, one more scan of the source (:mod:`dsh_store.jsonl.scan`); it
imports no use case, so the use cases that read older logs do not import each other for
it.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from .errors import (
    DshStoreError,
    EventValidationError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from .jsonl.scan import LogScanner, header_version
from .model import SESSION_FORMAT_VERSION, SessionEvent, SessionHeader
from .model.stream_check import check_stream

if TYPE_CHECKING:
    from pathlib import Path

    from .migrations._lenient import LenientLog

__all__ = [
    "HEADER_CLASSES",
    "MODEL_EDGE",
    "Locate",
    "check_upgraded",
    "classify_header",
    "lenient_source",
    "model_refusal",
    "scanned_rows",
    "upgrade",
    "upgrade_header",
    "upgrade_located",
    "with_source_line",
]

HEADER_CLASSES: Final = ("current", "migration-required", "unsupported", "malformed")

# The scanner parses one read chunk at a time; the one more scan that locates a refused
# event keeps it small, as the migration's own scan does.
_SCAN_CHUNK: Final = 1 << 18
_ROW_VALUE: Final = operator.itemgetter(3)  # ScannedRow.value

MODEL_EDGE: Final = "model"
"""The ``edge`` of a refusal by the v4 model's check of the upgraded log (after 3->4)."""

Locate = Callable[[int], tuple[int | None, str | None]]
"""Upgraded seq -> ``(source seq, None)``, or ``(None, edge)`` for an event an edge made."""


# -- header-only --------------------------------------------------------------------------


def upgrade_header(header_json: Mapping[str, Any], *, path: str | None = None) -> SessionHeader:
    """Translate a header row of any supported version to the v4 header, header only.

    :raises UnsupportedVersionError: the version is not 0-4.
    :raises MigrationRefusedError: an edge refuses the header.
    :raises EventValidationError: the translated header is not a valid v4 header.
    """
    from .migrations import EDGES, MigrationContext  # the chain: off a v4 reader's start-up

    version = _version_of(header_json, path)
    context = MigrationContext(path=path, session_id=header_json.get("id"))
    row = dict(header_json)
    for source in range(version, SESSION_FORMAT_VERSION):
        row = EDGES[source].header(row, context)
    return SessionHeader.from_json(row)


def classify_header(path: str | os.PathLike[str]) -> str:
    """Header-only classification, one of :data:`HEADER_CLASSES`.

    ``current``: a valid v4 header; ``migration-required``: an older header the chain
    translates into a valid v4 header; ``unsupported``: a newer or unknown version, or a
    header the chain refuses; ``malformed``: no session header at all (empty file, not
    JSON, no version) or a header whose fields are invalid. Reads the first line only:
    never reads event bodies, never writes.
    """
    try:
        info = LogScanner(path).read_header()
    except UnsupportedVersionError:
        return "unsupported"
    except (NotASessionError, OSError):
        return "malformed"
    if info is None:
        return "malformed"
    try:
        upgrade_header(info.value, path=os.fspath(path))
    except MigrationRefusedError:
        return "unsupported"
    except EventValidationError:
        return "malformed"
    return "current" if info.version == SESSION_FORMAT_VERSION else "migration-required"


def _version_of(header_json: Mapping[str, Any], path: str | None) -> int:
    version = header_json.get("version")
    if type(version) is not int or not 0 <= version <= SESSION_FORMAT_VERSION:
        raise UnsupportedVersionError(path or "<memory>", version, SESSION_FORMAT_VERSION)
    return version


# -- in memory ----------------------------------------------------------------------------


def upgrade(
    header_json: Mapping[str, Any],
    events_json: Iterable[Mapping[str, Any]],
    *,
    path: str | None = None,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    extras: Mapping[str, Any] | None = None,
    lenient: bool = False,
) -> tuple[SessionHeader, Iterator[SessionEvent]]:
    """Upgrade wire rows of any supported version to v4, in memory, lazily.

    Returns the v4 header and a lazy iterator of v4 events (envelope and payload checked
    per event; the whole-log rules are :func:`dsh_store.model.stream_check.check_stream`'s
    or ``Session.from_restore``'s job). A v4 input passes through unchanged. Intermediate
    versions exist only as edge state in memory.

    :param child_headers: headers of the sessions naming this one as parent (completes the
        v4 subagent catalog); ``None`` when unknown, e.g. a loose file.
    :param lenient: also migrate the format-0 logs DSH's reader loads but the faithful
        chain refuses (a surface event before the first step, an unknown ignorable event
        type), recording every deviation in a trailing ignorable ``migration/note`` event
        (docs/migrations.md, "The lenient opt-in").
    :raises UnsupportedVersionError: the header's version is not 0-4.
    :raises MigrationRefusedError: raised while iterating, when an edge refuses or the
        upgraded event is not valid v4 (naming path, seq, event type and rule).
    """
    header, events, _ = upgrade_located(
        header_json, events_json, path, child_headers, extras, fresh_dicts=False, lenient=lenient
    )
    return header, events


def upgrade_located(
    header_json: Mapping[str, Any],
    events_json: Iterable[Mapping[str, Any]],
    path: str | None,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    extras: Mapping[str, Any] | None,
    *,
    fresh_dicts: bool,
    lenient: bool | LenientLog = False,
) -> tuple[SessionHeader, Iterator[SessionEvent], Locate | None]:
    """:func:`upgrade`; ``fresh_dicts`` says the rows are dicts used once (the scanner's).

    ``lenient`` may be the :class:`LenientLog` the read of the source already records
    into (see :func:`lenient_source`).

    The third value maps an upgraded seq back to its source (``None`` for a v4 input,
    whose seqs are the source's).
    """
    version = _version_of(header_json, path)
    if version == SESSION_FORMAT_VERSION:
        return (
            SessionHeader.from_json(header_json),
            (SessionEvent.from_json(row) for row in events_json),
            None,
        )
    # The chain is imported by the first older log read: a v4 reader never loads it.
    from .migrations import MigrationContext
    from .migrations._lenient import LenientLog
    from .migrations._pipeline import located_chain

    context = MigrationContext(
        path=path,
        session_id=header_json.get("id"),
        child_headers=child_headers,
        extras=extras or {},
        lenient=lenient if isinstance(lenient, LenientLog) else LenientLog() if lenient else None,
        owned_rows=fresh_dicts,
    )
    # The edges take dicts: other mappings are copied, fresh dicts are handed on as they are.
    rows: Iterable[dict[str, Any]] = (
        events_json  # type: ignore[assignment]
        if fresh_dicts
        else (row if type(row) is dict else dict(row) for row in events_json)
    )
    v4_header, v4_rows, sources = located_chain(dict(header_json), rows, context)
    try:
        header = SessionHeader.from_json(v4_header)
    except EventValidationError as error:
        raise MigrationRefusedError(
            f"the upgraded header is not valid v4: {error.detail}",
            rule=error.rule,
            path=path,
        ) from None
    return header, _events(v4_rows, path, sources.locate), sources.locate


def lenient_source(reader: object, lenient: bool) -> bool | LenientLog:
    """The ``lenient`` of :func:`upgrade_located` for a log read by ``reader``: with the
    opt-in and a log file's scanner, a note whose scan replaces lone surrogates and records
    each (docs/migrations.md, "The lenient opt-in")."""
    if not lenient or not isinstance(reader, LogScanner):
        return lenient
    from .migrations._lenient import LenientLog  # only with the opt-in: as above

    log = LenientLog()
    reader.on_lone_surrogates = log.record_lone_surrogates
    return log


def scanned_rows(scanner: LogScanner) -> Iterator[dict[str, Any]]:
    """The decoded rows of a scan (always fresh dicts), without a generator per row."""
    return map(_ROW_VALUE, scanner.rows())


def _events(
    rows: Iterable[Mapping[str, Any]], path: str | None, locate: Locate
) -> Iterator[SessionEvent]:
    for row in _typed_refusals(rows, path):
        try:
            yield SessionEvent.from_json(row)
        except EventValidationError as error:
            raise _refusal(error.detail, error.rule, path, row, locate) from None
        except LosslessJsonError as error:
            raise _refusal(str(error), "not-lossless-json", path, row, locate) from None


def _typed_refusals(
    rows: Iterable[Mapping[str, Any]], path: str | None
) -> Iterator[Mapping[str, Any]]:
    """The chain's rows; a row shape an edge cannot even read becomes a typed refusal.

    Edges refuse what they recognize as wrong with precise rules; a value of an
    unexpected JSON type deep in an old row can still trip a plain ``TypeError`` /
    ``ValueError`` inside an edge. That is bad input, not a crash: it is reported as a
    ``MigrationRefusedError`` (rule ``unreadable-row``) with the original error chained.
    """
    iterator = iter(rows)
    while True:
        try:
            row = next(iterator)
        except StopIteration:
            return
        except DshStoreError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
            raise MigrationRefusedError(
                f"an older row has a shape the migration cannot read "
                f"({type(error).__name__}: {error})",
                rule="unreadable-row",
                path=path,
            ) from error
        yield row


def _refusal(
    detail: str, rule: str, path: str | None, row: Mapping[str, Any], locate: Locate
) -> MigrationRefusedError:
    seq = row.get("seq")
    return model_refusal(
        f"the upgraded event is not valid v4: {detail}",
        rule,
        path,
        seq if type(seq) is int else None,
        row.get("type"),
        locate,
    )


def model_refusal(
    detail: str,
    rule: str,
    path: str | None,
    seq: int | None,
    event_type: object,
    locate: Locate | None,
) -> MigrationRefusedError:
    """The refusal of the v4 model's check (edge :data:`MODEL_EDGE`), naming the source seq.

    ``seq`` is the upgraded event's seq; ``locate`` maps it back to the source event (the
    edges renumber). An event an edge made has no source seq: the refusal then names the
    upgraded seq and the edge in its detail, and carries ``seq=None``.
    """
    kind = event_type if isinstance(event_type, str) else None
    if seq is not None and locate is not None:
        source, made_by = locate(seq)
        if source is None:
            detail = f"{detail} (upgraded seq {seq}, an event the {made_by} edge made)"
        elif source != seq:
            detail = f"{detail} (upgraded seq {seq}, from source seq {source})"
        seq = source
    return MigrationRefusedError(
        detail, rule=rule, path=path, seq=seq, event_type=kind, edge=MODEL_EDGE
    )


def with_source_line(error: MigrationRefusedError, source: Path) -> MigrationRefusedError:
    """``error`` (a refusal naming a source seq) with that event's line and type.

    The seqs a model refusal names are source seqs (the migration's locator maps them
    back); so are those of the edges that read the source rows as they are
    (:func:`_source_seq_edges`). A later edge's seqs are of an intermediate format: such a
    refusal is left without a line.
    """
    if error.seq is None or error.line is not None:
        return error
    if error.edge != MODEL_EDGE and error.edge not in _source_seq_edges(source):
        return error
    found = _source_row(source, error.seq)
    if found is None:
        return error
    line, event_type = found
    detail = error.detail
    if error.event_type is not None and event_type != error.event_type:
        detail = f"{detail} (upgraded type {error.event_type!r})"
    return MigrationRefusedError(
        detail,
        rule=error.rule,
        path=error.path,
        seq=error.seq,
        event_type=event_type,
        edge=error.edge,
        line=line,
    )


def _source_seq_edges(source: Path) -> frozenset[str]:
    """The edges whose refusals name seqs of ``source`` itself: the one that reads its
    rows as they are (``"2->3"`` for a format-2 log) and, for format 0, also ``"1->2"``
    (0->1 keeps every seq and makes no event)."""
    version = header_version(source)
    if version is None:
        return frozenset()
    edges = {f"{version}->{version + 1}"}
    if version == 0:
        edges.add("1->2")
    return frozenset(edges)


def _source_row(source: Path, seq: int) -> tuple[int, str | None] | None:
    """(line, type) of the source row holding ``seq``; one more scan, only on a refusal."""
    try:
        for row in LogScanner(source, chunk_size=_SCAN_CHUNK).rows():
            if row.first_seq <= seq < row.first_seq + row.seq_count:
                kind = row.value.get("type")
                return row.line, kind if isinstance(kind, str) else None
            if row.first_seq > seq:
                return None
    except (DshStoreError, OSError):
        return None
    return None


def check_upgraded(
    header: SessionHeader, events: Iterable[SessionEvent], path: str, locate: Locate | None
) -> int:
    """Run every whole-log model rule over upgraded events; a failure is a refusal."""
    try:
        return check_stream(header, events)
    except EventValidationError as error:
        raise model_refusal(
            f"the upgraded log breaks a v4 rule: {error.detail}",
            error.rule,
            path,
            error.seq,
            error.event_type,
            locate,
        ) from None
