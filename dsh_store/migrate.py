"""The migration use case: upgrade older logs to format 4 and publish them safely (DESIGN §7).

Reads upgrade in memory and never write. Publishing never overwrites and never touches
the source:

- inside a store, the upgraded log is published as ``session.v4.jsonl`` beside the
  untouched source generation (the source is the backup);
- a loose file goes to ``output`` (published by ``link``, never overwriting) or is
  replaced ``in_place`` after its original inode was kept once as ``FILE.v<N>.bak``.

Every publish streams the upgrade into an exclusive temp file in the target directory,
fsyncs it, re-reads and re-verifies it in full (scan, per-event decoding and every model
rule, without keeping the events), checks the source did not change meanwhile, then links
(or renames, for in-place) it into place and fsyncs the directory. A crash at any point
leaves the source intact and either no target or a complete one; a rerun converges
because an existing target is accepted when it starts with exactly the bytes the rerun
produced and continues cleanly (a store may already have appended to it). A dry run makes
the same checks, the target's included, without writing.

Memory stays bounded by what the edges hold (about one turn) plus the model's validation
state, never the file: events flow from the scanner through the edges to the temp file.
"""

from __future__ import annotations

import contextlib
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .binding import BINDING_RULE, row_binding
from .children import children_index, jsonl_backend, migration_children
from .children import store_root as own_root
from .errors import (
    ConcurrentModificationError,
    DshStoreError,
    EventValidationError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from .inspection import Inspection
from .jsonl import files, layout
from .jsonl.failpoints import failpoint
from .jsonl.files import link_durably, new_temp, replace_durably, staged, write_all
from .jsonl.rows import HeaderInfo
from .jsonl.scan import LogScanner, ScannedRow, corruption_first, revision_of
from .jsonl.watermark import discard_watermark, record_published
from .model import SESSION_FORMAT_VERSION, SessionEvent, SessionHeader
from .model.stream_check import check_stream

if TYPE_CHECKING:
    from .migrations._lenient import LenientLog

__all__ = [
    "HEADER_CLASSES",
    "MIGRATE_FAILPOINTS",
    "MigrationResult",
    "classify_header",
    "migrate_file",
    "migrate_store",
    "publish_upgrade",
    "upgrade",
    "upgrade_header",
    "verify_published",
]

HEADER_CLASSES: Final = ("current", "migration-required", "unsupported", "malformed")

MIGRATE_FAILPOINTS: Final = (
    "migrate.before-fsync",
    "migrate.before-link",
    "migrate.after-link",
    "migrate.before-replace",
)
"""The crash points of the publish protocol (see :mod:`dsh_store.jsonl.failpoints`)."""

_WRITE_CHUNK: Final = 1 << 20
# The scanner parses one read chunk at a time: a smaller chunk than the default keeps the
# migration's peak memory (parsed rows of one chunk) small next to the write buffer.
_SCAN_CHUNK: Final = 1 << 18
_COMPARE_CHUNK: Final = 1 << 20
_REVERIFY_PREFIX: Final = "the upgraded log failed re-verification: "
_ROW_VALUE: Final = operator.itemgetter(3)  # ScannedRow.value

MODEL_EDGE: Final = "model"
"""The ``edge`` of a refusal by the v4 model's check of the upgraded log (after 3->4)."""

Locate = Callable[[int], tuple[int | None, str | None]]
"""Upgraded seq -> ``(source seq, None)``, or ``(None, edge)`` for an event an edge made."""


@dataclass(frozen=True)
class MigrationResult:
    """What a migration did (or, with ``dry_run``, would do) to one file.

    ``status`` is ``migrated``, ``would-migrate`` (dry run), ``current`` (already v4, or
    the v4 target was already published by an earlier run) or ``refused``; ``target`` is
    where the v4 log went (or would go).
    """

    source: Path
    status: str
    source_version: int | None
    target: Path | None = None
    events: int | None = None
    backup: Path | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable ``--json`` shape of ``dsh-store migrate``."""
        return {
            "source": str(self.source),
            "status": self.status,
            "sourceVersion": self.source_version,
            "target": None if self.target is None else str(self.target),
            "events": self.events,
            "backup": None if self.backup is None else str(self.backup),
            "reason": self.reason,
        }


# -- header-only --------------------------------------------------------------------------


def upgrade_header(header_json: Mapping[str, Any], *, path: str | None = None) -> SessionHeader:
    """Translate a header row of any supported version to the v4 header, header only.

    :raises UnsupportedVersionError: the version is not 0-4.
    :raises MigrationRefusedError: an edge refuses the header.
    :raises EventValidationError: the translated header is not a valid v4 header.
    """
    from .migrations import EDGES, MigrationContext

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
    from .migrations import MigrationContext
    from .migrations._lenient import LenientLog
    from .migrations._pipeline import located_chain

    version = _version_of(header_json, path)
    if version == SESSION_FORMAT_VERSION:
        return (
            SessionHeader.from_json(header_json),
            (SessionEvent.from_json(row) for row in events_json),
            None,
        )
    context = MigrationContext(
        path=path,
        session_id=header_json.get("id"),
        child_headers=child_headers,
        extras=extras or {},
        lenient=lenient if isinstance(lenient, LenientLog) else LenientLog() if lenient else None,
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
    """The ``lenient`` of :func:`upgrade_located` for a log read by ``reader``: with the opt-in
    and a log file's scanner, a note whose scan replaces lone surrogates and records each
    (docs/migrations.md, "The lenient opt-in")."""
    if not lenient or not isinstance(reader, LogScanner):
        return lenient
    from .migrations._lenient import LenientLog

    log = LenientLog()
    reader.on_lone_surrogates = log.record_lone_surrogates
    return log


def _scanned_rows(rows: Iterator[ScannedRow]) -> Iterator[dict[str, Any]]:
    """The decoded rows of a scan (always fresh dicts), without a generator per row."""
    return map(_ROW_VALUE, rows)


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
    from .jsonl.scan import header_version

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


def _checked(
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


# -- publishing ---------------------------------------------------------------------------


def _write_temp(
    target: Path, header_line: bytes, events: Iterable[SessionEvent]
) -> tuple[Path, int]:
    """Write the header line + events to a fresh exclusive temp beside ``target``, fsync it.

    Returns (temp path, event count). The temp is removed on any failure.
    """
    temp = new_temp(target)
    count = 0
    # A zstd target (by its name) gets the header frame, then one frame per written chunk.
    encoder = None
    if layout.encoding_of(target.name) == "zstd":
        from .jsonl.zstd_codec import FrameEncoder  # only for zstd targets (extra binding)

        encoder = FrameEncoder()
    with staged(temp, before_fsync="migrate.before-fsync") as file:
        fd = file.fd
        if encoder is None:
            buffer = bytearray(header_line)
        else:
            write_all(fd, encoder.header_frame(header_line))
            buffer = bytearray()
        for event in events:
            buffer += event.line
            count += 1
            if len(buffer) >= _WRITE_CHUNK:
                # bytearray written in place (no copy); write_all loops over short writes
                write_all(fd, buffer if encoder is None else encoder.batch_frame(bytes(buffer)))
                buffer.clear()
        if encoder is None:
            write_all(fd, buffer)
        elif buffer:
            write_all(fd, encoder.batch_frame(bytes(buffer)))
    return temp, count


def verify_published(path: str | os.PathLike[str]) -> int:
    """Re-read a v4 log in full, streaming, and require it to be clean; return its events.

    Every line is decoded and validated and every model rule is applied, but no event is
    kept, so memory does not grow with the file. A clean log has no torn tail and no
    finding of the physical reader.

    :raises MigrationRefusedError: with the model's rule when an event breaks one, else
        with rule ``re-verification`` naming what failed.
    """
    log = Path(path)
    scanner = LogScanner(log, chunk_size=_SCAN_CHUNK)
    try:
        info = scanner.read_header()
        if info is None or info.version != SESSION_FORMAT_VERSION:
            raise NotASessionError(str(log), "the written file has no v4 header")
        header = SessionHeader.from_json(info.value)
        count = check_stream(
            header,
            (SessionEvent.from_json(row.value, line=row.raw) for row in scanner.rows()),
        )
    except EventValidationError as error:
        # The written log breaks a model rule: the refusal carries that rule.
        raise MigrationRefusedError(
            f"the upgraded log breaks a v4 rule: {error.detail}",
            rule=error.rule,
            path=str(log),
            seq=error.seq,
            event_type=error.event_type,
        ) from None
    except DshStoreError as error:
        raise MigrationRefusedError(
            f"{_REVERIFY_PREFIX}{error}",
            rule="re-verification",
            path=str(log),
        ) from None
    problems = [finding.message for finding in scanner.findings]
    if scanner.torn is not None:
        problems.append(f"torn tail at byte {scanner.torn.offset}")
    if problems:
        raise MigrationRefusedError(
            f"{_REVERIFY_PREFIX}{'; '.join(problems)}",
            rule="re-verification",
            path=str(log),
        )
    return count


def _migrate_to_temp(
    source: Path,
    target: Path,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    lenient: bool = False,
) -> tuple[Path, int, int, str]:
    """Stream ``source`` through the chain into a fully verified temp file beside ``target``.

    Returns (temp, event count, source version, source revision before reading).
    """
    scanner = LogScanner(source, chunk_size=_SCAN_CHUNK)
    info = scanner.read_header()
    if info is None:
        raise NotASessionError(str(source), "the file is empty (0 bytes)")
    assert scanner.stat is not None
    revision = revision_of(scanner.stat)
    _, header_line, events, locate, rows = _source_stream(
        source, scanner, info, child_headers, lenient
    )
    try:
        with corruption_first(rows):
            temp, count = _write_temp(target, header_line, events)
    except MigrationRefusedError as error:
        raise with_source_line(error, source) from None
    try:
        verified = verify_published(temp)
        if verified != count:
            raise MigrationRefusedError(
                f"the upgraded log reads back {verified} events, {count} were written",
                rule="re-verification",
                path=str(temp),
            )
        _require_unchanged(source, revision)
    except MigrationRefusedError as error:
        _discard(temp)
        if error.rule == "re-verification":
            raise
        # A model rule broken by the upgraded log: name the source event (the temp is
        # gone); the written seq is the upgraded one.
        refusal = model_refusal(
            error.detail, error.rule, str(source), error.seq, error.event_type, locate
        )
        raise with_source_line(refusal, source) from None
    except BaseException:
        _discard(temp)
        raise
    return temp, count, info.version, revision


def _source_stream(
    source: Path,
    scanner: LogScanner,
    info: HeaderInfo,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    lenient: bool = False,
) -> tuple[SessionHeader, bytes, Iterator[SessionEvent], Locate | None, Iterator[ScannedRow]]:
    """The v4 header, its line and the v4 events to publish for ``source``, their
    locator, and the pass of the scanner's rows they come from.

    An older log is upgraded. A v4 log (published to another ``output``) is copied: its
    committed lines byte for byte, each still decoded and validated; a crash tail is not
    part of the committed log and is not copied.
    """
    rows = scanner.rows()
    if info.version == SESSION_FORMAT_VERSION:
        header = SessionHeader.from_json(info.value)
        return header, info.raw + b"\n", _copied_events(rows, str(source)), None, rows
    header, events, locate = upgrade_located(
        info.value,
        _scanned_rows(rows),
        str(source),
        child_headers,
        None,
        fresh_dicts=True,
        lenient=lenient_source(scanner, lenient),
    )
    return header, header.encode(), events, locate, rows


def _copied_events(rows: Iterator[ScannedRow], path: str) -> Iterator[SessionEvent]:
    for row in rows:
        try:
            yield SessionEvent.from_json(row.value, line=row.raw)
        except EventValidationError as error:
            raise model_refusal(
                f"the event is not valid v4: {error.detail}",
                error.rule,
                path,
                row.first_seq,
                row.value.get("type"),
                None,
            ) from None
        except LosslessJsonError as error:
            raise model_refusal(
                str(error), "not-lossless-json", path, row.first_seq, row.value.get("type"), None
            ) from None


def _discard(temp: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(temp)


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _require_unchanged(source: Path, revision: str, *, ignore_ctime: bool = False) -> None:
    """Fail when the source changed since ``revision`` (content, size, inode or mtime).

    ``ignore_ctime`` is for the moment after the backup link, which changes only the
    inode's link count and therefore its ctime.
    """
    now = revision_of(os.stat(source))
    same = now.split(":")[:4] == revision.split(":")[:4] if ignore_ctime else now == revision
    if not same:
        raise ConcurrentModificationError(
            str(source), "the source changed while it was being migrated; run the migration again"
        )


def _starts_with(path: Path, prefix_file: Path) -> bool:
    """True when the file at ``path`` begins with the bytes of ``prefix_file``."""
    with open(path, "rb") as existing, open(prefix_file, "rb") as staged:
        while True:
            want = staged.read(_COMPARE_CHUNK)
            if not want:
                return True
            if existing.read(len(want)) != want:
                return False


def _target_exists(target: Path, why: str) -> MigrationRefusedError:
    return MigrationRefusedError(
        f"{target} already exists and {why}; migration never overwrites — move it away or "
        "choose another output",
        rule="target-exists",
        path=str(target),
    )


def _accept_existing(target: Path, starts_with_upgrade: bool) -> None:
    """Accept an existing ``target`` as this log's published upgrade, or refuse.

    It must start with exactly the upgrade's bytes, and whatever follows (a store may have
    appended) must be whole valid v4 lines continuing its seqs: the whole file is
    re-verified as a published log is (clean scan, no torn tail, every model rule).
    """
    if not starts_with_upgrade:
        raise _target_exists(target, "is not this log's upgrade")
    try:
        verify_published(target)
    except MigrationRefusedError as error:
        raise _target_exists(
            target,
            "starts with this log's upgrade, but what follows is not a clean continuation "
            f"of it ({error.detail.removeprefix(_REVERIFY_PREFIX)})",
        ) from None


class _PrefixProbe:
    """Compares the bytes a publish would write with an existing target, without writing."""

    def __init__(self, target: Path) -> None:
        self._file = open(target, "rb")  # noqa: SIM115 - closed by __exit__
        self.matches = True

    def __enter__(self) -> _PrefixProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def feed(self, data: bytes) -> None:
        if self.matches and self._file.read(len(data)) != data:
            self.matches = False

    def tee(self, events: Iterable[SessionEvent]) -> Iterator[SessionEvent]:
        for event in events:
            self.feed(event.line)
            yield event


def _publish(temp: Path, target: Path) -> bool:
    """Link ``temp`` to ``target`` (never overwriting) and fsync the directory.

    Returns True when this call published it, False when an earlier run already had:
    an existing target is accepted only if it starts with exactly the staged bytes and
    continues cleanly (:func:`_accept_existing`). The temp name is always removed.
    """
    try:
        try:
            link_durably(
                temp, target, before_link="migrate.before-link", after_link="migrate.after-link"
            )
        except FileExistsError:
            _accept_existing(target, _starts_with(target, temp))
            files.fsync_dir(target.parent)
            return False
        discard_watermark(target)  # one an earlier log of this name left is not this log's
        return True
    finally:
        _discard(temp)


def publish_upgrade(
    inspection: Inspection,
    *,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
) -> Path:
    """Publish the v4 upgrade of a store session's older log as ``session.v4.jsonl`` beside it.

    The source generation stays untouched (it is the backup). Returns the published v4
    log's path (read it with :func:`dsh_store.restore.read_log`). Used when an older
    session is opened for writing.

    :param child_headers: header rows of the sessions naming this one as parent, as
        :func:`migrate_file` and :func:`migrate_store` take them (completes the v4 subagent
        catalog); pass the evidence the ``inspection`` was read with, so the published log
        is the one it showed. ``None`` when unknown.
    :raises MigrationRefusedError: ``target-exists`` when ``session.v4.jsonl`` exists but is
        not this log's upgrade followed only by a clean continuation of whole v4 lines.
    """
    source = inspection.path
    encoding = layout.encoding_of(source.name)
    target = source.parent / layout.generation_name(SESSION_FORMAT_VERSION, encoding)
    # Published earlier (perhaps by a run killed before its directory fsync) and perhaps
    # appended to since: accepted, as _publish accepts it, only as this log's upgrade
    # followed by a clean continuation (checked without writing: "current"), else refused
    # with target-exists. Then make the name durable before reporting it.
    if (
        os.path.lexists(target)
        and _dry_run(source, target, False, child_headers).status == "current"
    ):
        files.fsync_dir(target.parent)
    else:
        temp, _, _, _ = _migrate_to_temp(source, target, child_headers)
        if _publish(temp, target):
            record_published(target)  # the new log never inherits an old watermark
    return target


def migrate_file(
    src: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    in_place: bool = False,
    dry_run: bool = False,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
    store_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
) -> MigrationResult:
    """Migrate one log file to format 4.

    Without ``output`` or ``in_place`` the file must be a generation inside a session
    directory (``session.jsonl`` / ``session.vN.jsonl``) and the result is published
    beside it as ``session.v4.jsonl``. ``output`` publishes to that path (never
    overwriting); ``in_place`` keeps the original as ``FILE.v<N>.bak`` once, then
    atomically replaces the file. A v4 source is ``current`` unless ``output`` is given, in
    which case it is copied there by the same protocol. ``dry_run`` runs the whole chain,
    every model rule and the target's (or backup's) checks in memory, writes nothing and
    reports what the real run would. Rerunning after a crash converges to the same result.

    The child-session evidence that completes the v4 ``subagent/catalog`` is, in this
    order: ``child_headers`` as given; the sessions of ``store_root`` that name this log's
    header id as ``parentSession``; for a store file (:func:`dsh_store.bulk.store_root`),
    those of its own store; else none (a loose file: the catalog stays as written). So a
    store file gives the same bytes however it is migrated (beside itself, to ``output``,
    in a dry run, or by :func:`migrate_store`), and a loose copy of it gives them too when
    its ``store_root`` is named.

    ``lenient`` is the opt-in of :func:`upgrade`: the two kinds of format-0 logs DSH's
    reader loads but the faithful chain refuses are migrated, every deviation listed in
    the trailing ``migration/note`` event. Without a deviation the bytes are the default's.

    :raises ValueError: both ``output`` and ``in_place``, or both ``child_headers`` and
        ``store_root``.
    :raises NotASessionError: the file is empty or not a session log.
    :raises UnsupportedVersionError: the version is newer than 4 (or not a version).
    :raises CorruptLogError: the source has committed corruption.
    :raises MigrationRefusedError: the log cannot be upgraded faithfully, or the target
        exists with other content, or ``in_place`` names a symbolic link (rule
        ``in-place-symlink``); nothing is written in any of these cases.
    :raises ConcurrentModificationError: the source changed during the migration.
    """
    source = Path(src)
    if output is not None and in_place:
        raise ValueError("use either output or in_place, not both")
    if child_headers is not None and store_root is not None:
        raise ValueError("use either child_headers or store_root, not both")
    if in_place:
        _refuse_symlink(source)
    info = LogScanner(source).read_header()
    if info is None:
        raise NotASessionError(str(source), "the file is empty (0 bytes)")
    if child_headers is None:
        child_headers = _child_evidence(source, info, store_root)
    if info.version == SESSION_FORMAT_VERSION and output is None:
        if in_place and not dry_run:
            # Perhaps replaced by a run killed before its directory fsync: make the
            # replacement (and the backup's name) durable before reporting it.
            files.fsync_dir(source.parent)
        return MigrationResult(source, "current", SESSION_FORMAT_VERSION, target=source)
    # From here on a v4 source has an ``output``: it is copied there, by the same protocol.
    if dry_run:
        return _dry_run(source, output, in_place, child_headers, lenient)
    if in_place:
        return _migrate_in_place(source, child_headers, lenient)
    target = Path(output) if output is not None else _beside(source)
    temp, count, version, _ = _migrate_to_temp(source, target, child_headers, lenient)
    status = "migrated" if _publish(temp, target) else "current"
    return MigrationResult(source, status, version, target=target, events=count)


def _child_evidence(
    source: Path, info: HeaderInfo, store_root: str | os.PathLike[str] | None
) -> tuple[Mapping[str, Any], ...] | None:
    """The child headers of ``source`` from ``store_root``, else from its own store.

    None for a v4 source (it is not upgraded) and for a loose file with no ``store_root``.
    """
    if info.version == SESSION_FORMAT_VERSION:
        return None
    root = own_root(source) if store_root is None else Path(store_root)
    if root is None:
        return None
    return migration_children(info, jsonl_backend(root))


def _beside(source: Path) -> Path:
    if layout.generation_version(source.name) is None:
        raise NotASessionError(
            str(source),
            "a loose file (not session.jsonl / session.vN.jsonl in a session directory) has "
            "no generation to publish beside: pass --output OUT or --in-place",
        )
    encoding = layout.encoding_of(source.name)
    return source.parent / layout.generation_name(SESSION_FORMAT_VERSION, encoding)


def _dry_run(
    source: Path,
    output: str | os.PathLike[str] | None,
    in_place: bool,
    child_headers: tuple[Mapping[str, Any], ...] | None,
    lenient: bool = False,
) -> MigrationResult:
    """What the real run would report, checked in memory; nothing is written.

    The same checks in the same order: the chain and every model rule, then the target
    (an existing one is ``current`` when the real run would accept it, else refused with
    ``target-exists``) or, in place, the backup (``backup-exists``).
    """
    target = source if in_place else (Path(output) if output is not None else _beside(source))
    scanner = LogScanner(source, chunk_size=_SCAN_CHUNK)
    info = scanner.read_header()
    assert info is not None
    header, header_line, events, locate, rows = _source_stream(
        source, scanner, info, child_headers, lenient
    )
    with contextlib.ExitStack() as stack:
        probe: _PrefixProbe | None = None
        if not in_place and os.path.lexists(target):
            probe = stack.enter_context(_PrefixProbe(target))
            probe.feed(header_line)
            events = probe.tee(events)
        try:
            with corruption_first(rows):
                count = _checked(header, events, str(source), locate)
        except MigrationRefusedError as error:
            raise with_source_line(error, source) from None
        if probe is not None:
            _accept_existing(target, probe.matches)
            return MigrationResult(source, "current", info.version, target=target, events=count)
    backup = _backup_of(source, info.version) if in_place else None
    if backup is not None:
        _check_backup(source, backup)
    return MigrationResult(
        source, "would-migrate", info.version, target=target, events=count, backup=backup
    )


def _migrate_in_place(
    source: Path, child_headers: tuple[Mapping[str, Any], ...] | None, lenient: bool
) -> MigrationResult:
    temp, count, version, revision = _migrate_to_temp(source, source, child_headers, lenient)
    backup = _backup_of(source, version)
    try:
        _keep_backup(source, backup)
        failpoint("migrate.before-replace")
        _require_unchanged(source, revision, ignore_ctime=True)
        replace_durably(temp, source)
    finally:
        _discard(temp)
    return MigrationResult(source, "migrated", version, target=source, events=count, backup=backup)


def _refuse_symlink(source: Path) -> None:
    """Refuse (``in-place-symlink``) an in-place migration of a symbolic link.

    Replacing the name would turn the link into a file and a hard-linked backup would be a
    second link, naming whatever the link names later (perhaps migrated content); the file
    it names is migrated in place under its own name instead.
    """
    if source.is_symlink():
        raise _symlink_refusal(source)


def _symlink_refusal(source: Path) -> MigrationRefusedError:
    try:
        named = f" to {os.readlink(source)}"
    except OSError:  # no longer a link
        named = ""
    dangling = "" if source.exists() else ", which does not exist"
    return MigrationRefusedError(
        f"{source} is a symbolic link{named}{dangling}; --in-place replaces a file, never a "
        "link: migrate the file it names in place, or pass --output NEW",
        rule="in-place-symlink",
        path=str(source),
    )


def _backup_of(source: Path, version: int) -> Path:
    return source.with_name(f"{source.name}.v{version}.bak")


def _keep_backup(source: Path, backup: Path) -> None:
    """Make ``backup`` a second name of the source inode, once (nothing to copy or tear).

    An existing backup from an interrupted earlier run is the same inode, or at least the
    same bytes; anything else is someone's file and is never replaced.
    """
    try:
        os.link(source, backup)
    except FileExistsError:
        _check_backup(source, backup)
    else:
        if backup.is_symlink():  # the source became a symlink after it was checked
            os.unlink(backup)
            raise _symlink_refusal(source)
    files.fsync_dir(source.parent)


def _check_backup(source: Path, backup: Path) -> None:
    """Refuse (``backup-exists``) an existing ``backup`` that is not the source's."""
    if not os.path.lexists(backup):
        return
    if not (os.path.samefile(source, backup) or _same_bytes(source, backup)):
        raise MigrationRefusedError(
            f"{backup} already exists with other content; move it away and run the migration again",
            rule="backup-exists",
            path=str(source),
        )


def _same_bytes(left: Path, right: Path) -> bool:
    return left.stat().st_size == right.stat().st_size and _starts_with(left, right)


def migrate_store(
    root: str | os.PathLike[str], *, dry_run: bool = False, lenient: bool = False
) -> list[MigrationResult]:
    """Publish ``session.v4.jsonl`` beside every older-only session in a store root.

    Each session directory's newest generation is used. Sessions already at v4 are
    reported ``current``; refusals, corrupt and unsupported logs, and misfiled ones (their
    header's id and cwd derive another directory, :mod:`dsh_store.binding`), are reported
    ``refused`` with the reason and do not stop the others. The child headers of each
    session are passed to the chain so the v4 subagent catalog is complete. ``lenient`` is
    :func:`migrate_file`'s.
    """
    backend = jsonl_backend(root)
    results: list[MigrationResult] = []
    index: dict[str, tuple[Mapping[str, Any], ...]] | None = None
    for log in backend.locations():
        try:
            info = LogScanner(log).read_header()
            if info is None:
                continue
            misfiled = row_binding(backend.root, log.parent, info.value, path=log)
            if misfiled is not None:
                reason = f"{BINDING_RULE}: {misfiled.message}"
                results.append(MigrationResult(log, "refused", info.version, reason=reason))
                continue
            if index is None and info.version != SESSION_FORMAT_VERSION:
                index = children_index(backend)  # one walk of the store, built on first need
            children = migration_children(info, backend, index)
            results.append(
                migrate_file(log, dry_run=dry_run, child_headers=children, lenient=lenient)
            )
        except DshStoreError as error:
            version = getattr(error, "version", None)
            results.append(
                MigrationResult(
                    log,
                    "refused",
                    version if type(version) is int else None,
                    reason=error.message,
                )
            )
    return results
