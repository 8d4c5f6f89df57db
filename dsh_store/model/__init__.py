"""The pure v4 session model: header, events, validation, surface, projections, closers.

No I/O and no wall clock: time comes from an injected clock (epoch milliseconds).
"""

from __future__ import annotations

from .closers import build_fork_seed, interrupted_closers
from .events import (
    SessionEvent,
    SurfaceOp,
    SurfaceReplace,
    decode_source_seqs,
    encode_source_seqs,
)
from .header import SessionHeader
from .messages import derive_event_message
from .requests import fold_request_context, fold_request_header
from .session import Clock, EventInput, Listener, Session
from .surface import SurfaceFold, SurfaceReplacement, SurfaceView, fold_surface
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
    "KNOWN_TYPES",
    "LOG_ONLY_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "Clock",
    "EventInput",
    "Listener",
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
    "interrupted_closers",
    "is_plugin_type",
]
