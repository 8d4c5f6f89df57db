"""Message rewrites of the 3->4 edge: producer source kinds, content tags, tool-role lift.

All functions work on a private copy of an event payload and change it in place; a rule
violation raises :class:`MessageRefusal`, which the stage turns into a refusal naming
path, seq and event type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "V3_CONTENT_BLOCK_TYPES",
    "MessageRefusal",
    "convert_source",
    "iter_owned_content",
    "lift_tool_result",
    "message_slots",
    "producer_kind",
    "tag_content",
    "tag_stream",
]

V3_CONTENT_BLOCK_TYPES = frozenset(
    {"text", "reasoning", "image", "file", "tool-call", "tool-result"}
)

_RENAMED_PRODUCERS = {
    "compact": "compact-checkpoint",
    "tools-code-mode": "ptc-mode",
    "tools-ptc": "ptc-mode",
    "dsh-compaction-basic": "compact-basic",
}
# First-party producers whose plugin name becomes their kind unchanged.
_SAME_NAME_PRODUCERS = frozenset(
    {
        "agent-instructions",
        "session-reference",
        "team-message",
        "goal",
        "skill-invocation",
        "skill-catalog",
        "coordinator",
        "subagent-report",
        "subagent-settled",
        "webhook",
        "agent-message",
        "model-selection",
        "plan-mode",
        "time-context",
        "tmux-context",
        "user-approval",
        "repeat-tool-reminder",
        "tool-cordis",
        "cordis-host-runner",
        "tool-goal",
        "tool-jobs",
        "hooks-codex",
        "hooks-claude-code",
        "schedule",
        "dsh-session-title-llm",
    }
)
SYSTEM_PROMPT_PLUGIN = "@deepseek-ai/dsh-system-prompt"


class MessageRefusal(ValueError):
    """A message slot that 3->4 cannot convert; ``rule`` is the refusal rule name."""

    def __init__(self, detail: str, rule: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.rule = rule


def producer_kind(plugin: str, role: object) -> str:
    """The v4 source kind for a v3 ``{kind: 'plugin', plugin}`` source on a ``role`` message."""
    if plugin == SYSTEM_PROMPT_PLUGIN:
        return "system-prompt" if role == "system" else "runtime-context"
    if plugin in _RENAMED_PRODUCERS:
        return _RENAMED_PRODUCERS[plugin]
    if plugin in _SAME_NAME_PRODUCERS:
        return plugin
    return f"plugin:{plugin}"


def message_slots(event_type: str, data: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """Yield ``(json path, message)`` for every message slot 3->4 visits."""
    if event_type == "user/message":
        yield "data", data
    elif event_type in ("system/message", "assistant/message", "tool/result"):
        if isinstance(data.get("message"), dict):
            yield "data.message", data["message"]
    elif event_type in ("agent/inbox/spliced", "session/title-llm-request"):
        key = "inserted" if event_type == "agent/inbox/spliced" else "messages"
        items = data.get(key)
        if isinstance(items, list):
            for index, item in enumerate(items):
                if isinstance(item, dict):
                    yield f"data.{key}[{index}]", item


def convert_source(message: dict[str, Any], slot: str) -> None:
    """Replace a ``plugin`` source by its producer kind, keeping key order and other keys."""
    if "source" not in message:
        return
    source = message["source"]
    kind = source.get("kind") if isinstance(source, dict) else None
    if not isinstance(kind, str) or not kind:
        raise MessageRefusal(
            f"{slot}.source has no non-empty string kind", "message source without kind"
        )
    assert isinstance(source, dict)
    if kind != "plugin":
        return
    plugin = source.get("plugin")
    if not isinstance(plugin, str):
        raise MessageRefusal(
            f"{slot}.source is a plugin source without a string plugin name",
            "plugin source without name",
        )
    new_kind = producer_kind(plugin, message.get("role"))
    converted: dict[str, Any] = {}
    for key, value in source.items():
        if key == "kind":
            converted["kind"] = new_kind
        elif key != "plugin":
            converted[key] = value
    message["source"] = converted


def tag_content(content: object, path: str) -> object:
    """Prefix unknown block types with ``plugin:``; refuse any ``tool-result`` block here."""
    if not isinstance(content, list):
        return content
    tagged: list[Any] = []
    for index, block in enumerate(content):
        if isinstance(block, dict):
            block_type = block.get("type")
            if block_type == "tool-result":
                raise MessageRefusal(
                    f"{path}[{index}] is a tool-result block outside a tool/result wrapper; v4 "
                    "admits tool results only as tool-role messages",
                    "leftover tool-result block",
                )
            if isinstance(block_type, str) and block_type not in V3_CONTENT_BLOCK_TYPES:
                block = dict(block)
                block["type"] = f"plugin:{block_type}"
        tagged.append(block)
    return tagged


def tag_stream(stream: object) -> None:
    """Tag raw ``block-start.blockType`` and ``block-end.block.type`` in an embedded stream."""
    if not isinstance(stream, list):
        return
    for record in stream:
        chunk = (
            record.get("chunk")
            if isinstance(record, dict) and record.get("type") == "chunk"
            else None
        )
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == "block-start":
            block_type = chunk.get("blockType")
            if isinstance(block_type, str) and block_type not in V3_CONTENT_BLOCK_TYPES:
                chunk["blockType"] = f"plugin:{block_type}"
        elif chunk.get("type") == "block-end" and isinstance(chunk.get("block"), dict):
            block = chunk["block"]
            block_type = block.get("type")
            if isinstance(block_type, str) and block_type not in V3_CONTENT_BLOCK_TYPES:
                block["type"] = f"plugin:{block_type}"


def iter_owned_content(
    event_type: str, data: dict[str, Any]
) -> Iterable[tuple[str, dict[str, Any], str]]:
    """Yield ``(json path, holder, key)`` for owned content arrays outside message slots."""
    if event_type == "team/message/queued" and isinstance(data.get("message"), dict):
        yield "data.message.content", data["message"], "content"
    elif event_type == "compaction/summary":
        yield "data.summary", data, "summary"
        yield "data.rawOutput", data, "rawOutput"
    elif event_type == "tool/ptc-dispatch":
        yield "data.content", data, "content"


def lift_tool_result(message: dict[str, Any]) -> dict[str, Any]:
    """Turn a v3 user-role tool-result wrapper message into a v4 tool-role message."""
    message_id = message.get("id")
    source = message.get("source")
    call_id = source.get("callId") if isinstance(source, dict) else None
    content = message.get("content")
    if not isinstance(message_id, str) or not message_id:
        raise MessageRefusal(
            "data.message.id must be a non-empty string", "malformed tool-result wrapper"
        )
    if (
        not isinstance(source, dict)
        or source.get("kind") != "tool"
        or not isinstance(call_id, str)
        or not call_id
    ):
        raise MessageRefusal(
            "data.message.source must be {kind: 'tool', callId} with a non-empty callId",
            "malformed tool-result wrapper",
        )
    if not isinstance(content, list) or len(content) != 1 or not isinstance(content[0], dict):
        raise MessageRefusal(
            "data.message.content must hold exactly one block", "malformed tool-result wrapper"
        )
    wrapper = content[0]
    if wrapper.get("type") != "tool-result" or wrapper.get("toolCallId") != call_id:
        raise MessageRefusal(
            f"data.message.content[0] must be a tool-result block for call {call_id!r}",
            "malformed tool-result wrapper",
        )
    inner = wrapper.get("content")
    if not isinstance(inner, list):
        raise MessageRefusal(
            "data.message.content[0].content is not a list", "malformed tool-result wrapper"
        )
    if "isError" in wrapper and not isinstance(wrapper["isError"], bool):
        raise MessageRefusal(
            "data.message.content[0].isError is not a boolean", "malformed tool-result wrapper"
        )
    for index, block in enumerate(inner):
        if isinstance(block, dict) and block.get("type") == "tool-result":
            raise MessageRefusal(
                f"data.message.content[0].content[{index}] nests a tool-result inside a tool "
                "result, which the conversion cannot express",
                "nested tool result",
            )
    lifted: dict[str, Any] = {
        "role": "tool",
        "source": source,
        "toolCallId": call_id,
        "content": tag_content(inner, "data.message.content[0].content"),
    }
    if "isError" in wrapper:
        lifted["isError"] = wrapper["isError"]
    lifted["id"] = message_id
    for key, value in message.items():
        if key not in ("id", "role", "source", "content"):
            lifted[f"plugin:message:{key}"] = value
    for key, value in wrapper.items():
        if key not in ("type", "toolCallId", "content", "isError"):
            lifted[f"plugin:result:{key}"] = value
    return lifted
