"""Loss-free repair of a crashed v4 log: cut the torn tail, append the closers.

The crash story: the torn bytes are first copied to a fsynced sidecar, then the log is
truncated to its committed prefix, then the closers are appended as one fsynced batch; a
crash at any step converges on the next repair, and a balanced log is never written.

:func:`repair_file` also deletes the publish temps an interrupted publish left beside the
log, once they are older than :data:`TEMP_GRACE_S` (younger ones may still be written), and
removes an empty (0-byte) generation log of that age, which holds no header and no event
but would keep its session id taken: one name removal under the session lock, made durable
by a directory fsync, so a crash leaves the empty file or nothing.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .backend import RepairRequest, StorageBackend
from .errors import (
    ConcurrentModificationError,
    NeedsMigrationError,
    NotASessionError,
    SessionLockedError,
)
from .inspection import Inspection
from .jsonl import layout
from .jsonl.backend import JsonlBackend
from .jsonl.files import fsync_dir
from .jsonl.lock import SessionLock
from .jsonl.repair import sidecar_path
from .model import SESSION_FORMAT_VERSION
from .restore import read_log
from .verify import TEMP_GRACE_S, LeftoverTemp, leftover_temps

__all__ = [
    "TEMP_GRACE_S",
    "RepairPlan",
    "commit_repair",
    "commit_repair_with",
    "delete_orphan_temps",
    "repair_file",
    "repair_request",
]


def commit_repair(inspection: Inspection) -> Inspection:
    """Make an inspection's repair durable, loss-free, then re-read the log.

    The torn bytes go to a fsynced ``.torn-<offset>`` sidecar before the log is truncated
    to its committed prefix; then the closers are appended as one fsynced batch. Running
    it again after a crash at any point converges to the same log; on a balanced log it
    writes nothing. The caller must hold the session lock (or own the file).
    """
    backend = JsonlBackend(inspection.path.parent)
    return commit_repair_with(backend, inspection, lambda: read_log(inspection.path))


def commit_repair_with(
    backend: StorageBackend, inspection: Inspection, reread: Callable[[], Inspection]
) -> Inspection:
    """:func:`commit_repair` through ``backend``; ``reread`` reads the repaired log back.

    A log that needs no repair is still handed to the backend, which may finish an
    interrupted earlier repair of its own (a no-op for a balanced log).
    """
    if inspection.source_version != SESSION_FORMAT_VERSION:
        if inspection.needs_repair:
            raise NeedsMigrationError(str(inspection.path), inspection.source_version, "repair")
        return inspection
    outcome = backend.commit_repair(inspection.path, repair_request(inspection))
    return reread() if outcome.applied else inspection


def repair_request(inspection: Inspection) -> RepairRequest:
    """What a repair of ``inspection`` asks its backend to make durable."""
    return RepairRequest(
        session_id=inspection.header.id,
        events=inspection.events,
        closers=inspection.closers,
        committed_size=inspection.committed_size,
        stored_size=inspection.file_size
        if inspection.torn is not None
        else inspection.committed_size,
    )


@dataclass(frozen=True)
class RepairPlan:
    """What a repair does (or did) to one file.

    ``truncate_at``/``torn_bytes`` describe the crash tail cut (saved first to
    ``sidecar``), ``closers`` the event types appended; ``stale_temps`` are the leftover
    publish temps deleted (in a dry run: to delete), ``fresh_temps`` those kept because
    they are younger than the grace period. ``applied`` is False for a dry run or when
    nothing was needed.
    """

    path: Path
    classification: str
    truncate_at: int | None
    torn_bytes: int
    sidecar: Path | None
    closers: tuple[str, ...]
    applied: bool
    stale_temps: tuple[Path, ...] = ()
    fresh_temps: tuple[Path, ...] = ()
    removes_empty_log: bool = False

    @property
    def needed(self) -> bool:
        """True when the log or its directory needs (or needed) a change."""
        return (
            self.truncate_at is not None
            or bool(self.closers)
            or bool(self.stale_temps)
            or self.removes_empty_log
        )


def repair_file(
    path: str | os.PathLike[str], *, dry_run: bool = False, temp_grace_s: float = TEMP_GRACE_S
) -> RepairPlan:
    """Repair one v4 log file in place, loss-free (see :func:`commit_repair`).

    Works on any ``.jsonl`` path without a store root. Inside a session directory the
    session lock is taken first, so an open writer makes this fail with
    :class:`SessionLockedError`. Older formats are refused: migrate them first, then
    repair the published v4 log (migration keeps a crashed turn open, as it was).

    Then the publish temps that belong to the log
    (:func:`dsh_store.verify.leftover_temps`) and are stale (their mtime at least
    ``temp_grace_s`` seconds old, or already a second name of the log) are deleted, under
    the same lock, and the directory is fsynced; younger ones are kept and listed in
    ``fresh_temps``. A refused log keeps its temps too. ``dry_run`` changes nothing and
    lists what would be deleted.

    An empty (0-byte) generation log (``session.jsonl`` / ``session.vN.jsonl``) has no
    header and holds nothing, yet its name keeps the session id taken; it is removed
    (``removes_empty_log``) under the session lock once it is ``temp_grace_s`` old (a
    younger one may be a file another writer is creating: refused for now).

    :raises CorruptLogError: committed corruption; the file is left byte-identical.
    """
    log = Path(path)
    if layout.generation_version(log.name) is not None and _is_empty_file(log):
        return _remove_empty_log(log, dry_run=dry_run, grace_s=temp_grace_s)
    inspection = read_log(log)
    if inspection.source_version != SESSION_FORMAT_VERSION and inspection.needs_repair:
        raise NeedsMigrationError(str(log), inspection.source_version, "repair")
    # A half-written closer batch of an earlier repair is completed, not cut (no sidecar).
    preview = JsonlBackend(log.parent).commit_repair(log, repair_request(inspection), dry_run=True)
    torn = None if preview.completed_bytes else inspection.torn
    stale, fresh = _split_by_age(leftover_temps([str(log)]).get(str(log), ()), temp_grace_s)
    plan = RepairPlan(
        path=log,
        classification=inspection.classification,
        truncate_at=None if torn is None else torn.offset,
        torn_bytes=0 if torn is None else torn.length,
        sidecar=None if torn is None else sidecar_path(log, torn.offset),
        closers=tuple(event.type for event in inspection.closers),
        applied=False,
        stale_temps=tuple(Path(temp.path) for temp in stale),
        fresh_temps=tuple(Path(temp.path) for temp in fresh),
    )
    if dry_run or not plan.needed:
        return plan
    lock: SessionLock | None = None
    # Every generation name marks a session directory: its writers and publish_upgrade
    # hold this lock, so holding it keeps a repair from racing them.
    if layout.generation_version(log.name) is not None:
        lock = SessionLock(log.parent, inspection.header.id)
        lock.acquire()
    try:
        if inspection.needs_repair:
            commit_repair(read_log(log))
        deleted, kept = _delete_stale(stale, temp_grace_s)
    finally:
        if lock is not None:
            lock.release()
    return replace(plan, applied=True, stale_temps=deleted, fresh_temps=plan.fresh_temps + kept)


def _is_empty_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False  # read_log reports what is wrong with it
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def _remove_empty_log(log: Path, *, dry_run: bool, grace_s: float) -> RepairPlan:
    """Remove a 0-byte generation log at least ``grace_s`` old, under its session's lock."""
    age = time.time() - os.lstat(log).st_mtime
    if age < grace_s:
        raise NotASessionError(
            str(log),
            f"the file is empty (0 bytes) and was written {age:.0f} s ago, perhaps by a writer "
            f"still creating it; `dsh-store repair` removes it once it is {grace_s / 60:.0f} "
            "minutes old",
        )
    plan = RepairPlan(
        path=log,
        classification="empty",
        truncate_at=None,
        torn_bytes=0,
        sidecar=None,
        closers=(),
        applied=False,
        removes_empty_log=True,
    )
    if dry_run:
        return plan
    before = os.lstat(log)
    with SessionLock(log.parent, _session_id_of(str(log.parent))):
        now = os.lstat(log)
        if now.st_size != 0 or not os.path.samestat(before, now):
            raise ConcurrentModificationError(
                str(log), "the empty log was written or replaced while it was being removed"
            )
        os.unlink(log)
        fsync_dir(log.parent)
    return replace(plan, applied=True)


def delete_orphan_temps(
    orphans: Sequence[LeftoverTemp],
    *,
    dry_run: bool = False,
    temp_grace_s: float = TEMP_GRACE_S,
) -> list[tuple[Path, str]]:
    """Delete the stale orphan publish temps (those that belong to no log); never a log.

    An orphan (:func:`dsh_store.verify.orphan_temps_in`) is what a first publish killed
    before its link leaves; nothing in it was acknowledged. One in a session directory (a
    generation temp) is deleted under that session's lock, after checking again that no
    log has appeared to own it; a writer holding the lock keeps its directory's temps. The
    age rule is that of :func:`repair_file` (``temp_grace_s``), checked again just before
    the unlink; each directory is fsynced after its deletions.

    Returns ``(path, action)`` per orphan still present: ``deleted``, ``would-delete``
    (``dry_run``) or ``kept`` (too recent, owned meanwhile, or its session is open).
    """
    results: list[tuple[Path, str]] = []
    groups: dict[str, list[LeftoverTemp]] = {}
    for temp in orphans:
        groups.setdefault(os.path.dirname(temp.path) or os.curdir, []).append(temp)
    for directory, temps in groups.items():
        stale, fresh = _split_by_age(tuple(temps), temp_grace_s)
        results.extend((Path(temp.path), "kept") for temp in fresh)
        if dry_run:
            results.extend((Path(temp.path), "would-delete") for temp in stale)
            continue
        if not stale:
            continue
        in_session = any(
            layout.generation_version(layout.temp_final_name(os.path.basename(temp.path)) or "")
            is not None
            for temp in stale
        )
        lock = SessionLock(directory, _session_id_of(directory)) if in_session else None
        try:
            if lock is not None:
                lock.acquire()
        except SessionLockedError:
            results.extend((Path(temp.path), "kept") for temp in stale)
            continue
        try:
            with os.scandir(directory) as listing:
                present = {entry.name for entry in listing}
            still = [
                temp
                for temp in stale
                if layout.temp_owner(os.path.basename(temp.path), present) is None
            ]
            results.extend((Path(t.path), "kept") for t in stale if t not in still)
            deleted, kept = _delete_stale(still, temp_grace_s)
        finally:
            if lock is not None:
                lock.release()
        results.extend((path, "deleted") for path in deleted)
        results.extend((path, "kept") for path in kept)
    return results


def _session_id_of(directory: str) -> str:
    name = os.path.basename(os.path.normpath(directory))
    return layout.decode_session_id(name) or name


def _split_by_age(
    temps: tuple[LeftoverTemp, ...], grace_s: float
) -> tuple[list[LeftoverTemp], list[LeftoverTemp]]:
    """(stale, fresh): the temps no running publish can need, and the others."""
    now = time.time()
    stale = [temp for temp in temps if temp.is_stale(now, grace_s)]
    fresh = [temp for temp in temps if not temp.is_stale(now, grace_s)]
    return stale, fresh


def _delete_stale(
    stale: list[LeftoverTemp], grace_s: float
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """Unlink the stale temps, then fsync their directory; return (deleted, kept).

    Each temp is looked at again first: one written to since it was listed is a publish
    still at work and is kept; one already gone is neither deleted nor kept. A temp that
    is a second name of the log skips the age check: the log repair that just ran may
    have given it a fresh mtime, and its publish is over anyway.
    """
    deleted: list[Path] = []
    kept: list[Path] = []
    now = time.time()
    for temp in stale:
        try:
            # The same staleness rule as the listing, on the mtime as it is now.
            if not temp._replace(mtime=os.lstat(temp.path).st_mtime).is_stale(now, grace_s):
                kept.append(Path(temp.path))
                continue
            os.unlink(temp.path)
        except FileNotFoundError:
            continue
        deleted.append(Path(temp.path))
    if deleted:
        # Like every name change of the store, the removal is made durable.
        fsync_dir(deleted[0].parent)
    return tuple(deleted), tuple(kept)
