"""Hand-built session logs (canonical compact JSON lines) shared by the read-path tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.store.helpers import make_store, open_tool_turn

T0 = 1_760_000_000_000


def line(value: dict[str, Any]) -> bytes:
    """One canonical compact JSON line with its newline."""
    return orjson.dumps(value) + b"\n"


def header(version: int = 4, **extra: Any) -> dict[str, Any]:
    """A valid physical header of ``version`` (V0/V1 and V2+ shapes differ)."""
    value: dict[str, Any] = {"type": "session", "version": version, "id": "sess-1"}
    value["createdAt"] = T0
    value["cwd"] = "/work/project"
    if version >= 2:
        value["isSeeded"] = False
    value["delegationDepth"] = 0
    value.update(extra)
    return value


def event(seq: int, type_: str, data: Any, **extra: Any) -> dict[str, Any]:
    """An event envelope in DSH key order."""
    value: dict[str, Any] = {"type": type_, "seq": seq, "time": T0 + seq, "data": data}
    value.update(extra)
    return value


def _text(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def v4_events() -> list[dict[str, Any]]:
    """Two turns: tool calls, a surface replace with range-encoded sources, an open turn."""
    msg = {"role": "assistant", "content": _text("Looking — naïve café 日本語 🙂"), "id": "m-a1"}
    stream = [{"kind": "text", "index": 0, "text": "Looking"}]
    call = {"id": "call-1", "name": "bash", "arguments": '{"command":"ls"}'}
    result = {"role": "tool", "toolCallId": "call-1", "content": _text("a.txt\nb.txt"), "id": "r1"}
    return [
        event(0, "turn/start", {"turn": 1}),
        event(1, "step/start", {"turn": 1, "step": 1}),
        event(
            2,
            "system/message",
            {"turn": 1, "step": 1, "message": {"role": "system", "content": _text("Be brief.")}},
            surfaceOp="append",
        ),
        event(
            3, "user/message", {"role": "user", "content": _text("list files")}, surfaceOp="append"
        ),
        event(4, "assistant/message", {"message": msg, "stream": stream}, surfaceOp="append"),
        event(5, "tool/call", {"turn": 1, "step": 1, "call": call}),
        event(6, "tool/result", {"message": result}, sourceEventSeqs=[5], surfaceOp="append"),
        event(7, "step/end", {"turn": 1, "step": 1}),
        event(8, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        event(9, "turn/start", {"turn": 2}),
        event(10, "step/start", {"turn": 2, "step": 1}),
        event(
            11,
            "user/message",
            {"role": "user", "content": _text("summary of the above")},
            sourceEventSeqs=[[3, 6]],
            surfaceOp={"op": "replace", "startSeq": 3, "endSeq": 6},
        ),
        event(12, "tool/call", {"turn": 2, "step": 1, "call": {**call, "id": "call-2"}}),
    ]


def v4_log() -> bytes:
    """The bytes of a header plus :func:`v4_events`, one event per line."""
    return line(header()) + b"".join(line(e) for e in v4_events())


def closed_turn(first_seq: int, turn: int) -> list[dict[str, Any]]:
    """A complete small turn starting at ``first_seq``."""
    return [
        event(first_seq, "turn/start", {"turn": turn}),
        event(first_seq + 1, "turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def packed_row(seq0: int, texts: list[str], kind: str = "text-chunks") -> dict[str, Any]:
    """A V0/V1 packed chunk row of ``len(texts)`` members."""
    data: dict[str, Any] = {"turn": 1, "step": 1, "index": 0}
    if kind == "tool-call-chunks":
        data.update({"id": "call-1", "name": "bash", "dt": [1] * (len(texts) - 1), "args": texts})
    else:
        data.update({"dt": [1] * (len(texts) - 1), "texts": texts})
    return {"type": kind, "seq0": seq0, "time0": T0 + seq0, "data": data}


def write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` and return the path."""
    path.write_bytes(data)
    return path


def line_ends(data: bytes) -> list[int]:
    """Byte offsets just past every ``\\n`` in ``data``."""
    ends = []
    start = 0
    while (cut := data.find(b"\n", start)) >= 0:
        ends.append(cut + 1)
        start = cut + 1
    return ends


def store_log(tmp_path: Path) -> Path:
    """A store-written v4 log whose turn is open, with two tool calls, one result logged."""
    store = make_store(tmp_path / "store")
    with store.new("s", cwd="/w") as live:
        open_tool_turn(live, 1, ("c1", "c2"), logged=2)
        path = live.path
    return path


def sparse_tail(path: Path, length: int) -> int:
    """Extend ``path`` by a hole of ``length`` zero bytes; skip where holes cost disk."""
    size = path.stat().st_size
    os.truncate(path, size + length)
    if path.stat().st_blocks * 512 > 1 << 20:
        os.truncate(path, size)
        pytest.skip("this file system stores a hole as real blocks")
    return size
