"""The source audit of the 2->3 edge: is this row a well-formed released v2 event?

The audit runs before any transformation. It checks the closed v2 vocabulary (unknown
types are refused even when ignorable), the envelope members each kind of event may
carry, the exact payload members of every known type, message sources and content
blocks. A failure raises :class:`AuditFailure`; the stage adds path, seq and type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._seq_references import is_safe_int

__all__ = [
    "CONTENT_BLOCK_TYPES",
    "SURFACE_TYPES_V2",
    "V2_EVENT_TYPES",
    "AuditFailure",
    "audit_v2_event",
    "has_exact_members",
    "iter_message_slots",
]


class AuditFailure(ValueError):
    """A v2 row breaks a source rule; ``rule`` is the stable refusal rule name."""

    def __init__(self, detail: str, rule: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.rule = rule


def _members(required: str, optional: str = "") -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(required.split()), frozenset(optional.split())


# Exact payload members (required, optional) of every released v2 event type.
PAYLOAD_MEMBERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "agent-preset/selected": _members("agentPreset"),
    "agent/inbox/spliced": _members("target start inserted", "removedCount outcome"),
    "approval/asked": _members("id toolName", "callId reason"),
    "approval/decided": _members("id outcome"),
    "approval/policy": _members("policy", "source"),
    "assistant/attempt": _members("turn step stream"),
    "assistant/message": _members("turn step message stream", "usage interrupted"),
    "command/done": _members("commandId kind", "text sourceEventSeq"),
    "command/run": _members("commandId name source", "args"),
    "compaction/end": _members("compactionId turn", "sourceCommandId error"),
    "compaction/prune": _members("shadowedRange shadowedSeqs shadowedTokenCount"),
    "compaction/start": _members("compactionId turn", "sourceCommandId"),
    "compaction/summary": _members(
        "compactionId summary shadowedRange shadowedSeqs shadowedTokenCount provider model",
        "sourceCommandId maxTokens usage rawOutput llmStreamCall",
    ),
    "feedback/record": _members("text"),
    "goal/change": _members(
        "kind version operation", "goal roundsStarted createdAt updatedAt cleared clearedAt"
    ),
    "hook/invoked": _members("turn point dialect handlerId", "matcher"),
    "hook/result": _members("turn point handlerId decision durationMs", "exitCode stderrSummary"),
    "llm/retry": _members(
        "retryId turn step provider mode policyKey retry delayMs failure", "maxRetries"
    ),
    "llm/retry-started": _members("retryId turn step retry"),
    "model/selection": _members("provider model", "reasoningEffort"),
    "permission/preset": _members("preset"),
    "plan/mode": _members("active"),
    "request/context": _members("provider model", "contextWindow"),
    "request/header": _members("header reason", "startsSeries"),
    "sandbox/mode": _members("mode", "source"),
    "schedule/change": _members("version operation", "schedule id acceptedAt"),
    "session-log-deepseek/delivery-accepted": _members(
        "sessionId throughSeq", "sessionFormatVersion"
    ),
    "session/end-seed": _members("", "inherited"),
    "session/title": _members("title messageSeqs source"),
    "session/title-llm-request": _members(
        "titleProvider messageSeqs route system messages maxTokens"
    ),
    "step/end": _members("turn step"),
    "step/start": _members("turn step"),
    "subagent/descriptor": _members(
        "mode version provider",
        "label agentProvider agentModel agentReasoningEffort persona toolFilter",
    ),
    "subagent/model-selection-policy": _members("allowedModels"),
    "team/member": _members("version teamId member"),
    "team/message/delivered": _members("version teamId messageId targetId"),
    "team/message/queued": _members("version teamId message"),
    "team/task": _members("version teamId task"),
    "todo/write": _members("todos"),
    "tool-workflow/agent-end": _members("runId seq outcome"),
    "tool-workflow/agent-start": _members("runId seq label childId", "phase"),
    "tool-workflow/run-end": _members("runId stopReason"),
    "tool-workflow/run-start": _members("runId name"),
    "tool/call": _members("turn step callId name arguments"),
    "tool/code-dispatch": _members(
        "rootCallId parentCallId subCallId name arguments isError content"
    ),
    "tool/code-dispatch-start": _members("rootCallId parentCallId subCallId name arguments"),
    "tool/result": _members("turn step message", "error meta"),
    "turn/end": _members("turn reason"),
    "turn/start": _members("turn"),
    "user/message": _members("role id content source"),
    "web/deepseek-search-llm-request": _members("endpoint apiVersion body"),
}

_ALLOWED_MEMBERS: dict[str, frozenset[str]] = {
    event_type: required | optional for event_type, (required, optional) in PAYLOAD_MEMBERS.items()
}

# The feedback events joined the vocabulary at v2 with payloads the format history
# leaves open, so only their envelope and "data is an object" are checked.
_OPEN_PAYLOAD_TYPES = frozenset({"feedback/message-put", "feedback/message-delete"})

V2_EVENT_TYPES: frozenset[str] = frozenset(PAYLOAD_MEMBERS) | _OPEN_PAYLOAD_TYPES
"""The 53 event types of the released v2 format."""

SURFACE_TYPES_V2 = frozenset({"user/message", "assistant/message", "tool/result"})
_ENVELOPE_BASE = frozenset({"type", "seq", "time", "data"})
_SURFACE_ENVELOPE = _ENVELOPE_BASE | {"ignorable", "sourceEventSeqs", "surfaceOp"}
_LOG_ONLY_ENVELOPE = _ENVELOPE_BASE | {"ignorable"}

CONTENT_BLOCK_TYPES = frozenset({"text", "reasoning", "image", "file", "tool-call", "tool-result"})
_SOURCE_KINDS = frozenset(
    {
        "user",
        "plugin",
        "model",
        "tool",
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
    }
)


def audit_v2_event(event: dict[str, Any]) -> None:
    """Check one v2 row against the released v2 rules; raise :class:`AuditFailure`."""
    event_type = event["type"]
    if event_type not in V2_EVENT_TYPES:
        marker = " (even though it is marked ignorable)" if event.get("ignorable") is True else ""
        raise AuditFailure(
            f"event type {event_type!r} is not part of the released v2 vocabulary{marker}",
            "unknown event type",
        )
    _audit_envelope(event, event_type)
    data = event["data"]
    if not isinstance(data, dict):
        raise AuditFailure("data is not an object", "malformed payload")
    members = PAYLOAD_MEMBERS.get(event_type)
    # Exact members are one pair of set comparisons; _audit_members names what is wrong.
    if members is not None and not (
        data.keys() >= members[0] and data.keys() <= _ALLOWED_MEMBERS[event_type]
    ):
        _audit_members(data, *members)
    _audit_payload(event_type, data)
    for slot, message in iter_message_slots(event_type, data):
        _audit_message(message, slot)
    for slot, content in _iter_other_content(event_type, data):
        _audit_content(content, slot)


def has_exact_members(event_type: str, data: dict[str, Any]) -> bool:
    """True when ``data`` holds every required and only allowed payload member of
    ``event_type``, a type of :data:`PAYLOAD_MEMBERS` (what :func:`audit_v2_event` checks)."""
    return PAYLOAD_MEMBERS[event_type][0] <= data.keys() <= _ALLOWED_MEMBERS[event_type]


def _audit_envelope(event: dict[str, Any], event_type: str) -> None:
    allowed = _SURFACE_ENVELOPE if event_type in SURFACE_TYPES_V2 else _LOG_ONLY_ENVELOPE
    if not event.keys() <= allowed or (
        event_type == "assistant/message" and "sourceEventSeqs" in event
    ):
        extra = sorted(set(event) - allowed)
        if event_type == "assistant/message" and "sourceEventSeqs" in event:
            extra.append("sourceEventSeqs")
        raise AuditFailure(
            f"envelope member(s) {', '.join(extra)} not allowed on {event_type!r} in v2",
            "envelope member not allowed",
        )
    if not event.keys() >= _ENVELOPE_BASE:
        missing = sorted(_ENVELOPE_BASE - set(event))
        raise AuditFailure(f"envelope lacks {', '.join(missing)}", "malformed envelope")
    if "ignorable" in event and event["ignorable"] is not True:
        raise AuditFailure("ignorable must be exactly true when present", "malformed envelope")
    time = event["time"]
    if not isinstance(time, int) or isinstance(time, bool):
        raise AuditFailure(f"time {time!r} is not an integer", "malformed envelope")
    if event_type in SURFACE_TYPES_V2 and "surfaceOp" not in event:
        raise AuditFailure(
            f"surface event {event_type!r} has no surfaceOp; v3 requires one", "missing surfaceOp"
        )


def _audit_members(
    data: dict[str, Any], required: frozenset[str], optional: frozenset[str]
) -> None:
    missing = sorted(required - set(data))
    if missing:
        raise AuditFailure(
            f"payload lacks required member(s) {', '.join(missing)}", "missing payload member"
        )
    extra = sorted(set(data) - required - optional)
    if extra:
        raise AuditFailure(
            f"payload has unexpected member(s) {', '.join(extra)}", "unexpected payload member"
        )


def _audit_payload(event_type: str, data: dict[str, Any]) -> None:
    if event_type in ("assistant/message", "assistant/attempt"):
        for key in ("turn", "step"):
            value = data[key]
            if not is_safe_int(value) or value == 0:
                raise AuditFailure(
                    f"{key} {value!r} is not a positive integer", "non-positive turn or step"
                )
        stream = data["stream"]
        if not isinstance(stream, list):
            raise AuditFailure("stream is not a list", "malformed payload")
        _audit_stream(stream)
    elif event_type == "session/end-seed":
        if "inherited" in data and data["inherited"] is not True:
            raise AuditFailure("inherited must be exactly true when present", "malformed end-seed")
    elif event_type == "tool/result":
        error = data.get("error")
        message = data["message"]
        if isinstance(error, dict) and error.get("code") == "TOOL_NOT_STARTED":
            _audit_not_started_id(message)


def _audit_not_started_id(message: object) -> None:
    message_id = message.get("id") if isinstance(message, dict) else None
    call_id = None
    if isinstance(message, dict) and isinstance(message.get("source"), dict):
        call_id = message["source"].get("callId")
    prefix = f"interrupted-tool-result-{call_id}-"
    if (
        not isinstance(message_id, str)
        or not isinstance(call_id, str)
        or not message_id.startswith(prefix)
        or not message_id[len(prefix) :].isdigit()
    ):
        raise AuditFailure(
            f"a TOOL_NOT_STARTED result must have id interrupted-tool-result-<callId>-<n>, "
            f"got {message_id!r}",
            "malformed not-started tool result id",
        )


def iter_message_slots(
    event_type: str, data: dict[str, Any]
) -> Iterable[tuple[str, dict[str, Any]]]:
    """Yield ``(json path, message)`` for every message slot of a v2 payload."""
    if event_type == "user/message":
        yield "data", data
    elif event_type in ("assistant/message", "tool/result"):
        if isinstance(data.get("message"), dict):
            yield "data.message", data["message"]
    elif event_type == "agent/inbox/spliced":
        yield from _list_slots(data.get("inserted"), "data.inserted")
    elif event_type == "session/title-llm-request":
        yield from _list_slots(data.get("messages"), "data.messages")


def _list_slots(items: object, path: str) -> Iterable[tuple[str, dict[str, Any]]]:
    if isinstance(items, list):
        for index, item in enumerate(items):
            if isinstance(item, dict):
                yield f"{path}[{index}]", item


def _iter_other_content(event_type: str, data: dict[str, Any]) -> Iterable[tuple[str, object]]:
    if event_type == "team/message/queued" and isinstance(data.get("message"), dict):
        yield "data.message.content", data["message"].get("content")
    elif event_type == "compaction/summary":
        yield "data.summary", data.get("summary")
        yield "data.rawOutput", data.get("rawOutput")
    elif event_type == "tool/code-dispatch":
        yield "data.content", data.get("content")


def _audit_message(message: dict[str, Any], slot: str) -> None:
    source = message.get("source")
    if source is not None:
        if not isinstance(source, dict) or source.get("kind") not in _SOURCE_KINDS:
            kind = source.get("kind") if isinstance(source, dict) else source
            raise AuditFailure(
                f"{slot}.source kind {kind!r} is not a v2 source kind",
                "unknown message source kind",
            )
        if source["kind"] == "agent-message" and (
            set(source) != {"kind", "form", "senderSessionId"} or source.get("form") != "relay"
        ):
            raise AuditFailure(
                f"{slot}.source must be exactly {{kind, form: 'relay', senderSessionId}}",
                "malformed agent-message source",
            )
    _audit_content(message.get("content"), f"{slot}.content")


def _audit_content(content: object, path: str) -> None:
    if not isinstance(content, list):
        return
    for index, block in enumerate(content):
        where = f"{path}[{index}]"
        block_type = block.get("type") if isinstance(block, dict) else None
        if block_type not in CONTENT_BLOCK_TYPES:
            raise AuditFailure(
                f"{where} has content block type {block_type!r}", "unknown content block type"
            )
        assert isinstance(block, dict)
        if block_type == "file":
            attachment = block.get("attachment")
            if (
                set(block) != {"type", "attachment"}
                or not isinstance(attachment, dict)
                or set(attachment) != {"attachmentId", "name", "bytes"}
            ):
                raise AuditFailure(
                    f"{where} must be exactly {{type, attachment: {{attachmentId, name, bytes}}}}",
                    "malformed file block",
                )
        elif block_type == "tool-result":
            _audit_content(block.get("content"), f"{where}.content")


def _audit_stream(stream: list[Any]) -> None:
    for index, record in enumerate(stream):
        if not isinstance(record, dict) or record.get("type") != "chunk":
            continue
        chunk = record.get("chunk")
        if not isinstance(chunk, dict):
            continue
        where = f"data.stream[{index}].chunk"
        if chunk.get("type") == "block-start" and chunk.get("blockType") not in CONTENT_BLOCK_TYPES:
            raise AuditFailure(
                f"{where}.blockType {chunk.get('blockType')!r} is not a content block type",
                "unknown content block type",
            )
        if chunk.get("type") == "block-end" and isinstance(chunk.get("block"), dict):
            _audit_content([chunk["block"]], f"{where}.block")
