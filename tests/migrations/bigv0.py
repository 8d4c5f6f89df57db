"""A large, valid format-0 log written lazily (for the memory test and the benchmark)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import orjson

HEADER = {"type": "session", "version": 0, "id": "big", "createdAt": 1, "delegationDepth": 0}


def turn_rows(turn: int, seq: int, chunks: int, packed: bool = False) -> list[dict[str, object]]:
    """One complete turn: user message, request header, a claimed streamed answer (its
    chunks as plain rows, or ``packed`` in rows of 64 as DSH writes them)."""
    rows: list[dict[str, object]] = []

    def add(event_type: str, data: Mapping[str, object], **envelope: object) -> int:
        nonlocal seq
        rows.append({"type": event_type, "seq": seq, "time": 1000 + seq, "data": data, **envelope})
        seq += 1
        return seq - 1

    add("turn/start", {"turn": turn})
    add("step/start", {"turn": turn, "step": 1})
    text = f"question {turn} " * 8
    user = {
        "role": "user",
        "id": f"u{turn}",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    add("user/message", user, surfaceOp="append")
    header = {"config": {"provider": "p", "model": "m"}, "system": "Be terse.", "tools": []}
    add("request/header", {"header": header, "reason": "initial"})
    if packed:
        # DSH's packed rows: one row per batch of up to 64 consecutive text deltas.
        seqs = list(range(seq, seq + chunks))
        for start in range(0, chunks, 64):
            texts = [f"w{k} " for k in range(start, min(start + 64, chunks))]
            data = {"turn": turn, "step": 1, "index": 0, "dt": [1] * (len(texts) - 1)}
            rows.append(
                {
                    "type": "text-chunks",
                    "seq0": seq,
                    "time0": 1000 + seq,
                    "data": {**data, "texts": texts},
                }
            )
            seq += len(texts)
    else:
        seqs = [
            add(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": 1,
                    "chunk": {"type": "text-delta", "index": 0, "text": f"w{k} "},
                },
            )
            for k in range(chunks)
        ]
    answer = "".join(f"w{k} " for k in range(chunks))
    message = {
        "role": "assistant",
        "id": f"a{turn}",
        "content": [{"type": "text", "text": answer}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    add(
        "assistant/message",
        {
            "turn": turn,
            "step": 1,
            "message": message,
            "usage": {"inputTokens": 10, "outputTokens": chunks},
        },
        surfaceOp="append",
        sourceEventSeqs=seqs,
    )
    add("step/end", {"turn": turn, "step": 1})
    add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return rows


def lines(min_bytes: int, chunks: int = 40, packed: bool = False) -> Iterator[bytes]:
    """The header line and then whole turns until at least ``min_bytes`` were produced."""
    total = 0
    line = orjson.dumps(HEADER) + b"\n"
    yield line
    total += len(line)
    seq = 0
    turn = 0
    while total < min_bytes:
        turn += 1
        rows = turn_rows(turn, seq, chunks, packed)
        seq = _next_seq(rows)
        block = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        total += len(block)
        yield block


def _next_seq(rows: list[dict[str, object]]) -> int:
    seq = rows[-1]["seq"]  # every turn ends with an event (turn/end)
    assert isinstance(seq, int)
    return seq + 1


def write(path: Path, min_bytes: int, chunks: int = 40, packed: bool = False) -> Path:
    """Write a valid format-0 log of at least ``min_bytes`` to ``path``."""
    with open(path, "wb") as out:
        for block in lines(min_bytes, chunks, packed):
            out.write(block)
    return path
