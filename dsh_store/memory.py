"""The in-memory reference backend: :class:`~dsh_store.backend.StorageBackend` in a dict.

It gives the semantics every backend must give, without a file: lazy materialization,
seq continuity, the tail check, rollback of a failed append, the committed-region rule,
loss-free tail cuts, revisions and a single-writer lock (within one process). The
contract suite (``tests/contract/``) runs against it next to the JSONL backend, and its
failure hooks (:meth:`MemoryBackend.fail_next`, :meth:`MemoryBackend.tear`,
:meth:`MemoryBackend.replace_row`) stand in for a crash or a full disk.

A log is its header record plus one record per row (canonical JSON without the
terminator), and perhaps a torn fragment a crash left after them. Sizes are counted in
the bytes the same log takes as JSONL, so positions in messages read alike.
"""

from __future__ import annotations

import errno
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from .backend import (
    Finding,
    HeaderInfo,
    RepairOutcome,
    RepairRequest,
    StorageBackend,
    StoredRow,
    TornTail,
    refuse_misnumbered_batch,
)
from .errors import (
    ConcurrentModificationError,
    CorruptLogError,
    SessionExistsError,
    SessionLockedError,
    StorageError,
    WriterBrokenError,
)
from .jsonl.layout import encode_session_id
from .jsonl.rows import read_header_line, row_problem
from .records import PassResults

__all__ = ["MemoryBackend"]


class _Log:
    """One stored log: header record, row records and a torn fragment (no terminator)."""

    def __init__(self, header: bytes, rows: list[bytes]) -> None:
        self.header = header
        self.rows = rows
        self.fragment = b""
        self.generation = 0
        self.cuts: list[bytes] = []

    def size(self) -> int:
        return len(self.header) + 1 + sum(len(row) + 1 for row in self.rows) + len(self.fragment)


def _key(location: Path) -> str:
    return str(location)


class MemoryBackend(StorageBackend):
    """Session logs in a dict; one instance is one store (not shared across processes)."""

    name = "memory"

    def __init__(self) -> None:
        self._logs: dict[str, _Log] = {}
        self._locks: set[str] = set()
        self._failures: dict[str, OSError] = {}
        self._generations = itertools.count(1)

    # -- failure hooks (for the contract suite) -----------------------------------------

    def fail_next(self, operation: str, error: OSError) -> None:
        """Make the next ``operation`` (``append`` or ``publish``) fail with ``error``."""
        self._failures[operation] = error

    def tear(self, location: Path, fragment: bytes) -> None:
        """Leave ``fragment`` after the last row, as a crash in mid-write does."""
        log = self._log(location)
        log.fragment += fragment
        self._touch(log)

    def replace_row(self, location: Path, index: int, record: bytes) -> None:
        """Replace row ``index`` (0 = the first event) with ``record`` (damage at rest)."""
        log = self._log(location)
        log.rows[index] = record
        self._touch(log)

    def cut_tails(self, location: Path) -> list[bytes]:
        """The torn tails repairs cut from the log, oldest first (kept loss-free)."""
        return list(self._log(location).cuts)

    # -- discovery -------------------------------------------------------------------

    def locate(self, session_id: str, cwd: str | None) -> Path:
        """``memory:/<encodedId>/session.v4.jsonl``: one place per id, whatever the cwd."""
        return Path("memory:") / encode_session_id(session_id) / "session.v4.jsonl"

    def find(self, session_id: str) -> Path | None:
        location = self.locate(session_id, None)
        return location if _key(location) in self._logs else None

    def locations(self) -> Iterator[Path]:
        return iter([Path(key) for key in sorted(self._logs)])

    # -- reading ---------------------------------------------------------------------

    def read(self, location: Path) -> _MemoryReader:
        return _MemoryReader(self, location)

    def revision(self, location: Path) -> str:
        log = self._log(location)
        return f"memory:{log.generation}:{log.size()}"

    # -- writing ---------------------------------------------------------------------

    def lock(self, location: Path, session_id: str, *, create: bool = False) -> _MemoryLock:
        return _MemoryLock(self._locks, _key(location), session_id)

    def publish_first(
        self,
        location: Path,
        header_line: bytes,
        first_batch: Sequence[bytes],
        *,
        session_id: str,
    ) -> _MemoryAppender:
        if not first_batch:
            raise ValueError("publish_first needs a non-empty first batch: a log is never empty")
        if _key(location) in self._logs:
            raise SessionExistsError(session_id, str(location))
        failure = self._failures.pop("publish", None)
        if failure is not None:
            raise StorageError("publishing the new log", str(location), failure)
        log = _Log(header_line.rstrip(b"\n"), [record[:-1] for record in first_batch])
        self._logs[_key(location)] = log
        self._touch(log)
        return _MemoryAppender(self, location, log.size(), len(first_batch))

    def open_appender(
        self, location: Path, *, expected_size: int, next_seq: int
    ) -> _MemoryAppender:
        log = self._logs.get(_key(location))
        if log is None:
            raise ConcurrentModificationError(str(location), "the log no longer exists")
        if log.size() != expected_size:
            raise ConcurrentModificationError(
                str(location), f"size is {log.size()} bytes, expected {expected_size}"
            )
        return _MemoryAppender(self, location, expected_size, next_seq)

    def commit_repair(
        self, location: Path, request: RepairRequest, *, dry_run: bool = False
    ) -> RepairOutcome:
        log = self._log(location)
        cut = request.stored_size - request.committed_size
        outcome = RepairOutcome(
            cut_at=request.committed_size if cut else None,
            cut_bytes=cut,
            saved_to=location if cut else None,
            completed_bytes=0,
            closers=len(request.closers),
            applied=False,
        )
        if dry_run or (not cut and not request.closers):
            return outcome
        if log.size() != request.stored_size:
            raise ConcurrentModificationError(
                str(location), f"it is {log.size()} bytes long, the read saw {request.stored_size}"
            )
        if cut:
            kept = len(request.events)
            torn = b"".join(row + b"\n" for row in log.rows[kept:]) + log.fragment
            log.cuts.append(torn)
            del log.rows[kept:]
            log.fragment = b""
        log.rows.extend(event.line[:-1] for event in request.closers)
        self._touch(log)
        return outcome._replace(applied=True)

    # -- internals -------------------------------------------------------------------

    def _log(self, location: Path) -> _Log:
        log = self._logs.get(_key(location))
        if log is None:
            raise FileNotFoundError(errno.ENOENT, "no such session log", str(location))
        return log

    def _touch(self, log: _Log) -> None:
        log.generation = next(self._generations)

    def _take_failure(self, operation: str) -> OSError | None:
        return self._failures.pop(operation, None)


class _MemoryLock:
    """The single-writer lock of one log, held in the backend's set of held locks."""

    def __init__(self, held: set[str], key: str, session_id: str) -> None:
        self._held = held
        self._key = key
        self._session_id = session_id
        self._mine = False

    @property
    def is_held(self) -> bool:
        return self._mine

    def acquire(self) -> None:
        if self._mine or self._key in self._held:
            raise SessionLockedError(self._session_id, self._key)
        self._held.add(self._key)
        self._mine = True

    def release(self) -> None:
        if self._mine:
            self._held.discard(self._key)
            self._mine = False

    def __enter__(self) -> _MemoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class _MemoryAppender:
    """Appends batches to one log with the tail check; a failed append leaves no row."""

    def __init__(self, backend: MemoryBackend, location: Path, size: int, next_seq: int) -> None:
        self._backend = backend
        self.path = location
        self.size = size
        self._next_seq = next_seq
        self.pending: list[bytes] = []
        self.pending_first_seq: int | None = None
        self.broken_cause: str | None = None
        self._closed = False

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def closed(self) -> bool:
        return self._closed

    def append(self, lines: Sequence[bytes], first_seq: int, last_seq: int) -> None:
        if self.broken_cause is not None:
            raise WriterBrokenError(str(self.path), self.broken_cause)
        if self._closed:
            raise ValueError(f"{self.path}: the log writer is closed")
        if first_seq != self._next_seq or last_seq - first_seq + 1 != len(lines) or not lines:
            refuse_misnumbered_batch(self.path, self._next_seq, lines, first_seq, last_seq)
        log = self._backend._logs.get(_key(self.path))
        if log is None:
            raise ConcurrentModificationError(str(self.path), "the log was removed")
        if log.size() != self.size:
            raise ConcurrentModificationError(
                str(self.path), f"size is {log.size()} bytes, this writer last left {self.size}"
            )
        before = len(log.rows)
        log.rows.extend(line[:-1] for line in lines)
        failure = self._backend._take_failure("append")
        if failure is not None:
            del log.rows[before:]  # the rollback: the log is as it was before the batch
            self.pending = list(lines)
            self.pending_first_seq = first_seq
            raise StorageError(f"append of seqs {first_seq}..{last_seq}", str(self.path), failure)
        self._backend._touch(log)
        self.size = log.size()
        self._next_seq = last_seq + 1
        self.pending = []
        self.pending_first_seq = None

    def close(self) -> None:
        self._closed = True


class _MemoryReader(PassResults):
    """One pass over a snapshot of a log, under the committed-region rule."""

    def __init__(self, backend: MemoryBackend, location: Path) -> None:
        self._backend = backend
        self.path = str(location)
        self._location = location
        self._begin_pass()

    def _snapshot(self) -> tuple[bytes, tuple[bytes, ...], bytes]:
        log = self._backend._log(self._location)
        self._revision = self._backend.revision(self._location)
        self._file_size = log.size()
        return log.header, tuple(log.rows), log.fragment

    def read_header(self) -> HeaderInfo | None:
        header, _, _ = self._snapshot()
        self._header = read_header_line(header + b"\n", path=self.path)
        self._findings = list(self._header.findings)
        return self._header

    def reopen(self) -> _MemoryReader:
        return _MemoryReader(self._backend, self._location)

    def exhaust(self) -> _MemoryReader:
        for _ in self.rows():
            pass
        return self

    def rows(self) -> Iterator[StoredRow]:
        header_record, rows, fragment = self._snapshot()
        header = read_header_line(header_record + b"\n", path=self.path)
        self._header = header
        self._findings = list(header.findings)
        self._torn = None
        offset = len(header_record) + 1
        expected = 0
        defect: tuple[str, str, int, int] | None = None  # rule, message, index, offset
        for index, record in enumerate(rows):
            problem = _row_defect(record, expected, header.version)
            if problem is not None:
                defect = (problem[0], problem[1], index, offset)
                break
            value = orjson.loads(record)
            yield StoredRow(index + 2, offset, record, value, expected, 1)
            expected += 1
            offset += len(record) + 1
        self._committed_size = offset
        if defect is not None:
            rule, message, index, at = defect
            for later, record in enumerate(rows[index + 1 :], start=index + 1):
                if _row_defect(record, -1, header.version) is None and _is_turn_end(record):
                    raise CorruptLogError(
                        self.path,
                        f"{message} [{rule}]; the turn/end at line {later + 2} shows this "
                        "region was committed",
                        line=index + 2,
                        offset=at,
                        seq=expected,
                        rule=rule,
                    )
        elif fragment:
            defect = (
                "torn-line",
                f"the last line has no newline ({len(fragment)} byte(s) cut off)",
                len(rows),
                offset,
            )
        if defect is not None:
            rule, message, index, at = defect
            self._torn = TornTail(at, self._file_size - at, index + 2, message, expected, rule)
            self._findings.append(
                Finding(
                    "torn-tail",
                    f"crash tail of {self._file_size - at} byte(s) from line {index + 2}: "
                    f"{message} [{rule}]",
                    index + 2,
                    at,
                    expected,
                )
            )


def _row_defect(record: bytes, expected: int, version: int) -> tuple[str, str] | None:
    """Why ``record`` cannot be the row of seq ``expected`` (any seq for -1), or None."""
    try:
        value: Any = orjson.loads(record)
    except orjson.JSONDecodeError:
        return ("unparsable-line", "line is not valid JSON")
    problem = row_problem(value, version)
    if problem is not None:
        return problem
    if expected >= 0 and value.get("seq") != expected:
        seq = value.get("seq")
        rule = "seq-gap" if isinstance(seq, int) and seq > expected else "seq-duplicate"
        return (rule, f"expected seq {expected}, found {seq}")
    return None


def _is_turn_end(record: bytes) -> bool:
    value = orjson.loads(record)
    return isinstance(value, dict) and value.get("type") == "turn/end"
