"""The real DSH v4 samples restore, project the expected history and re-encode byte-exactly."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from dsh_store.model import (
    Session,
    SessionEvent,
    SessionHeader,
    fold_request_header,
    interrupted_closers,
)
from tests.conftest import SHARED

pytestmark = pytest.mark.requires("shared")

SAMPLES = SHARED / "reference" / "samples"
NAMES = ["dynamic-tool-updates.v4.jsonl", "feedback-command.v4.jsonl"]


def substitute(line: bytes) -> tuple[bytes, bool]:
    """The corpus placeholder rules; returns the line and whether its structure changed."""
    line = line.replace(b"{{cwd}}", b"/dsh-snapshot-cwd")
    obj = orjson.loads(line)
    if obj.get("type") != "request/header":
        return line, False
    header = obj["data"]["header"]
    tools = header.get("tools")
    if tools == "{{tools}}":
        del header["tools"]  # canonical v4 headers omit empty tools
    elif isinstance(tools, list) and all(isinstance(name, str) for name in tools):
        header["tools"] = [{"name": name, "description": "", "parameters": {}} for name in tools]
    else:
        return line, False
    return orjson.dumps(obj) + b"\n", True


def load(name: str) -> tuple[Session, list[tuple[bytes, bool]]]:
    raw = (SAMPLES / name).read_bytes().splitlines(keepends=True)
    header = SessionHeader.from_json(orjson.loads(substitute(raw[0])[0]))
    lines = [substitute(line) for line in raw[1:]]
    events = [SessionEvent.from_json(orjson.loads(line), line=line) for line, _ in lines]
    return Session.from_restore(header, events), lines


def summary(messages: list[Any]) -> list[tuple[str, str]]:
    out = []
    for message in messages:
        block = message["content"][0]
        text = block.get("text") or block.get("name") or block.get("toolName") or ""
        out.append((message["role"], text[:40]))
    return out


def clip(expected: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(role, text[:40]) for role, text in expected]


def test_dynamic_tool_updates() -> None:
    session, _ = load("dynamic-tool-updates.v4.jsonl")
    assert session.seq == 30 and session.is_balanced
    assert session.header.cwd == "/dsh-snapshot-cwd"
    assert interrupted_closers(session.events) == []
    assert session.surface.nodes == (7, 8, 9, 13, 15, 19, 20, 22, 26, 27)
    assert summary(session.derive_messages()) == clip(
        [
            ("system", "{{system}}"),
            ("user", "Read task.txt, call the newly available s"),
            ("user", "Current runtime context. This snapshot s"),
            ("assistant", "read"),
            ("tool", "<path>/dsh-snapshot-cwd/task.txt</path>\n"),
            ("developer", "snapshot_ping"),
            ("assistant", "snapshot_ping"),
            ("tool", "pong"),
            ("developer", "snapshot_ping"),
            ("assistant", "DONE"),
        ]
    )
    tool_messages = [m for m in session.derive_messages() if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_messages] == ["call_task_read", "call_dynamic_ping"]
    header = session.request_header()
    assert header is not None and len(header["tools"]) == 24
    assert header == fold_request_header(session.events)


def test_feedback_command() -> None:
    session, _ = load("feedback-command.v4.jsonl")
    assert session.seq == 19 and session.is_balanced
    assert session.header.agent_preset == "standard"
    messages = session.derive_messages()
    assert summary(messages) == clip(
        [
            ("system", "{{system}}"),
            ("user", "Reply with the single word LIGHTHOUSE and"),
            ("user", "Current runtime context. This snapshot s"),
            ("assistant", "The user wants me to reply with a single"),
        ]
    )
    assert messages[3]["content"][1] == {"type": "text", "text": "LIGHTHOUSE"}
    assert session.request_header() == {
        "config": {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
    }
    assert session.request_context() == {
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
        "contextWindow": 128000,
    }
    # Log-only records after the last turn are ordinary standalone events.
    assert [e.type for e in session.events[-3:]] == [
        "command/run",
        "feedback/record",
        "command/done",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_line_re_encodes_identically(name: str) -> None:
    raw = (SAMPLES / name).read_bytes().splitlines(keepends=True)
    assert SessionHeader.from_json(orjson.loads(substitute(raw[0])[0])).encode() == raw[0].replace(
        b"{{cwd}}", b"/dsh-snapshot-cwd"
    )
    for original in raw[1:]:
        line, restructured = substitute(original)
        event = SessionEvent.from_json(orjson.loads(line))
        assert event.line == line
        if not restructured:
            assert event.line == original.replace(b"{{cwd}}", b"/dsh-snapshot-cwd")


@pytest.mark.parametrize("name", NAMES)
def test_samples_replay_through_append(name: str) -> None:
    restored, _ = load(name)
    replay = Session.create("{{session:1}}", clock=lambda: 0)
    for event in restored.events:
        wire = event.to_json()
        replay.append(
            wire["type"],
            wire["data"],
            surface_op=wire.get("surfaceOp"),
            source_event_seqs=wire.get("sourceEventSeqs"),
        )
    assert replay.derive_messages() == restored.derive_messages()
    assert replay.surface == restored.surface
