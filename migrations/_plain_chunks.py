"""Recognizing the ordinary ``assistant/chunk`` row of formats 0 and 1 in one test.

Streamed chunks are most rows of an early log. An ordinary one is exactly
``{type: "assistant/chunk", seq, time, data: {turn, step, chunk}}`` with safe-integer
``seq``, ``time``, ``turn`` and ``step`` and a chunk object with a string ``type``. Such a
row passes every admission rule of the 0->1 and 1->2 edges (envelope, vocabulary, payload
keys, chunk shape), so those edges take it on a short path; a row that is anything else
takes their full path, which names the rule it breaks.
"""

from __future__ import annotations

from typing import Any

from . import Row
from .v0_vocabulary import MAX_SAFE_INTEGER

__all__ = ["FUSED_TYPES", "PLAIN_ROW_KEYS", "RENUMBERED_TYPES", "PlainChunk", "plain_chunk"]

PLAIN_ROW_KEYS = frozenset({"type", "seq", "time", "data"})
"""The envelope keys of an ordinary event row (no ``ignorable``, no surface keys)."""

_CHUNK_DATA_KEYS = frozenset({"turn", "step", "chunk"})

RENUMBERED_TYPES = frozenset(
    {"turn/start", "step/start", "step/end", "request/context", "tool/call"}
)
"""Event types whose plain row (``{type, seq, time, data}``, exact payload keys) every edge
from format 0 to format 4 passes on with its payload untouched: no legacy shape to
normalize (a ``turn/start`` with ``trigger`` has other keys), no message, no reference,
no rename. Along the way such a row only gets new seqs, and each edge only notes the turn
or step it opens or closes; the fused path of :mod:`._pipeline` takes it so, one edge
method each, when the edges' state allows (see their ``take_plain``)."""

FUSED_TYPES = RENUMBERED_TYPES | {"request/header"}
"""The renumbered types and ``request/header``, whose plain row the fused path also takes:
0->1 and 1->2 pass it on as it is (no ``messagePrefix``, reason not ``fallback``), 2->3
rewrites its payload in place (the system prompt, an empty ``tools`` and
``adapterDefaults`` leave it) when its prompt is the current one, and 3->4 passes it on
(no ``deferLoading`` tool)."""

PlainChunk = tuple[int, int, int, int, dict[str, Any]]
"""``(seq, time, turn, step, chunk)`` of an ordinary chunk row."""


def plain_chunk(event: Row, expected_seq: int) -> PlainChunk | None:
    """The fields of ``event`` when it is an ordinary chunk row at ``expected_seq``, else None.

    ``expected_seq`` is the running event count, so it is never negative.
    """
    if event.get("type") != "assistant/chunk" or event.keys() != PLAIN_ROW_KEYS:
        return None
    seq, time, data = event["seq"], event["time"], event["data"]
    if not (
        type(seq) is int
        and seq == expected_seq
        and seq <= MAX_SAFE_INTEGER
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and type(data) is dict
        and data.keys() == _CHUNK_DATA_KEYS
    ):
        return None
    turn, step, chunk = data["turn"], data["step"], data["chunk"]
    if (
        type(turn) is int
        and -MAX_SAFE_INTEGER <= turn <= MAX_SAFE_INTEGER
        and type(step) is int
        and -MAX_SAFE_INTEGER <= step <= MAX_SAFE_INTEGER
        and type(chunk) is dict
        and type(chunk.get("type")) is str
    ):
        return seq, time, turn, step, chunk
    return None
