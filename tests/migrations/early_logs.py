"""Small builders and a Hypothesis log generator for the 0->1 and 1->2 edge tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrations import MigrationContext, v0_to_v1, v1_to_v2

Row = dict[str, Any]
T = TypeVar("T")
SESSION_ID = "s-1"
PATH = "/logs/session.jsonl"
CONTEXT = MigrationContext(path=PATH, session_id=SESSION_ID)


def header(version: int = 0, **extra: Any) -> Row:
    return {
        "type": "session",
        "version": version,
        "id": SESSION_ID,
        "createdAt": 5,
        **extra,
        "delegationDepth": 0,
    }


def ev(event_type: str, seq: int, data: Row, time: int | None = None, **envelope: Any) -> Row:
    return {
        "type": event_type,
        "seq": seq,
        "time": 1000 + seq if time is None else time,
        "data": data,
        **envelope,
    }


def user(seq: int, text: str = "hi", **envelope: Any) -> Row:
    data = {
        "role": "user",
        "id": f"u{seq}",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return ev("user/message", seq, data, surfaceOp="append", **envelope)


def chunk(seq: int, inner: Row, turn: int = 1, step: int = 1, time: int | None = None) -> Row:
    return ev("assistant/chunk", seq, {"turn": turn, "step": step, "chunk": inner}, time)


def text(index: int, value: str) -> Row:
    return {"type": "text-delta", "index": index, "text": value}


def assistant(seq: int, sources: list[Any] | None, turn: int = 1, step: int = 1) -> Row:
    data = {
        "turn": turn,
        "step": step,
        "message": {
            "role": "assistant",
            "id": f"a{seq}",
            "content": [],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    }
    envelope: Row = {"surfaceOp": "append"}
    if sources is not None:
        envelope["sourceEventSeqs"] = sources
    return ev("assistant/message", seq, data, **envelope)


def run(edge: Any, events: Iterable[Row], head: Row) -> list[Row]:
    stage = edge.stage(head, CONTEXT)
    out = [row for event in events for row in stage.feed(event)]
    return out + list(stage.finish())


def run01(events: Iterable[Row], head: Row | None = None) -> list[Row]:
    return run(v0_to_v1.EDGE, events, head or header(0))


def run12(events: Iterable[Row], head: Row | None = None) -> list[Row]:
    return run(v1_to_v2.EDGE, events, head or header(1))


def refused(
    call: Any, *, rule: str, seq: int | None, event_type: str | None, detail: str, edge: str
) -> MigrationRefusedError:
    """Run ``call`` and check every fact of the refusal it must raise."""
    with pytest.raises(MigrationRefusedError) as caught:
        call()
    error = caught.value
    assert error.rule == rule
    assert error.seq == seq
    assert error.event_type == event_type
    assert error.edge == edge
    assert error.path == PATH
    assert detail in error.detail
    assert f"[rule: {rule}]" in str(error)
    return error


def refuse_run(
    runner: Callable[[Iterable[Row], Row | None], list[Row]],
    edge: str,
    rows: list[Row],
    *,
    rule: str,
    seq: int | None,
    event_type: str | None,
    detail: str,
    head: Row | None = None,
) -> None:
    """``runner(rows, head)`` must raise the refusal described (bind the first two)."""
    refused(
        lambda: runner(rows, head),
        rule=rule,
        seq=seq,
        event_type=event_type,
        detail=detail,
        edge=edge,
    )


# -- a generator of valid format-0 logs --------------------------------------------


class _Log:
    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.seq = 0

    def add(self, event_type: str, data: Row, **envelope: Any) -> int:
        seq = self.seq
        self.rows.append(
            {"type": event_type, "seq": seq, "time": 10_000 + 3 * seq, "data": data, **envelope}
        )
        self.seq += 1
        return seq

    def packed(
        self, turn: int, step: int, index: int, texts: list[str], gaps: list[int]
    ) -> list[int]:
        self.rows.append(
            {
                "type": "text-chunks",
                "seq0": self.seq,
                "time0": 10_000 + 3 * self.seq,
                "data": {"turn": turn, "step": step, "index": index, "dt": gaps, "texts": texts},
            }
        )
        seqs = list(range(self.seq, self.seq + len(texts)))
        self.seq += len(texts)
        return seqs


_CHUNK_KINDS = st.sampled_from(["text", "reasoning", "tool", "block", "usage", "packed", "note"])


@st.composite
def v0_logs(draw: st.DrawFn, max_turns: int = 3) -> list[Row]:
    """Valid format-0 event rows: turns, steps, attempts (claimed or not), packed rows."""
    log = _Log()
    for turn in range(1, draw(st.integers(1, max_turns)) + 1):
        log.add("turn/start", {"turn": turn})
        for step in range(1, draw(st.integers(0, 2)) + 1):
            log.add("step/start", {"turn": turn, "step": step})
            if step == 1:
                log.add(
                    "user/message",
                    {"role": "user", "id": f"u{turn}", "content": [], "source": {"kind": "user"}},
                    surfaceOp="append",
                )
            for _attempt in range(draw(st.integers(0, 2))):
                seqs: list[int] = []
                for kind in draw(st.lists(_CHUNK_KINDS, max_size=6)):
                    index = draw(st.integers(0, 1))
                    if kind == "note":
                        log.add("todo/write", {"todos": []})
                    elif kind == "packed":
                        size = draw(st.integers(1, 4))
                        gaps = draw(
                            st.lists(st.integers(-3, 3), min_size=size - 1, max_size=size - 1)
                        )
                        seqs += log.packed(turn, step, index, ["x"] * size, gaps)
                    else:
                        choices: dict[str, Row] = {
                            "text": {"type": "text-delta", "index": index, "text": "t"},
                            "reasoning": {"type": "reasoning-delta", "index": index, "text": "r"},
                            "tool": {
                                "type": "tool-call-delta",
                                "index": index,
                                "id": "c",
                                "name": "n",
                                "argumentsDelta": "{",
                            },
                            "block": {"type": "block-start", "index": index, "blockType": "text"},
                            "usage": {"type": "usage", "usage": {"inputTokens": 1}},
                        }
                        inner = choices[kind]
                        seqs.append(
                            log.add("assistant/chunk", {"turn": turn, "step": step, "chunk": inner})
                        )
                outcome = draw(st.sampled_from(["claim", "retry", "none"]))
                if outcome == "claim":
                    log.add(
                        "assistant/message",
                        {
                            "turn": turn,
                            "step": step,
                            "message": {
                                "role": "assistant",
                                "id": f"a{log.seq}",
                                "content": [],
                                "source": {"kind": "model", "provider": "p", "model": "m"},
                            },
                        },
                        surfaceOp="append",
                        sourceEventSeqs=seqs,
                    )
                elif outcome == "retry":
                    log.add(
                        "llm/retry-started",
                        {"retryId": "r", "turn": turn, "step": step, "retry": 1},
                    )
                if outcome != "claim" or draw(st.booleans()):
                    break
            log.add("step/end", {"turn": turn, "step": step})
        log.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return log.rows


def sample(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """``count`` values of ``strategy``, the same ones on every run (derandomized, no database)."""
    drawn: list[T] = []

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        drawn.append(value)

    collect()
    return drawn


def long_log(turns: int, chunks_per_attempt: int) -> Iterator[Row]:
    """A long format-1 log, generated lazily: each turn has one claimed attempt."""
    seq = 0
    for turn in range(1, turns + 1):
        rows: list[Row] = [ev("turn/start", seq, {"turn": turn})]
        rows.append(ev("step/start", seq + 1, {"turn": turn, "step": 1}))
        first = seq + 2
        rows += [chunk(first + k, text(0, "x"), turn=turn) for k in range(chunks_per_attempt)]
        last = first + chunks_per_attempt
        message = assistant(last, list(range(first, last)), turn=turn)
        rows += [
            message,
            ev("step/end", last + 1, {"turn": turn, "step": 1}),
            ev("turn/end", last + 2, {"turn": turn, "reason": {"kind": "completed"}}),
        ]
        seq = last + 3
        yield from rows
