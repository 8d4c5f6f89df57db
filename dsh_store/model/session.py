"""The live v4 :class:`Session`: an append-only, validated event log."""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NamedTuple, NoReturn

import orjson

from .._typed_append import typed_append
from ..jsonvalue import MAX_SAFE_INTEGER
from . import shapes
from ._checks import fail, is_count
from .events import (
    SessionEvent,
    SurfaceOp,
    SurfaceReplace,
    check_envelope,
    encode_line,
    make_event,
    normalize_source_seqs,
    parse_surface_op,
)
from .header import SessionHeader
from .lifecycle import LifecycleState
from .messages import project
from .projections import (
    MessageProjection,
    ProjectionContext,
    projection_registry,
    projection_types,
    run_projection,
)
from .shapes import PLAIN_PAYLOAD_SIZES, EventFacts, check_payload
from .surface import SurfaceManager, SurfaceView
from .tools import ToolHistoryFold
from .vocabulary import KNOWN_TYPES, SURFACE_TYPES

__all__ = ["Clock", "EventInput", "Listener", "Session"]


Clock = Callable[[], int]
"""Returns the current time as integer epoch milliseconds."""

Listener = Callable[[SessionEvent], None]
"""Called once per committed event, after the whole append committed."""


class EventInput(NamedTuple):
    """One proposed event for :meth:`Session.append_many`."""

    type: str
    data: Any
    surface_op: SurfaceOp | Mapping[str, Any] | None = None
    source_event_seqs: Sequence[int] | None = None
    ignorable: bool = False


def _wall_clock() -> int:
    return int(_time.time() * 1000)


_Candidate = tuple[SurfaceOp | None, tuple[int, ...] | None, EventFacts, tuple[int, int] | None]
"""A checked proposal: surface op, source seqs, payload facts and the replaced span."""

# ``append`` takes a parameter named ``type``; the hot path needs the builtin too.
_type_of = type
# Known types that carry neither surfaceOp nor sourceEventSeqs in the common shape.
_NON_SURFACE_KNOWN: Final = KNOWN_TYPES - SURFACE_TYPES
# Types whose common shape is surfaceOp "append" without sourceEventSeqs.
_APPENDED_SURFACE: Final = SURFACE_TYPES
# Types whose common shape may also cite sourceEventSeqs.
_CITING_SURFACE: Final = SURFACE_TYPES - {"assistant/message"}
_INT_ONLY: Final = frozenset({int})


class _SeqIndex(Mapping[int, SessionEvent]):
    """Events by seq over the log (and a batch's staged events), without copying it."""

    __slots__ = ("_log", "_staged")

    def __init__(self, log: Sequence[SessionEvent], staged: Sequence[SessionEvent]) -> None:
        self._log = log
        self._staged = staged

    def __getitem__(self, seq: int) -> SessionEvent:
        count = len(self._log)
        if type(seq) is int and 0 <= seq < count:
            return self._log[seq]
        if type(seq) is int and 0 <= seq - count < len(self._staged):
            return self._staged[seq - count]
        raise KeyError(seq)

    def __len__(self) -> int:
        return len(self._log) + len(self._staged)

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self)))


def _clock_invalid(stamp: object, seq: int, event_type: str | None) -> NoReturn:
    fail(
        "clock-invalid",
        f"the clock must return integer epoch milliseconds, got {stamp!r}",
        seq=seq,
        event_type=event_type,
    )


class Session:
    """An append-only log of validated :class:`SessionEvent` values for one session.

    Build one with :meth:`create` (new or seeded) or :meth:`from_restore` (stored log).
    Every append is validated against the envelope, payload, lifecycle and surface rules
    before anything changes; the committed event's line bytes are its immutable snapshot.
    """

    __slots__ = (
        "_changed_messages",
        "_clock",
        "_context_seq",
        "_events",
        "_events_view",
        "_header",
        "_header_seq",
        "_lifecycle",
        "_listeners",
        "_projected",
        "_projected_generation",
        "_projected_nodes",
        "_projection_kinds",
        "_projections",
        "_publishing",
        "_surface",
        "_tool_history",
        "first_live_seq",
        "inherited_event_count",
    )

    def __init__(
        self,
        header: SessionHeader,
        clock: Clock | None,
        projections: Iterable[MessageProjection] | None = None,
    ) -> None:
        """Internal: use :meth:`create` or :meth:`from_restore`."""
        if type(header) is not SessionHeader:
            fail("session-header", "header must be a SessionHeader", seq=None, event_type=None)
        self._projections = projection_registry(projections)
        self._projection_kinds = projection_types(self._projections)
        # Messages changed by message projections, by original seq (a replaced node's
        # entry stays: it is simply no longer on the surface).
        self._changed_messages: dict[int, Any] = {}
        self._tool_history: ToolHistoryFold | None = None
        self._header = header
        self._clock: Clock = clock if clock is not None else _wall_clock
        self._events: list[SessionEvent] = []
        self._events_view: tuple[SessionEvent, ...] | None = ()
        self._lifecycle = LifecycleState()
        self._surface = SurfaceManager()
        self._listeners: list[Listener] = []
        self._publishing = False
        self._header_seq: int | None = None
        self._context_seq: int | None = None
        self._projected: list[Any] = []
        self._projected_nodes = 0
        self._projected_generation = 0
        self.inherited_event_count = 0
        self.first_live_seq = 0

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        id: str,
        *,
        seed: Iterable[SessionEvent] | None = None,
        header: SessionHeader | None = None,
        inherited_event_count: int = 0,
        clock: Clock | None = None,
        projections: Iterable[MessageProjection] | None = None,
    ) -> Session:
        """A new session, optionally seeded with replayed or forked history.

        ``projections`` are the interpreters of plugin-owned message changes
        (:mod:`dsh_store.model.projections`); None installs the first-party catalog
        (``image/offload``). A seed event that needs a missing one is refused.

        A header with ``is_seeded=True`` marks a fork child: its seed either already holds
        the ``session/end-seed {"inherited": true}`` marker at ``inherited_event_count``
        (as :func:`build_fork_seed` produces) or is exactly the inherited prefix, and the
        marker is added at the cut. A replay seed (not seeded) gets an ordinary
        ``session/end-seed {}`` unless it already ends in a marker. ``first_live_seq`` is the
        seed length before any such marker.

        :raises EventValidationError: on any invalid seed event or inconsistent fork facts.
        """
        tick = clock if clock is not None else _wall_clock
        events = list(seed) if seed is not None else []
        if not is_count(inherited_event_count):
            fail(
                "inherited-count",
                f"inherited_event_count must be a non-negative integer, got "
                f"{inherited_event_count!r}",
                seq=None,
                event_type=None,
            )
        if header is None:
            tagged = any(type(e) is SessionEvent and e._facts.inherited for e in events)
            header = SessionHeader(
                id=id, created_at=tick(), is_seeded=tagged or inherited_event_count > 0
            )
        elif type(header) is not SessionHeader:
            fail(
                "session-header",
                f"header must be a SessionHeader, got {type(header).__name__}; build one with "
                "SessionHeader(...) or SessionHeader.from_json(row)",
                seq=None,
                event_type=None,
            )
        if header.id != id:
            fail(
                "header-id-mismatch",
                f"header id {header.id!r} differs from session id {id!r}",
                seq=None,
                event_type=None,
            )
        session = cls(header, tick, projections)
        for event in events:
            session._admit(event, refuse_unknown=False)
        cut = session._last_inherited_marker()
        count = len(events)
        if header.is_seeded:
            if cut is None:
                if inherited_event_count != count:
                    fail(
                        "inherited-count",
                        f"a fork seed without its marker must be exactly the inherited prefix "
                        f"({inherited_event_count} events), got {count}",
                        seq=None,
                        event_type=None,
                    )
                stamp = events[-1].time if events else tick()
                session._append_marker({"inherited": True}, stamp)
                cut = count
            elif cut != inherited_event_count:
                fail(
                    "inherited-count",
                    f"inherited_event_count is {inherited_event_count}, but the seed's "
                    f"inherited marker is at seq {cut}",
                    seq=None,
                    event_type=None,
                )
            session.inherited_event_count = cut
        else:
            if cut is not None or inherited_event_count:
                fail(
                    "seeded-marker-mismatch",
                    "the header is not seeded, but the seed has an inherited marker or "
                    "inherited_event_count is set; use a header with is_seeded=True",
                    seq=cut,
                    event_type=None,
                )
            if events and events[-1].type != "session/end-seed":
                session._append_marker({}, events[-1].time)
        session.first_live_seq = count
        return session

    @classmethod
    def from_restore(
        cls,
        header: SessionHeader,
        events: Iterable[SessionEvent],
        *,
        resume: bool = False,
        clock: Clock | None = None,
        projections: Iterable[MessageProjection] | None = None,
    ) -> Session:
        """Rebuild a session from its stored header and events.

        ``projections`` as for :meth:`create`: a stored event whose message projection has
        no interpreter is refused (rule ``projection-missing``, with its seq and type), as
        is one whose decision the interpreter rejects.

        Restore rules apply: an unknown type is refused unless ``ignorable`` (then it is
        kept opaque). No crash closers are added (see :func:`interrupted_closers`). With
        ``resume=True`` a ``session/end-seed {}`` marker is appended unless the log already
        ends in a marker. ``inherited_event_count`` is the seq of the last
        ``{"inherited": true}`` marker, which must exist exactly when the header is seeded.

        :raises EventValidationError: with the seq of the first invalid event.
        """
        session = cls(header, clock, projections)
        session._admit_restored(events)
        cut = session._last_inherited_marker()
        if header.is_seeded != (cut is not None):
            fail(
                "seeded-marker-mismatch",
                "header isSeeded is true but no session/end-seed {inherited: true} marker exists"
                if header.is_seeded
                else "an inherited session/end-seed marker exists but header isSeeded is false",
                seq=cut,
                event_type="session/end-seed" if cut is not None else None,
            )
        session.inherited_event_count = cut or 0
        session.first_live_seq = len(session._events)
        if resume and not (session._events and session._events[-1].type == "session/end-seed"):
            session._append_marker({}, session._now(len(session._events), "session/end-seed"))
        return session

    def _last_inherited_marker(self) -> int | None:
        for event in reversed(self._events):
            if event.type == "session/end-seed" and event._facts.inherited:
                return event.seq
        return None

    def _append_marker(self, data: dict[str, Any], stamp: int) -> None:
        seq = len(self._events)
        self._admit(SessionEvent("session/end-seed", seq, stamp, data), refuse_unknown=True)

    def _admit_restored(self, events: Iterable[SessionEvent]) -> None:
        """:meth:`_admit` each stored event (an unknown type refused unless ignorable).

        An event of a known type that no projection interprets and whose surface op is
        no replace is checked and committed inline, as :meth:`_admit` and :meth:`_commit`
        would (one call per event less in a restore); every other event takes
        :meth:`_admit` itself, and so does every event of a subclass with its own commit.
        """
        if type(self)._commit is not Session._commit:
            for event in events:
                self._admit(event, refuse_unknown=True)
            return
        committed = self._events
        append = committed.append
        lifecycle = self._lifecycle
        check = lifecycle.check
        apply = lifecycle.apply
        surface_apply = self._surface.apply
        interpreted = self._projection_kinds
        self._events_view = None
        for event in events:
            seq = len(committed)
            kind = event.type if _type_of(event) is SessionEvent else None
            if (
                kind in KNOWN_TYPES
                and event.seq == seq
                and kind not in interpreted
                and _type_of(event.surface_op) is not SurfaceReplace
            ):
                facts = event._facts
                check(kind, seq, facts)
                append(event)
                apply(kind, seq, facts)
                if kind in SURFACE_TYPES:
                    surface_apply(kind, seq, None)
                elif kind == "request/header":
                    self._header_seq = seq
                elif kind == "request/context":
                    self._context_seq = seq
                continue
            self._admit(event, refuse_unknown=True)

    def _admit(self, event: SessionEvent, *, refuse_unknown: bool) -> None:
        """Validate a fully formed history event at the end of the log and commit it."""
        seq = len(self._events)
        if type(event) is not SessionEvent:
            fail(
                "not-an-event",
                f"history must hold SessionEvent values, got {type(event).__name__}",
                seq=seq,
                event_type=None,
            )
        if event.seq != seq:
            fail(
                "seq-not-contiguous",
                f"expected seq {seq} (seq equals the event's index), got {event.seq}",
                seq=event.seq,
                event_type=event.type,
            )
        if event.type in self._projections and event.type not in KNOWN_TYPES:
            # A plugin type with a registered interpreter is interpreted, not opaque.
            changed = self._project(event, self._surface, self._changed_messages)
            self._commit(event, None)
            self._apply_changes(changed, self._surface, self._changed_messages)
            return
        if event.type not in KNOWN_TYPES:
            if refuse_unknown and not event.ignorable:
                fail(
                    "unknown-type",
                    "this event type is unknown to this reader and not marked ignorable; "
                    "upgrade dsh-store to read this log",
                    seq=seq,
                    event_type=event.type,
                )
            self._commit(event, None)
            return
        self._lifecycle.check(event.type, seq, event._facts)
        span = (  # surface.check has nothing to say about any other op
            self._surface.check(event.type, seq, event.surface_op, event.source_event_seqs)
            if _type_of(event.surface_op) is SurfaceReplace
            else None
        )
        if event.type in self._projection_kinds:
            changed = self._project(event, self._surface, self._changed_messages)
            self._commit(event, span)
            self._apply_changes(changed, self._surface, self._changed_messages)
            return
        self._commit(event, span)

    def _commit(self, event: SessionEvent, span: tuple[int, int] | None) -> None:
        self._events.append(event)
        self._events_view = None
        kind = event.type
        if kind in KNOWN_TYPES:
            self._lifecycle.apply(kind, event.seq, event._facts)
            if kind in SURFACE_TYPES:  # surface.apply ignores every other type
                self._surface.apply(kind, event.seq, span)
            if kind == "request/header":
                self._header_seq = event.seq
            elif kind == "request/context":
                self._context_seq = event.seq

    def _projection_events(self, staged: Sequence[SessionEvent] = ()) -> Mapping[int, SessionEvent]:
        """Committed (and, in a batch, staged) events by seq, for a projection's context."""
        return _SeqIndex(self._events, staged)

    def _project(
        self,
        event: SessionEvent,
        surface: SurfaceManager,
        changed: dict[int, Any],
        staged: Sequence[SessionEvent] = (),
    ) -> dict[int, Any]:
        """Run the message projection ``event`` needs against this (staged) history."""
        context = ProjectionContext(
            tuple(surface.nodes),
            surface.node_types(),
            self._projection_events(staged),
            MappingProxyType(changed),
        )
        return run_projection(self._projections, event, context)

    @staticmethod
    def _apply_changes(
        updates: dict[int, Any], surface: SurfaceManager, changed: dict[int, Any]
    ) -> None:
        if updates:
            changed.update(updates)
            surface.content_generation += 1

    def _now(self, seq: int, event_type: str) -> int:
        stamp = self._clock()
        if not is_count(stamp):
            _clock_invalid(stamp, seq, event_type)
        return stamp

    # -- appends --------------------------------------------------------------------------

    @typed_append
    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Validate, stamp (seq, time), encode once and commit one event; notify listeners.

        Unknown types are accepted (a live session never stalls on vocabulary growth).

        :raises EventValidationError: the event breaks a rule; the log is unchanged.
        :raises LosslessJsonError: ``data`` is not lossless JSON; the log is unchanged.
        """
        # The hot path: the same steps as _candidate/_now/_commit, with the calls that
        # the common shapes never need left out.
        if self._publishing:
            self._check_writable()
        events = self._events
        seq = len(events)
        lifecycle = self._lifecycle
        if (
            _type_of(type) is str
            and ignorable is False
            and (
                (
                    source_event_seqs is None
                    and (
                        (surface_op is None and type in _NON_SURFACE_KNOWN)
                        or (
                            _type_of(surface_op) is str
                            and surface_op == "append"
                            and type in _APPENDED_SURFACE
                        )
                    )
                )
                or (
                    # Cited seqs: a list of distinct earlier seqs (normalize_source_seqs and
                    # check_envelope accept it), on a surface type that may cite.
                    _type_of(surface_op) is str
                    and surface_op == "append"
                    and type in _CITING_SURFACE
                    and _type_of(source_event_seqs) is list
                    and source_event_seqs
                    and _INT_ONLY.issuperset(map(_type_of, source_event_seqs))
                    and min(source_event_seqs) >= 0
                    and max(source_event_seqs) < seq
                    and len(set(source_event_seqs)) == len(source_event_seqs)
                )
            )
        ):
            # The common envelopes, which check_envelope accepts on sight: _candidate's
            # steps in its order, without the ones these envelopes never need.
            op: SurfaceOp | None = surface_op
            sources = None if source_event_seqs is None else tuple(source_event_seqs)
            span = None
            compiled = shapes.fast_payload_facts
            facts = compiled(type, data) if compiled is not None else None
            if facts is None:
                facts = check_payload(type, data, seq)
            if facts.inherited:
                self._candidate(seq, type, data, op, None, False, lifecycle, self._surface)
            lifecycle.check(type, seq, facts)
        else:
            op, sources, facts, span = self._candidate(
                seq, type, data, surface_op, source_event_seqs, ignorable, lifecycle, self._surface
            )
        stamp = self._clock()
        if _type_of(stamp) is not int or not 0 <= stamp <= MAX_SAFE_INTEGER:
            _clock_invalid(stamp, seq, type)
        plain_size = PLAIN_PAYLOAD_SIZES.get(type)
        line = encode_line(
            type,
            seq,
            stamp,
            data,
            ignorable,
            sources,
            op,
            prescreened=plain_size is not None and len(data) == plain_size,
        )
        event = make_event(type, seq, stamp, line, ignorable, op, sources, facts)
        changed = None
        if type in self._projection_kinds:
            changed = self._project(event, self._surface, self._changed_messages)
        events.append(event)
        self._events_view = None
        if type in KNOWN_TYPES:
            lifecycle.apply(type, seq, facts)
            if type in SURFACE_TYPES:
                self._surface.apply(type, seq, span)
            elif type == "request/header":
                self._header_seq = seq
            elif type == "request/context":
                self._context_seq = seq
        if changed is not None:
            self._apply_changes(changed, self._surface, self._changed_messages)
        if self._listeners:
            self._publish(tuple(self._listeners), (event,))
        return event

    def append_many(self, inputs: Iterable[EventInput | tuple[Any, ...]]) -> list[SessionEvent]:
        """Append several events atomically: all are validated before any commits.

        Each input is an :class:`EventInput` or a tuple ``(type, data)`` /
        ``(type, data, options)`` where ``options`` maps ``surface_op``,
        ``source_event_seqs`` and ``ignorable``. All events share one timestamp.
        Listeners run after the whole batch committed.
        """
        self._check_writable()
        items = [self._input(item, len(self._events) + index) for index, item in enumerate(inputs)]
        if not items:
            return []
        lifecycle = self._lifecycle.copy()
        surface = self._surface.copy()
        base = len(self._events)
        stamp = self._now(base, items[0].type)
        staged: list[tuple[SessionEvent, tuple[int, int] | None]] = []
        changed: dict[int, Any] | None = None  # a copy once the batch changes a message
        for offset, item in enumerate(items):
            seq = base + offset
            op, sources, facts, span = self._candidate(
                seq,
                item.type,
                item.data,
                item.surface_op,
                item.source_event_seqs,
                item.ignorable,
                lifecycle,
                surface,
            )
            line = encode_line(item.type, seq, stamp, item.data, item.ignorable, sources, op)
            event = make_event(item.type, seq, stamp, line, item.ignorable, op, sources, facts)
            updates = None
            if item.type in self._projection_kinds:
                if changed is None:
                    changed = dict(self._changed_messages)
                updates = self._project(event, surface, changed, [e for e, _ in staged])
            if item.type in KNOWN_TYPES:
                lifecycle.apply(item.type, seq, facts)
                surface.apply(item.type, seq, span)
            if updates is not None and changed is not None:
                self._apply_changes(updates, surface, changed)
            staged.append((event, span))
        listeners = tuple(self._listeners)
        self._lifecycle = lifecycle
        self._surface = surface
        if changed is not None:
            self._changed_messages = changed
        for event, _span in staged:
            # Lifecycle and surface were folded while staging; only record the event.
            self._events.append(event)
            if event.type == "request/header":
                self._header_seq = event.seq
            elif event.type == "request/context":
                self._context_seq = event.seq
        self._events_view = None
        committed = [event for event, _span in staged]
        self._publish(listeners, committed)
        return committed

    @staticmethod
    def _input(item: Any, seq: int) -> EventInput:
        if isinstance(item, EventInput):
            return item
        if type(item) is tuple and len(item) in (2, 3):
            if len(item) == 2:
                return EventInput(item[0], item[1])
            options = item[2]
            if isinstance(options, Mapping) and set(options) <= {
                "surface_op",
                "source_event_seqs",
                "ignorable",
            }:
                return EventInput(item[0], item[1], **options)
        fail(
            "batch-input",
            "each batch input must be an EventInput or (type, data[, options]) with options "
            f"among surface_op, source_event_seqs, ignorable; got {item!r:.80}",
            seq=seq,
            event_type=None,
        )

    def _candidate(
        self,
        seq: int,
        event_type: Any,
        data: Any,
        surface_op: Any,
        source_event_seqs: Any,
        ignorable: Any,
        lifecycle: LifecycleState,
        surface: SurfaceManager,
    ) -> _Candidate:
        if _type_of(event_type) is not str or event_type == "":
            fail(
                "event-type",
                f"type must be a non-empty string, got {event_type!r:.80}",
                seq=seq,
                event_type=None,
            )
        if ignorable is not True and ignorable is not False:
            fail("ignorable-not-true", "ignorable must be a bool", seq=seq, event_type=event_type)
        if surface_op is None:
            op: SurfaceOp | None = None
        elif _type_of(surface_op) is str and surface_op == "append":
            op = "append"  # what parse_surface_op returns for it, without the call
        else:
            op = parse_surface_op(surface_op, seq, event_type)
        sources = (
            None
            if source_event_seqs is None
            else normalize_source_seqs(source_event_seqs, seq, event_type)
        )
        # check_envelope returns at once for these shapes; skip the call.
        if not (
            sources is None
            and (
                (op is None and event_type in _NON_SURFACE_KNOWN)
                or (op == "append" and event_type in _APPENDED_SURFACE)
            )
        ):
            check_envelope(event_type, seq, op, sources, ignorable, opaque=False)
        facts = check_payload(event_type, data, seq)
        if facts.inherited:
            # The inherited marker ends a fork's seed; it is written when the seed is
            # (Session.create(seed=...)), and a restore refuses it anywhere else.
            fail(
                "seeded-marker-mismatch",
                'session/end-seed {"inherited": true} marks the end of a fork\'s seed and is '
                "written with the seed (JsonlStore.fork, Session.create(seed=...)); append "
                "session/end-seed {} to mark a resume",
                seq=seq,
                event_type=event_type,
            )
        span = None
        if event_type in KNOWN_TYPES:
            lifecycle.check(event_type, seq, facts)
            if _type_of(op) is SurfaceReplace:  # surface.check has nothing to say otherwise
                span = surface.check(event_type, seq, op, sources)
        return op, sources, facts, span

    def _check_writable(self) -> None:
        if self._publishing:
            fail(
                "append-reentrant",
                "a listener tried to append while the session was publishing an append; "
                "append after the listener returns",
                seq=len(self._events),
                event_type=None,
            )

    def _publish(self, listeners: tuple[Listener, ...], events: Sequence[SessionEvent]) -> None:
        if not listeners:
            return
        self._publishing = True
        try:
            for event in events:
                for listener in listeners:
                    try:
                        listener(event)
                    except Exception:
                        # The append is committed; a failing observer must not undo it.
                        # (logging is imported only here: it costs ~10 ms at start-up.)
                        import logging

                        logging.getLogger("dsh_store.model").exception(
                            "session %r: listener %r failed on seq %d (%s); the event stays "
                            "committed",
                            self._header.id,
                            listener,
                            event.seq,
                            event.type,
                        )
        finally:
            self._publishing = False

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` after each committed event; returns the unsubscriber.

        Listener exceptions are logged on the ``dsh_store.model`` logger and contained.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            for index, registered in enumerate(self._listeners):
                if registered is listener:
                    del self._listeners[index]
                    return

        return unsubscribe

    # -- reads ----------------------------------------------------------------------------

    @property
    def events(self) -> tuple[SessionEvent, ...]:
        """All events in seq order (an immutable snapshot)."""
        if self._events_view is None:
            self._events_view = tuple(self._events)
        return self._events_view

    @property
    def seq(self) -> int:
        """The next event's seq: always the log length."""
        return len(self._events)

    @property
    def header(self) -> SessionHeader:
        """The immutable session header."""
        return self._header

    @property
    def id(self) -> str:
        """The session id (from the header)."""
        return self._header.id

    @property
    def surface(self) -> SurfaceView:
        """The current surface: node seqs in model-visible order and the replace count."""
        return self._surface.view()

    @property
    def is_balanced(self) -> bool:
        """No turn is open."""
        return self._lifecycle.balanced

    def derive_messages(self) -> list[Any]:
        """The model-visible message history: fresh copies, in surface order.

        The projection cache grows with new surface nodes and is rebuilt after a replace
        or a message projection (``surface.content_generation``). A message changed by a
        message projection (``image/offload``) is derived as changed.
        """
        surface = self._surface
        if surface.content_generation != self._projected_generation:
            self._projected = []
            self._projected_nodes = 0
            self._projected_generation = surface.content_generation
        events = self._events
        changed = self._changed_messages
        for seq in surface.nodes[self._projected_nodes :]:
            message = project(events[seq])
            if message is not None:
                self._projected.append(changed.get(seq, message))
        self._projected_nodes = len(surface.nodes)
        copied: list[Any] = orjson.loads(orjson.dumps(self._projected))
        return copied

    def derive_event_message(self, event: SessionEvent) -> Any | None:
        """The message ``event`` projects to (a fresh copy), or ``None``.

        When ``event`` is this session's event at its seq, committed message projections
        are applied; the logged event itself never changes.
        """
        message = project(event)
        if message is None:
            return None
        seq = event.seq
        if seq in self._changed_messages and self._events[seq].line == event.line:
            message = self._changed_messages[seq]
        return orjson.loads(orjson.dumps(message))

    def tool_history(self) -> dict[str, Any]:
        """The tool history: request-header tools plus ``developer/message`` additions.

        ``{"tools": [...], "updates": [{"messageId", "additions"}]}``, a fresh copy (rules in
        :mod:`dsh_store.model.tools`). The first call folds the whole log, each later call
        only the events appended since.

        :raises EventValidationError: ``tool-addition-undefined`` for a developer message
            adding a tool its ``headerSeq`` header does not declare.
        """
        fold = self._tool_history
        if fold is None:
            fold = self._tool_history = ToolHistoryFold()
        events = self._events
        for seq in range(fold.seen, len(events)):
            fold.apply(events[seq])
        return fold.snapshot()

    def request_header(self) -> dict[str, Any] | None:
        """The latest ``request/header`` snapshot's header (a fresh copy), or ``None``."""
        if self._header_seq is None:
            return None
        header: dict[str, Any] = self._events[self._header_seq].data["header"]
        return header

    def request_context(self) -> dict[str, Any] | None:
        """The latest ``request/context`` payload (a fresh copy), or ``None``."""
        if self._context_seq is None:
            return None
        context: dict[str, Any] = self._events[self._context_seq].data
        return context

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, events={len(self._events)})"
