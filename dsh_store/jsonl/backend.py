"""The JSONL backend: :class:`~dsh_store.backend.StorageBackend` over a store root.

It assembles the physical layer: layout and lookup (:mod:`.layout`), the committed-region
scanner (:mod:`.scan`), durable publish and append (:mod:`.files`), loss-free tail cuts
(:mod:`.repair`) and the session lock (:mod:`.lock`). The encoding (how a batch is framed,
scanned and cut) is a constructor option; ``raw`` (one line per event) is the one this
module implements.

Crash stories (``docs/architecture.md``): the first publish is temp file, fsync, ``link``,
directory fsync, so a log exists complete or not at all; an append is one write and one
fsync, truncated back on failure; a repair copies the torn bytes to a fsynced sidecar
before it truncates, then appends the closers as one batch, and a repeat converges.
"""

from __future__ import annotations

import builtins
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from ..backend import (
    RepairOutcome,
    RepairRequest,
    StorageBackend,
    WriterLock,
)
from ..errors import AmbiguousSessionError
from ..model import SessionEvent, interrupted_closers
from . import layout
from .files import LogWriter, fsync_chain, make_dirs, materialize
from .lock import SessionLock
from .repair import commit_truncation, sidecar_path
from .scan import LogScanner, revision_of
from .zstd_frames import is_zstd_log
from .zstd_repair import commit_zstd_repair

__all__ = ["ENCODINGS", "JsonlBackend", "newest_generation", "revision_of"]

ENCODINGS: Final = ("raw",)
"""The encodings this backend writes and reads."""

# The event types a closer batch is made of (dsh_store.model.interrupted_closers).
_CLOSER_TYPES: Final = frozenset({"tool/result", "step/end", "turn/end"})


class JsonlBackend(StorageBackend):
    """Session logs in DSH's JSONL layout under ``root`` (DESIGN §4).

    :param root: the store root (absolute); created on first write, never required.
    :param encoding: how batches are framed; ``raw`` is one line per event.
    """

    name = "jsonl"

    def __init__(self, root: Path, *, encoding: str = "raw") -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown JSONL encoding {encoding!r}; known: {', '.join(ENCODINGS)}")
        self.root = root
        self.encoding = encoding

    # -- discovery -------------------------------------------------------------------

    def locate(self, session_id: str, cwd: str | None) -> Path:
        """``<root>/<projectKey>/<encodedId>/session.v4.jsonl`` (``_no-cwd`` without cwd)."""
        return layout.log_path(self.root, session_id, cwd)

    def find(self, session_id: str) -> Path | None:
        """The newest generation log of ``session_id``, or None; duplicates are refused."""
        name = layout.encode_session_id(session_id)
        matches: list[Path] = []
        for project in _listing(self.root):
            candidate = project / name
            if _real_dir(candidate):
                log = newest_generation(candidate)
                if log is not None:
                    matches.append(log)
        if len(matches) > 1:
            raise AmbiguousSessionError(session_id, matches)
        return matches[0] if matches else None

    def session_dirs(self) -> Iterator[Path]:
        """Every session directory under the root (symlinked or unlistable ones skipped)."""
        for project in _listing(self.root):
            if _real_dir(project):
                for directory in _listing(project):
                    if _real_dir(directory):
                        yield directory

    def locations(self) -> Iterator[Path]:
        """The log of every session directory (its :func:`newest_generation`), walk order."""
        for directory in self.session_dirs():
            log = newest_generation(directory)
            if log is not None:
                yield log

    def is_empty(self, location: Path) -> bool:
        """A 0-byte regular file (a log that never got its header)."""
        try:
            info = os.lstat(location)
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size == 0

    # -- reading ---------------------------------------------------------------------

    def read(self, location: Path) -> LogScanner:
        """A committed-region scanner over the file; reads at most its size at open."""
        return LogScanner(location)

    def revision(self, location: Path) -> str:
        """:func:`revision_of` the file's current ``stat``."""
        return revision_of(os.stat(location))

    # -- writing ---------------------------------------------------------------------

    def lock(self, location: Path, session_id: str, *, create: bool = False) -> WriterLock:
        """``session.lock`` in the session directory (made first, durably, with ``create``)."""
        if create:
            # A killed earlier attempt may have made some of these directories without
            # fsyncing their parents: make every name from the root down durable.
            make_dirs(location.parent, durable_below=self.root)
        return SessionLock(location.parent, session_id)

    def publish_first(
        self,
        location: Path,
        header_line: bytes,
        first_batch: Sequence[bytes],
        *,
        session_id: str,
    ) -> LogWriter:
        """Temp file, fsync, ``link`` (never overwriting), directory fsync; the writer."""
        return materialize(location, header_line, list(first_batch), session_id=session_id)

    def open_appender(self, location: Path, *, expected_size: int, next_seq: int) -> LogWriter:
        """Open the log for appending, then make every name from the root down durable."""
        writer = LogWriter.open(location, expected_size=expected_size, next_seq=next_seq)
        try:
            # Before this handle acknowledges anything: a killed earlier writer may have
            # linked the log or made its directories without the parent fsync.
            fsync_chain(location, self.root)
        except BaseException:
            writer.close()
            raise
        return writer

    def commit_repair(
        self, location: Path, request: RepairRequest, *, dry_run: bool = False
    ) -> RepairOutcome:
        """Sidecar, truncate, closers (see :mod:`dsh_store.jsonl.repair` and the module doc).

        A torn tail that is a prefix of this very closer batch, with evidence that an
        earlier repair was writing it, is completed instead of cut (no sidecar of our own
        bytes). Otherwise the tail goes to ``<log>.torn-<offset>`` before the truncate.
        A zstd log (by its name or magic) keeps its torn frame's records instead
        (:mod:`.zstd_repair`).
        """
        if is_zstd_log(location):
            return commit_zstd_repair(location, request, dry_run=dry_run)
        torn_bytes = request.stored_size - request.committed_size
        completed = _interrupted_closers_written(location, request) if torn_bytes else None
        cut = torn_bytes > 0 and completed is None
        outcome = RepairOutcome(
            cut_at=request.committed_size if cut else None,
            cut_bytes=torn_bytes if cut else 0,
            saved_to=sidecar_path(location, request.committed_size) if cut else None,
            completed_bytes=completed or 0,
            closers=len(request.closers),
            applied=False,
        )
        if dry_run or (not torn_bytes and not request.closers):
            return outcome
        closers = request.closers
        if completed is not None:
            _append_pieces(location, closers, completed, request.stored_size)
            return outcome._replace(applied=True)
        saved = None
        if cut:
            saved = commit_truncation(
                location, request.committed_size, expected_size=request.stored_size
            )
        if closers:
            first = closers[0].seq
            with LogWriter.open(
                location, expected_size=request.committed_size, next_seq=first
            ) as writer:
                writer.append([event.line for event in closers], first, closers[-1].seq)
        return outcome._replace(applied=True, saved_to=saved if cut else None)


def _interrupted_closers_written(location: Path, request: RepairRequest) -> int | None:
    """How many bytes of its closer batch an earlier, interrupted repair wrote; else None.

    The closers depend only on the committed prefix, so the repair's unfinished write is
    a torn tail that is a byte prefix of them. A byte prefix alone proves nothing (``{``
    starts every line), so there must also be evidence that a repair was writing here:
    either its sidecar at this offset (it cut a tail here, then began the closers) or
    whole lines of its batch already committed (the prefix ends with the first lines of
    the closers computed without them). Completing the batch then gives exactly the bytes
    an uninterrupted repair writes and removes no byte. Without evidence: None.
    """
    length = request.stored_size - request.committed_size
    if not request.closers or length <= 0:
        return None
    closer_bytes = b"".join(event.line for event in request.closers)
    if length >= len(closer_bytes):  # not a proper prefix: never read a huge tail
        return None
    with open(location, "rb") as log:
        log.seek(request.committed_size)
        tail = log.read(length + 1)
    if len(tail) != length or not closer_bytes.startswith(tail):
        return None
    evidence = sidecar_path(location, request.committed_size).exists() or _ends_with_closer_lines(
        request.events
    )
    return len(tail) if evidence else None


def _ends_with_closer_lines(events: Sequence[SessionEvent]) -> bool:
    """Whether the log ends with the first lines of the closer batch of an earlier prefix."""
    for count in range(1, len(events)):
        if events[-count].type not in _CLOSER_TYPES:
            return False
        head = interrupted_closers(events[:-count])[:count]
        if [event.line for event in head] == [event.line for event in events[-count:]]:
            return True
    return False


def _append_pieces(
    location: Path, closers: Sequence[SessionEvent], written: int, stored_size: int
) -> None:
    """Complete a closer batch of which ``written`` bytes are already in the log."""
    closer_bytes = b"".join(event.line for event in closers)
    # The writer only joins the pieces; one piece per seq keeps its count check meaningful.
    pieces: list[bytes] = []
    position = written
    for _ in closers:
        end = closer_bytes.index(b"\n", position) + 1
        pieces.append(closer_bytes[position:end])
        position = end
    first = closers[0].seq
    with LogWriter.open(location, expected_size=stored_size, next_seq=first) as writer:
        writer.append(pieces, first, first + len(pieces) - 1)


def newest_generation(directory: Path) -> Path | None:
    """The log a session directory holds: v4 if present, else its newest older generation."""
    best: tuple[int, Path] | None = None
    try:
        entries = list(directory.iterdir())
    except OSError:
        return None
    for entry in entries:
        version = layout.generation_version(entry.name)
        if version is None or not entry.is_file():
            continue
        # Both encodings of one generation (an interrupted conversion): raw, by name.
        if best is None or (version, best[1].name) > (best[0], entry.name):
            best = (version, entry)
    return None if best is None else best[1]


def _listing(directory: Path) -> builtins.list[Path]:
    """The entries of ``directory``, sorted; none when it cannot be listed."""
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _real_dir(path: Path) -> bool:
    """A directory that is not a symlink; False also when it cannot be looked at."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
