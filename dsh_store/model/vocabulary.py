"""The v4 event vocabulary: core types, the surface subset and first-party log-only types."""

from __future__ import annotations

from typing import Final

__all__ = [
    "CORE_TYPES",
    "KNOWN_TYPES",
    "LOG_ONLY_TYPES",
    "PLUGIN_PREFIX",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "TURN_STEP_TYPES",
    "is_plugin_type",
]

SESSION_FORMAT_VERSION: Final = 4
"""The session format version this model reads and writes."""

SURFACE_TYPES: Final = frozenset(
    {
        "system/message",
        "developer/message",
        "user/message",
        "assistant/message",
        "tool/result",
    }
)
"""Message-producing types: each requires a ``surfaceOp`` and joins the ordered surface."""

CORE_TYPES: Final = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        *SURFACE_TYPES,
        "assistant/attempt",
        "tool/call",
        "request/header",
        "request/context",
        "session/end-seed",
    }
)
"""The core vocabulary whose payloads and lifecycle the model validates."""

LOG_ONLY_TYPES: Final = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "deliverables/presented",
        "feedback/message-delete",
        "feedback/message-put",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "image/offload",
        "llm/retry",
        "llm/retry-started",
        "model/selection",
        "permission/preset",
        "plan/mode",
        "sandbox/mode",
        "schedule/change",
        "session-log-deepseek/delivery-accepted",
        "session/title",
        "session/title-llm-request",
        "subagent/catalog",
        "subagent/descriptor",
        "subagent/model-selection-policy",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/ptc-dispatch",
        "tool/ptc-dispatch-start",
        "web/deepseek-search-llm-request",
        "workspace/changes",
    }
)
"""First-party plugin types of the v4 vocabulary: known, never on the surface.

Their payloads belong to their owning plugins, so the model checks only their envelope.
"""

KNOWN_TYPES: Final = CORE_TYPES | LOG_ONLY_TYPES
"""Every type a v4 reader recognizes (59 names)."""

TURN_STEP_TYPES: Final = frozenset(
    {
        "system/message",
        "developer/message",
        "assistant/message",
        "assistant/attempt",
        "tool/call",
        "tool/result",
    }
)
"""Core types whose payload names the turn and step that must enclose them."""

PLUGIN_PREFIX: Final = "plugin:"


def is_plugin_type(event_type: str) -> bool:
    """Whether ``event_type`` names an experimental ``plugin:`` record (always ignorable)."""
    return event_type.startswith(PLUGIN_PREFIX)
