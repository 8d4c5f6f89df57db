"""Seeded session scripts for the upstream driver (``driver.mjs``'s ``write`` actions).

A script is a list of actions the driver runs against live upstream sessions. The events
follow the shapes DSH's own harness writes (turns, steps, a request header and context,
streamed chunks ending in block-end/usage/finish, assistant messages citing their chunks,
tool calls and results citing their call), with flushes where DSH's checkpoint policy puts
them and, at random, in the middle of a chunk stream (packing is per batch, so that cuts
packed runs). Everything is a function of the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["CWD", "Script"]

CWD = "/home/dev/project"
PROVIDER = {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
WORDS = ["alpha", "beta", "gamma", "delta", "é", "naïve", "日本", "🙂", "x\ny", 'q"t', "\\b"]


class Script:
    """Builds the actions of one or more sessions; :attr:`actions` is what the driver gets."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.actions: list[dict[str, Any]] = []
        self._ids = 0

    # -- primitives ----------------------------------------------------------------

    def create(self, session: str, cwd: str = CWD) -> None:
        self.actions.append({"do": "create", "id": session, "cwd": cwd})

    def resume(self, session: str) -> None:
        self.actions.append({"do": "resume", "id": session})

    def fork(self, source: str, child: str, boundary: int | dict[str, int] | None = None) -> None:
        """Fork ``source`` through ``boundary``: a seq, ``{"turnEnd": k}`` (its k-th
        ``turn/end``) or None (its last event)."""
        self.actions.append({"do": "fork", "id": source, "child": child, "boundary": boundary})

    def append(self, session: str, kind: str, data: Any, **extra: Any) -> None:
        self.actions.append({"do": "append", "id": session, "type": kind, "data": data, **extra})

    def flush(self, session: str) -> None:
        self.actions.append({"do": "flush", "id": session})
        self.actions.append({"do": "progress"})

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids}"

    def _text(self, words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(words))

    # -- pieces of a turn ------------------------------------------------------------

    def user(self, session: str, text: str | None = None) -> None:
        message = {
            "role": "user",
            "id": self._id("user"),
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": text or self._text(self.rng.randint(1, 6))}],
        }
        self.append(session, "user/message", message, surfaceOp="append")

    def request(self, session: str, system: str) -> None:
        header = {"config": dict(PROVIDER), "system": system, "tools": []}
        self.append(session, "request/header", {"header": header, "reason": "initial"})
        self.append(session, "request/context", dict(PROVIDER))
        self.flush(session)  # DSH checkpoints before the model call

    def _chunk(self, session: str, turn: int, step: int, chunk: dict[str, Any]) -> None:
        self.append(session, "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
        if self.rng.random() < 0.08:
            self.flush(session)

    def stream_block(self, session: str, turn: int, step: int, index: int, kind: str) -> Any:
        """Stream one content block; returns the block, or None if the stream stops early."""
        self._chunk(session, turn, step, {"type": "block-start", "index": index, "blockType": kind})
        pieces = [self._text(self.rng.randint(1, 3)) + " " for _ in range(self.rng.randint(1, 6))]
        if kind == "tool-call":
            call_id, name = self._id("call"), self.rng.choice(["bash", "read_file", "grep"])
            argument = '{"command": "' + self._text(2).replace('"', "").replace("\\", "") + '"}'
            cut = sorted(self.rng.sample(range(1, len(argument)), 2))
            parts = [argument[: cut[0]], argument[cut[0] : cut[1]], argument[cut[1] :]]
            for part in parts:
                delta = {"type": "tool-call-delta", "index": index, "id": call_id, "name": name}
                self._chunk(session, turn, step, {**delta, "argumentsDelta": part})
            block = {"type": "tool-call", "id": call_id, "name": name, "arguments": argument}
        else:
            delta_type = "text-delta" if kind == "text" else "reasoning-delta"
            for piece in pieces:
                self._chunk(
                    session, turn, step, {"type": delta_type, "index": index, "text": piece}
                )
            block = {"type": kind, "text": "".join(pieces)}
        self._chunk(session, turn, step, {"type": "block-end", "index": index, "block": block})
        return block

    def answer(self, session: str, turn: int, step: int, *, tool: bool) -> list[Any]:
        """Stream and record an assistant message; returns its content blocks."""
        blocks: list[Any] = []
        kinds = (["reasoning"] if self.rng.random() < 0.5 else []) + ["text"]
        if tool:
            kinds = [kind for kind in kinds if kind == "reasoning"] + ["tool-call"]
        for index, kind in enumerate(kinds):
            blocks.append(self.stream_block(session, turn, step, index, kind))
        usage = {"inputTokens": self.rng.randint(5, 500), "outputTokens": self.rng.randint(1, 90)}
        self._chunk(session, turn, step, {"type": "usage", "usage": usage})
        finish = {"kind": "tool-calls" if tool else "stop"}
        self._chunk(session, turn, step, {"type": "finish", "reason": finish})
        message = {
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", **PROVIDER},
            "id": self._id("assistant"),
        }
        data = {"turn": turn, "step": step, "message": message, "usage": usage}
        self.append(session, "assistant/message", data, surfaceOp="append", claimChunks=True)
        return blocks

    def tool_call(self, session: str, turn: int, step: int, block: Any) -> None:
        data = {
            "turn": turn,
            "step": step,
            "callId": block["id"],
            "name": block["name"],
            "arguments": block["arguments"],
        }
        self.append(session, "tool/call", data)
        self.flush(session)  # DSH checkpoints before the tool runs

    def tool_result(self, session: str, turn: int, step: int, block: Any) -> None:
        result = {
            "type": "tool-result",
            "toolCallId": block["id"],
            "content": [{"type": "text", "text": self._text(self.rng.randint(1, 8))}],
            "isError": self.rng.random() < 0.2,
        }
        message = {
            "source": {"kind": "tool", "callId": block["id"]},
            "content": [result],
            "role": "user",
            "id": self._id("result"),
        }
        data = {"turn": turn, "step": step, "message": message}
        self.append(session, "tool/result", data, surfaceOp="append", citeCall=block["id"])

    def turn(
        self,
        session: str,
        turn: int,
        *,
        system: str = "You are a careful assistant.",
        user_first: bool = False,
        stop: str | None = None,
    ) -> None:
        """One turn: a tool step then an answer step. ``stop`` ends the script early at
        ``not-started`` (tool requested, no tool/call), ``outcome-unknown`` (tool/call, no
        result), ``mid-stream`` (inside the answer's chunks), ``step-open`` (after the
        answer, before step/end) or ``turn-open`` (after step/end, before turn/end)."""
        self.append(session, "turn/start", {"turn": turn})
        if user_first:
            self.user(session)
        self.append(session, "step/start", {"turn": turn, "step": 1})
        if not user_first:
            self.user(session)
        self.request(session, system)
        blocks = self.answer(session, turn, 1, tool=True)
        call = blocks[-1]
        if stop == "not-started":
            return
        self.tool_call(session, turn, 1, call)
        if stop == "outcome-unknown":
            return
        self.tool_result(session, turn, 1, call)
        self.append(session, "step/end", {"turn": turn, "step": 1})
        self.flush(session)
        self.append(session, "step/start", {"turn": turn, "step": 2})
        self.request(session, system)
        if stop == "mid-stream":
            self.stream_block(session, turn, 2, 0, "text")
            return
        self.answer(session, turn, 2, tool=False)
        if stop == "step-open":
            return
        self.append(session, "step/end", {"turn": turn, "step": 2})
        if stop == "turn-open":
            return
        self.append(session, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        self.flush(session)
