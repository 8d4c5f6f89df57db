"""Loss-free crash repair of a zstd log: the torn frame's records are kept (docs/format.md §7.3).

Protocol of :func:`commit_zstd_repair` (each step is safe to crash after; a rerun finds
what the earlier run left and ends in the same log an uninterrupted repair writes):

1. The lines to append -- the events decoded from the torn final frame, then the closers
   -- are saved as ``<log>.repair-<offset>`` (:func:`~.repair.write_intent`), fsynced.
2. The torn bytes go to the ``<log>.torn-<offset>`` sidecar and the log is cut to the
   frame boundary (:func:`~.repair.commit_truncation`).
3. The saved lines are appended as one frame by the log writer (write-all, fsync,
   truncate-back on failure); then the intent is removed.

A rerun that finds an intent at the log's end whose first seq continues the log finishes
with those lines (the torn frame is gone by then); an intent that does not is stale and
is dropped, as are intents below the committed size (their lines are in the log).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from ..backend import RepairOutcome, RepairRequest
from ..errors import ConcurrentModificationError
from .files import LogWriter
from .repair import (
    commit_truncation,
    drop_intent,
    drop_stale_intents,
    read_intent,
    sidecar_path,
    write_intent,
)
from .scan import LogScanner

__all__ = ["commit_zstd_repair"]


def commit_zstd_repair(
    location: Path, request: RepairRequest, *, dry_run: bool = False
) -> RepairOutcome:
    """Make ``request`` durable on the zstd log at ``location``, loss-free (module doc).

    ``applied`` is True when the log was written; its ``read_back`` is then True: the log
    is not the committed region followed by the closers' lines, so the caller reads it.
    """
    offset = request.committed_size
    torn_bytes = request.stored_size - offset
    outcome = RepairOutcome(
        cut_at=offset if torn_bytes else None,
        cut_bytes=torn_bytes,
        saved_to=sidecar_path(location, offset) if torn_bytes else None,
        completed_bytes=0,
        closers=len(request.closers),
        applied=False,
        read_back=True,
    )
    if dry_run:
        return outcome
    drop_stale_intents(location, offset)
    pending = read_intent(location, offset)
    if pending is not None and not torn_bytes:
        next_seq = len(request.events)
        if not pending or _seq_of(pending[0]) != next_seq:  # not this log's continuation
            drop_intent(location, offset)
            pending = None
    if not torn_bytes and pending is None:
        if not request.closers:
            return outcome
        pending = [event.line for event in request.closers]
    if torn_bytes:
        if pending is None:
            scanner = LogScanner(location).exhaust()
            if (scanner.committed_size, scanner.file_size) != (offset, request.stored_size):
                raise ConcurrentModificationError(str(location), "it changed while it was repaired")
            kept = len(request.events) - scanner.recovered_events
            recovered = [event.line for event in request.events[kept:]]
            pending = recovered + [event.line for event in request.closers]
            if pending:
                write_intent(location, offset, pending)
        commit_truncation(location, offset, expected_size=request.stored_size)
    if pending:
        first = LogScanner(location).exhaust().event_count
        with LogWriter.open(location, expected_size=offset, next_seq=first) as writer:
            writer.append(pending, first, first + len(pending) - 1)
    drop_intent(location, offset)
    return outcome._replace(applied=True)


def _seq_of(line: bytes) -> int | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    seq = value.get("seq") if isinstance(value, dict) else None
    return seq if type(seq) is int else None
