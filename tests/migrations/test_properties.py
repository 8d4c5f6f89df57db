"""Properties of the whole chain on generated format-0 logs (Hypothesis, kept small).

The generator of the early-edge tests (``early_logs.v0_logs``) varies the chunk streams
(packed rows, claimed and unclaimed attempts, retries) with empty messages; here a second
generator draws complete conversations whose derived messages can be checked: user text,
streamed answers with usage, tool rounds and retried (unclaimed) attempts.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store.migrate import upgrade
from dsh_store.model import Session

from .early_logs import v0_logs

Row = dict[str, Any]
HEADER: Row = {"type": "session", "version": 0, "id": "prop", "createdAt": 7, "delegationDepth": 0}
TEXT = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=12)


def _migrated(rows: list[Row]) -> tuple[bytes, Session]:
    header, events = upgrade(HEADER, [dict(row) for row in rows], path="generated")
    kept = list(events)
    session = Session.from_restore(header, kept)
    return header.encode() + b"".join(event.line for event in kept), session


class _Conversation:
    """A format-0 conversation and the messages it must migrate to."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.expected: list[tuple[str, list[str], Any]] = []

    def add(self, event_type: str, data: Row, **envelope: Any) -> int:
        seq = len(self.rows)
        self.rows.append(
            {"type": event_type, "seq": seq, "time": 50 + seq, "data": data, **envelope}
        )
        return seq


@st.composite
def conversations(draw: st.DrawFn) -> _Conversation:
    """Turns with user text, streamed assistant answers (with usage) and tool rounds."""
    log = _Conversation()
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        log.add("turn/start", {"turn": turn})
        log.add("step/start", {"turn": turn, "step": 1})
        question = draw(TEXT)
        user = {
            "role": "user",
            "id": f"u{turn}",
            "content": [{"type": "text", "text": question}],
            "source": {"kind": "user"},
        }
        log.add("user/message", user, surfaceOp="append")
        log.expected.append(("user", [question], None))
        header = {
            "config": {"provider": "p", "model": "m"},
            "system": draw(st.sampled_from(["", "A", "B"])),
            "tools": [],
        }
        log.add("request/header", {"header": header, "reason": "initial"})
        step = 1
        for round_ in range(draw(st.integers(0, 2))):
            call_id = f"c{turn}-{round_}"
            block = {"type": "tool-call", "id": call_id, "name": "ls", "arguments": "{}"}
            seqs = [
                log.add(
                    "assistant/chunk",
                    {
                        "turn": turn,
                        "step": step,
                        "chunk": {
                            "type": "tool-call-delta",
                            "index": 0,
                            "id": call_id,
                            "name": "ls",
                            "argumentsDelta": "{}",
                        },
                    },
                )
            ]
            usage = {
                "inputTokens": draw(st.integers(0, 500)),
                "outputTokens": draw(st.integers(0, 50)),
            }
            message = {
                "role": "assistant",
                "id": f"a{turn}-{round_}",
                "content": [block],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            }
            log.add(
                "assistant/message",
                {"turn": turn, "step": step, "message": message, "usage": usage},
                surfaceOp="append",
                sourceEventSeqs=seqs,
            )
            log.expected.append(("assistant", [], usage))
            call = log.add(
                "tool/call",
                {"turn": turn, "step": step, "callId": call_id, "name": "ls", "arguments": "{}"},
            )
            output = draw(TEXT)
            result = {
                "role": "user",
                "id": f"r-{call_id}",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "content": [{"type": "text", "text": output}],
                        "isError": False,
                    }
                ],
                "source": {"kind": "tool", "callId": call_id},
            }
            log.add(
                "tool/result",
                {"turn": turn, "step": step, "message": result},
                surfaceOp="append",
                sourceEventSeqs=[call],
            )
            log.expected.append(("tool", [output], None))
            log.add("step/end", {"turn": turn, "step": step})
            step += 1
            log.add("step/start", {"turn": turn, "step": step})
        if draw(st.booleans()):
            # A failed attempt nobody claims, then a retry: it becomes assistant/attempt.
            for piece in draw(st.lists(TEXT, min_size=1, max_size=3)):
                log.add(
                    "assistant/chunk",
                    {
                        "turn": turn,
                        "step": step,
                        "chunk": {"type": "text-delta", "index": 0, "text": piece},
                    },
                )
            log.add(
                "llm/retry-started", {"retryId": f"r{turn}", "turn": turn, "step": step, "retry": 1}
            )
        pieces = draw(st.lists(TEXT, min_size=1, max_size=4))
        seqs = [
            log.add(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": "text-delta", "index": 0, "text": piece},
                },
            )
            for piece in pieces
        ]
        usage = {"inputTokens": draw(st.integers(0, 500)), "outputTokens": len(pieces)}
        answer = "".join(pieces)
        message = {
            "role": "assistant",
            "id": f"a{turn}",
            "content": [{"type": "text", "text": answer}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        log.add(
            "assistant/message",
            {"turn": turn, "step": step, "message": message, "usage": usage},
            surfaceOp="append",
            sourceEventSeqs=seqs,
        )
        log.expected.append(("assistant", [answer], usage))
        log.add("step/end", {"turn": turn, "step": step})
        log.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return log


def _texts(content: list[Any]) -> list[str]:
    texts: list[str] = []
    for block in content:
        if block.get("type") == "text":
            texts.append(block["text"])
        elif block.get("type") == "tool-result":
            texts += _texts(block["content"])
    return texts


@settings(max_examples=40)
@given(conversations())
def test_the_conversation_and_usage_survive_migration(log: _Conversation) -> None:
    _bytes, session = _migrated(log.rows)
    messages = [m for m in session.derive_messages() if m["role"] != "system"]
    assert [(m["role"], _texts(m["content"])) for m in messages] == [
        (role, texts) for role, texts, _usage in log.expected
    ]
    usages = [e.data.get("usage") for e in session.events if e.type == "assistant/message"]
    assert usages == [usage for role, _t, usage in log.expected if role == "assistant"]


@settings(max_examples=40)
@given(conversations())
def test_migration_is_dense_deterministic_and_idempotent_at_v4(log: _Conversation) -> None:
    _assert_dense_deterministic_and_idempotent(log.rows)


@settings(max_examples=40)
@given(v0_logs())
def test_early_edge_logs_migrate_dense_deterministic_and_idempotent(rows: list[Row]) -> None:
    _assert_dense_deterministic_and_idempotent(rows)


def _assert_dense_deterministic_and_idempotent(rows: list[Row]) -> None:
    first, session = _migrated(rows)
    second, _ = _migrated(rows)
    assert first == second
    seqs = [event.seq for event in session.events]
    assert seqs == list(range(len(seqs)))
    # A v4 log goes through the chain unchanged, byte for byte.
    lines = first.split(b"\n")[:-1]
    header, events = upgrade(orjson.loads(lines[0]), (orjson.loads(line) for line in lines[1:]))
    again = header.encode() + b"".join(event.line for event in events)
    assert again == first
