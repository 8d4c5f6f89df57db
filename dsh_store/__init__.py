"""dsh-store: durable JSONL session event logs (deepseek-harness session format v4).

The package root re-exports the public API. Heavy modules load on first use so that
``import dsh_store`` and the ``dsh-store`` command start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_module_getattr
from .errors import (
    ConcurrentModificationError,
    CorruptLogError,
    DshStoreError,
    EventValidationError,
    InvalidSessionIdError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    SalvageRefusedError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    UnsupportedVersionError,
    WriterBrokenError,
)

if TYPE_CHECKING:
    # `X as X`: an explicit re-export, which a user's `mypy --strict` requires (it does
    # not evaluate the computed __all__ below).
    from .inspection import Inspection as Inspection
    from .migrate import MigrationResult as MigrationResult
    from .migrate import migrate_file as migrate_file
    from .migrate import migrate_store as migrate_store
    from .migrate import upgrade as upgrade
    from .model import SESSION_FORMAT_VERSION as SESSION_FORMAT_VERSION
    from .model import Session as Session
    from .model import SessionEvent as SessionEvent
    from .model import SessionHeader as SessionHeader
    from .model import build_fork_seed as build_fork_seed
    from .model import fold_request_header as fold_request_header
    from .model import fold_surface as fold_surface
    from .model import interrupted_closers as interrupted_closers
    from .payloads import *  # noqa: F403
    from .restore import FileReport as FileReport
    from .restore import classify as classify
    from .restore import examine as examine
    from .restore import read_log as read_log
    from .store import AsyncLiveSession as AsyncLiveSession
    from .store import JsonlStore as JsonlStore
    from .store import LiveSession as LiveSession
    from .store import RepairPlan as RepairPlan
    from .store import SalvagePlan as SalvagePlan
    from .store import repair_file as repair_file
    from .store import salvage_file as salvage_file
    from .verify import verify_path as verify_path

__version__ = "0.1.0"

# Public name -> defining module, imported lazily by __getattr__.
_LAZY: dict[str, str] = {
    "SESSION_FORMAT_VERSION": ".model",
    "Session": ".model",
    "SessionEvent": ".model",
    "SessionHeader": ".model",
    "build_fork_seed": ".model",
    "fold_request_header": ".model",
    "fold_surface": ".model",
    "interrupted_closers": ".model",
    "AsyncLiveSession": ".store",
    "JsonlStore": ".store",
    "LiveSession": ".store",
    "RepairPlan": ".store",
    "repair_file": ".store",
    "SalvagePlan": ".store",
    "salvage_file": ".store",
    "FileReport": ".restore",
    "Inspection": ".inspection",
    "classify": ".restore",
    "examine": ".restore",
    "read_log": ".restore",
    "verify_path": ".verify",
    "MigrationResult": ".migrate",
    "migrate_file": ".migrate",
    "migrate_store": ".migrate",
    "upgrade": ".migrate",
}
# The typed payloads and their constructors (dsh_store.payloads.__all__).
_PAYLOAD_NAMES: tuple[str, ...] = (
    "PAYLOAD_TYPES",
    "AbortedReason",
    "AssistantAttemptData",
    "AssistantMessage",
    "AssistantMessageData",
    "AssistantStream",
    "BlockedReason",
    "CancelCause",
    "CompletedReason",
    "ContentBlock",
    "DeveloperMessage",
    "DeveloperMessageData",
    "EndSeedData",
    "EpochHeader",
    "ErrorReason",
    "ForkedReason",
    "ImageBlock",
    "InterruptedReason",
    "JsonObject",
    "JsonValue",
    "LlmCallConfig",
    "LlmFailure",
    "MaxTokensReason",
    "ModelSource",
    "RawChunkRecord",
    "ReasoningBlock",
    "RequestContextData",
    "RequestHeaderData",
    "RequestHeaderReason",
    "StepData",
    "StreamRecord",
    "SystemMessage",
    "SystemMessageData",
    "TextBlock",
    "TextChunksRecord",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallChunksRecord",
    "ToolCallData",
    "ToolFailure",
    "ToolResultData",
    "ToolResultMessage",
    "ToolSchema",
    "ToolSource",
    "TurnEndData",
    "TurnEndReason",
    "TurnStartData",
    "UserMessage",
    "assistant_message",
    "reasoning_block",
    "request_header",
    "step_end",
    "step_start",
    "system_message",
    "text_block",
    "tool_call",
    "tool_call_block",
    "tool_failure",
    "tool_result",
    "tool_schema",
    "turn_end",
    "turn_start",
    "user_message",
)
_LAZY.update(dict.fromkeys(_PAYLOAD_NAMES, ".payloads"))

__all__ = [
    "ConcurrentModificationError",
    "CorruptLogError",
    "DshStoreError",
    "EventValidationError",
    "InvalidSessionIdError",
    "LosslessJsonError",
    "MigrationRefusedError",
    "NotASessionError",
    "SalvageRefusedError",
    "SessionExistsError",
    "SessionLockedError",
    "SessionNotFoundError",
    "UnsupportedVersionError",
    "WriterBrokenError",
    "__version__",
    *_LAZY,
]


__getattr__ = lazy_module_getattr(__name__, _LAZY, globals())
