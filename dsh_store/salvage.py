"""Point-in-time salvage: copy the longest valid prefix of a damaged v4 log to a new file.

A log with committed corruption is never rewritten (``load``, ``open`` and ``repair``
refuse it). Salvage is the way out that keeps the damaged original for forensics: it
reads the log with the same checks :func:`dsh_store.restore.read_log` applies, stops at
the first event that fails any of them, and publishes the header, the kept lines (their
original bytes) and the closers of the kept prefix to a *new* file with
:func:`~dsh_store.jsonl.files.materialize`, which never overwrites. The source is only
read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from .errors import (
    CorruptLogError,
    EventValidationError,
    NotASessionError,
    SalvageRefusedError,
    SessionExistsError,
    ZstdWriteUnsupportedError,
    location_text,
)
from .jsonl.files import materialize
from .jsonl.rows import Finding
from .jsonl.scan import LogScanner, ScannedRow
from .model import SESSION_FORMAT_VERSION, Session, SessionEvent, SessionHeader, interrupted_closers
from .restore import collector_paused, current_events, finding_json, header_from_row

__all__ = [
    "SalvagePlan",
    "SalvageRefusedError",
    "salvage_file",
    "salvage_json",
]


@dataclass(frozen=True)
class SalvagePlan:
    """What a salvage keeps, drops and writes (or would write) for one log.

    ``kept_events`` events (seqs ``0 .. kept_events - 1``) are kept; they and the header
    occupy bytes ``[0, kept_bytes)`` of ``path`` and are copied unchanged. The other
    ``dropped_bytes`` bytes of ``path`` are left out. ``stop`` says why the kept region
    ends (None for a clean log, which salvages to a copy). ``closers`` are the event
    types appended to balance an open turn. ``applied`` is True when this call published
    ``output``; ``existing`` when ``output`` already held exactly these bytes (an earlier
    salvage of the same log, e.g. one killed after its link), so nothing was written.
    """

    path: Path
    output: Path
    kept_events: int
    kept_bytes: int
    dropped_bytes: int
    stop: Finding | None
    closers: tuple[str, ...]
    applied: bool
    existing: bool = False

    @property
    def status(self) -> str:
        """``salvaged``, ``already-salvaged`` or ``would-salvage`` (a dry run)."""
        if self.applied:
            return "salvaged"
        return "already-salvaged" if self.existing else "would-salvage"

    def to_json(self) -> dict[str, Any]:
        """The ``dsh-store repair --salvage --json`` object (salvage.schema.json)."""
        return salvage_json(
            self.path,
            self.output,
            self.status,
            kept_events=self.kept_events,
            kept_bytes=self.kept_bytes,
            dropped_bytes=self.dropped_bytes,
            stop=self.stop,
            closers=self.closers,
        )


def salvage_json(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    status: str,
    *,
    kept_events: int | None = None,
    kept_bytes: int | None = None,
    dropped_bytes: int | None = None,
    stop: Finding | None = None,
    closers: Sequence[str] = (),
    reason: str | None = None,
) -> dict[str, Any]:
    """One salvage result in its stable JSON shape (docs/schemas/salvage.schema.json)."""
    return {
        "path": os.fspath(path),
        "output": os.fspath(output),
        "status": status,
        "keptEvents": kept_events,
        "keptBytes": kept_bytes,
        "droppedBytes": dropped_bytes,
        "stop": None if stop is None else finding_json(stop),
        "closers": list(closers),
        "reason": reason,
    }


class _Prefix:
    """The result of the scan: the admitted events, their row positions and the stop."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        # (line, offset) of every row handed to the model, in order: row i holds seq i.
        self.rows: list[tuple[int, int]] = []
        self.stop: Finding | None = None
        self.end: int | None = None  # where the kept region ends, when a defect cut it

    def track(self, rows: Iterable[ScannedRow]) -> Iterator[ScannedRow]:
        for row in rows:
            self.rows.append((row.line, row.offset))
            yield row

    def admitted(self, events: Iterable[SessionEvent]) -> Iterator[SessionEvent]:
        for event in events:
            yield event
            # Resumed only when the model asks for the next event: this one passed.
            self.events.append(event)

    def stop_at_row(self, index: int, rule: str, message: str) -> None:
        """Stop before the row that carried seq ``index``."""
        line, offset = self.rows[index]
        self.stop = Finding(rule, message, line, offset, index)
        self.end = offset
        del self.events[index:]


def salvage_file(
    path: str | os.PathLike[str], output: str | os.PathLike[str], *, dry_run: bool = False
) -> SalvagePlan:
    """Publish the longest valid prefix of the v4 log ``path``, balanced, as ``output``.

    The prefix is every event from seq 0 that passes what :func:`read_log` checks (row
    framing, lossless JSON, envelope and payload, the model's lifecycle and surface
    rules, the seeded-marker rule), up to the first one that does not, or up to a crash
    tail. Its lines are copied byte for byte after the header, followed by the closers a
    load would append (:func:`interrupted_closers`), so ``output`` verifies ``ok``. A
    clean log salvages to a copy (plus closers for an open turn).

    ``output`` is published with :func:`materialize` (temp file, fsync, link that never
    overwrites, directory fsync): after a crash it is absent or complete. ``path`` is
    only read. If ``output`` already holds exactly the bytes this salvage would write, it
    is left alone and the plan says ``existing`` (a rerun after a crash converges).
    ``dry_run`` computes the plan and writes nothing.

    :raises NotASessionError: no session header (nothing salvageable).
    :raises UnsupportedVersionError: a header version newer than this library reads.
    :raises CorruptLogError: the header line itself is invalid.
    :raises SalvageRefusedError: an older format, nothing valid to keep, or ``output`` is
        ``path`` or another existing file.
    """
    log = Path(path)
    target = Path(output)
    scanner = LogScanner(log, report=True)  # committed corruption ends the prefix
    info = scanner.read_header()
    if info is None:
        raise NotASessionError(str(log), "the file is empty (0 bytes)")
    if scanner.encoding == "zstd":  # the prefix is copied by byte offset: raw only
        raise ZstdWriteUnsupportedError(str(log), "a salvage")
    if info.version != SESSION_FORMAT_VERSION:
        raise SalvageRefusedError(
            str(log),
            f"it is a format-{info.version} log and salvage reads format "
            f"{SESSION_FORMAT_VERSION} only; `dsh-store migrate` upgrades an intact older "
            "log (a corrupt one is refused by the migration as well)",
            rule="needs-migration",
        )
    header = header_from_row(info.value, log)
    _check_target(log, target)
    prefix = _scan(scanner, log, header)
    kept = prefix.events
    closers = interrupted_closers(kept)
    kept_bytes = scanner.committed_size if prefix.end is None else prefix.end
    data = _read_prefix(log, kept_bytes, prefix)
    starts = [offset for _, offset in prefix.rows[: len(kept)]]
    lines = [data[start:end] for start, end in zip(starts, [*starts[1:], kept_bytes], strict=True)]
    lines.extend(event.line for event in closers)
    header_line = data[: info.size]
    plan = SalvagePlan(
        path=log,
        output=target,
        kept_events=len(kept),
        kept_bytes=kept_bytes,
        dropped_bytes=scanner.file_size - kept_bytes,
        stop=prefix.stop,
        closers=tuple(event.type for event in closers),
        applied=False,
    )
    content = b"".join((header_line, *lines))
    if _holds(target, content):
        return replace(plan, existing=True)
    if os.path.lexists(target):
        raise _exists(log, target)
    if dry_run:
        return plan
    try:
        writer = materialize(target, header_line, lines, session_id=header.id)
    except SessionExistsError:
        if _holds(target, content):  # a concurrent salvage of the same log got there first
            return replace(plan, existing=True)
        raise _exists(log, target) from None
    writer.close()
    return replace(plan, applied=True)


def _check_target(log: Path, target: Path) -> None:
    """Refuse to write over the source, whatever the spelling of it (or a hard link)."""
    try:
        same = os.path.samefile(log, target)
    except OSError:
        same = False
    if same:
        raise SalvageRefusedError(
            str(log),
            f"the output {target} is the source file itself; salvage writes a new file and "
            "never changes the original",
            rule="output-is-source",
        )


def _exists(log: Path, target: Path) -> SalvageRefusedError:
    return SalvageRefusedError(
        str(log),
        f"the output {target} already exists; salvage never overwrites a file, so name a "
        "new one or move it away",
        rule="output-exists",
    )


def _holds(target: Path, content: bytes) -> bool:
    """True when ``target`` is a regular file (not a symlink) holding exactly ``content``."""
    try:
        info = os.lstat(target)
        if not stat.S_ISREG(info.st_mode) or info.st_size != len(content):
            return False
        return target.read_bytes() == content
    except OSError:
        return False


def _scan(scanner: LogScanner, log: Path, header: SessionHeader) -> _Prefix:
    """Feed the log's events through the restore path one by one; keep those admitted.

    The scanner (made with ``report=True``) yields every row before a defect and ends
    there, recording committed corruption (or a crash tail); an event row that is not a
    valid event raises when it is decoded; the model rejects the first event that breaks
    a rule. Whichever comes first ends the prefix. The seeded-marker rule, checked once
    all events are in, is applied to the prefix afterwards (:func:`_enforce_end_rules`).
    """
    prefix = _Prefix()
    # A generator in fact: closed below so the scanner's descriptor goes at once.
    rows = cast(Generator[ScannedRow, None, None], scanner.rows())
    events = prefix.admitted(current_events(prefix.track(rows), log))
    whole = False
    try:
        with collector_paused():
            Session.from_restore(header, events)
        whole = True
    except CorruptLogError as error:  # an event row that does not decode
        prefix.stop = Finding(error.rule, error.detail, error.line, error.offset, error.seq)
        prefix.end = error.offset
    except EventValidationError as error:
        if len(prefix.events) < len(prefix.rows):
            # The model refused the last event handed to it.
            prefix.stop_at_row(
                len(prefix.events), error.rule, f"committed event is invalid: {error.detail}"
            )
        # Otherwise every event passed and only the end rule failed: handled below.
    finally:
        rows.close()
    corruption = scanner.corruption
    if prefix.stop is None and corruption is not None:
        prefix.stop = Finding(
            corruption.rule, corruption.detail, corruption.line, corruption.offset, corruption.seq
        )
        prefix.end = corruption.offset
    torn = scanner.torn
    if prefix.stop is None and torn is not None:
        prefix.stop = Finding(
            torn.rule, f"crash tail: {torn.reason}", torn.line, torn.offset, torn.seq
        )
    if not whole:
        _enforce_end_rules(log, header, prefix)
    if not prefix.events:
        stop = prefix.stop
        if stop is None:
            detail = "the log holds no event"
        else:
            where = location_text(None, stop.line, stop.offset, stop.seq)
            rule = "" if f"[{stop.rule}]" in stop.message else f" [{stop.rule}]"
            detail = f"the first event is already bad: {where}: {stop.message}{rule}"
        raise SalvageRefusedError(
            str(log), f"nothing to salvage: {detail}", rule="nothing-to-salvage", stop=stop
        )
    return prefix


def _enforce_end_rules(log: Path, header: SessionHeader, prefix: _Prefix) -> None:
    """Shorten the prefix until the restore path accepts it as a whole log.

    Only the rules checked after the last event can still fail here (today: a seeded
    header needs an inherited ``session/end-seed`` marker, an unseeded one may not have
    one). A failure naming an event cuts the prefix before it; one naming none (a seeded
    header whose marker was lost) leaves nothing valid to keep.
    """
    while prefix.events:
        try:
            with collector_paused():
                Session.from_restore(header, prefix.events)
            return
        except EventValidationError as error:
            seq = error.seq
            if seq is None or not 0 <= seq < len(prefix.events):
                raise SalvageRefusedError(
                    str(log),
                    f"nothing to salvage: the valid events do not form a log: {error.detail}",
                    rule="nothing-to-salvage",
                    stop=Finding(error.rule, error.detail, None, None, seq),
                ) from None
            prefix.stop_at_row(seq, error.rule, f"committed event is invalid: {error.detail}")


def _read_prefix(log: Path, size: int, prefix: _Prefix) -> bytes:
    """Bytes ``[0, size)`` of the log, checked against the lines the scan accepted.

    Reading them again (rather than rebuilding them from the decoded rows) keeps a BOM and
    CRLF line ends exactly as they were; the check makes sure no one changed them since.
    """
    with open(log, "rb") as handle:
        data = handle.read(size)
    changed = len(data) != size
    for event, (_, offset) in zip(prefix.events, prefix.rows, strict=False):
        body = event.line[:-1]  # the row without its line end
        if changed or data[offset : offset + len(body)] != body:
            raise SalvageRefusedError(
                str(log),
                "the log changed while it was being read; nothing was written, try again",
                rule="source-changed",
            )
    return data
