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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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
)
from .inspection import Inspection
from .jsonl import files, layout
from .jsonl.failpoints import failpoint
from .jsonl.files import link_durably, new_temp, replace_durably, staged, write_all
from .jsonl.lock import SessionLock
from .jsonl.rows import HeaderInfo
from .jsonl.scan import LogScanner, ScannedRow, corruption_first, revision_of
from .jsonl.watermark import discard_watermark, record_published
from .model import SESSION_FORMAT_VERSION, SessionEvent, SessionHeader
from .model.stream_check import check_stream
from .upgrading import (
    HEADER_CLASSES,
    Locate,
    check_upgraded,
    classify_header,
    lenient_source,
    model_refusal,
    upgrade,
    upgrade_header,
    upgrade_located,
    with_source_line,
)
from .upgrading import MODEL_EDGE as MODEL_EDGE  # re-exported: migrate.MODEL_EDGE

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

MIGRATE_FAILPOINTS: Final = (
    "migrate.before-fsync",
    "migrate.before-link",
    "migrate.after-link",
    "migrate.before-replace",
    "migrate.before-retire",
)
"""The crash points of the publish protocol (see :mod:`dsh_store.jsonl.failpoints`)."""

_WRITE_CHUNK: Final = 1 << 20
# The scanner parses one read chunk at a time: a smaller chunk than the default keeps the
# migration's peak memory (parsed rows of one chunk) small next to the write buffer.
_SCAN_CHUNK: Final = 1 << 18
_COMPARE_CHUNK: Final = 1 << 20
_REVERIFY_PREFIX: Final = "the upgraded log failed re-verification: "
_ROW_VALUE: Final = operator.itemgetter(3)  # ScannedRow.value


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
    with corruption_first(rows):  # a refused header: committed corruption further on wins
        header, events, locate = upgrade_located(
            info.value,
            map(_ROW_VALUE, rows),  # the scanner's rows, always fresh dicts
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
    encoding: str | None = None,
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

    ``encoding`` (``raw`` or ``zstd``) converts: published beside its source, the v4 log is
    ``session.v4.jsonl`` or ``session.v4.jsonl.zstd`` whatever the source's encoding, and
    a v4 store log of the other encoding is re-encoded beside itself, then retired to
    ``session.v4.jsonl[.zstd].v4.bak`` (:func:`_convert_beside`, docs/format.md §7.4).
    ``None`` keeps the source's encoding. An ``output`` or ``in_place`` file's encoding is
    its name's, which must then agree with ``encoding``.

    :raises ValueError: both ``output`` and ``in_place``, or both ``child_headers`` and
        ``store_root``; an unknown ``encoding`` or one the ``output`` / ``in_place`` name
        contradicts.
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
    _check_encoding_option(source, output, in_place, encoding)
    if in_place:
        _refuse_symlink(source)
    info = LogScanner(source).read_header()
    if info is None:
        raise NotASessionError(str(source), "the file is empty (0 bytes)")
    if child_headers is None:
        child_headers = _child_evidence(source, info, store_root)
    if info.version == SESSION_FORMAT_VERSION and output is None and not in_place:
        converting = _conversion(source, encoding)
        if converting is not None:
            return _convert_beside(*converting, info, dry_run=dry_run)
    if info.version == SESSION_FORMAT_VERSION and output is None:
        if in_place and not dry_run:
            # Perhaps replaced by a run killed before its directory fsync: make the
            # replacement (and the backup's name) durable before reporting it.
            files.fsync_dir(source.parent)
        return MigrationResult(source, "current", SESSION_FORMAT_VERSION, target=source)
    # From here on a v4 source has an ``output``: it is copied there, by the same protocol.
    beside = output is None and not in_place
    if dry_run:
        destination = _beside(source, encoding) if beside else output
        return _dry_run(source, destination, in_place, child_headers, lenient)
    if in_place:
        return _migrate_in_place(source, child_headers, lenient)
    target = Path(output) if output is not None else _beside(source, encoding)
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


def _beside(source: Path, encoding: str | None = None) -> Path:
    """The v4 generation published beside ``source``: in ``encoding``, else the source's."""
    if layout.generation_version(source.name) is None:
        raise NotASessionError(
            str(source),
            "a loose file (not session.jsonl / session.vN.jsonl in a session directory) has "
            "no generation to publish beside: pass --output OUT or --in-place",
        )
    encoding = encoding or layout.encoding_of(source.name)
    return source.parent / layout.generation_name(SESSION_FORMAT_VERSION, encoding)


def _check_encoding_option(
    source: Path,
    output: str | os.PathLike[str] | None,
    in_place: bool,
    encoding: str | None,
) -> None:
    """Refuse an unknown ``encoding``, or one the name of the file written contradicts."""
    if encoding is None:
        return
    if encoding not in ("raw", "zstd"):
        raise ValueError(f"an encoding is 'raw' or 'zstd', got {encoding!r}")
    named = None if output is None else Path(output)
    if named is None and in_place:
        named = source
    if named is not None and layout.encoding_of(named.name) != encoding:
        where = "--in-place keeps the name" if output is None else "the output"
        raise ValueError(
            f"{where} {named} names a {layout.encoding_of(named.name)} log (a zstd log's "
            f"name ends in {layout.ZSTD_SUFFIX}), not {encoding}: name the output for "
            "the encoding you want"
        )


def _conversion(source: Path, encoding: str | None) -> tuple[Path, Path] | None:
    """(source, target) when re-encoding the v4 store log ``source`` is asked for.

    Either ``encoding`` is not the source's, or it is and the other encoding's v4 log lies
    beside it: a conversion towards ``encoding`` that a crash interrupted before it
    retired its source (:func:`_convert_beside` finishes it). None otherwise.
    """
    if encoding is None or layout.generation_version(source.name) != SESSION_FORMAT_VERSION:
        return None
    own = layout.encoding_of(source.name)
    if own != encoding:
        return source, _beside(source, encoding)
    other = "zstd" if own == "raw" else "raw"
    sibling = _beside(source, other)
    return (sibling, source) if os.path.lexists(sibling) else None


def _convert_beside(
    source: Path, target: Path, info: HeaderInfo, *, dry_run: bool
) -> MigrationResult:
    """Re-encode the v4 store log ``source`` as ``target`` beside it, retiring the source.

    Under the session lock (no writer appends meanwhile): the source must have no crash
    tail (repair it first; the copy is of whole logs); its lines are written to a temp in
    the target's encoding, fsynced, re-verified and linked to ``target`` (never
    overwriting; an existing target is accepted only as this very copy); then the source
    gets its backup name ``<source>.v4.bak`` (a hard link) and loses its own, and the
    directory is fsynced. A crash before the unlink leaves the source and perhaps the
    target and backup, all whole: readers refuse a session directory holding both
    encodings' v4 logs and name the command that finishes, and a rerun converges.
    """
    session_id = info.value.get("id")
    backup = _backup_of(source, SESSION_FORMAT_VERSION)
    with SessionLock(source.parent, session_id if isinstance(session_id, str) else ""):
        scanner = LogScanner(source).exhaust()
        if scanner.torn is not None:
            raise MigrationRefusedError(
                f"{source} ends in a crash tail at byte {scanner.torn.offset}; converting "
                f"copies whole logs only: run `dsh-store repair {source}`, then convert",
                rule="convert-torn-tail",
                path=str(source),
            )
        if dry_run:
            _check_backup(source, backup)
            result = _dry_run(source, target, False, None)
            status = "would-migrate" if result.status == "current" else result.status
            return MigrationResult(
                source,
                status,
                SESSION_FORMAT_VERSION,
                target=target,
                events=result.events,
                backup=backup,
            )
        temp, count, _, revision = _migrate_to_temp(source, target, None)
        if _publish(temp, target):
            record_published(target)  # the new log never inherits an old watermark
        _keep_backup(source, backup)
        failpoint("migrate.before-retire")
        _require_unchanged(source, revision, ignore_ctime=True)
        os.unlink(source)
        discard_watermark(source)  # the source's name is free: no record stays under it
        files.fsync_dir(source.parent)
    return MigrationResult(
        source, "migrated", SESSION_FORMAT_VERSION, target=target, events=count, backup=backup
    )


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
                count = check_upgraded(header, events, str(source), locate)
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
    root: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    lenient: bool = False,
    encoding: str | None = None,
) -> list[MigrationResult]:
    """Publish ``session.v4.jsonl`` beside every older-only session in a store root.

    Each session directory's newest generation is used. Sessions already at v4 are
    reported ``current``; refusals, corrupt and unsupported logs, and misfiled ones (their
    header's id and cwd derive another directory, :mod:`dsh_store.binding`), are reported
    ``refused`` with the reason and do not stop the others. The child headers of each
    session are passed to the chain so the v4 subagent catalog is complete. ``lenient`` is
    :func:`migrate_file`'s, and so is ``encoding`` (``raw`` / ``zstd``: every session's v4
    log is published, or re-encoded, in it).
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
                migrate_file(
                    log,
                    dry_run=dry_run,
                    child_headers=children,
                    lenient=lenient,
                    encoding=encoding,
                )
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
