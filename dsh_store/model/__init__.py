"""The pure v4 session model: header, events, validation, surface, projections, closers.

No I/O and no wall clock: time comes from an injected clock (epoch milliseconds).

The closers (:mod:`.closers`) and the request folds (:mod:`.requests`) are imported on
first use of one of their names (PEP 562): validating a log, as ``dsh-store verify`` does,
needs neither, and its start-up is measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_module_getattr
from .events import (
    SessionEvent,
    SurfaceOp,
    SurfaceReplace,
    decode_source_seqs,
    encode_source_seqs,
)
from .header import SessionHeader
from .messages import derive_event_message
from .projections import (
    FIRST_PARTY_PROJECTIONS,
    IMAGE_OFFLOAD,
    MESSAGE_PROJECTION_TYPES,
    MessageProjection,
    ProjectionContext,
)
from .session import Clock, EventInput, Listener, Session
from .surface import SurfaceFold, SurfaceReplacement, SurfaceView, fold_surface
from .tools import fold_tool_history
from .vocabulary import (
    CORE_TYPES,
    KNOWN_TYPES,
    LOG_ONLY_TYPES,
    SESSION_FORMAT_VERSION,
    SURFACE_TYPES,
    is_plugin_type,
)

__all__ = [
    "CORE_TYPES",
    "FIRST_PARTY_PROJECTIONS",
    "IMAGE_OFFLOAD",
    "KNOWN_TYPES",
    "LOG_ONLY_TYPES",
    "MESSAGE_PROJECTION_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "Clock",
    "EventInput",
    "Listener",
    "MessageProjection",
    "ProjectionContext",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "SurfaceFold",
    "SurfaceOp",
    "SurfaceReplace",
    "SurfaceReplacement",
    "SurfaceView",
    "build_fork_seed",
    "decode_source_seqs",
    "derive_event_message",
    "encode_source_seqs",
    "fold_request_context",
    "fold_request_header",
    "fold_surface",
    "fold_tool_history",
    "interrupted_closers",
    "is_plugin_type",
]

if TYPE_CHECKING:
    from .closers import build_fork_seed, interrupted_closers
    from .requests import fold_request_context, fold_request_header

# Public name -> the submodule defining it, imported by __getattr__ on first use.
_LAZY: dict[str, str] = {
    "build_fork_seed": ".closers",
    "interrupted_closers": ".closers",
    "fold_request_context": ".requests",
    "fold_request_header": ".requests",
}


__getattr__ = lazy_module_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
