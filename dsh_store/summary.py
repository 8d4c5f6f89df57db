"""Read-only summaries behind ``dsh-store inspect``, ``list`` and ``cat``.

Plain dicts with camelCase keys, so that the CLI's ``--json`` output is exactly what these
functions return (documented in docs/cli.md and docs/schemas/).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import DshStoreError
from .jsonl.scan import LogScanner
from .restore import examine, finding_json, read_log

__all__ = ["iter_v4_lines", "list_store", "summarize"]


def summarize(
    path: str | os.PathLike[str], *, events: bool = False, messages: bool = False
) -> dict[str, Any]:
    """Header, version, classification, counts by type (events and bytes), open turn.

    A log that cannot be restored still gets its classification and findings.
    """
    log = Path(path)
    report = examine(log)
    summary: dict[str, Any] = {
        "path": str(log),
        "classification": report.classification,
        "version": report.version,
        "findings": [finding_json(finding) for finding in report.findings],
    }
    try:
        inspection = read_log(log)
    except DshStoreError:
        return summary
    summary["header"] = inspection.header.to_json()
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
        events=len(inspection.events),
        turns=turns,
        steps=steps,
        openTurn=open_turn,
        closers=[event.type for event in inspection.closers],
        tornBytes=None if inspection.torn is None else inspection.torn.length,
        byType=dict(sorted(by_type.items(), key=lambda item: -item[1]["bytes"])),
    )
    if events:
        summary["eventList"] = [
            {"seq": event.seq, "type": event.type, "bytes": len(event.line)}
            for event in inspection.events
        ]
    if messages:
        from .model import Session

        session = Session.from_restore(inspection.header, inspection.balanced)
        summary["messages"] = [_message_json(message) for message in session.derive_messages()]
    return summary


def _message_json(message: Any) -> dict[str, Any]:
    value = message if isinstance(message, dict) else getattr(message, "to_json", lambda: {})()
    role = value.get("role", "?")
    texts: list[str] = []
    content = value.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "tool-call":
                    texts.append(f"<tool call {part.get('toolName') or part.get('name')}>")
    text = " ".join(texts).replace("\n", " ")
    return {"role": role, "text": text[:200] + ("…" if len(text) > 200 else "")}


def list_store(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One row per session: id, cwd, created, version, events, status — headers only.

    ``events`` counts complete lines after the header (a byte count, no parsing);
    ``status`` is ``current`` / ``needs-migration`` plus ``torn-tail`` when the file does
    not end with a newline. ``dsh-store verify`` gives the full verdict.
    """
    from .store import JsonlStore, _newest_generation

    store = JsonlStore(root)
    rows: list[dict[str, Any]] = []
    for directory in store._session_dirs():
        log = _newest_generation(directory)
        if log is None:
            continue
        try:
            info = LogScanner(log).read_header()
        except (DshStoreError, OSError):
            continue
        if info is None:
            continue
        lines, clean_end = _count_lines(log)
        status = "current" if info.version == 4 else "needs-migration"
        if not clean_end:
            status = "torn-tail"
        rows.append(
            {
                "id": info.value.get("id"),
                "cwd": info.value.get("cwd"),
                "created": info.value.get("createdAt"),
                "version": info.version,
                "events": max(0, lines - 1),
                "status": status,
                "path": str(log),
            }
        )
    rows.sort(key=lambda row: str(row["id"]))
    return rows


def _count_lines(log: Path) -> tuple[int, bool]:
    count = 0
    last = b"\n"
    with open(log, "rb") as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count, last == b"\n"


def iter_v4_lines(path: str | os.PathLike[str]) -> Iterator[tuple[str, int, bytes]]:
    """``(type, seq, line)`` of every committed event as v4 JSONL, streaming.

    A v4 log streams its own lines; an older log is upgraded event by event. The torn
    tail is never included; committed corruption raises.
    """
    scanner = LogScanner(path)
    info = scanner.read_header()
    if info is None:
        return
    if info.version == 4:
        for row in scanner.rows():
            yield row.value["type"], row.first_seq, row.raw + b"\n"
        return
    from .migrate import upgrade

    _, events = upgrade(info.value, (row.value for row in scanner.rows()), path=str(path))
    for event in events:
        yield event.type, event.seq, event.line
