"""Generate the migration fixtures under ``fixtures/`` (or check the committed ones).

    python scripts/make_fixtures.py           # (re)write fixtures/
    python scripts/make_fixtures.py --check   # exit 1 if fixtures/ differs from this script

Layout:

- ``valid/<name>/session.jsonl`` (format 0) or ``session.vN.jsonl`` plus
  ``expected.v4.jsonl``: the golden format-4 log the migration must produce, byte for byte;
- ``refused/<name>/session...jsonl`` plus ``expected.json``: the refusal it must raise
  (``rule``, ``edge``, ``seq``, ``eventType``) and why;
- ``demo/<name>/session...jsonl``: one small older session per format 0-3 for
  ``dsh-store demo``.

Older-format sources are built here from small builders. Format 2 and 3 sources are made
by running a format-0 log through the first edges (so they carry real embedded streams)
and then adding what only that format can hold. Every valid fixture's golden output is
checked against the v4 model before it is written; every refusal is checked to be raised
with the declared rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsh_store.errors import EventValidationError, MigrationRefusedError  # noqa: E402
from dsh_store.migrate import upgrade  # noqa: E402
from dsh_store.migrations import EDGES, MigrationContext  # noqa: E402
from dsh_store.model import Session  # noqa: E402

FIXTURES = ROOT / "fixtures"
SESSION_ID = "fixture-session"
CREATED_AT = 1_780_000_000_000
Row = dict[str, Any]


class Log:
    """A format-0/1 log under construction: dense seqs, deterministic times."""

    def __init__(self, **header: Any) -> None:
        self.header: Row = {
            "type": "session",
            "version": 0,
            "id": SESSION_ID,
            "createdAt": CREATED_AT,
            "cwd": "/work/project",
            **header,
        }
        self.header.setdefault("delegationDepth", 0)
        self.rows: list[Row] = []
        self.seq = 0

    def time(self, seq: int) -> int:
        return CREATED_AT + 10 * (seq + 1)

    def add(self, event_type: str, data: Row, **envelope: Any) -> int:
        seq = self.seq
        self.rows.append(
            {"type": event_type, "seq": seq, "time": self.time(seq), "data": data, **envelope}
        )
        self.seq += 1
        return seq

    def packed(
        self, kind: str, turn: int, step: int, index: int, members: list[str], **more: Any
    ) -> list[int]:
        """A packed assistant-delta row (gaps alternate +3/-1: negative gaps are legal)."""
        gaps = [3 if k % 2 == 0 else -1 for k in range(len(members) - 1)]
        data: Row = {"turn": turn, "step": step, "index": index, **more, "dt": gaps}
        data["args" if kind == "tool-call-chunks" else "texts"] = members
        self.rows.append(
            {"type": kind, "seq0": self.seq, "time0": self.time(self.seq), "data": data}
        )
        seqs = list(range(self.seq, self.seq + len(members)))
        self.seq += len(members)
        return seqs

    def chunk(self, turn: int, step: int, chunk: Row) -> int:
        return self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})

    # -- common shapes ------------------------------------------------------------------

    def user(self, text: str, message_id: str, **source: Any) -> int:
        data = {
            "role": "user",
            "id": message_id,
            "content": [{"type": "text", "text": text}],
            "source": source or {"kind": "user"},
        }
        return self.add("user/message", data, surfaceOp="append")

    def request(self, system: str, **extra: Any) -> int:
        header = {
            "config": {"provider": "provider-1", "model": "model-1"},
            "system": system,
            "tools": [],
            **extra,
        }
        return self.add("request/header", {"header": header, "reason": "initial"})

    def answer(self, turn: int, step: int, text: str, message_id: str, tokens: int = 7) -> int:
        """A streamed text answer: block, packed deltas, block end, usage, finish, message."""
        seqs = [self.chunk(turn, step, {"type": "block-start", "index": 0, "blockType": "text"})]
        pieces = [
            text[: len(text) // 3],
            text[len(text) // 3 : 2 * len(text) // 3],
            text[2 * len(text) // 3 :],
        ]
        seqs += self.packed("text-chunks", turn, step, 0, pieces)
        seqs.append(
            self.chunk(
                turn,
                step,
                {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            )
        )
        seqs.append(
            self.chunk(
                turn, step, {"type": "usage", "usage": {"inputTokens": 20, "outputTokens": tokens}}
            )
        )
        seqs.append(self.chunk(turn, step, {"type": "finish", "reason": {"kind": "stop"}}))
        return self.message(turn, step, [{"type": "text", "text": text}], message_id, seqs, tokens)

    def message(
        self,
        turn: int,
        step: int,
        content: list[Row],
        message_id: str,
        seqs: list[int],
        tokens: int = 7,
    ) -> int:
        data = {
            "turn": turn,
            "step": step,
            "message": {
                "role": "assistant",
                "id": message_id,
                "content": content,
                "source": {"kind": "model", "provider": "provider-1", "model": "model-1"},
            },
            "usage": {"inputTokens": 20, "outputTokens": tokens},
        }
        return self.add("assistant/message", data, surfaceOp="append", sourceEventSeqs=seqs)

    def tool_round(
        self, turn: int, step: int, call_id: str, output: str, reasoning: list[str] | None = None
    ) -> None:
        """An assistant tool call streamed as packed rows, then the call and its result."""
        arguments = '{"path":"README.md"}'
        seqs: list[int] = []
        content: list[Row] = []
        index = 0
        if reasoning:
            seqs.append(
                self.chunk(
                    turn, step, {"type": "block-start", "index": 0, "blockType": "reasoning"}
                )
            )
            seqs += self.packed("reasoning-chunks", turn, step, 0, reasoning)
            thought = {"type": "reasoning", "text": "".join(reasoning)}
            seqs.append(self.chunk(turn, step, {"type": "block-end", "index": 0, "block": thought}))
            content.append(thought)
            index = 1
        seqs.append(
            self.chunk(
                turn, step, {"type": "block-start", "index": index, "blockType": "tool-call"}
            )
        )
        seqs += self.packed(
            "tool-call-chunks",
            turn,
            step,
            index,
            ['{"path":', '"READ', 'ME.md"}'],
            id=call_id,
            name="read_file",
        )
        block = {"type": "tool-call", "id": call_id, "name": "read_file", "arguments": arguments}
        seqs.append(self.chunk(turn, step, {"type": "block-end", "index": index, "block": block}))
        seqs.append(self.chunk(turn, step, {"type": "finish", "reason": {"kind": "tool-calls"}}))
        self.message(turn, step, [*content, block], f"assistant-{call_id}", seqs)
        call = self.add(
            "tool/call",
            {
                "turn": turn,
                "step": step,
                "callId": call_id,
                "name": "read_file",
                "arguments": arguments,
            },
        )
        self.add(
            "tool/result",
            {"turn": turn, "step": step, "message": tool_wrapper(call_id, output)},
            sourceEventSeqs=[call],
            surfaceOp="append",
        )

    def start(self, turn: int) -> None:
        self.add("turn/start", {"turn": turn})

    def step(self, turn: int, step: int) -> None:
        self.add("step/start", {"turn": turn, "step": step})

    def end_step(self, turn: int, step: int) -> None:
        self.add("step/end", {"turn": turn, "step": step})

    def end(self, turn: int, kind: str = "completed") -> None:
        self.add("turn/end", {"turn": turn, "reason": {"kind": kind}})


def tool_wrapper(call_id: str, output: str, **extra: Any) -> Row:
    """The user-role tool-result wrapper of formats 0-3."""
    return {
        "role": "user",
        "id": f"result-{call_id}",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": output}],
                "isError": False,
            }
        ],
        "source": {"kind": "tool", "callId": call_id},
        **extra,
    }


def simple_turn(log: Log, turn: int, question: str, answer: str) -> None:
    log.start(turn)
    log.step(turn, 1)
    log.user(question, f"user-{turn}")
    log.request("You are a terse assistant.")
    log.answer(turn, 1, answer, f"assistant-{turn}")
    log.end_step(turn, 1)
    log.end(turn)


# -- format-0 sources ---------------------------------------------------------------------


def v0_basic() -> Log:
    log = Log()
    simple_turn(log, 1, "Say hello.", "Hello there!")
    simple_turn(log, 2, "And goodbye?", "Goodbye, then.")
    return log


def v0_packed_tool_round() -> Log:
    """Packed reasoning and tool-call rows (negative gaps), a tool call and its result."""
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("What does the README say?", "user-1")
    log.request("You are a terse assistant.")
    log.tool_round(1, 1, "call-1", "# Demo project", reasoning=["I should ", "read ", "the file."])
    log.end_step(1, 1)
    log.step(1, 2)
    log.answer(1, 2, "It is titled Demo project.", "assistant-2")
    log.end_step(1, 2)
    log.end(1)
    return log


def v0_chunk_attempts() -> Log:
    """Unclaimed attempts (a retried one, one cut by step/end) and interleaved events."""
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("Plan the work.", "user-1")
    log.request("You are a planner.")
    # Attempt 1: fails and is retried: nobody claims its chunks.
    log.chunk(1, 1, {"type": "block-start", "index": 0, "blockType": "text"})
    log.packed("text-chunks", 1, 1, 0, ["Par", "tial ", "answ"])
    log.add("llm/retry-started", {"retryId": "retry-1", "turn": 1, "step": 1, "retry": 1})
    # Attempt 2: a todo list is written while the answer streams (interleaved), then claimed.
    seqs = [log.chunk(1, 1, {"type": "block-start", "index": 0, "blockType": "text"})]
    seqs.append(log.chunk(1, 1, {"type": "text-delta", "index": 0, "text": "Step one, "}))
    log.add("todo/write", {"todos": [{"content": "step one", "status": "pending"}]})
    seqs.append(log.chunk(1, 1, {"type": "text-delta", "index": 0, "text": "then two."}))
    seqs.append(
        log.chunk(
            1,
            1,
            {
                "type": "block-end",
                "index": 0,
                "block": {"type": "text", "text": "Step one, then two."},
            },
        )
    )
    seqs.append(log.chunk(1, 1, {"type": "finish", "reason": {"kind": "stop"}}))
    log.message(1, 1, [{"type": "text", "text": "Step one, then two."}], "assistant-1", seqs)
    log.end_step(1, 1)
    # Step 2: the model starts streaming and the step ends before any message (unclaimed).
    log.step(1, 2)
    log.chunk(1, 2, {"type": "block-start", "index": 0, "blockType": "text"})
    log.chunk(1, 2, {"type": "text-delta", "index": 0, "text": "Cut"})
    log.end_step(1, 2)
    log.end(1, "interrupted")
    return log


def v0_legacy_shapes() -> Log:
    """Shapes written by format-0 builds before the format settled."""
    log = Log()
    log.add("turn/start", {"turn": 1, "trigger": {"kind": "user"}})
    log.step(1, 1)
    log.add(
        "user/message",
        {"content": [{"type": "text", "text": "Old style."}], "source": {"kind": "user"}},
        surfaceOp="append",
    )
    log.add(
        "request/header",
        {
            "header": {
                "config": {"provider": "provider-1", "model": "model-1"},
                "system": "Old prompt.",
                "tools": [],
                "messagePrefix": [],
            },
            "reason": "initial",
        },
    )
    seqs = [log.chunk(1, 1, {"type": "text-delta", "index": 0, "text": "Calling."})]
    log.add(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "content": [
                {"type": "text", "text": "Calling."},
                {"type": "tool-call", "id": "call-1", "name": "read_file", "arguments": "{}"},
            ],
            "provenance": {"provider": "provider-1", "model": "model-1"},
            "usage": {"inputTokens": 9, "outputTokens": 2},
        },
        surfaceOp="append",
        sourceEventSeqs=seqs,
    )
    call = log.add(
        "tool/call",
        {"turn": 1, "step": 1, "callId": "call-1", "name": "read_file", "arguments": "{}"},
    )
    log.add(
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "callId": "call-1",
            "content": [{"type": "text", "text": "file body"}],
            "isError": False,
        },
        surfaceOp="append",
        sourceEventSeqs=[call],
    )
    log.end_step(1, 1)
    log.add("turn/end", {"turn": 1, "reason": {"kind": "disposed"}})
    log.start(2)
    log.step(2, 1)
    log.user("Retry please.", "user-2")
    log.add(
        "llm/retry",
        {
            "turn": 2,
            "step": 1,
            "provider": "provider-1",
            "mode": "m",
            "policyKey": "k",
            "retry": 1,
            "delayMs": 5,
            "failure": {},
        },
    )
    log.end_step(2, 1)
    log.add("turn/end", {"turn": 2, "reason": {"kind": "aborted"}})
    log.start(3)
    log.step(3, 1)
    log.user("Fail now.", "user-3")
    log.end_step(3, 1)
    log.add("turn/end", {"turn": 3, "reason": {"kind": "error", "step": 1, "message": "boom"}})
    return log


def v0_seeded_fork() -> Log:
    """A fork child: the parent's first turn is inherited (seedLength), then a live turn."""
    log = Log(parentSession="parent-session")
    simple_turn(log, 1, "Inherited question.", "Inherited answer.")
    log.header["seedLength"] = log.seq
    log.add("session/end-seed", {})
    simple_turn(log, 2, "Live question.", "Live answer.")
    return log


def v0_compaction_replacement() -> Log:
    """A compaction replaces the first exchange on the surface with a summary message."""
    log = Log()
    log.start(1)
    log.step(1, 1)
    first = log.user("Long question.", "user-1")
    log.request("You are a terse assistant.")
    last = log.answer(1, 1, "Long answer.", "assistant-1")
    log.end_step(1, 1)
    log.end(1)
    log.add("compact/start", {"compactionId": "compaction-1", "turn": None})
    log.add(
        "compact/summary",
        {
            "compactionId": "compaction-1",
            "summary": [{"type": "text", "text": "We talked."}],
            "shadowedRange": {"start": first, "end": last},
            "shadowedSeqs": [first, last],
            "shadowedTokenCount": 30,
            "provider": "provider-1",
            "model": "model-1",
        },
    )
    log.start(2)
    log.step(2, 1)
    log.add(
        "user/message",
        {
            "role": "user",
            "id": "summary-1",
            "content": [{"type": "text", "text": "Summary: we talked."}],
            "source": {"kind": "plugin", "plugin": "compact", "compactionId": "compaction-1"},
        },
        surfaceOp={"op": "replace", "start": first, "end": last},
        sourceEventSeqs=[first, last],
    )
    log.add("compact/end", {"compactionId": "compaction-1", "turn": None})
    log.user("Continue.", "user-2")
    log.answer(2, 1, "Continuing.", "assistant-2")
    log.end_step(2, 1)
    log.end(2)
    return log


def v0_plugin_sources() -> Log:
    """Plugin-sourced user messages (mapped to producer kinds by 3->4)."""
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("Hi.", "user-1")
    log.user(
        "Runtime context: workspace-write.",
        "context-1",
        kind="plugin",
        plugin="@deepseek-ai/dsh-system-prompt",
    )
    log.user("Code mode is on.", "ptc-1", kind="plugin", plugin="tools-code-mode")
    log.user("From a third party.", "third-1", kind="plugin", plugin="acme-notes")
    log.request("You are a terse assistant.")
    log.answer(1, 1, "Noted.", "assistant-1")
    log.end_step(1, 1)
    log.end(1)
    return log


# -- later-format sources -----------------------------------------------------------------


def run_edges(log: Log, target: int) -> tuple[Row, list[Row]]:
    """Upgrade ``log`` (format 0) to ``target`` with the real edges, in memory."""
    header, rows = log.header, list(log.rows)
    context = MigrationContext(path=None, session_id=SESSION_ID)
    for source in range(0, target):
        edge = EDGES[source]
        stage = edge.stage(header, context)
        header = edge.header(header, context)
        rows = [out for row in rows for out in stage.feed(row)] + list(stage.finish())
    return header, rows


class Later:
    """A format-1..4 source given directly as header + rows."""

    def __init__(self, header: Row, rows: list[Row]) -> None:
        self.header = header
        self.rows = rows


def v1_from(log: Log) -> Later:
    return Later(*run_edges(log, 1))


def v2_system_prompt_changes() -> Later:
    """The prompt changes between steps: 2->3 emits a head and a replacing system message."""
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("Be brief.", "user-1")
    log.request("Prompt A.")
    log.answer(1, 1, "Brief.", "assistant-1")
    log.end_step(1, 1)
    log.step(1, 2)
    log.request("Prompt B.")
    log.answer(1, 2, "Briefer.", "assistant-2")
    log.end_step(1, 2)
    log.end(1)
    return Later(*run_edges(log, 2))


def v2_ptc_preset() -> Later:
    """A format-2 log whose header names the preset ``ptc``, as format-2 writers did."""
    header, rows = run_edges(v0_basic(), 2)
    header["agentPreset"] = "ptc"
    return Later(header, rows)


def v2_replacement() -> Later:
    return Later(*run_edges(v0_compaction_replacement(), 2))


def v3_wrappers_and_unknown() -> Later:
    """Tool-result wrappers, plugin sources and an unknown ignorable event (3->4 lifts them)."""
    log = v0_packed_tool_round()
    header, rows = run_edges(log, 3)
    rows.append(
        {
            "type": "acme/telemetry",
            "seq": len(rows),
            "time": CREATED_AT + 99_999,
            "data": {"ping": 1},
            "ignorable": True,
        }
    )
    return Later(header, rows)


def v3_plugin_sources() -> Later:
    return Later(*run_edges(v0_plugin_sources(), 3))


def v4_current() -> Later:
    return Later(*run_edges(v0_basic(), 4))


Source = Log | Later

VALID: dict[str, Callable[[], Source]] = {
    "v0-basic": v0_basic,
    "v0-packed-tool-round": v0_packed_tool_round,
    "v0-chunk-attempts": v0_chunk_attempts,
    "v0-legacy-shapes": v0_legacy_shapes,
    "v0-seeded-fork": v0_seeded_fork,
    "v0-compaction-replacement": v0_compaction_replacement,
    "v0-plugin-sources": v0_plugin_sources,
    "v1-basic": lambda: v1_from(v0_basic()),
    "v1-chunk-attempts": lambda: v1_from(v0_chunk_attempts()),
    "v2-system-prompt-changes": v2_system_prompt_changes,
    "v2-replacement": v2_replacement,
    "v2-ptc-preset": v2_ptc_preset,
    "v3-tool-wrapper-unknown-ignorable": v3_wrappers_and_unknown,
    "v3-plugin-sources": v3_plugin_sources,
    "v4-current": v4_current,
}

DEMO: dict[str, Callable[[], Source]] = {
    "format-0": v0_basic,
    "format-1": lambda: v1_from(v0_chunk_attempts()),
    "format-2": v2_system_prompt_changes,
    "format-3": v3_wrappers_and_unknown,
}


# -- refusals -----------------------------------------------------------------------------


def _mutated(make: Callable[[], Log], change: Callable[[Log], None]) -> Callable[[], Source]:
    def build() -> Source:
        log = make()
        change(log)
        return log

    return build


def _later(
    target: int, make: Callable[[], Log], change: Callable[[Row, list[Row]], None]
) -> Callable[[], Source]:
    def build() -> Source:
        header, rows = run_edges(make(), target)
        change(header, rows)
        return Later(header, rows)

    return build


def _append(log: Log, event_type: str, data: Row, **envelope: Any) -> None:
    log.add(event_type, data, **envelope)


def _turn_with(*extra: tuple[str, Row]) -> Callable[[], Log]:
    """A one-turn log with ``extra`` events right after the first user message."""

    def build() -> Log:
        log = Log()
        log.start(1)
        log.step(1, 1)
        log.user("Hi.", "user-1")
        for event_type, data in extra:
            log.add(event_type, data)
        log.request("You are terse.")
        log.answer(1, 1, "Hello.", "assistant-1")
        log.end_step(1, 1)
        log.end(1)
        return log

    return build


def _surface_first() -> Log:
    log = Log()
    log.start(1)
    log.user("Before any step.", "user-1")
    log.step(1, 1)
    log.request("You are terse.")
    log.answer(1, 1, "Hello.", "assistant-1")
    log.end_step(1, 1)
    log.end(1)
    return log


def _prompt_outside_step() -> Log:
    log = v0_basic()
    log.add(
        "request/header",
        {
            "header": {
                "config": {"provider": "provider-1", "model": "model-1"},
                "system": "Changed between turns.",
                "tools": [],
            },
            "reason": "initial",
        },
    )
    return log


def _claim_without_sources() -> Log:
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("Hi.", "user-1")
    log.chunk(1, 1, {"type": "text-delta", "index": 0, "text": "Hel"})
    log.add(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "assistant",
                "id": "a-1",
                "content": [],
                "source": {"kind": "model"},
            },
        },
        surfaceOp="append",
    )
    log.end_step(1, 1)
    log.end(1)
    return log


def _inexact_claim() -> Log:
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("Hi.", "user-1")
    first = log.chunk(1, 1, {"type": "text-delta", "index": 0, "text": "Hel"})
    log.chunk(1, 1, {"type": "text-delta", "index": 0, "text": "lo"})
    log.message(1, 1, [{"type": "text", "text": "Hello"}], "a-1", [first])
    log.end_step(1, 1)
    log.end(1)
    return log


def _second_turn_start() -> Log:
    log = Log()
    log.start(1)
    log.step(1, 1)
    log.user("Hi.", "user-1")
    log.end_step(1, 1)
    log.start(2)
    return log


def _seed_beyond_log() -> Log:
    log = v0_basic()
    log.header["seedLength"] = log.seq + 5
    log.header["parentSession"] = "parent-session"
    return log


def _unknown_required(header: Row, rows: list[Row]) -> None:
    rows.append(
        {"type": "acme/required", "seq": len(rows), "time": CREATED_AT + 99_999, "data": {}}
    )


def _unknown_v2(header: Row, rows: list[Row]) -> None:
    rows.append(
        {
            "type": "acme/extension",
            "seq": len(rows),
            "time": CREATED_AT + 99_999,
            "data": {},
            "ignorable": True,
        }
    )


def _defer_loading(header: Row, rows: list[Row]) -> None:
    for row in rows:
        if row["type"] == "request/header":
            row["data"]["header"]["tools"] = [
                {"name": "read_file", "description": "", "parameters": {}, "deferLoading": True}
            ]
            return


def _wrapper(change: Callable[[Row], None]) -> Callable[[Row, list[Row]], None]:
    def apply(header: Row, rows: list[Row]) -> None:
        for row in rows:
            if row["type"] == "tool/result":
                change(row["data"]["message"])
                return

    return apply


def _nested(message: Row) -> None:
    block = message["content"][0]
    block["content"] = [dict(block)]


def _two_blocks(message: Row) -> None:
    message["content"].append({"type": "text", "text": "extra"})


def _plugin_without_name(header: Row, rows: list[Row]) -> None:
    for row in rows:
        if row["type"] == "user/message":
            row["data"]["source"] = {"kind": "plugin"}
            return


def _leftover_block(header: Row, rows: list[Row]) -> None:
    for row in rows:
        if row["type"] == "user/message":
            row["data"]["content"].append(
                {"type": "tool-result", "toolCallId": "x", "content": [], "isError": False}
            )
            return


def _ptc_in_v2(header: Row, rows: list[Row]) -> None:
    for row in rows:
        if row["type"] == "user/message":
            row["data"]["source"] = {"kind": "plugin", "plugin": "tools-ptc"}
            return


def _seeded_without_marker(header: Row, rows: list[Row]) -> None:
    header["isSeeded"] = True


REFUSED: dict[str, tuple[Callable[[], Source], str, str]] = {
    # name: (source, rule, what the fixture shows)
    "2to3-missing-surfaceop-after-steering": (
        _turn_with(
            (
                "steering/message",
                {
                    "turn": 1,
                    "message": {
                        "role": "user",
                        "id": "steer-1",
                        "content": [{"type": "text", "text": "Faster."}],
                        "source": {"kind": "user"},
                    },
                },
            )
        ),
        "missing surfaceOp",
        "a legacy steering message becomes a user/message without surfaceOp (format 0 could not "
        "give it one), and format 3 requires one",
    ),
    "0to1-removed-event-type": (
        _turn_with(("mode/set", {"mode": "plan"})),
        "removed-event-type",
        "mode/set was removed before format 0 was released; it has no successor",
    ),
    "0to1-fallback-request-reason": (
        _mutated(
            v0_basic,
            lambda log: _append(
                log,
                "request/header",
                {
                    "header": {"config": {"provider": "provider-1", "model": "model-1"}},
                    "reason": "fallback",
                },
            ),
        ),
        "fallback-request-reason",
        "the pre-release request reason 'fallback' has no successor",
    ),
    "0to1-unknown-event-type": (
        _mutated(v0_basic, lambda log: _append(log, "acme/extension", {}, ignorable=True)),
        "unknown-event-type",
        "the format-0 vocabulary is closed: unknown types are refused even when ignorable",
    ),
    "0to1-envelope-member": (
        _mutated(
            v0_basic, lambda log: _append(log, "todo/write", {"todos": []}, surfaceOp="append")
        ),
        "envelope-member",
        "a log-only event may not carry surfaceOp",
    ),
    "0to1-missing-payload-member": (
        _mutated(v0_basic, lambda log: _append(log, "todo/write", {})),
        "missing-payload-member",
        "todo/write without todos",
    ),
    "0to1-unexpected-payload-member": (
        _mutated(v0_basic, lambda log: _append(log, "todo/write", {"todos": [], "color": "red"})),
        "unexpected-payload-member",
        "a payload member format 0 never defined",
    ),
    "0to1-malformed-legacy-shape": (
        _mutated(v0_basic, lambda log: _append(log, "steering/message", {"turn": 1})),
        "malformed-legacy-shape",
        "a steering message that matches none of the known legacy forms",
    ),
    "0to1-subagent-descriptor-version": (
        _mutated(
            v0_basic,
            lambda log: _append(
                log, "subagent/descriptor", {"mode": "one-shot", "version": 9, "provider": "p"}
            ),
        ),
        "subagent-descriptor-version",
        "descriptor versions other than 1-3 were never written",
    ),
    "0to1-seed-beyond-log": (
        _seed_beyond_log,
        "seed-beyond-log",
        "the header's seedLength is larger than the log",
    ),
    "0to1-foreign-delivery-marker": (
        _mutated(
            v0_basic,
            lambda log: _append(
                log,
                "session-log-deepseek/delivery-accepted",
                {"sessionId": "someone-else", "throughSeq": 1},
            ),
        ),
        "foreign-delivery-marker",
        "a delivery marker naming another session in a session that is not a fork",
    ),
    "1to2-claim-without-sources": (
        _claim_without_sources,
        "claim-without-sources",
        "an assistant message without sourceEventSeqs while its attempt's chunks are pending",
    ),
    "1to2-inexact-chunk-claim": (
        _inexact_claim,
        "inexact-chunk-claim",
        "the message cites only part of its attempt",
    ),
    "1to2-turn-already-open": (
        _second_turn_start,
        "turn-already-open",
        "a second turn/start while turn 1 is open, outside the old restart pattern",
    ),
    "2to3-surface-before-first-step": (
        _surface_first,
        "surface before first step",
        "a user message before the first step/start cannot get a system head",
    ),
    "2to3-changed-prompt-outside-step": (
        _prompt_outside_step,
        "changed request prompt outside an open step",
        "the prompt changes between turns, where no system message can be placed",
    ),
    "2to3-unknown-event-type": (
        _later(2, v0_basic, _unknown_v2),
        "unknown event type",
        "the format-2 vocabulary is closed, even for ignorable events",
    ),
    "2to3-v3-ptc-tag-in-v2-source": (
        _later(2, v0_basic, _ptc_in_v2),
        "v3 ptc tag in v2 source",
        "a format-2 message source already naming the format-3 plugin 'tools-ptc'",
    ),
    "2to3-cut-disagrees-with-header": (
        _later(2, v0_basic, _seeded_without_marker),
        "cut disagrees with header",
        "a seeded header without an inherited session/end-seed marker",
    ),
    "3to4-unknown-required-event": (
        _later(3, v0_basic, _unknown_required),
        "unknown required event",
        "an unknown event that is not ignorable cannot be skipped",
    ),
    "3to4-nested-tool-result": (
        _later(3, v0_packed_tool_round, _wrapper(_nested)),
        "nested tool result",
        "a tool-result block inside a tool result",
    ),
    "3to4-malformed-tool-result-wrapper": (
        _later(3, v0_packed_tool_round, _wrapper(_two_blocks)),
        "malformed tool-result wrapper",
        "a tool result wrapper that is not exactly one tool-result block",
    ),
    "3to4-leftover-tool-result-block": (
        _later(3, v0_basic, _leftover_block),
        "leftover tool-result block",
        "a tool-result block in a user message",
    ),
    "3to4-plugin-source-without-name": (
        _later(3, v0_basic, _plugin_without_name),
        "plugin source without name",
        "a plugin message source without its plugin name",
    ),
    "3to4-defer-loading-in-v3-tool": (
        _later(3, v0_basic, _defer_loading),
        "deferLoading in v3 tool",
        "a tool definition with deferLoading, which exists only in format 4",
    ),
}


# -- rendering ----------------------------------------------------------------------------


def _lines(header: Row, rows: Iterable[Row]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in [header, *rows])


def _source_name(version: int) -> str:
    return "session.jsonl" if version == 0 else f"session.v{version}.jsonl"


def _golden(source: Source) -> bytes:
    header, events = upgrade(source.header, source.rows, path=None)
    kept = list(events)
    Session.from_restore(header, kept)  # the golden output must be a valid v4 log
    return header.encode() + b"".join(event.line for event in kept)


def _refusal(name: str, source: Source, rule: str) -> dict[str, Any]:
    try:
        header, events = upgrade(source.header, source.rows, path=None)
        Session.from_restore(header, list(events))
    except MigrationRefusedError as error:
        if error.rule != rule:
            raise SystemExit(
                f"{name}: refused with rule {error.rule!r}, declared {rule!r}: {error}"
            ) from None
        return {
            "rule": error.rule,
            "edge": error.edge,
            "seq": error.seq,
            "eventType": error.event_type,
        }
    except EventValidationError as error:
        raise SystemExit(f"{name}: the model rejected it ({error}), not the chain") from None
    raise SystemExit(f"{name}: expected a refusal with rule {rule!r}, but it migrated")


def render() -> dict[str, bytes]:
    """Every fixture file, keyed by its path relative to ``fixtures/``."""
    files: dict[str, bytes] = {}
    for name, make in VALID.items():
        source = make()
        version = source.header["version"]
        golden = _golden(source)
        # A v4 source is written canonically: migrating it must then be the identity.
        raw = golden if version == 4 else _lines(source.header, source.rows)
        files[f"valid/{name}/{_source_name(version)}"] = raw
        files[f"valid/{name}/expected.v4.jsonl"] = golden
    for name, (make, rule, why) in REFUSED.items():
        source = make()
        version = source.header["version"]
        files[f"refused/{name}/{_source_name(version)}"] = _lines(source.header, source.rows)
        expected = {**_refusal(name, source, rule), "why": why}
        files[f"refused/{name}/expected.json"] = (json.dumps(expected, indent=2) + "\n").encode()
    for name, make in DEMO.items():
        source = make()
        files[f"demo/{name}/{_source_name(source.header['version'])}"] = _lines(
            source.header, source.rows
        )
    files["README.md"] = README.encode()
    return files


README = """# Migration fixtures

Generated by `scripts/make_fixtures.py` (do not edit by hand; `--check` verifies them).

- `valid/<name>/session[.vN].jsonl`: an older (or current) log; `expected.v4.jsonl` is the
  exact format-4 log the migration produces.
- `refused/<name>/session[.vN].jsonl`: a log the chain must refuse; `expected.json` names
  the rule, edge, source seq and event type of the refusal.
- `demo/<name>/`: one small session directory per format 0-3, migrated by `dsh-store demo`.
"""


def _committed() -> dict[str, bytes]:
    if not FIXTURES.is_dir():
        return {}
    return {
        path.relative_to(FIXTURES).as_posix(): path.read_bytes()
        for path in sorted(FIXTURES.rglob("*"))
        if path.is_file()
    }


def main(argv: list[str] | None = None) -> int:
    """Write the fixtures, or with ``--check`` compare them; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    wanted = render()
    if args.check:
        have = _committed()
        stale = sorted(path for path in wanted if have.get(path) != wanted[path])
        extra = sorted(set(have) - set(wanted))
        for path in stale:
            print(f"out of date: fixtures/{path}")
        for path in extra:
            print(f"not generated: fixtures/{path}")
        if stale or extra:
            print("run: python scripts/make_fixtures.py")
            return 1
        print(f"fixtures up to date ({len(wanted)} files)")
        return 0
    for path in sorted(set(_committed()) - set(wanted)):
        (FIXTURES / path).unlink()
    for path, data in wanted.items():
        target = FIXTURES / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
    print(f"wrote {len(wanted)} files under {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
