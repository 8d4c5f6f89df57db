"""The immutable :class:`SessionEvent`, its envelope rules and its wire form.

An event keeps its canonical line bytes (encoded once) as the snapshot of what was logged;
``data`` is decoded from them on demand, so callers always receive fresh copies and can
never reach the logged value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, NamedTuple, NoReturn

import orjson

from .. import jsonvalue
from ..errors import LosslessJsonError
from ..jsonvalue import MAX_SAFE_INTEGER
from ._checks import fail, is_count, is_text
from .shapes import EventFacts, check_payload
from .vocabulary import KNOWN_TYPES, SURFACE_TYPES, is_plugin_type

__all__ = [
    "SessionEvent",
    "SurfaceOp",
    "SurfaceReplace",
    "decode_source_seqs",
    "encode_source_seqs",
]

_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "ignorable", "sourceEventSeqs", "surfaceOp"}
)
_INT_ONLY: Final = frozenset({int})
_RUN: Final = 3  # runs of at least this many consecutive seqs are written as [start, end]
_STRICT_LINE: Final = orjson.OPT_STRICT_INTEGER | orjson.OPT_APPEND_NEWLINE


class SurfaceReplace(NamedTuple):
    """``{"op": "replace", "startSeq": s, "endSeq": e}``: replace surface nodes s..e.

    The endpoints are event seqs of current surface nodes; their relative order is surface
    order, not numeric order.
    """

    start_seq: int
    end_seq: int

    def to_json(self) -> dict[str, Any]:
        """The wire object, keys in DSH order."""
        return {"op": "replace", "startSeq": self.start_seq, "endSeq": self.end_seq}


SurfaceOp = Literal["append"] | SurfaceReplace
"""How a surface event joins the ordered surface."""


def _fail(rule: str, message: str, seq: int | None, event_type: str | None) -> NoReturn:
    fail(rule, message, seq=seq, event_type=event_type)


def parse_surface_op(value: Any, seq: int | None, event_type: str | None) -> SurfaceOp | None:
    """Admit ``"append"``, a :class:`SurfaceReplace` or the exact wire replace object."""
    if value is None:
        return None
    if type(value) is str and value == "append":
        return "append"
    if type(value) is SurfaceReplace:
        if not (is_count(value.start_seq) and is_count(value.end_seq)):
            _fail("surface-op-shape", "replace endpoints must be seqs", seq, event_type)
        return value
    if (
        isinstance(value, Mapping)
        and set(value) == {"op", "startSeq", "endSeq"}
        and value["op"] == "replace"
        and is_count(value["startSeq"])
        and is_count(value["endSeq"])
    ):
        return SurfaceReplace(value["startSeq"], value["endSeq"])
    _fail(
        "surface-op-shape",
        'surfaceOp must be "append" or exactly {op: "replace", startSeq, endSeq} with seq '
        f"endpoints, got {value!r:.80}",
        seq,
        event_type,
    )


def normalize_source_seqs(
    value: Any, seq: int | None, event_type: str | None
) -> tuple[int, ...] | None:
    """Admit a plain list or tuple of seqs (the append side; no range pairs)."""
    if value is None:
        return None
    # All exact ints, then the range by min/max: C loops, no call per member.
    if (
        type(value) not in (list, tuple)
        or not _INT_ONLY.issuperset(map(type, value))
        or (value and not (min(value) >= 0 and max(value) <= MAX_SAFE_INTEGER))
    ):
        _fail(
            "source-seqs-shape",
            f"sourceEventSeqs must be a list of seqs, got {value!r:.80}",
            seq,
            event_type,
        )
    return tuple(value)


def decode_source_seqs(
    value: Any, seq: int | None = None, event_type: str | None = None
) -> tuple[int, ...]:
    """Read the wire form: plain seqs mixed with inclusive ``[start, end]`` pairs."""
    if type(value) is not list:
        _fail(
            "source-seqs-shape",
            f"sourceEventSeqs must be an array, got {value!r:.80}",
            seq,
            event_type,
        )
    out: list[int] = []
    ranged = False
    for item in value:
        if is_count(item):
            out.append(item)
            continue
        if (
            type(item) is list
            and len(item) == 2
            and is_count(item[0])
            and is_count(item[1])
            and item[0] <= item[1]
        ):
            ranged = True
            out.extend(range(item[0], item[1] + 1))
            continue
        _fail(
            "source-seqs-shape",
            f"sourceEventSeqs members must be seqs or [start, end] pairs, got {item!r:.80}",
            seq,
            event_type,
        )
    if ranged and any(b <= a for a, b in itertools.pairwise(out)):
        _fail(
            "source-seqs-range",
            "sourceEventSeqs with [start, end] pairs must expand to a strictly increasing list",
            seq,
            event_type,
        )
    return tuple(out)


def encode_source_seqs(seqs: Iterable[int]) -> list[int | list[int]]:
    """The wire form: in a strictly increasing list, runs of 3+ consecutive seqs become pairs.

    A list that is not strictly increasing is written verbatim.
    """
    values = list(seqs)
    if len(values) < _RUN:  # no run to fold; verbatim either way
        return list(values)
    if any(b <= a for a, b in itertools.pairwise(values)):
        return list(values)
    out: list[int | list[int]] = []
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[end] + 1:
            end += 1
        if end - start + 1 >= _RUN:
            out.append([values[start], values[end]])
        else:
            out.extend(values[start : end + 1])
        start = end + 1
    return out


def check_envelope(
    event_type: str,
    seq: int,
    surface_op: SurfaceOp | None,
    sources: tuple[int, ...] | None,
    ignorable: bool,
    *,
    opaque: bool,
) -> None:
    """Envelope rules that need nothing but the event itself.

    ``opaque`` marks a type this reader does not know, whose surface fields are carried
    unvalidated (restore of an ignorable unknown event).
    """
    if sources is None and (
        (surface_op is None and event_type in KNOWN_TYPES and event_type not in SURFACE_TYPES)
        or (surface_op == "append" and event_type in SURFACE_TYPES)
    ):
        return  # the common shapes: nothing else to check
    if is_plugin_type(event_type) and not ignorable:
        _fail(
            "plugin-not-ignorable",
            "plugin: records must be marked ignorable (readers without the plugin skip them)",
            seq,
            event_type,
        )
    if event_type in SURFACE_TYPES:
        if surface_op is None:
            _fail(
                "surface-op-required",
                'a message-producing event needs surfaceOp ("append" or a replace)',
                seq,
                event_type,
            )
        if sources is not None and event_type == "assistant/message":
            _fail(
                "assistant-source-seqs",
                "assistant/message cannot cite sourceEventSeqs (its stream is its evidence)",
                seq,
                event_type,
            )
    elif not opaque:
        if surface_op is not None:
            _fail(
                "surface-op-forbidden",
                "only message-producing events may carry surfaceOp",
                seq,
                event_type,
            )
        if sources is not None:
            _fail(
                "source-seqs-forbidden",
                "only message-producing events may carry sourceEventSeqs",
                seq,
                event_type,
            )
    if opaque:
        return
    if sources is not None:
        if not sources:
            _fail(
                "source-seqs-empty",
                "sourceEventSeqs must be omitted or list at least one earlier seq",
                seq,
                event_type,
            )
        if len(set(sources)) != len(sources):
            _fail("source-seqs-duplicate", "sourceEventSeqs lists a seq twice", seq, event_type)
        late = [cited for cited in sources if cited >= seq]
        if late:
            _fail(
                "source-seqs-not-earlier",
                f"sourceEventSeqs cites seq {late[0]}, which is not earlier than this event",
                seq,
                event_type,
            )
    if type(surface_op) is SurfaceReplace and max(surface_op.start_seq, surface_op.end_seq) >= seq:
        _fail(
            "replace-not-earlier",
            f"replace endpoints {surface_op.start_seq}..{surface_op.end_seq} must be earlier "
            "than this event",
            seq,
            event_type,
        )


class _EventSlots:
    # The storage of an event, without the immutability guard: SessionEvent adds the
    # guard, _EventDraft (the same layout) is filled with plain attribute stores.
    __slots__ = (
        "_data",
        "_facts",
        "_line",
        "ignorable",
        "seq",
        "source_event_seqs",
        "surface_op",
        "time",
        "type",
    )

    type: str
    seq: int
    time: int
    ignorable: bool
    surface_op: SurfaceOp | None
    source_event_seqs: tuple[int, ...] | None
    _line: bytes
    _facts: EventFacts
    _data: Any


class SessionEvent(_EventSlots):
    """One immutable log entry: ``type, seq, time, data`` plus optional envelope fields.

    ``data`` returns a fresh copy of the logged payload on every access. ``line`` is the
    canonical JSONL row (with its trailing newline), encoded once.
    """

    __slots__ = ()  # the slots and their types are _EventSlots'

    def __init__(
        self,
        type: str,
        seq: int,
        time: int,
        data: Any,
        *,
        ignorable: bool = False,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Iterable[int] | None = None,
    ) -> None:
        """Build and validate a standalone event (envelope, payload and lossless JSON).

        Lifecycle and surface rules need the rest of the log; :class:`Session` checks them.
        """
        if not is_text(type):
            _fail("event-type", f"type must be a non-empty string, got {type!r:.80}", None, None)
        if not is_count(seq):
            _fail("event-seq", f"seq must be a non-negative safe integer, got {seq!r}", None, type)
        if not is_count(time):
            _fail(
                "event-time", f"time must be a non-negative safe integer, got {time!r}", seq, type
            )
        if ignorable is not True and ignorable is not False:
            _fail("ignorable-not-true", "ignorable must be a bool", seq, type)
        op = parse_surface_op(surface_op, seq, type)
        # Any iterable of seqs is accepted; anything else (an int, a str, a mapping) is left
        # as it is for normalize_source_seqs to refuse with a typed error.
        given: Any = source_event_seqs
        if isinstance(given, Iterable) and not isinstance(given, str | bytes | Mapping):
            given = list(given)
        sources = normalize_source_seqs(given, seq, type)
        check_envelope(type, seq, op, sources, ignorable, opaque=type not in KNOWN_TYPES)
        facts = check_payload(type, data, seq)
        line = encode_line(type, seq, time, data, ignorable, sources, op)
        _init(self, type, seq, time, ignorable, op, sources, line, facts)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, line: bytes | None = None) -> SessionEvent:
        """Build an event from its decoded wire object (restore side).

        ``sourceEventSeqs`` is read in plain and ``[start, end]`` range form. When ``line`` is
        given it must be the bytes ``obj`` was decoded from; they are kept as the event's
        line as they are (no copy to add a missing newline: :attr:`line` adds it when
        asked) and make the lossless check cheap.

        :raises EventValidationError: on a bad envelope or core payload.
        :raises LosslessJsonError: when the payload is not lossless JSON.
        """
        if type(obj) is dict and line is not None:
            event = _from_plain_row(obj, line)
            if event is not None:
                return event
        if type(obj) is not dict and not isinstance(obj, Mapping):  # the ABC check is slow
            _fail(
                "event-not-object", f"an event must be a JSON object, got {obj!r:.80}", None, None
            )
        event_type: Any = obj.get("type")
        seq: Any = obj.get("seq")
        if not is_text(event_type):
            _fail(
                "event-type",
                f"type must be a non-empty string, got {event_type!r:.80}",
                seq if is_count(seq) else None,
                None,
            )
        if not is_count(seq):
            _fail(
                "event-seq",
                f"seq must be a non-negative safe integer, got {seq!r:.40}",
                None,
                event_type,
            )
        if not _ENVELOPE_KEYS.issuperset(obj):
            unknown = [key for key in obj if key not in _ENVELOPE_KEYS]
            _fail(
                "envelope-unknown-key", f"unknown envelope key {unknown[0]!r:.60}", seq, event_type
            )
        time: Any = obj.get("time")
        if not is_count(time):
            _fail(
                "event-time",
                f"time must be a non-negative safe integer, got {time!r:.40}",
                seq,
                event_type,
            )
        if "data" not in obj:
            _fail("event-data-missing", "the event has no data", seq, event_type)
        ignorable = "ignorable" in obj
        if ignorable and obj["ignorable"] is not True:
            _fail(
                "ignorable-not-true", "ignorable must be exactly true when present", seq, event_type
            )
        sources = (
            decode_source_seqs(obj["sourceEventSeqs"], seq, event_type)
            if "sourceEventSeqs" in obj
            else None
        )
        op = parse_surface_op(obj.get("surfaceOp"), seq, event_type)
        if "surfaceOp" in obj and obj["surfaceOp"] is None:
            _fail("surface-op-shape", "surfaceOp must be omitted, not null", seq, event_type)
        check_envelope(
            event_type, seq, op, sources, ignorable, opaque=event_type not in KNOWN_TYPES
        )
        data = obj["data"]
        facts = check_payload(event_type, data, seq)
        if line is None:
            # At about its own size: an event may be kept for a session's life
            # (docs/migrations.md, "Memory").
            line = encode_line(event_type, seq, time, data, ignorable, sources, op)
        else:
            jsonvalue.check_loaded(obj, event_type=event_type, path="", raw=line)
        event = cls.__new__(cls)
        _init(event, event_type, seq, time, ignorable, op, sources, line, facts)
        return event

    @property
    def data(self) -> Any:
        """A fresh copy of the logged payload."""
        return orjson.loads(self._line)["data"]

    @property
    def line(self) -> bytes:
        """The canonical JSONL row, including the trailing newline."""
        line = self._line
        if line[-1:] == b"\n":
            return line
        # A line read from a log is kept as read, without its newline: adding it at
        # restore would copy every line once more (docs/format.md, memory).
        return line + b"\n"

    def to_json(self) -> dict[str, Any]:
        """A fresh wire object; ``sourceEventSeqs`` as a plain list (no range pairs)."""
        wire: dict[str, Any] = orjson.loads(self._line)
        if self.source_event_seqs is not None:
            wire["sourceEventSeqs"] = list(self.source_event_seqs)
        return wire

    def _value(self) -> Any:
        # Private decoded payload for internal folds; never handed to callers.
        if self._data is _UNSET:
            _SET_DATA(self, orjson.loads(self._line)["data"])
        return self._data

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SessionEvent is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"SessionEvent is immutable; cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionEvent):
            return NotImplemented
        mine, theirs = self._line, other._line
        if len(mine) == len(theirs):
            return mine == theirs
        return self.line == other.line  # one of them kept without its newline

    def __hash__(self) -> int:
        return hash(self.line)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_from_line, (self.line,))

    def __repr__(self) -> str:
        return f"SessionEvent(type={self.type!r}, seq={self.seq}, time={self.time})"


_UNSET: Final = object()


def _from_plain_row(obj: dict[str, Any], line: bytes) -> SessionEvent | None:
    """:meth:`SessionEvent.from_json` of a row in one of the three common envelope shapes,
    or None for the general path to judge (and name what it refuses).

    The shapes are exactly ``type, seq, time, data`` of a known type that produces no
    message; those four plus ``surfaceOp: "append"`` of a message-producing type; and those
    five plus ``sourceEventSeqs`` of plain, distinct, earlier seqs (no range pair) of a
    message-producing type other than ``assistant/message``: what :func:`check_envelope`
    accepts on sight. Everything else the general path checks is exact here too: safe
    integers, the payload (:func:`check_payload`), and lossless JSON as read
    (:func:`jsonvalue.loaded_is_lossless`; any other outcome goes to
    :func:`jsonvalue.check_loaded`, which names the problem or accepts).
    """
    event_type = obj.get("type")
    seq = obj.get("seq")
    time = obj.get("time")
    size = len(obj)
    if not (
        type(event_type) is str
        and type(seq) is int
        and type(time) is int
        and 0 <= seq <= MAX_SAFE_INTEGER
        and 0 <= time <= MAX_SAFE_INTEGER
        and "data" in obj
        and len(line) < jsonvalue.LARGE_LINE_BYTES
    ):
        return None
    sources: tuple[int, ...] | None = None
    if size == 4 and event_type in _PLAIN_TYPES:
        op: SurfaceOp | None = None
    elif (
        event_type in SURFACE_TYPES
        and type(surface_op := obj.get("surfaceOp")) is str
        and surface_op == "append"
    ):
        op = "append"
        if size == 6:
            # Cited seqs as plain members only (no range pair), each earlier, none twice.
            cited = obj.get("sourceEventSeqs")
            if not (
                type(cited) is list
                and cited
                and event_type != "assistant/message"
                and _INT_ONLY.issuperset(map(type, cited))
                and min(cited) >= 0
                and max(cited) < seq
                and len(set(cited)) == len(cited)
            ):
                return None
            sources = tuple(cited)
        elif size != 5:
            return None
    else:
        return None
    facts = check_payload(event_type, obj["data"], seq)
    if not _loaded_is_lossless(obj, line):
        jsonvalue.check_loaded(obj, event_type=event_type, path="", raw=line)
    return make_event(event_type, seq, time, line, False, op, sources, facts)


_PLAIN_TYPES: Final = KNOWN_TYPES - SURFACE_TYPES
_loaded_is_lossless: Final = jsonvalue.loaded_is_lossless


def _from_line(line: bytes) -> SessionEvent:
    return SessionEvent.from_json(orjson.loads(line), line=line)


class _EventDraft(_EventSlots):
    # An event being built: plain (fast) slot stores, then its class becomes SessionEvent.
    __slots__ = ()


def _slot_setter(name: str) -> Any:
    # The slot descriptor's own __set__ bypasses SessionEvent.__setattr__ (which refuses).
    return _EventSlots.__dict__[name].__set__


_SET_TYPE: Final = _slot_setter("type")
_SET_SEQ: Final = _slot_setter("seq")
_SET_TIME: Final = _slot_setter("time")
_SET_IGNORABLE: Final = _slot_setter("ignorable")
_SET_OP: Final = _slot_setter("surface_op")
_SET_SOURCES: Final = _slot_setter("source_event_seqs")
_SET_LINE: Final = _slot_setter("_line")
_SET_FACTS: Final = _slot_setter("_facts")
_SET_DATA: Final = _slot_setter("_data")


def _init(
    event: SessionEvent,
    event_type: str,
    seq: int,
    time: int,
    ignorable: bool,
    op: SurfaceOp | None,
    sources: tuple[int, ...] | None,
    line: bytes,
    facts: EventFacts,
) -> None:
    _SET_TYPE(event, event_type)
    _SET_SEQ(event, seq)
    _SET_TIME(event, time)
    _SET_IGNORABLE(event, ignorable)
    _SET_OP(event, op)
    _SET_SOURCES(event, sources)
    _SET_LINE(event, line)
    _SET_FACTS(event, facts)
    _SET_DATA(event, _UNSET)


def encode_line(
    event_type: str,
    seq: int,
    time: int,
    data: Any,
    ignorable: bool,
    sources: tuple[int, ...] | None,
    op: SurfaceOp | None,
    *,
    prescreened: bool = False,
) -> bytes:
    """Encode the envelope once, keys in canonical order, range pairs applied; the line
    holds about its own size (:func:`jsonvalue.encode_row`), so an event keeps it as is.

    ``prescreened`` says the caller has proven every value of the envelope an exact ``str``,
    ``int`` or ``bool`` (a payload of :data:`~.shapes.PLAIN_PAYLOAD_SIZES`), so the strict
    encoder alone decides; on any refusal the full lossless encoder names the problem.
    Otherwise only ``data`` is type-screened: every caller has checked the other envelope
    fields to be exact (``is_text``, ``is_count``, a bool, a parsed surface op and seqs).
    """
    envelope: dict[str, Any] = {"type": event_type, "seq": seq, "time": time, "data": data}
    if ignorable:
        envelope["ignorable"] = True
    if sources is not None:
        envelope["sourceEventSeqs"] = encode_source_seqs(sources)
    if op is not None:
        envelope["surfaceOp"] = op.to_json() if type(op) is SurfaceReplace else op
    try:
        return jsonvalue.encode_row(
            envelope, data, event_type=event_type, path="", screened=prescreened
        )
    except LosslessJsonError as error:
        raise error.at_seq(seq) from None


def make_event_in_python(
    event_type: str,
    seq: int,
    time: int,
    line: bytes,
    ignorable: bool,
    op: SurfaceOp | None,
    sources: tuple[int, ...] | None,
    facts: EventFacts,
) -> SessionEvent:
    """Wrap already checked and encoded parts (the append fast path)."""
    # Nine slot stores on a draft and one class assignment cost a third of nine calls of
    # the slot descriptors' setters on the guarded class.
    draft = _new_event(_EventDraft)
    draft.type = event_type
    draft.seq = seq
    draft.time = time
    draft.ignorable = ignorable
    draft.surface_op = op
    draft.source_event_seqs = sources
    draft._line = line  # encode_line's: it holds about its own size
    draft._facts = facts
    draft._data = _UNSET
    draft.__class__ = SessionEvent  # type: ignore[assignment]  # same layout, guarded
    return draft  # type: ignore[return-value]  # a SessionEvent now


_new_event: Final = object.__new__

make_event: Callable[
    [str, int, int, bytes, bool, SurfaceOp | None, tuple[int, ...] | None, EventFacts],
    SessionEvent,
]
"""Wrap already checked and encoded parts (the append fast path): in C where the extension
was compiled (one allocation, the slots filled in place), else :func:`make_event_in_python`."""
try:
    from .._jsonscreen import configure_event, new_event
except ImportError:  # installed without a C compiler
    make_event = make_event_in_python
else:
    configure_event(
        SessionEvent,
        tuple(
            _EventSlots.__dict__[name]
            for name in (
                "type",
                "seq",
                "time",
                "_line",
                "ignorable",
                "surface_op",
                "source_event_seqs",
                "_facts",
                "_data",
            )
        ),
        _UNSET,
    )
    make_event = new_event
