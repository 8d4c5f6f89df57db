"""The compact embedded assistant stream of format 2 and later.

A stream is a list of records, each one of:

- ``{type:'text-chunks'|'reasoning-chunks', time0, index, dt, texts}``
- ``{type:'tool-call-chunks', time0, index, dt, id, name?, args}``
- ``{type:'chunk', time, chunk}``

Every text, reasoning or tool-call delta starts or extends a run (a run of one is fine).
A delta extends the last record when it is a run of the same kind and content block
(same ``index``; for tool calls the same ``id`` and the same ``name``, present or absent)
and the time gap is a safe integer (it may be negative). Deltas are never concatenated:
each one stays its own member, so :func:`expand_stream` gives back the exact timed chunks.
Anything that is not a well-formed delta (block-start, block-end, usage, finish, a
tool-call delta with an empty ``id`` or ``name``, a delta with extra keys) is kept whole
as a ``chunk`` record, so folding is lossless.
"""

from __future__ import annotations

from typing import Any

from .v0_vocabulary import MAX_SAFE_INTEGER, is_safe_int

__all__ = ["DELTA_TYPES", "StreamBuilder", "expand_stream", "member_chunk"]

_RUN_TYPES = {"text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks"}
DELTA_TYPES = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
"""Run type (of a stream record or a packed row) -> the delta chunk type of its members."""
_TEXT_KEYS = frozenset({"type", "index", "text"})
_TOOL_KEYS = frozenset({"type", "index", "id", "argumentsDelta"})


class StreamBuilder:
    """Accumulates the timed chunks of one model attempt into compact stream records."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._last_time = 0

    def __len__(self) -> int:
        return len(self.records)

    def add(self, time: int, chunk: dict[str, Any]) -> None:
        """Append one chunk observed at ``time`` (epoch milliseconds)."""
        # Plain text and reasoning deltas are nearly every chunk: their run test is inlined
        # (same checks, same order as _run_of and _extends); everything else goes below.
        index = chunk.get("index")
        if type(index) is int and -MAX_SAFE_INTEGER <= index <= MAX_SAFE_INTEGER:
            kind: Any = chunk.get("type")
            run_type = _RUN_TYPES.get(kind)
            if run_type is not None and chunk.keys() == _TEXT_KEYS:
                text = chunk["text"]
                if isinstance(text, str):
                    records = self.records
                    gap = time - self._last_time
                    self._last_time = time
                    if records:
                        tail = records[-1]
                        if (
                            tail["type"] == run_type
                            and tail["index"] == index
                            and type(gap) is int
                            and -MAX_SAFE_INTEGER <= gap <= MAX_SAFE_INTEGER
                        ):
                            tail["dt"].append(gap)
                            tail["texts"].append(text)
                            return
                    records.append(
                        {"type": run_type, "time0": time, "index": index, "dt": [], "texts": [text]}
                    )
                    return
        run = self._run_of(chunk)
        if run is None:
            self.records.append({"type": "chunk", "time": time, "chunk": chunk})
        else:
            run_type, member = run
            last = self.records[-1] if self.records else None
            if last is not None and self._extends(last, run_type, chunk, time):
                last["dt"].append(time - self._last_time)
                last["args" if run_type == "tool-call-chunks" else "texts"].append(member)
            else:
                self.records.append(_new_run(run_type, time, chunk, member))
        self._last_time = time

    def extend_run(self, gaps: list[int], members: list[str], time: int) -> None:
        """Extend the last record, a run, by ``members`` following it at ``gaps``, ending
        at ``time``: what :meth:`add` of each member's delta chunk does when every one of
        them extends that run (the rest of a packed row whose first member made or
        extended it)."""
        tail = self.records[-1]
        tail["dt"].extend(gaps)
        tail["args" if tail["type"] == "tool-call-chunks" else "texts"].extend(members)
        self._last_time = time

    @staticmethod
    def _run_of(chunk: dict[str, Any]) -> tuple[str, str] | None:
        kind = chunk.get("type")
        if not is_safe_int(chunk.get("index")):
            return None
        if kind in _RUN_TYPES:
            if chunk.keys() == _TEXT_KEYS and isinstance(chunk["text"], str):
                return _RUN_TYPES[kind], chunk["text"]
            return None
        if kind == "tool-call-delta":
            keys = chunk.keys() - {"name"}
            name = chunk.get("name")
            if (
                keys == _TOOL_KEYS
                and isinstance(chunk["id"], str)
                and chunk["id"]
                and ("name" not in chunk or (isinstance(name, str) and name))
                and isinstance(chunk["argumentsDelta"], str)
            ):
                return "tool-call-chunks", chunk["argumentsDelta"]
        return None

    def _extends(
        self, last: dict[str, Any], run_type: str, chunk: dict[str, Any], time: int
    ) -> bool:
        if last["type"] != run_type or last["index"] != chunk["index"]:
            return False
        if run_type == "tool-call-chunks" and (
            last["id"] != chunk["id"]
            or ("name" in last) != ("name" in chunk)
            or last.get("name") != chunk.get("name")
        ):
            return False
        return is_safe_int(time - self._last_time)


def _new_run(run_type: str, time: int, chunk: dict[str, Any], member: str) -> dict[str, Any]:
    if run_type == "tool-call-chunks":
        record: dict[str, Any] = {
            "type": run_type,
            "time0": time,
            "index": chunk["index"],
            "dt": [],
            "id": chunk["id"],
        }
        if "name" in chunk:
            record["name"] = chunk["name"]
        record["args"] = [member]
        return record
    return {"type": run_type, "time0": time, "index": chunk["index"], "dt": [], "texts": [member]}


def member_chunk(delta_type: str, run: dict[str, Any], member: str) -> dict[str, Any]:
    """The delta chunk one member of a run stands for.

    ``run`` holds ``index`` (and ``id``, ``name?`` for tool calls): a stream record, or the
    data of a packed row. The chunk is ``{type, index, text}`` for text and reasoning and
    ``{type:'tool-call-delta', index, id, name?, argumentsDelta}`` for tool calls.
    """
    chunk: dict[str, Any] = {"type": delta_type, "index": run["index"]}
    if delta_type == "tool-call-delta":
        chunk["id"] = run["id"]
        if "name" in run:
            chunk["name"] = run["name"]
        chunk["argumentsDelta"] = member
    else:
        chunk["text"] = member
    return chunk


def expand_stream(records: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Return the exact ``(time, chunk)`` list a stream stands for."""
    chunks: list[tuple[int, dict[str, Any]]] = []
    for record in records:
        if record["type"] == "chunk":
            chunks.append((record["time"], record["chunk"]))
            continue
        delta_type = DELTA_TYPES[record["type"]]
        members = record["args" if delta_type == "tool-call-delta" else "texts"]
        time = record["time0"]
        for position, member in enumerate(members):
            if position:
                time += record["dt"][position - 1]
            chunks.append((time, member_chunk(delta_type, record, member)))
    return chunks
