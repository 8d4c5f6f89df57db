"""The frozen event vocabulary of formats 0 and 1, shared by the 0->1 and 1->2 edges.

Formats 0 and 1 have the same 51 event types. Each type has an exact payload key set:
members in ``required`` must be present, members in ``optional`` may be, anything else
is refused. Format 1 differs only in what :func:`payload_keys` says about delivery markers
(``sessionFormatVersion``), which both edges accept so that a format-1 writer's markers and
a late format-0 writer's markers read alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

__all__ = [
    "EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "PACKED_ROW_TYPES",
    "SURFACE_TYPES",
    "PayloadKeys",
    "is_safe_int",
    "payload_keys",
    "payload_problem",
]

MAX_SAFE_INTEGER = 2**53 - 1

SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""Event types that may carry ``surfaceOp`` and ``sourceEventSeqs`` in formats 0 and 1."""

PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
"""Row tags of packed assistant-delta rows (formats 0 and 1 only)."""


@dataclass(frozen=True)
class PayloadKeys:
    """The exact payload members of one event type."""

    required: frozenset[str]
    optional: frozenset[str] = frozenset()


def _keys(required: str, optional: str = "") -> PayloadKeys:
    return PayloadKeys(frozenset(required.split()), frozenset(optional.split()))


_PAYLOADS: dict[str, PayloadKeys] = {
    "agent-preset/selected": _keys("agentPreset"),
    "agent/inbox/spliced": _keys("target start inserted", "removedCount outcome"),
    "approval/asked": _keys("id toolName", "callId reason"),
    "approval/decided": _keys("id outcome"),
    "approval/policy": _keys("policy", "source"),
    "assistant/chunk": _keys("turn step chunk"),
    "assistant/message": _keys("turn step message", "usage interrupted"),
    "command/done": _keys("commandId kind", "text sourceEventSeq"),
    "command/run": _keys("commandId name source", "args"),
    "compaction/end": _keys("compactionId turn", "sourceCommandId error"),
    "compaction/prune": _keys("shadowedRange shadowedSeqs shadowedTokenCount"),
    "compaction/start": _keys("compactionId turn", "sourceCommandId"),
    "compaction/summary": _keys(
        "compactionId summary shadowedRange shadowedSeqs shadowedTokenCount provider model",
        "sourceCommandId maxTokens usage rawOutput llmStreamCall",
    ),
    "feedback/record": _keys("text"),
    "goal/change": _keys(
        "kind version operation",
        "goal roundsStarted createdAt updatedAt cleared clearedAt",
    ),
    "hook/invoked": _keys("turn point dialect handlerId", "matcher"),
    "hook/result": _keys("turn point handlerId decision durationMs", "exitCode stderrSummary"),
    "llm/retry": _keys(
        "retryId turn step provider mode policyKey retry delayMs failure", "maxRetries"
    ),
    "llm/retry-started": _keys("retryId turn step retry"),
    "model/selection": _keys("provider model", "reasoningEffort"),
    "permission/preset": _keys("preset"),
    "plan/mode": _keys("active"),
    "request/context": _keys("provider model", "contextWindow"),
    "request/header": _keys("header reason", "startsSeries"),
    "sandbox/mode": _keys("mode", "source"),
    "schedule/change": _keys("version operation", "schedule id acceptedAt"),
    "session-log-deepseek/delivery-accepted": _keys("sessionId throughSeq", "sessionFormatVersion"),
    "session/end-seed": _keys(""),
    "session/title": _keys("title messageSeqs source"),
    "session/title-llm-request": _keys("titleProvider messageSeqs route system messages maxTokens"),
    "step/end": _keys("turn step"),
    "step/start": _keys("turn step"),
    "subagent/descriptor": _keys(
        "mode version provider",
        "label agentProvider agentModel agentReasoningEffort persona toolFilter",
    ),
    "subagent/model-selection-policy": _keys("allowedModels"),
    "team/member": _keys("version teamId member"),
    "team/message/delivered": _keys("version teamId messageId targetId"),
    "team/message/queued": _keys("version teamId message"),
    "team/task": _keys("version teamId task"),
    "todo/write": _keys("todos"),
    "tool-workflow/agent-end": _keys("runId seq outcome"),
    "tool-workflow/agent-start": _keys("runId seq label childId", "phase"),
    "tool-workflow/run-end": _keys("runId stopReason"),
    "tool-workflow/run-start": _keys("runId name"),
    "tool/call": _keys("turn step callId name arguments"),
    "tool/code-dispatch": _keys("rootCallId parentCallId subCallId name arguments isError content"),
    "tool/code-dispatch-start": _keys("rootCallId parentCallId subCallId name arguments"),
    "tool/result": _keys("turn step message", "error meta"),
    "turn/end": _keys("turn reason"),
    "turn/start": _keys("turn"),
    "user/message": _keys("role id content source"),
    "web/deepseek-search-llm-request": _keys("endpoint apiVersion body"),
}

_ALLOWED: dict[str, frozenset[str]] = {
    event_type: keys.required | keys.optional for event_type, keys in _PAYLOADS.items()
}

EVENT_TYPES = frozenset(_PAYLOADS)
"""The 51 event types of formats 0 and 1."""

assert len(EVENT_TYPES) == 51


def payload_keys(event_type: str) -> PayloadKeys:
    """Return the exact payload members of a format 0/1 event type (``KeyError`` if unknown)."""
    return _PAYLOADS[event_type]


def is_safe_int(value: object) -> TypeGuard[int]:
    """True for a JSON integer within ±(2^53-1) (never a bool)."""
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def payload_problem(event_type: str, data: Mapping[str, Any]) -> tuple[str, str] | None:
    """Check ``data`` against the exact key set of ``event_type``.

    Returns ``None`` when the members are exact, else ``(rule, detail)`` where rule is
    ``missing-payload-member`` or ``unexpected-payload-member``.
    """
    keys = _PAYLOADS[event_type]
    present = data.keys()
    # The exact case is one pair of set comparisons; the lists below only name a problem.
    if present >= keys.required and present <= _ALLOWED[event_type]:
        return None
    missing = sorted(keys.required - data.keys())
    if missing:
        return (
            "missing-payload-member",
            f"{event_type} payload lacks required member(s) {', '.join(missing)}",
        )
    extra = sorted(data.keys() - keys.required - keys.optional)
    if extra:
        return (
            "unexpected-payload-member",
            f"{event_type} payload has member(s) {', '.join(extra)} that format 0/1 does "
            "not define",
        )
    return None
