"""Loss-free repair of a crashed v4 log: cut the torn tail, append the closers.

The crash story: the torn bytes are first copied to a fsynced sidecar, then the log is
truncated to its committed prefix, then the closers are appended as one fsynced batch; a
crash at any step converges on the next repair, and a balanced log is never written.

:func:`repair_file` also deletes the publish temps an interrupted publish left beside the
log, once they are older than :data:`TEMP_GRACE_S` (younger ones may still be written).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import NeedsMigrationError
from .inspection import Inspection
from .jsonl import layout
from .jsonl.files import LogWriter, fsync_dir
from .jsonl.lock import SessionLock
from .jsonl.repair import commit_truncation, sidecar_path
from .model import SESSION_FORMAT_VERSION
from .restore import read_log
from .verify import TEMP_GRACE_S, LeftoverTemp, leftover_temps

__all__ = ["TEMP_GRACE_S", "RepairPlan", "commit_repair", "repair_file"]


def commit_repair(inspection: Inspection) -> Inspection:
    """Make an inspection's repair durable, loss-free, then re-read the log.

    The torn bytes go to a fsynced ``.torn-<offset>`` sidecar before the log is truncated
    to its committed prefix; then the closers are appended as one fsynced batch. Running
    it again after a crash at any point converges to the same log; on a balanced log it
    writes nothing. The caller must hold the session lock (or own the file).
    """
    if not inspection.needs_repair:
        return inspection
    if inspection.source_version != SESSION_FORMAT_VERSION:
        raise NeedsMigrationError(str(inspection.path), inspection.source_version, "repair")
    if inspection.torn is not None:
        # A tail that is a byte prefix of the closers is an earlier repair's unfinished
        # write: completing it removes no byte, so nothing needs a sidecar.
        if _finish_interrupted_closers(inspection):
            return read_log(inspection.path)
        commit_truncation(
            inspection.path, inspection.committed_size, expected_size=inspection.file_size
        )
    if inspection.closers:
        first = inspection.closers[0].seq
        with LogWriter.open(
            inspection.path, expected_size=inspection.committed_size, next_seq=first
        ) as writer:
            writer.append(
                [event.line for event in inspection.closers],
                first,
                first + len(inspection.closers) - 1,
            )
    return read_log(inspection.path)


def _interrupted_closers_written(inspection: Inspection) -> int | None:
    """How many bytes of its closer batch an earlier, interrupted repair wrote; else None.

    The closers depend only on the committed prefix, so a torn tail that is a byte prefix
    of them is that repair's unfinished write (when it wrote whole closer lines too, they
    are now part of the prefix, and the rest of the batch is what remains to close).
    Appending the missing rest gives exactly the bytes an uninterrupted repair writes, and
    keeps every byte already in the file, whoever wrote it: no sidecar is needed.
    """
    torn = inspection.torn
    if torn is None or not inspection.closers or torn.offset != inspection.committed_size:
        return None
    closer_bytes = b"".join(event.line for event in inspection.closers)
    with open(inspection.path, "rb") as log:
        log.seek(torn.offset)
        tail = log.read(torn.length + 1)
    if len(tail) != torn.length or not closer_bytes.startswith(tail):
        return None
    return len(tail)


def _finish_interrupted_closers(inspection: Inspection) -> bool:
    """Complete a closer batch that an earlier repair left half written; True if done."""
    written = _interrupted_closers_written(inspection)
    if written is None:
        return False
    closer_bytes = b"".join(event.line for event in inspection.closers)
    # The writer only joins the pieces; one piece per seq keeps its count check meaningful.
    pieces: list[bytes] = []
    position = written
    for _ in inspection.closers:
        end = closer_bytes.index(b"\n", position) + 1
        pieces.append(closer_bytes[position:end])
        position = end
    first = inspection.closers[0].seq
    with LogWriter.open(
        inspection.path, expected_size=inspection.file_size, next_seq=first
    ) as writer:
        writer.append(pieces, first, first + len(pieces) - 1)
    return True


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

    @property
    def needed(self) -> bool:
        """True when the log or its directory needs (or needed) a change."""
        return self.truncate_at is not None or bool(self.closers) or bool(self.stale_temps)

    def describe(self) -> str:
        """A few readable lines for the CLI."""
        if not self.needed:
            lines = [f"{self.path}: {self.classification}: nothing to repair"]
        else:
            verb = "repaired" if self.applied else "would repair"
            lines = [f"{self.path}: {verb} ({self.classification})"]
        if self.truncate_at is not None:
            lines.append(
                f"  cut {self.torn_bytes} torn byte(s) at offset {self.truncate_at}, saved to "
                f"{self.sidecar}"
            )
        if self.closers:
            lines.append(f"  append closers: {', '.join(self.closers)}")
        delete = "deleted" if self.applied else "delete"
        lines.extend(f"  {delete} leftover temp {temp}" for temp in self.stale_temps)
        lines.extend(
            f"  kept recent temp {temp} (a publish may still be writing it)"
            for temp in self.fresh_temps
        )
        return "\n".join(lines)


def repair_file(
    path: str | os.PathLike[str], *, dry_run: bool = False, temp_grace_s: float = TEMP_GRACE_S
) -> RepairPlan:
    """Repair one v4 log file in place, loss-free (see :func:`commit_repair`).

    Works on any ``.jsonl`` path without a store root. Inside a session directory the
    session lock is taken first, so an open writer makes this fail with
    :class:`SessionLockedError`. Older formats are refused: migrate them instead (the
    3->4 edge closes an interrupted turn itself).

    Then the publish temps that belong to the log
    (:func:`dsh_store.verify.leftover_temps`) and are stale (their mtime at least
    ``temp_grace_s`` seconds old, or already a second name of the log) are deleted, under
    the same lock, and the directory is fsynced; younger ones are kept and listed in
    ``fresh_temps``. A refused log keeps its temps too. ``dry_run`` changes nothing and
    lists what would be deleted.

    :raises CorruptLogError: committed corruption; the file is left byte-identical.
    """
    log = Path(path)
    inspection = read_log(log)
    if inspection.source_version != SESSION_FORMAT_VERSION and inspection.needs_repair:
        raise NeedsMigrationError(str(log), inspection.source_version, "repair")
    # A half-written closer batch of an earlier repair is completed, not cut (no sidecar).
    torn = None if _interrupted_closers_written(inspection) is not None else inspection.torn
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
