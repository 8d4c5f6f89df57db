"""Validate a whole v4 log one event at a time, without keeping the events.

:meth:`Session.from_restore` is the authority on what a valid stored log is, but it keeps
every event. A migration must re-verify a log that may be far larger than memory, so
:class:`StreamCheck` runs the very same restore path (``Session.from_restore`` and its
per-event admission: seq, vocabulary, lifecycle and surface rules, then the seeded-marker
rule at the end) on a session whose event list keeps only a count and the last inherited
``session/end-seed`` marker. No rule is restated here.

Memory is the lifecycle state (one open turn's tool calls) and the surface node index
(an ``int`` per model-visible message), never the events themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from .events import SessionEvent
from .header import SessionHeader
from .projections import MessageProjection, carries_image
from .session import Clock, Session

__all__ = ["StreamCheck", "check_stream"]


class _CountingTail:
    """The event list of a :class:`StreamCheck`: a count and the last inherited marker.

    It offers exactly what the restore path asks of its event list: ``append``, ``len``,
    reverse iteration (to find the last inherited marker) and the last element.
    """

    __slots__ = ("count", "last", "last_inherited")

    def __init__(self) -> None:
        self.count = 0
        self.last: SessionEvent | None = None
        self.last_inherited: SessionEvent | None = None

    def append(self, event: SessionEvent) -> None:
        self.count += 1
        self.last = event
        if event.type == "session/end-seed" and event._facts.inherited:
            self.last_inherited = event

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __reversed__(self) -> Iterator[SessionEvent]:
        if self.last_inherited is not None:
            yield self.last_inherited

    def __getitem__(self, index: int) -> SessionEvent:
        if index == -1 and self.last is not None:
            return self.last
        raise IndexError("a streaming check keeps only the last event")


class StreamCheck(Session):
    """A :class:`Session` that validates like a restore but retains no events.

    Build it with :meth:`Session.from_restore` (or :func:`check_stream`); reading
    ``events`` or deriving messages is not supported, only the counts and header.

    Message projections are validated as a restore validates them. For that it keeps the
    ``user/message`` and ``tool/result`` events that carry an image (the only messages the
    first-party ``image/offload`` definition reads) and the messages projections changed:
    memory grows with the image-bearing messages, not with the log.
    """

    __slots__ = ("_carriers",)

    def __init__(
        self,
        header: SessionHeader,
        clock: Clock | None,
        projections: Iterable[MessageProjection] | None = None,
    ) -> None:
        super().__init__(header, clock, projections)
        tail: Any = _CountingTail()
        self._events = tail
        self._carriers: dict[int, SessionEvent] = {}

    def _commit(self, event: SessionEvent, span: tuple[int, int] | None) -> None:
        super()._commit(event, span)
        kind = event.type
        if kind == "user/message" or kind == "tool/result":
            value = event._value()
            if carries_image(value if kind == "user/message" else value.get("message")):
                self._carriers[event.seq] = event

    def _projection_events(self, staged: Sequence[SessionEvent] = ()) -> Mapping[int, SessionEvent]:
        return MappingProxyType(self._carriers)

    @property
    def events(self) -> tuple[SessionEvent, ...]:
        """Not available: a streaming check keeps no events."""
        raise TypeError("StreamCheck keeps no events; use Session.from_restore to keep them")

    def derive_messages(self) -> list[Any]:
        """Not available: a streaming check keeps no events."""
        raise TypeError("StreamCheck keeps no events; use Session.from_restore to derive them")

    def tool_history(self) -> dict[str, Any]:
        """Not available: a streaming check keeps no events."""
        raise TypeError("StreamCheck keeps no events; use Session.from_restore to fold them")


def check_stream(header: SessionHeader, events: Iterable[SessionEvent]) -> int:
    """Validate ``events`` as a complete stored log under ``header``; return the count.

    Applies exactly the rules of :meth:`Session.from_restore` while holding no events.

    :raises EventValidationError: with the seq of the first invalid event.
    """
    checked = StreamCheck.from_restore(header, events)
    return checked.seq
