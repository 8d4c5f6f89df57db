"""The typed payloads: constructors produce what ``append`` accepts, restore returns it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import orjson
import pytest

import dsh_store
from dsh_store import JsonlStore, payloads
from dsh_store.migrations.streams import expand_stream
from dsh_store.model import Session
from dsh_store.model.vocabulary import CORE_TYPES, SURFACE_TYPES
from dsh_store.payloads import (
    AssistantStream,
    assistant_message,
    reasoning_block,
    request_header,
    step_end,
    step_start,
    system_message,
    text_block,
    tool_call,
    tool_call_block,
    tool_failure,
    tool_result,
    tool_schema,
    turn_end,
    turn_start,
    user_message,
)
from tests.conftest import REPO

PROVIDER = "deepseek-official"
MODEL = "deepseek-v4-flash"
BASH = tool_schema(
    "bash",
    "Run a shell command",
    {"type": "object", "properties": {"command": {"type": "string"}}},
)


def _streamed_answer() -> AssistantStream:
    """A provider stream: reasoning, text in two deltas, one tool call in two deltas."""
    stream = AssistantStream()
    stream.chunk({"type": "block-start", "index": 0, "blockType": "reasoning"}, time=100)
    stream.reasoning("The user wants a count; ", index=0, time=101)
    stream.reasoning("run find.", index=0, time=103)
    stream.text("Let me ", index=1, time=110)
    stream.text("count them.", index=1, time=111)
    stream.tool_call('{"command": ', index=2, id="call-1", name="bash", time=120)
    stream.tool_call('"find . | wc -l"}', index=2, id="call-1", name=None, time=121)
    stream.chunk({"type": "finish", "reason": {"kind": "tool-calls"}}, time=130)
    return stream


def _every_constructor() -> list[tuple[str, Any, dict[str, Any]]]:
    """(type, payload, append options) for a two-turn session using every constructor."""
    stream = _streamed_answer()
    return [
        ("turn/start", turn_start(1), {}),
        ("step/start", step_start(1, 1), {}),
        ("request/header", request_header(PROVIDER, MODEL, tools=[BASH]), {}),
        ("system/message", system_message(1, 1, "You are careful.", id="sys-1"), {"op": True}),
        ("user/message", user_message("Count the files.", id="u1"), {"op": True}),
        (
            "assistant/message",
            assistant_message(
                1,
                1,
                stream.content(),
                provider=PROVIDER,
                model=MODEL,
                id="a1",
                stream=stream,
                usage={"inputTokens": 120, "outputTokens": 40, "reasoningTokens": 12},
            ),
            {"op": True},
        ),
        ("tool/call", tool_call(1, 1, "call-1", "bash", '{"command": "find . | wc -l"}'), {}),
        ("tool/result", tool_result(1, 1, "call-1", "42", meta={"exit": 0}), {"op": True}),
        (
            "assistant/message",
            assistant_message(
                1,
                1,
                [
                    reasoning_block("Also list them."),
                    tool_call_block("call-2", "bash", '{"command": "ls /nope"}'),
                ],
                provider=PROVIDER,
                model=MODEL,
                id="a2",
            ),
            {"op": True},
        ),
        ("tool/call", tool_call(1, 1, "call-2", "bash", '{"command": "ls /nope"}'), {}),
        (
            "tool/result",
            tool_result(
                1,
                1,
                "call-2",
                "ls: cannot access '/nope'",
                error=tool_failure("CommandError", "EXIT_2", "the directory does not exist"),
            ),
            {"op": True},
        ),
        ("step/end", step_end(1, 1), {}),
        ("turn/end", turn_end(1), {}),
        ("turn/start", turn_start(2), {}),
        ("user/message", user_message([text_block("Thanks!")], id="u2"), {"op": True}),
        ("step/start", step_start(2, 1), {}),
        (
            "request/header",
            request_header(PROVIDER, MODEL, reason="change", reasoning_effort="high"),
            {},
        ),
        (
            "assistant/message",
            assistant_message(2, 1, "You're", provider=PROVIDER, model=MODEL, interrupted=True),
            {"op": True},
        ),
        ("step/end", step_end(2, 1), {}),
        ("turn/end", turn_end(2, {"kind": "aborted", "reason": {"kind": "user"}}), {}),
    ]


def _append_all(live: Any) -> list[tuple[str, Any]]:
    appended = []
    for event_type, data, options in _every_constructor():
        live.append(event_type, data, surface_op="append" if options else None)
        appended.append((event_type, data))
    return appended


def test_every_constructor_is_accepted_by_append_and_round_trips(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    with store.new("typed", cwd="/work") as live:
        appended = _append_all(live)
        live.flush()
    restored = store.load("typed")
    assert restored.closers == ()
    assert [(event.type, event.data) for event in restored.events] == appended
    # Byte for byte: restore gives back the payload in the constructor's key order.
    for event, (_, data) in zip(restored.events, appended, strict=True):
        assert orjson.dumps(event.data) == orjson.dumps(data)
    messages = Session.from_restore(restored.header, restored.events).derive_messages()
    assert [message["role"] for message in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


def test_the_async_session_takes_the_same_payloads(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    with store.new("typed-async") as live:
        live.append("turn/start", turn_start(1))
        live.append("turn/end", turn_end(1))

    async def more() -> None:
        async with store.aopen("typed-async") as alive:
            await alive.append("turn/start", turn_start(2))
            await alive.append("user/message", user_message("hi", id="u1"), surface_op="append")
            await alive.append("turn/end", turn_end(2))
            await alive.flush()

    asyncio.run(more())
    events = store.load("typed-async").events
    assert [event.type for event in events] == [
        "turn/start",
        "turn/end",
        "session/end-seed",
        "turn/start",
        "user/message",
        "turn/end",
    ]
    assert events[4].data == user_message("hi", id="u1")


def test_a_result_for_a_call_never_requested_is_still_refused() -> None:
    # Typed payloads change nothing about validation: the lifecycle rules still apply.
    session = Session.create("s1")
    session.append("turn/start", turn_start(1))
    session.append("step/start", step_start(1, 1))
    with pytest.raises(dsh_store.EventValidationError) as caught:
        session.append(
            "tool/result", tool_result(1, 1, "call-9", "x", is_error=True), surface_op="append"
        )
    assert caught.value.rule == "tool-result-unpaired"


def test_the_stream_builder_is_compact_and_expands_to_the_exact_chunks() -> None:
    stream = _streamed_answer()
    records: list[Any] = stream.records
    assert [record["type"] for record in records] == [
        "chunk",
        "reasoning-chunks",
        "text-chunks",
        "tool-call-chunks",
        "tool-call-chunks",
        "chunk",
    ]
    assert records[1] == {
        "type": "reasoning-chunks",
        "time0": 101,
        "index": 0,
        "dt": [2],
        "texts": ["The user wants a count; ", "run find."],
    }
    assert records[3] == {
        "type": "tool-call-chunks",
        "time0": 120,
        "index": 2,
        "dt": [],
        "id": "call-1",
        "name": "bash",
        "args": ['{"command": '],
    }
    # A delta without the name starts a new run (the name's presence must match).
    assert "name" not in records[4] and records[4]["args"] == ['"find . | wc -l"}']
    expanded = expand_stream([dict(record) for record in records])
    assert [time for time, _ in expanded] == [100, 101, 103, 110, 111, 120, 121, 130]
    assert stream.content() == [
        {"type": "reasoning", "text": "The user wants a count; run find."},
        {"type": "text", "text": "Let me count them."},
        {
            "type": "tool-call",
            "id": "call-1",
            "name": "bash",
            "arguments": '{"command": "find . | wc -l"}',
        },
    ]


def test_the_records_handed_out_are_a_copy() -> None:
    stream = AssistantStream()
    stream.text("a", index=0, time=1)
    records: list[Any] = stream.records
    stream.text("b", index=0, time=2)  # extends the same run
    assert records == [{"type": "text-chunks", "time0": 1, "index": 0, "dt": [], "texts": ["a"]}]
    assert orjson.loads(orjson.dumps(stream.records))[0]["texts"] == ["a", "b"]


def test_the_default_stream_is_one_delta_per_streamed_block() -> None:
    data = assistant_message(
        1,
        2,
        [reasoning_block("r"), text_block("t"), tool_call_block("c", "bash", "{}")],
        provider=PROVIDER,
        model=MODEL,
        id="a",
    )
    assert data["stream"] == [
        {"type": "reasoning-chunks", "time0": 0, "index": 0, "dt": [], "texts": ["r"]},
        {"type": "text-chunks", "time0": 0, "index": 1, "dt": [], "texts": ["t"]},
        {
            "type": "tool-call-chunks",
            "time0": 0,
            "index": 2,
            "dt": [],
            "id": "c",
            "name": "bash",
            "args": ["{}"],
        },
    ]
    assert assistant_message(1, 2, "x", provider="p", model="m", stream=[])["stream"] == []


def test_turn_end_needs_a_full_object_for_reasons_with_facts() -> None:
    assert turn_end(3, "max-tokens") == {"turn": 3, "reason": {"kind": "max-tokens"}}
    with pytest.raises(ValueError, match="aborted"):
        turn_end(3, "aborted")  # type: ignore[arg-type]


def test_constructors_leave_optional_fields_out() -> None:
    assert request_header("p", "m") == {
        "header": {"config": {"provider": "p", "model": "m"}},
        "reason": "initial",
    }
    assert tool_result(1, 1, "c", "ok") == {
        "turn": 1,
        "step": 1,
        "message": {
            "role": "tool",
            "source": {"kind": "tool", "callId": "c"},
            "toolCallId": "c",
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
            "id": "result-c",
        },
    }
    assert tool_failure("E", "C") == {"name": "E", "code": "C"}
    first, second = user_message("x"), user_message("x")
    assert first["id"] != second["id"] and first["id"].startswith("user-")


def test_every_core_type_has_a_payload_type() -> None:
    assert set(payloads.PAYLOAD_TYPES) == CORE_TYPES
    for event_type, payload_type in payloads.PAYLOAD_TYPES.items():
        assert typing.is_typeddict(payload_type), event_type
    assert SURFACE_TYPES <= CORE_TYPES


def test_the_package_root_re_exports_the_payloads_lazily() -> None:
    assert set(dsh_store._PAYLOAD_NAMES) == set(payloads.__all__)
    assert set(payloads.__all__) <= set(dsh_store.__all__)
    assert dsh_store.user_message is user_message
    done = subprocess.run(
        [sys.executable, "-c", "import sys, dsh_store; print('dsh_store.payloads' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False"


# -- the type checker ----------------------------------------------------------------------

GOOD = """
    from dsh_store import JsonlStore, ToolResultData, tool_result, turn_start, user_message

    store = JsonlStore("/tmp/never-written")
    with store.new("s") as live:
        live.append("turn/start", turn_start(1))
        live.append("turn/start", {"turn": 1})
        live.append("user/message", user_message("hi"), surface_op="append")
        result: ToolResultData = tool_result(1, 1, "c", "ok")
        live.append("tool/result", result, surface_op="append", source_event_seqs=[3])
        live.append("plugin:x/y", {"anything": [1, 2]}, ignorable=True)
        event_type: str = "turn/start"
        live.append(event_type, {"whatever": True})
"""

BAD = """
    from dsh_store import JsonlStore, ToolResultData, tool_result, turn_start, user_message

    store = JsonlStore("/tmp/never-written")
    with store.new("s") as live:
        live.append("turn/start", turn_start(trun=1))  # E:call-arg
        result: ToolResultData = {"turn": 1, "step": 1, "mesage": {}}  # E:typeddict-unknown-key
        live.append("turn/start", {"trun": 1})  # E:deprecated
        live.append("turn/start", {"turn": "1"})  # E:deprecated
        live.append("user/message", user_message("hi"))  # E:deprecated
        live.append("tool/call", user_message("hi"))  # E:deprecated
        live.append("turn/start", turn_start(1), surface_op="append")  # E:deprecated
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(source))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--enable-error-code",
            "deprecated",
            "--no-error-summary",
            "--hide-error-context",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(snippet),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )


def test_mypy_accepts_typed_and_plain_payloads_and_flags_wrong_fields(tmp_path: Path) -> None:
    # Every public name of the package root is an explicit export for `mypy --strict`.
    every_name = f"\n    from dsh_store import {', '.join(sorted(dsh_store.__all__))}\n"
    good = _mypy(tmp_path, GOOD + every_name)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(tmp_path, BAD)
    lines = textwrap.dedent(BAD).splitlines()
    expected = {
        number: line.split("# E:")[1]
        for number, line in enumerate(lines, start=1)
        if "# E:" in line
    }
    reported: dict[int, set[str]] = {}
    for row in bad.stdout.splitlines():
        if ": error: " not in row:
            continue
        number = int(row.split(":")[1])
        reported.setdefault(number, set()).add(row.rsplit("[", 1)[1].rstrip("]"))
    assert set(reported) == set(expected), bad.stdout
    for number, code in expected.items():
        assert code in reported[number], (number, bad.stdout)
