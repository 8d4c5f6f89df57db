"""Folds of the request state: the latest ``request/header`` and ``request/context``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .events import SessionEvent

__all__ = ["fold_request_context", "fold_request_header"]


def _latest(events: Iterable[SessionEvent], event_type: str) -> SessionEvent | None:
    latest = None
    for event in events:
        if event.type == event_type:
            latest = event
    return latest


def fold_request_header(events: Iterable[SessionEvent]) -> dict[str, Any] | None:
    """The request header in force after ``events``: a fresh copy of the latest
    ``request/header`` snapshot's ``data.header``, or ``None`` before the first one."""
    latest = _latest(events, "request/header")
    return None if latest is None else latest.data["header"]


def fold_request_context(events: Iterable[SessionEvent]) -> dict[str, Any] | None:
    """The latest route metadata (a fresh copy of the last ``request/context`` payload)."""
    latest = _latest(events, "request/context")
    return None if latest is None else latest.data
