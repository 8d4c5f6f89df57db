"""Expansion of packed assistant-delta rows (formats 0 and 1).

A packed row stores a run of N consecutive ``assistant/chunk`` deltas of one kind and one
content block as ``{type, seq0, time0, data}`` where ``type`` is ``text-chunks``,
``reasoning-chunks`` or ``tool-call-chunks`` and ``data`` holds the shared ``turn``,
``step``, ``index`` (and ``id``/``name`` for tool calls), the N-1 time gaps ``dt`` (which
may be negative) and the N member texts (``texts``) or argument fragments (``args``).
Member k is the logical event ``seq0 + k`` at ``time0 + dt[0] + ... + dt[k-1]``.

Refusal rule: ``malformed-packed-row`` (the row does not have exactly this shape).
"""

from __future__ import annotations

from itertools import accumulate, repeat
from typing import Any

from dsh_store.errors import MigrationRefusedError

from . import Row
from .streams import DELTA_TYPES, member_chunk
from .v0_vocabulary import MAX_SAFE_INTEGER, PACKED_ROW_TYPES, is_safe_int

__all__ = ["check_packed_row", "checked_run", "expand_packed_row", "is_packed_row"]

_ENVELOPE_KEYS = frozenset({"type", "seq0", "time0", "data"})
_TEXT_DATA_KEYS = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_DATA_KEYS = frozenset({"turn", "step", "index", "id", "dt", "args"})
_INT_TYPE = frozenset({int})


def is_packed_row(row: Row) -> bool:
    """True when ``row`` is tagged as a packed assistant-delta row."""
    return row.get("type") in PACKED_ROW_TYPES


def _refuse(row: Row, detail: str, path: str | None, edge: str) -> MigrationRefusedError:
    seq0 = row.get("seq0")
    return MigrationRefusedError(
        f"packed {row.get('type')} row is malformed: {detail}",
        rule="malformed-packed-row",
        path=path,
        seq=seq0 if is_safe_int(seq0) else None,
        event_type=str(row.get("type")),
        edge=edge,
    )


def _check(row: Row, path: str | None, edge: str) -> tuple[dict[str, Any], list[Any]]:
    if set(row) != _ENVELOPE_KEYS:
        raise _refuse(
            row, f"envelope keys are {sorted(row)}, expected {sorted(_ENVELOPE_KEYS)}", path, edge
        )
    data = row["data"]
    if not isinstance(data, dict):
        raise _refuse(row, "data is not an object", path, edge)
    is_tool = row["type"] == "tool-call-chunks"
    expected = _TOOL_DATA_KEYS if is_tool else _TEXT_DATA_KEYS
    allowed = expected | {"name"} if is_tool else expected
    if not expected <= data.keys() <= allowed:
        raise _refuse(row, f"data keys are {sorted(data)}, expected {sorted(expected)}", path, edge)
    for name in ("seq0", "time0"):
        if not is_safe_int(row[name]) or row[name] < 0:
            raise _refuse(row, f"{name} is not a non-negative safe integer", path, edge)
    for name in ("turn", "step", "index"):
        if not is_safe_int(data[name]) or data[name] < 0:
            raise _refuse(row, f"data.{name} is not a non-negative safe integer", path, edge)
    if is_tool and not isinstance(data["id"], str):
        raise _refuse(row, "data.id is not a string", path, edge)
    if is_tool and "name" in data and not isinstance(data["name"], str):
        raise _refuse(row, "data.name is not a string", path, edge)
    members = data["args" if is_tool else "texts"]
    if not isinstance(members, list) or not members:
        raise _refuse(row, "the member list is not a non-empty array", path, edge)
    if not all(map(isinstance, members, repeat(str))):
        raise _refuse(row, "a member is not a string", path, edge)
    gaps = data["dt"]
    if not isinstance(gaps, list) or len(gaps) != len(members) - 1:
        raise _refuse(row, f"dt must hold {len(members) - 1} gap(s)", path, edge)
    # Every gap is_safe_int, tested per list: exact int type, then the bounds.
    if gaps and (
        not set(map(type, gaps)) <= _INT_TYPE
        or min(gaps) < -MAX_SAFE_INTEGER
        or max(gaps) > MAX_SAFE_INTEGER
    ):
        raise _refuse(row, "a dt gap is not a safe integer", path, edge)
    return data, members


def check_packed_row(row: Row, *, path: str | None = None, edge: str = "0->1") -> int:
    """Check a packed row's exact shape and return how many logical events it holds."""
    return len(_check(row, path, edge)[1])


def checked_run(
    row: Row, *, path: str | None = None, edge: str = "1->2", shape_checked: bool = False
) -> tuple[dict[str, Any], list[Any], list[int]]:
    """Check a packed row as :func:`expand_packed_row` does (same refusals, same order)
    and return its data, its members and the time of each member, without making events.

    ``shape_checked``: the row already passed :func:`check_packed_row` (the 0->1 edge
    checks the same shape), so only the member times are checked here.
    """
    if shape_checked:
        data = row["data"]
        members = data["args" if row["type"] == "tool-call-chunks" else "texts"]
    else:
        data, members = _check(row, path, edge)
    times = list(accumulate(data["dt"], initial=row["time0"]))
    if times and (min(times) < 0 or max(times) > MAX_SAFE_INTEGER):
        for position, time in enumerate(times):
            if not is_safe_int(time) or time < 0:
                raise _refuse(row, f"member {position} has an unsafe time", path, edge)
    return data, members, times


def expand_packed_row(row: Row, *, path: str | None = None, edge: str = "1->2") -> list[Row]:
    """Return the logical ``assistant/chunk`` events of a packed row, in order.

    Each event is ``{type:'assistant/chunk', seq, time, data:{turn, step, chunk}}``; the
    chunk is ``{type, index, text}`` for text and reasoning rows and
    ``{type:'tool-call-delta', index, id, name?, argumentsDelta}`` for tool-call rows.
    The whole row is checked first; a malformed row yields nothing and is refused.
    """
    data, members = _check(row, path, edge)
    delta_type = DELTA_TYPES[row["type"]]
    time = row["time0"]
    seq = row["seq0"]
    events: list[Row] = []
    for position, member in enumerate(members):
        if position:
            time += data["dt"][position - 1]
            if not is_safe_int(time) or time < 0:
                raise _refuse(row, f"member {position} has an unsafe time", path, edge)
        chunk = member_chunk(delta_type, data, member)
        events.append(
            {
                "type": "assistant/chunk",
                "seq": seq + position,
                "time": time,
                "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
            }
        )
    return events
