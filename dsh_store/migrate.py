"""The migration use case: upgrade older logs to format 4 and publish them safely (DESIGN §7).

Reads upgrade in memory and never write. Publishing never overwrites and never touches
the source:

- inside a store, the upgraded log is published as ``session.v4.jsonl`` beside the
  untouched source generation (the source is the backup);
- a loose file goes to ``--output OUT`` (published by ``link``, never overwriting) or is
  replaced ``--in-place`` after its original bytes were saved once as ``FILE.v<N>.bak``.

Every publish writes a temp file in the target directory, fsyncs it, re-reads and
re-verifies it in full, checks the source did not change meanwhile, then links (or
renames, for in-place) it into place and fsyncs the directory. A crash at any point
leaves the source intact and either no target or a complete one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .errors import (
    ConcurrentModificationError,
    DshStoreError,
    EventValidationError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    UnsupportedVersionError,
)
from .jsonl import layout
from .jsonl.failpoints import failpoint
from .jsonl.files import fsync_dir
from .jsonl.scan import LogScanner
from .model import SESSION_FORMAT_VERSION, SessionEvent, SessionHeader
from .restore import Inspection, read_log, revision_of

__all__ = [
    "HEADER_CLASSES",
    "MigrationResult",
    "classify_header",
    "migrate_file",
    "migrate_store",
    "publish_upgrade",
    "upgrade",
]

HEADER_CLASSES: Final = ("current", "migration-required", "unsupported", "malformed")

_WRITE_CHUNK: Final = 1 << 20


@dataclass(frozen=True)
class MigrationResult:
    """What a migration did (or, with ``dry_run``, would do) to one file.

    ``status`` is ``migrated``, ``would-migrate`` (dry run), ``current`` (already v4,
    nothing to do) or ``refused``; ``target`` is where the v4 log went (or would go).
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


def classify_header(path: str | os.PathLike[str]) -> str:
    """Header-only classification: ``current``, ``migration-required``, ``unsupported`` or
    ``malformed``. Reads the first line only; never reads event bodies, never writes.
    """
    try:
        info = LogScanner(path).read_header()
    except UnsupportedVersionError:
        return "unsupported"
    except (NotASessionError, OSError):
        return "malformed"
    if info is None:
        return "malformed"
    return "current" if info.version == SESSION_FORMAT_VERSION else "migration-required"


def upgrade(
    header_json: Mapping[str, Any],
    events_json: Iterable[Mapping[str, Any]],
    *,
    path: str | None = None,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
) -> tuple[SessionHeader, Iterator[SessionEvent]]:
    """Upgrade wire rows of any supported version to v4, in memory, lazily.

    Returns the v4 header and a lazy iterator of v4 events; a v4 input passes through
    unchanged. Refusals surface as :class:`MigrationRefusedError` while iterating.
    """
    from .migrations import MigrationContext, chain

    version = header_json.get("version")
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or not 0 <= version <= SESSION_FORMAT_VERSION
    ):
        raise UnsupportedVersionError(path or "<memory>", version, SESSION_FORMAT_VERSION)
    if version == SESSION_FORMAT_VERSION:
        return SessionHeader.from_json(header_json), (
            SessionEvent.from_json(row) for row in events_json
        )
    context = MigrationContext(
        path=path, session_id=header_json.get("id"), child_headers=child_headers
    )
    v4_header, rows = chain(dict(header_json), (dict(row) for row in events_json), context)
    return SessionHeader.from_json(v4_header), _events(rows, path)


def _events(rows: Iterable[Mapping[str, Any]], path: str | None) -> Iterator[SessionEvent]:
    for row in rows:
        try:
            yield SessionEvent.from_json(row)
        except (EventValidationError, LosslessJsonError) as error:
            raise MigrationRefusedError(
                f"the upgraded event is not valid v4: {error}",
                rule=getattr(error, "rule", "not-lossless-json"),
                path=path,
                seq=row.get("seq"),
                event_type=row.get("type"),
            ) from None


def _write_temp(
    directory: Path, final_name: str, header: SessionHeader, events: Iterable[SessionEvent]
) -> tuple[Path, int]:
    """Write header + events to a fresh exclusive temp file, fsync it; return (path, count)."""
    temp = directory / f"{final_name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, layout.FILE_MODE)
    count = 0
    try:
        buffer = bytearray(header.encode())
        for event in events:
            buffer += event.line
            count += 1
            if len(buffer) >= _WRITE_CHUNK:
                _write_all(fd, bytes(buffer))
                buffer.clear()
        _write_all(fd, bytes(buffer))
        failpoint("migrate.before-fsync")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    os.close(fd)
    return temp, count


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _verify_temp(temp: Path, count: int) -> Inspection:
    """Re-read the written file in full and require a clean, balanced v4 log."""
    try:
        inspection = read_log(temp)
    except DshStoreError as error:
        raise MigrationRefusedError(
            f"the upgraded log failed re-verification: {error}",
            rule="re-verification",
            path=str(temp),
        ) from None
    if inspection.torn is not None or len(inspection.events) != count:
        raise MigrationRefusedError(
            f"the upgraded log reads back {len(inspection.events)} events, wrote {count}",
            rule="re-verification",
            path=str(temp),
        )
    return inspection


def _migrate_to_temp(
    source: Path,
    directory: Path,
    final_name: str,
    child_headers: tuple[Mapping[str, Any], ...] | None,
) -> tuple[Path, int, int, str]:
    """Stream ``source`` through the chain into a verified temp file.

    Returns (temp, event count, source version, source revision before reading).
    """
    scanner = LogScanner(source)
    info = scanner.read_header()
    if info is None:
        raise NotASessionError(str(source), "the file is empty (0 bytes)")
    assert scanner.stat is not None
    revision = revision_of(scanner.stat)
    header, events = upgrade(
        info.value,
        (row.value for row in scanner.rows()),
        path=str(source),
        child_headers=child_headers,
    )
    temp, count = _write_temp(directory, final_name, header, events)
    try:
        _verify_temp(temp, count)
        _require_unchanged(source, revision)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return temp, count, info.version, revision


def _require_unchanged(source: Path, revision: str) -> None:
    if revision_of(os.stat(source)) != revision:
        raise ConcurrentModificationError(
            str(source), "the source changed while it was being migrated; run the migration again"
        )


def _link_into_place(temp: Path, target: Path) -> None:
    try:
        failpoint("migrate.before-link")
        os.link(temp, target)
        failpoint("migrate.after-link")
        fsync_dir(target.parent)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def publish_upgrade(inspection: Inspection) -> Inspection:
    """Publish the v4 upgrade of a store session's older log as ``session.v4.jsonl`` beside it.

    The source generation stays untouched (it is the backup). Returns the inspection of
    the published v4 log. Used when an older session is opened for writing.
    """
    source = inspection.path
    target = source.parent / layout.generation_name(SESSION_FORMAT_VERSION)
    if not target.exists():
        temp, _, _, _ = _migrate_to_temp(source, source.parent, target.name, None)
        _link_into_place(temp, target)
    return read_log(target)


def migrate_file(
    src: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    in_place: bool = False,
    dry_run: bool = False,
    child_headers: tuple[Mapping[str, Any], ...] | None = None,
) -> MigrationResult:
    """Migrate one log file to format 4.

    Without ``output`` or ``in_place`` the file must be a generation inside a session
    directory (``session.jsonl`` / ``session.vN.jsonl``) and the result is published
    beside it as ``session.v4.jsonl``. ``output`` publishes to that path (never
    overwriting); ``in_place`` saves ``FILE.v<N>.bak`` once, then atomically replaces the
    file. ``dry_run`` runs the whole chain and verification in memory and writes nothing.

    :raises MigrationRefusedError: the log cannot be upgraded faithfully (nothing written).
    """
    source = Path(src)
    if output is not None and in_place:
        raise ValueError("use either output or in_place, not both")
    kind = classify_header(source)
    if kind == "current":
        return MigrationResult(source, "current", SESSION_FORMAT_VERSION, target=source)
    if kind != "migration-required":
        # Let the reader raise the precise typed error.
        LogScanner(source).read_header()
        raise NotASessionError(str(source), "not a session log")
    if dry_run:
        return _dry_run(source, output, in_place, child_headers)
    if in_place:
        return _migrate_in_place(source, child_headers)
    target = Path(output) if output is not None else _beside(source)
    if target.exists():
        raise DshStoreError(
            f"{target} already exists; migration never overwrites — remove it or choose another "
            "--output"
        )
    temp, count, version, _ = _migrate_to_temp(source, target.parent, target.name, child_headers)
    _link_into_place(temp, target)
    return MigrationResult(source, "migrated", version, target=target, events=count)


def _beside(source: Path) -> Path:
    if layout.generation_version(source.name) is None:
        raise DshStoreError(
            f"{source} is a loose file (not session.jsonl / session.vN.jsonl in a session "
            "directory): pass --output OUT or --in-place"
        )
    return source.parent / layout.generation_name(SESSION_FORMAT_VERSION)


def _dry_run(
    source: Path,
    output: str | os.PathLike[str] | None,
    in_place: bool,
    child_headers: tuple[Mapping[str, Any], ...] | None,
) -> MigrationResult:
    scanner = LogScanner(source)
    info = scanner.read_header()
    assert info is not None
    _header, events = upgrade(
        info.value,
        (row.value for row in scanner.rows()),
        path=str(source),
        child_headers=child_headers,
    )
    count = sum(1 for _ in events)
    target = source if in_place else (Path(output) if output is not None else _beside(source))
    return MigrationResult(source, "would-migrate", info.version, target=target, events=count)


def _migrate_in_place(
    source: Path, child_headers: tuple[Mapping[str, Any], ...] | None
) -> MigrationResult:
    info = LogScanner(source).read_header()
    assert info is not None
    backup = source.with_name(f"{source.name}.v{info.version}.bak")
    temp, count, version, revision = _migrate_to_temp(
        source, source.parent, source.name, child_headers
    )
    try:
        if not backup.exists():
            # The backup is a second name for the original inode: no copy, nothing to tear.
            os.link(source, backup)
            fsync_dir(source.parent)
        failpoint("migrate.before-replace")
        _require_unchanged(source, revision)
        os.replace(temp, source)
        fsync_dir(source.parent)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return MigrationResult(source, "migrated", version, target=source, events=count, backup=backup)


def migrate_store(root: str | os.PathLike[str], *, dry_run: bool = False) -> list[MigrationResult]:
    """Publish ``session.v4.jsonl`` beside every older-only session in a store root.

    Sessions that already have a v4 generation are reported ``current``; refusals are
    reported (``refused`` with the reason) and do not stop the others.
    """
    from .store import JsonlStore

    store = JsonlStore(root)
    results: list[MigrationResult] = []
    for directory in store._session_dirs():
        from .store import _newest_generation

        log = _newest_generation(directory)
        if log is None:
            continue
        try:
            version = LogScanner(log).read_header()
        except DshStoreError as error:
            results.append(MigrationResult(log, "refused", None, reason=str(error)))
            continue
        if version is None:
            continue
        children = None
        if version.version != SESSION_FORMAT_VERSION:
            session_id = version.value.get("id")
            children = store._child_headers(session_id) if isinstance(session_id, str) else ()
        try:
            results.append(migrate_file(log, dry_run=dry_run, child_headers=children))
        except MigrationRefusedError as error:
            results.append(MigrationResult(log, "refused", version.version, reason=error.message))
    return results
