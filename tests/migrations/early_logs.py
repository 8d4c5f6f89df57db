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
        self, kind: str, turn: int, step: int, index: int, members: list[str], gaps: list[int]
    ) -> list[int]:
        data: Row = {"turn": turn, "step": step, "index": index, "dt": gaps}
        if kind == "tool-call-chunks":
            data.update({"id": f"c{self.seq}", "name": "n", "args": members})
        else:
            data["texts"] = members
        self.rows.append(
            {"type": kind, "seq0": self.seq, "time0": 10_000 + 3 * self.seq, "data": data}
        )
        seqs = list(range(self.seq, self.seq + len(members)))
        self.seq += len(members)
        return seqs

    def user(self, text: str, source: Row | None = None) -> int:
        # A copy: a drawn source is one object shared by every example that draws it.
        message = {
            "role": "user",
            "id": f"u{self.seq}",
            "content": [{"type": "text", "text": text}],
            "source": dict(source or {"kind": "user"}),
        }
        return self.add("user/message", message, surfaceOp="append")


_CHUNK_KINDS = st.sampled_from(
    ["text", "reasoning", "tool", "block", "block-end", "usage", "finish", "packed", "note"]
)
_PACKED_KINDS = st.sampled_from(["text-chunks", "reasoning-chunks", "tool-call-chunks"])
_TEXTS = st.sampled_from(["hi", "naïve ☃", "a\nb", ""])
_PROMPTS = st.sampled_from(["", "You are terse.", "Be brief."])
# Message sources: the user's, and producers (3->4 names them by kind: runtime-context for
# the system-prompt plugin's user-role snapshot, the producer itself, plugin:<name>).
_SOURCES = st.sampled_from(
    [
        {"kind": "user"},
        {"kind": "user"},
        {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt", "form": "snapshot"},
        {"kind": "plugin", "plugin": "hooks-codex"},
        {"kind": "plugin", "plugin": "acme-notes", "form": "notice"},
    ]
)
# Turn endings: the reasons DSH writes (legacy ones are normalized by 0->1), and the restart
# pattern (a next-turn splice, then the next turn/start with no turn/end; 1->2 closes the
# turn). The last turn may instead stay open, as a crash leaves it (maybe inside a step).
_ENDINGS = st.sampled_from(["completed", "restart", "aborted", "disposed", "interrupted"])


def _chunk(kind: str, index: int) -> Row:
    chunks: dict[str, Row] = {
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
        "block-end": {"type": "block-end", "index": index, "block": {"type": "text", "text": "t"}},
        "usage": {"type": "usage", "usage": {"inputTokens": 1}},
        "finish": {"type": "finish", "reason": {"kind": "stop"}},
    }
    return chunks[kind]


def _attempt(draw: st.DrawFn, log: _Log, turn: int, step: int) -> list[int]:
    """One model attempt's chunks (and notes between them); the seqs a claim must cite.

    A ``finish`` chunk ends an attempt: a chunk after it starts the next one (the one
    before is then unclaimed), so the claim cites only the chunks since the last finish.
    """
    seqs: list[int] = []
    finished = False
    for kind in draw(st.lists(_CHUNK_KINDS, max_size=6)):
        index = draw(st.integers(0, 1))
        if kind == "note":
            log.add("todo/write", {"todos": []})
            continue
        if finished:
            seqs, finished = [], False
        if kind == "packed":
            size = draw(st.integers(1, 4))
            gaps = draw(st.lists(st.integers(-3, 3), min_size=size - 1, max_size=size - 1))
            seqs += log.packed(draw(_PACKED_KINDS), turn, step, index, ["x"] * size, gaps)
        else:
            seqs.append(
                log.add(
                    "assistant/chunk", {"turn": turn, "step": step, "chunk": _chunk(kind, index)}
                )
            )
            finished = kind == "finish"
    return seqs


def _step(draw: st.DrawFn, log: _Log, turn: int, step: int) -> None:
    """A step's body after its ``step/start``: messages, a request, attempts, a tool round."""
    if step == 1:
        first = log.user(draw(_TEXTS))
        if draw(st.booleans()):
            log.user(draw(_TEXTS), draw(_SOURCES))
        if turn == 1 and draw(st.booleans()):
            title = {"title": "T", "messageSeqs": [first], "source": {"kind": "fallback"}}
            log.add("session/title", title)
    elif draw(st.integers(0, 3)) == 0:
        log.user(draw(_TEXTS), draw(_SOURCES))
    if draw(st.booleans()):
        header = {"config": {"provider": "p", "model": "m"}, "system": draw(_PROMPTS), "tools": []}
        log.add("request/header", {"header": header, "reason": "initial"})
        log.add("request/context", {"provider": "p", "model": "m"})
    for _attempt_number in range(draw(st.integers(0, 3))):
        seqs = _attempt(draw, log, turn, step)
        outcome = draw(st.sampled_from(["claim", "claim", "retry", "failure", "none"]))
        if outcome in ("retry", "failure"):
            retry_id = f"r{log.seq}"
            if outcome == "failure":
                log.add(
                    "llm/retry",
                    {
                        "retryId": retry_id,
                        "turn": turn,
                        "step": step,
                        "provider": "p",
                        "mode": "normal",
                        "policyKey": "k",
                        "retry": 1,
                        "delayMs": 1,
                        "failure": {"message": "empty", "code": "EMPTY_RESPONSE"},
                    },
                )
            log.add(
                "llm/retry-started", {"retryId": retry_id, "turn": turn, "step": step, "retry": 1}
            )
            continue
        if outcome == "none":
            break
        call_id = f"call-{log.seq}" if draw(st.booleans()) else None
        content: list[Row] = [{"type": "text", "text": "done"}] if draw(st.booleans()) else []
        if call_id is not None:
            content.append({"type": "tool-call", "id": call_id, "name": "ls", "arguments": "{}"})
        claim: Row = {
            "turn": turn,
            "step": step,
            "message": {
                "role": "assistant",
                "id": f"a{log.seq}",
                "content": content,
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        }
        if draw(st.booleans()):
            claim["usage"] = {"inputTokens": draw(st.integers(0, 9)), "outputTokens": 1}
        if draw(st.integers(0, 4)) == 0:
            claim["interrupted"] = True
        log.add("assistant/message", claim, surfaceOp="append", sourceEventSeqs=seqs)
        if call_id is not None:
            call = log.add(
                "tool/call",
                {"turn": turn, "step": step, "callId": call_id, "name": "ls", "arguments": "{}"},
            )
            if draw(st.booleans()):
                log.add("todo/write", {"todos": []})
            failed = draw(st.integers(0, 3)) == 0
            result = {
                "role": "user",
                "id": f"r{log.seq}",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "content": [{"type": "text", "text": draw(_TEXTS)}],
                        "isError": failed,
                    }
                ],
                "source": {"kind": "tool", "callId": call_id},
            }
            outcome_data: Row = {"turn": turn, "step": step, "message": result}
            if failed:
                outcome_data["error"] = {"name": "AbortError", "code": "ABORTED"}
            log.add("tool/result", outcome_data, surfaceOp="append", sourceEventSeqs=[call])
        if draw(st.booleans()):
            break


@st.composite
def v0_logs(draw: st.DrawFn, max_turns: int = 3) -> list[Row]:
    """Valid format-0 event rows, as DSH writes them, which the whole chain accepts.

    Each turn's first step opens with its user message(s) (a title may cite the first);
    steps hold an optional request (header with a system prompt, context), model attempts
    (chunks, packed rows of all three kinds with gaps, notes, ``finish`` splitting
    attempts) that a message claims (with a tool round) or that end unclaimed at a
    retry or at the step's end. Turns end with a (legacy or current) reason, by the
    restart pattern, or the last one stays open as a crash leaves it.
    """
    log = _Log()
    turns = draw(st.integers(1, max_turns))
    for turn in range(1, turns + 1):
        log.add("turn/start", {"turn": turn})
        ending = "open" if turn == turns and draw(st.integers(0, 4)) == 0 else draw(_ENDINGS)
        steps = draw(st.integers(0, 3))
        for step in range(1, steps + 1):
            log.add("step/start", {"turn": turn, "step": step})
            _step(draw, log, turn, step)
            if ending == "open" and step == steps and draw(st.booleans()):
                return log.rows  # the crash came inside the step
            log.add("step/end", {"turn": turn, "step": step})
        if ending == "open":
            return log.rows
        if ending == "restart" and turn < turns:
            inserted = {
                "role": "user",
                "id": f"i{log.seq}",
                "content": [],
                "source": {"kind": "user"},
            }
            log.add(
                "agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [inserted]}
            )
        else:
            kind = "completed" if ending == "restart" else ending
            log.add("turn/end", {"turn": turn, "reason": {"kind": kind}})
    return log.rows


# Damage to a valid log that the chain refuses at the damaged row: name -> (edge, rule).
EARLY_DAMAGE = {
    "unknown-type": ("0->1", "unknown-event-type"),
    "packed-gaps": ("0->1", "malformed-packed-row"),
    "turn-reopened": ("1->2", "turn-already-open"),
    "inexact-claim": ("1->2", "inexact-chunk-claim"),
    "user-before-step": ("2->3", "surface before first step"),
    "defer-loading": ("3->4", "deferLoading in v3 tool"),
}


def damage_v0_log(rows: list[Row], damage: str, pick: int) -> str:
    """Apply ``damage`` in place (seqs stay dense); the damage applied, which is
    ``unknown-type`` when the log has nothing ``damage`` could change."""
    plain = [index for index, row in enumerate(rows) if "seq" in row]
    if damage == "packed-gaps":
        packed = [row for row in rows if "seq0" in row]
        if packed:
            packed[pick % len(packed)]["data"]["dt"].append(0)
            return damage
    elif damage == "turn-reopened":
        steps = [row for row in rows if row["type"] == "step/start"]
        if steps:
            row = steps[pick % len(steps)]
            row["type"], row["data"] = "turn/start", {"turn": row["data"]["turn"] + 1}
            return damage
    elif damage == "inexact-claim":
        claims = [row for row in rows if row["type"] == "assistant/message"]
        # Not a claim of one chunk: citing [] is valid (a known empty stream).
        claims = [row for row in claims if len(row["sourceEventSeqs"]) > 1]
        if claims:
            del claims[pick % len(claims)]["sourceEventSeqs"][0]
            return damage
    elif damage == "defer-loading":
        requests = [row for row in rows if row["type"] == "request/header"]
        if requests:
            tool = {"name": "read", "description": "", "parameters": {}, "deferLoading": True}
            requests[pick % len(requests)]["data"]["header"]["tools"] = [tool]
            return damage
    elif damage == "user-before-step":
        # The first step/start and the user message after it trade places and seqs:
        # DSH's own fixture order, which the 2->3 edge refuses (no system head yet).
        for index, row in enumerate(rows[:-1]):
            if row["type"] == "step/start":
                user_row = rows[index + 1]
                for key in ("seq", "time"):
                    row[key], user_row[key] = user_row[key], row[key]
                rows[index], rows[index + 1] = user_row, row
                return damage
    rows[plain[pick % len(plain)]]["type"] = "web/search"
    return "unknown-type"


@st.composite
def refused_v0_logs(draw: st.DrawFn) -> tuple[list[Row], str, str]:
    """A :func:`v0_logs` log with one damage the chain refuses: ``(rows, edge, rule)``."""
    rows = draw(v0_logs())
    damage = damage_v0_log(rows, draw(st.sampled_from(sorted(EARLY_DAMAGE))), draw(st.integers(0)))
    edge, rule = EARLY_DAMAGE[damage]
    return rows, edge, rule


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
