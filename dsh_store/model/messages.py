"""Projection of surface events into the messages the model sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .events import SessionEvent

__all__ = ["derive_event_message", "project"]


def project(event: SessionEvent) -> Any | None:
    """The message ``event`` projects to, sharing the event's private decoded value.

    Internal: callers get copies through :func:`derive_event_message`.
    """
    kind = event.type
    if kind == "user/message":
        return event._value()
    if kind in ("system/message", "developer/message", "assistant/message", "tool/result"):
        # Empty assistant messages (a cut-off step that only holds its stream) and empty
        # system nodes (dormant, or "no system prompt" at the head) project to nothing.
        if not event._facts.projects:
            return None
        return event._value()["message"]
    return None


def derive_event_message(
    event: SessionEvent, projected_messages: Mapping[int, Any] | None = None
) -> Any | None:
    """A fresh copy of the message ``event`` projects to, or ``None``.

    ``user/message`` projects its payload; ``system/message``, ``developer/message``,
    ``assistant/message`` and ``tool/result`` project ``data.message``. Everything else
    (turn/step brackets, attempts, requests, log-only and plugin records) projects nothing.
    With ``projected_messages`` (a :class:`~dsh_store.model.surface.SurfaceFold`'s), a
    message changed by a message projection is returned as changed.
    """
    message = project(event)
    if message is None:
        return None
    if projected_messages is not None and event.seq in projected_messages:
        message = projected_messages[event.seq]
    return orjson.loads(orjson.dumps(message))
