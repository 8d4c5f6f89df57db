"""Read-only summaries behind ``dsh-store inspect``, ``list`` and ``cat``.

Plain dicts with camelCase keys, so that the CLI's ``--json`` output is exactly what these
functions return inside its versioned envelope (documented in docs/cli.md and
docs/schemas/). Nothing here writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ._output import printable
from .errors import (
    DshStoreError,
    EventValidationError,
    NotASessionDirectoryError,
    NotASessionError,
)
from .jsonl import layout
from .jsonl.rows import is_packed_row, packed_row_count
from .jsonl.scan import LogScanner
from .jsonl.zstd_frames import is_zstd_log
from .model import Session
from .restore import (
    check_stream_session,
    corruption_first,
    finding_json,
    model_error,
    open_events,
    open_located,
    read_log,
    source_located,
)

if TYPE_CHECKING:
    from .inspection import Inspection

__all__ = [
    "NotASessionDirectoryError",
    "blank_list_row",
    "inspection_summary",
    "iter_v4_lines",
    "list_store",
    "one_log_file",
    "printable",
    "session_row",
    "stream_v4_lines",
    "summarize",
]

_TAIL_BYTES = 64 * 1024
_HEADER_READ = frozenset({"current", "needs-migration", "torn-tail"})
"""Statuses of a row whose header line was read (its id, cwd and created are known)."""
_MESSAGE_PREVIEW = 200


def one_log_file(path: str | os.PathLike[str]) -> str:
    """The single log ``dsh-store inspect`` and ``cat`` read for ``path``.

    A path that is not a directory is returned as given. In a session directory it is
    the newest generation log (``session.v4.jsonl`` before ``session.v3.jsonl`` ...
    before ``session.jsonl``), picked by the walker of ``dsh-store verify``
    (:func:`dsh_store.verify.iter_log_files`), so both commands read the same file.

    :raises NotASessionDirectoryError: ``path`` is a directory without a generation log
        of its own (an empty or unrelated directory, a store root, a project directory, a
        directory of loose ``.jsonl`` files); the message says what to pass instead.
    """
    text = os.fspath(path)
    if not os.path.isdir(text):
        return text
    # verify (and binding) off `dsh-store cat` and `export`
    from .verify import clean_path, iter_log_files

    top = clean_path(text)
    loose: str | None = None
    deeper: str | None = None
    # The walk lists the directory's own logs first; at most one of them is a generation
    # (the newest), so the first log found in a subdirectory ends the search.
    for log in iter_log_files(text):
        if (os.path.dirname(log) or os.curdir) != top:
            deeper = log
            break
        if layout.generation_version(os.path.basename(log)) is not None:
            return log
        if loose is None:
            loose = log
    reason = "it holds no session.jsonl or session.vN.jsonl log of its own"
    if loose is not None:
        instead = f"pass one of its .jsonl files (such as {loose}) instead"
    elif deeper is not None:
        reason += f", only logs below it such as {deeper}"
        instead = "pass one session directory or a .jsonl file instead"
    else:
        instead = "pass a session directory or a .jsonl file instead"
    raise NotASessionDirectoryError(text, reason, instead)


def summarize(
    path: str | os.PathLike[str], *, events: bool = False, messages: bool = False
) -> dict[str, Any]:
    """Header, version, classification, counts by type (events and bytes), open turn.

    A log that cannot be restored still gets its classification and findings (and no
    counts). Byte counts are of the v4 line of each event (an older log is upgraded in
    memory first). ``events`` adds ``eventList``; ``messages`` adds the derived messages.
    """
    # verify (and binding) off `dsh-store cat` and `export`
    from .verify import examine_file

    log = Path(path)
    report = examine_file(str(log))
    summary: dict[str, Any] = {
        "path": str(log),
        "classification": report.classification,
        "version": report.version,
        "findings": [finding_json(finding) for finding in report.findings],
    }
    if report.events is None:
        return summary
    return inspection_summary(summary, read_log(log), events=events, messages=messages)


def inspection_summary(
    summary: dict[str, Any], inspection: Inspection, *, events: bool, messages: bool
) -> dict[str, Any]:
    """``summary`` (path, classification, version, findings) completed from a restorable
    log's ``inspection``: the counts :func:`summarize` gives, for any store's log."""
    by_type: dict[str, dict[str, int]] = {}
    turns = steps = 0
    open_turn: int | None = None
    for event in inspection.events:
        slot = by_type.setdefault(event.type, {"count": 0, "bytes": 0})
        slot["count"] += 1
        slot["bytes"] += len(event.line)
        if event.type == "turn/start":
            turns += 1
            open_turn = event.data.get("turn")
        elif event.type == "turn/end":
            open_turn = None
        elif event.type == "step/start":
            steps += 1
    summary.update(
        header=inspection.header.to_json(),
        events=len(inspection.events),
        turns=turns,
        steps=steps,
        openTurn=open_turn,
        closers=[event.type for event in inspection.closers],
        tornBytes=None if inspection.torn is None else inspection.torn.length,
        byType=dict(sorted(by_type.items(), key=lambda item: (-item[1]["bytes"], item[0]))),
    )
    if events:
        summary["eventList"] = [
            {"seq": event.seq, "type": event.type, "bytes": len(event.line)}
            for event in inspection.events
        ]
    if messages:
        session = Session.from_restore(inspection.header, inspection.balanced)
        summary["messages"] = [_message_json(message) for message in session.derive_messages()]
    return summary


def _message_json(message: Any) -> dict[str, Any]:
    """A derived message as ``{role, text}``: its text parts joined, tool calls named."""
    value = message if isinstance(message, dict) else getattr(message, "to_json", dict)()
    texts: list[str] = []
    content = value.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "tool-call":
                texts.append(f"<tool call {part.get('toolName') or part.get('name')}>")
    text = " ".join(" ".join(texts).split())
    if len(text) > _MESSAGE_PREVIEW:
        text = text[:_MESSAGE_PREVIEW] + "…"
    return {"role": str(value.get("role", "?")), "text": text}


def list_store(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One row per session directory of a store root (see :func:`session_row`), by id.

    Reads each format-4 log's first line and its last 64 KiB only, so it stays fast on
    thousands of sessions (an older log is read whole, see :func:`session_row`).
    ``dsh-store verify`` gives the full verdict.

    :raises FileNotFoundError: ``root`` does not exist.
    :raises NotADirectoryError: ``root`` is not a directory.
    """
    base = Path(root)
    if not base.exists():
        raise FileNotFoundError(
            2, "no such store root (pass ROOT or set DSH_STORE_ROOT)", str(base)
        )
    if not base.is_dir():
        raise NotADirectoryError(20, "store root is not a directory", str(base))
    # the store (and its writer) off `dsh-store cat`, `export` and `inspect`
    from .store import JsonlStore

    rows: list[dict[str, Any]] = []
    encoding = layout.root_encoding(str(base))
    for log in JsonlStore(base).session_logs():
        row = session_row(log, root=base)
        if row["id"] is None and row["status"] in _HEADER_READ:
            continue  # a header without a string id names no session: not listable
        # What the store refuses to read (docs/format.md §7.2, §7.4) says so first.
        if layout.encoding_twin(str(log)) is not None:
            row["status"] = "encoding-conversion"
        elif layout.encoding_of(log.name) != encoding:
            row["status"] = "other-encoding"
        rows.append(row)
    rows.sort(key=lambda row: (str(row["id"]), row["path"]))
    return rows


def blank_list_row(path: str) -> dict[str, Any]:
    """A ``dsh-store list`` row for ``path`` before its header is read: every fact None,
    status ``not-a-session``, not misfiled (the JSONL and PostgreSQL listings start here)."""
    return {
        "id": None,
        "cwd": None,
        "created": None,
        "version": None,
        "events": None,
        "status": "not-a-session",
        "path": path,
        "misfiled": False,
    }


def session_row(log: Path, *, root: Path | None = None) -> dict[str, Any]:
    """``{id, cwd, created, version, events, status, path, misfiled}`` of one log, cheaply.

    ``misfiled`` is True when ``root`` is the store root the log was found in and the
    header's id and cwd derive another session directory (:mod:`dsh_store.binding`); the
    row still shows what the header says. Without ``root`` it is False.

    ``events`` is the number of committed events as ``dsh-store verify`` counts them: for
    a format-4 log the last committed seq + 1, read from the file's last complete line
    (None when that line is unreadable); for an older log the events of its in-memory
    upgrade, which reads the whole log (None when it cannot be upgraded). ``status``:
    ``current`` or ``needs-migration`` by header version; ``torn-tail`` when the file
    does not end with a newline (a zstd log: its frames are decoded, and the last one is
    torn); ``unsupported-version`` / ``not-a-session`` / ``unreadable`` when the header
    says so. :func:`list_store` also sets ``other-encoding`` for a log of another
    encoding than its root's and ``encoding-conversion`` for a session directory holding
    both encodings' v4 logs (both refused by the store).

    Every value has its documented type (docs/schemas/list.schema.json): a header ``id``
    or ``cwd`` that is not a string, or a ``createdAt`` that is not an integer, is None;
    ``events`` is None rather than negative. :func:`list_store` skips a row whose header
    was read but has no string id.
    """
    row = blank_list_row(str(log))
    try:
        info = LogScanner(log).read_header()
    except DshStoreError as error:
        kind = getattr(error, "version", None)
        row["status"] = "unsupported-version" if kind is not None else "not-a-session"
        return row
    except OSError:
        row["status"] = "unreadable"
        return row
    if info is None:
        row["status"] = "empty"
        return row
    row.update(
        id=_str_or_none(info.value.get("id")),
        cwd=_str_or_none(info.value.get("cwd")),
        created=_int_or_none(info.value.get("createdAt")),
        version=info.version,
        status="current" if info.version == layout.CURRENT_VERSION else "needs-migration",
    )
    if root is not None:
        # only for a store's listing: off `dsh-store cat` and `export`
        from .binding import row_binding

        row["misfiled"] = row_binding(root, log.parent, info.value, path=log) is not None
    try:
        events, clean_end = _tail_facts(log, info.size)
    except OSError:
        row["status"] = "unreadable"
        return row
    except DshStoreError:
        events, clean_end = None, True  # committed corruption: verify reports it
    if info.version != layout.CURRENT_VERSION:
        # An upgrade can merge or split events (packed rows, retired types), so only the
        # upgrade itself counts what verify counts: the whole older log is read.
        from .verify import examine_file

        events = examine_file(str(log)).events
    row["events"] = events
    if not clean_end:
        row["status"] = "torn-tail"
    return row


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tail_facts(log: Path, header_size: int) -> tuple[int | None, bool]:
    """(last seq + 1 or None, whether the file ends with a newline), from its tail.

    A zstd log's tail is compressed: its frames are scanned instead (the whole log is
    decoded, one frame at a time), and a torn final frame is its unclean end.
    """
    if is_zstd_log(log):
        scanner = LogScanner(log).exhaust()
        return scanner.event_count, scanner.torn is None
    with open(log, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(header_size, size - _TAIL_BYTES)
        handle.seek(start)
        tail = handle.read(size - start)
    if not tail:
        return 0, True
    clean_end = tail.endswith(b"\n")
    lines = tail.split(b"\n")
    if not clean_end:
        lines.pop()  # the unterminated fragment is not committed
    for raw in reversed(lines):
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None, clean_end
        return _next_seq(value), clean_end
    return (0 if start == header_size else None), clean_end


def _next_seq(value: Any) -> int | None:
    if not isinstance(value, dict):
        return None
    if is_packed_row(value):
        first = value.get("seq0")
        try:
            count = packed_row_count(value)
        except (KeyError, TypeError):
            return None
        first = _int_or_none(first)
        return first + count if first is not None and first >= 0 and count >= 0 else None
    seq = _int_or_none(value.get("seq"))
    return seq + 1 if seq is not None and seq >= 0 else None


def iter_v4_lines(path: str | os.PathLike[str]) -> Iterator[tuple[str, int, bytes]]:
    """``(type, seq, line)`` of every committed event as v4 JSONL, after checking the log.

    The whole log is first checked as a restore checks it (header, every event, the
    lifecycle, surface and seeded-marker rules; see :func:`stream_v4_lines`), keeping no
    event; then it is read again and its lines are yielded. So a log with committed
    corruption raises before anything is yielded. ``dsh-store cat`` streams in one pass
    with :func:`stream_v4_lines` instead.

    :raises CorruptLogError: committed corruption (a bad line, header or event).
    :raises MigrationRefusedError: an older log that cannot be upgraded faithfully.
    :raises NotASessionError: the first line is not a session header.
    """
    count = stream_v4_lines(path, lambda _type, _seq, _line: None)
    if count is None:
        return
    _, _, _, events = open_events(path, None)
    for event in islice(events, count):  # not what a writer appended since the check
        yield event.type, event.seq, event.line


def stream_v4_lines(
    path: str | os.PathLike[str], emit: Callable[[str, int, bytes], object]
) -> int | None:
    """Call ``emit(type, seq, line)`` for every committed event as v4 JSONL, streaming.

    Each event is checked as a restore checks it (the scanner's framing, the header, the
    event's envelope and payload, the lifecycle and surface rules: the checks of
    :func:`dsh_store.restore.examine`, reused) and emitted only once it passed, so the
    first bad event stops the stream with the typed error naming the path, line, byte
    offset and seq; the events before it were emitted, none after it. The rule that ties
    the header's ``isSeeded`` to an inherited ``session/end-seed`` marker can only be
    decided at the end of the log, so it raises after the last event. An older log is
    upgraded event by event. The torn tail is never emitted. Returns the number of
    events, or None for an empty (0-byte) file, which emits nothing.

    :raises CorruptLogError: committed corruption (a bad line, header or event).
    :raises MigrationRefusedError: an older log that cannot be upgraded faithfully.
    :raises NotASessionError: the first line is not a session header.
    :raises UnsupportedVersionError: a newer (or invalid) format version.
    """
    log = os.fspath(path)
    scanner = LogScanner(log)
    try:
        _, version, header, events, locate, rows = open_located(log, None, scanner)
    except NotASessionError:
        if scanner.empty:
            return None
        raise

    def admitted() -> Iterator[Any]:
        for event in events:
            yield event
            # The check asks for the next event only once this one was admitted.
            emit(event.type, event.seq, event.line)

    # An older log's refusal names its source line, as verify and migrate do.
    with source_located(log), corruption_first(rows):
        try:
            checked = check_stream_session(header, admitted())
        except EventValidationError as error:
            raise model_error(error, log, version, locate) from None
    return checked.seq
