"""The lenient opt-in of the chain: what it changes, and the note that records it.

By default every edge refuses what it cannot carry faithfully. Two refusals concern logs
that DSH's own format-0 reader (0.1.0-rc.8) loads; with ``lenient`` the chain migrates
them instead, and records every deviation:

* ``system-head-before-first-step``: a surface event logged inside a turn before the
  turn's first ``step/start`` (the order of DSH's own format-0 fixtures). The 2->3 edge
  inserts the empty system head just before it, naming the open turn and the step that
  opens next, so the head is surface node 0 as DSH's request had the prompt first; the
  first ``request/header`` prompt then replaces it exactly as in every migrated log.
* ``ignorable-unknown-event``: an event of a type no format knows, marked
  ``ignorable: true`` (DSH's reader skips it). The early edges carry it unchanged and the
  3->4 edge renames it ``plugin:<type>``, as it does any unknown ignorable v3 event.

The deviations are written as one log-only event at the end of the upgraded log,
``{"type": "migration/note", ..., "ignorable": true}``: a type outside the v4 vocabulary,
so every v4 reader (DSH's included) keeps it opaque and derives nothing from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from dsh_store.model.vocabulary import KNOWN_TYPES

from . import Row

__all__ = [
    "HEAD_BEFORE_STEP",
    "LENIENT_RULES",
    "LONE_SURROGATE",
    "NOTE_TYPE",
    "SYNTHESIZED_STEP_END",
    "SYNTHESIZED_STEP_START",
    "SYNTHESIZED_TURN_END",
    "SYNTHESIZED_TURN_START",
    "UNKNOWN_IGNORABLE",
    "LenientLog",
    "NoteStage",
    "is_carried_unknown",
    "unknown_change",
]

LENIENT_RULES = frozenset(
    {"surface before first step", "unknown-event-type", "unknown event type", "lone-surrogate"}
)
"""The refusal rules the lenient opt-in can lift (a verify hint re-checks only these)."""

NOTE_TYPE = "migration/note"
"""The event type of the note a lenient migration appends (ignorable, log-only)."""

HEAD_BEFORE_STEP = "system-head-before-first-step"
UNKNOWN_IGNORABLE = "ignorable-unknown-event"
SYNTHESIZED_TURN_START = "synthesized-turn-start"
SYNTHESIZED_STEP_START = "synthesized-step-start"
SYNTHESIZED_STEP_END = "synthesized-step-end"
SYNTHESIZED_TURN_END = "synthesized-turn-end"
LONE_SURROGATE = "lone-surrogate-replaced"

_AT_END = "end"
_SOURCE = "source"
"""The recording place of a change made while reading the source file (no edge): its
seq is the source seq."""


def is_carried_unknown(event: Row, event_type: str) -> bool:
    """Whether the lenient chain carries ``event`` as an opaque ignorable event.

    It must be marked ``ignorable: true`` and its type must be one no format knows: a type
    a later format defines (``assistant/attempt``, ``image/offload``, ...) has a meaning
    the later edges would check, so it stays refused.
    """
    return event.get("ignorable") is True and event_type not in KNOWN_TYPES


def unknown_change(event_type: str) -> dict[str, Any]:
    """The recorded change for a carried unknown ignorable event of ``event_type``."""
    return {
        "change": UNKNOWN_IGNORABLE,
        "sourceType": event_type,
        "carriedAs": f"plugin:{event_type}",
    }


class _Locating(Protocol):
    edge_name: str

    def source_seq(self, target: int) -> int | None: ...


class LenientLog:
    """The deviations of one lenient migration, as the edges record them.

    Each entry names the recording edge and the seq on that edge's *input*; the note
    translates it to the source file's seq through the stages before that edge.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[str, int, dict[str, Any]]] = []

    def record(self, edge: str, input_seq: int, change: dict[str, Any]) -> None:
        """Record ``change`` (a JSON object with at least ``change``) made by ``edge``."""
        self.entries.append((edge, input_seq, change))

    def record_at_end(self, change: dict[str, Any]) -> None:
        """Record ``change`` made after the last source event (listed with ``atEnd``)."""
        self.entries.append((_AT_END, -1, change))

    def record_lone_surrogates(self, seq: int, line: int, found: list[tuple[str, str]]) -> None:
        """Record that the source row ``seq`` (physical ``line``) was read with each lone
        surrogate in ``found`` (``(JSON path, code unit)`` pairs) replaced by U+FFFD."""
        replaced = [{"jsonPath": path, "codeUnit": unit} for path, unit in found]
        self.record(_SOURCE, seq, {"change": LONE_SURROGATE, "line": line, "replaced": replaced})


class NoteStage:
    """The last stage of a lenient chain: passes the v4 rows on, appends the note.

    Nothing is appended when no deviation was made, so a lenient migration of a log the
    default accepts gives exactly the default's bytes.
    """

    edge_name = "lenient"

    def __init__(
        self, log: LenientLog, stages: Sequence[_Locating], source_version: int, header: Row
    ) -> None:
        self._log = log
        self._stages = list(stages)
        self._source_version = source_version
        self._next_seq = 0
        self._last_time = header.get("createdAt", 0)
        self._note_seq: int | None = None

    def source_seq(self, target: int) -> int | None:
        """``target`` itself (this stage keeps seqs); None for the note."""
        return None if target == self._note_seq else target

    def feed(self, event: Row) -> list[Row]:
        self._next_seq = event["seq"] + 1 if isinstance(event.get("seq"), int) else self._next_seq
        self._last_time = event.get("time", self._last_time)
        return [event]

    def finish(self) -> list[Row]:
        changes = self._changes()
        if not changes:
            return []
        self._note_seq = self._next_seq
        return [
            {
                "type": NOTE_TYPE,
                "seq": self._note_seq,
                "time": self._last_time,
                "data": {
                    "producer": "dsh-store",
                    "mode": "lenient",
                    "sourceVersion": self._source_version,
                    "changes": changes,
                },
                "ignorable": True,
            }
        ]

    def _changes(self) -> list[dict[str, Any]]:
        seen: set[tuple[str, int]] = set()
        out: list[dict[str, Any]] = []
        at_end: list[dict[str, Any]] = []
        for edge, seq, change in self._log.entries:
            if edge == _AT_END:
                at_end.append({"change": change["change"], "atEnd": True, **_rest(change)})
                continue
            source = self._source_of(edge, seq)
            key = (str(change["change"]), source)
            if key in seen:  # an event carried by several edges is one change
                continue
            seen.add(key)
            out.append({"change": change["change"], "sourceSeq": source, **_rest(change)})
        out.sort(key=lambda change: (change["sourceSeq"], change["change"]))
        return out + at_end

    def _source_of(self, edge: str, seq: int) -> int:
        """The source file's seq of ``seq`` on the input of ``edge``."""
        index = next(
            (i for i, stage in enumerate(self._stages) if stage.edge_name == edge),
            0,  # the fused 0->1 stage keeps seqs, the source read has none: source seqs
        )
        for stage in reversed(self._stages[:index]):
            mapped = stage.source_seq(seq)
            if mapped is None:
                # An event that stage made: an unclaimed attempt stands for its first chunk.
                made_from = getattr(stage, "made_from", None)
                mapped = made_from(seq) if made_from is not None else None
            if mapped is None:  # cannot happen: the edges record source events only
                break
            seq = mapped
        return seq


def _rest(change: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in change.items() if key != "change"}
