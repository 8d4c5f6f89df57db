"""Edge v1 -> v2: assistant chunks fold into embedded streams; seqs are renumbered.

What changes:

- Packed assistant-delta rows are expanded (:mod:`.packed`) into ``assistant/chunk`` events.
- Every ``assistant/chunk`` is removed. Chunks group by (turn, step) into a pending attempt,
  which an ``assistant/message`` claims by citing exactly its chunk seqs, in order, in
  ``sourceEventSeqs``; the attempt's compact stream (:mod:`.streams`) becomes
  ``data.stream`` (last key) and ``sourceEventSeqs`` is dropped from every assistant
  message. An attempt no message claims becomes a log-only
  ``assistant/attempt {turn, step, stream}`` at the position of its last chunk, with the time
  of that chunk. An attempt ends when a ``finish`` chunk arrives (a later chunk then starts
  a new one), when a chunk of another (turn, step) arrives, and at ``turn/end``,
  ``step/end``, ``llm/retry`` and ``llm/retry-started`` (which finish it unclaimed at once).
- Events between chunks of an attempt keep their place; events after its last chunk are
  held and emitted just before the claiming message, or just after the ``assistant/attempt``.
- A ``turn/start`` for turn n+1 while turn n is open, with no open step and right after a
  ``next-turn`` inbox splice that inserted messages, gets a ``turn/end`` with reason
  ``interrupted`` (and the ``turn/start``'s time) just before it.
- A ``user/message`` whose source is ``{kind:'goal', change:X, ...}`` becomes
  ``goal/change {X}`` followed by the message with source ``{kind:'plugin', plugin:'goal'}``.
- Header: ``seedLength`` becomes ``isSeeded``. In a seeded log the event at source seq
  ``seedLength`` that is a ``session/end-seed`` gets ``data:{inherited:true}``; otherwise a
  ``session/end-seed {inherited:true}`` is inserted before the first event emitted from
  source seq >= ``seedLength`` (or at the end, with the last time seen).
- Target seqs are dense from 0. The reference fields (``sourceEventSeqs``, replace
  ``surfaceOp.start``/``end``, ``command/done.data.sourceEventSeq``, compaction
  ``shadowedRange.start``/``end`` and ``shadowedSeqs``, title ``messageSeqs``) are rewritten
  through the old->new map. Range pairs in ``sourceEventSeqs`` are read and written back as
  plain lists.

Refusal rules (``MigrationRefusedError.rule``, edge ``"1->2"``):

- ``wrong-source-version``: the header's version is not 1.
- ``malformed-seed-length``: ``seedLength`` is not a non-negative safe integer.
- ``malformed-envelope`` / ``seq-not-dense``: as in 0->1.
- ``malformed-packed-row``: a packed row without the exact packed shape.
- ``unknown-event-type``: a type outside the 51 format-1 types, even when ignorable
  (with ``context.lenient``, an ignorable type no format knows is carried unchanged).
- ``envelope-member``: an envelope key the type may not carry (chunks may carry
  ``ignorable``, ``sourceEventSeqs`` and ``surfaceOp``), or ``ignorable`` not ``true``.
- ``missing-payload-member`` / ``unexpected-payload-member``: payload keys are not exact.
- ``malformed-chunk``: an ``assistant/chunk`` whose data is not ``{turn, step, chunk}``
  with integer turn and step and a typed chunk object.
- ``claim-without-sources``: an ``assistant/message`` without ``sourceEventSeqs`` while
  an attempt of its (turn, step) is pending ("does not cite its complete chunk attempt").
- ``inexact-chunk-claim``: non-empty ``sourceEventSeqs`` on an ``assistant/message`` that
  are not exactly the pending attempt's chunk seqs in order.
- ``invalid-reference``: a reference field that is not a list/number of earlier seqs.
- ``consumed-chunk-reference``: a reference to a folded ``assistant/chunk``.
- ``cut-splits-attempt``: an attempt's chunks or its claiming message straddle the cut.
- ``seed-beyond-log``: ``seedLength`` exceeds the number of events.
- ``turn-already-open``: a ``turn/start`` while a turn is open, outside the restart pattern.
- ``malformed-goal-change``: a legacy goal source whose ``change`` is not a goal/change payload.
- ``foreign-delivery-marker``: a generation-1 delivery marker naming another session
  outside the inherited prefix of a child session.

Memory: the stage holds at most one pending attempt (its chunk seqs and stream) plus the
events that arrived after its last chunk, which is bounded by one turn since every
``turn/end`` and ``step/end`` settles the attempt. The seq map is run-length encoded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dsh_store.errors import MigrationRefusedError

from . import EdgeStage, MigrationContext, Row
from ._early_rows import (
    BASE_ENVELOPE,
    CHUNK_DATA_KEYS,
    SURFACE_ENVELOPE,
    EarlyStage,
    check_source_version,
)
from ._lenient import is_carried_unknown, unknown_change
from ._plain_chunks import PlainChunk, plain_chunk
from .packed import checked_run, is_packed_row
from .seqmap import CONSUMED, SeqMap, expand_seq_list
from .streams import DELTA_TYPES, StreamBuilder, member_chunk
from .v0_vocabulary import EVENT_TYPES, SURFACE_TYPES, is_safe_int, payload_problem

__all__ = ["EDGE", "V1ToV2Edge", "V1ToV2Stage"]

EDGE_NAME = "1->2"

_INT_TYPE = frozenset({int})
_ATTEMPT_CLOSERS = frozenset({"turn/end", "step/end", "llm/retry", "llm/retry-started"})


class V1ToV2Edge:
    """The 1 -> 2 edge (see the module docstring for its rules)."""

    source = 1
    target = 2

    def header(self, header: Row, context: MigrationContext) -> Row:
        """Return the format-2 header: ``seedLength`` replaced by ``isSeeded``."""
        _seed_cut(header, context)
        out: Row = {}
        for key, value in header.items():
            if key == "seedLength":
                continue
            if key == "delegationDepth":
                out["isSeeded"] = "seedLength" in header
            out[key] = 2 if key == "version" else value
        out.setdefault("isSeeded", "seedLength" in header)
        return out

    def stage(self, header: Row, context: MigrationContext) -> V1ToV2Stage:
        """Start the event transform for a log with format-1 header ``header``."""
        return V1ToV2Stage(header, context, _seed_cut(header, context))


def _seed_cut(header: Row, context: MigrationContext) -> int | None:
    check_source_version(header, 1, context, EDGE_NAME)
    if "seedLength" not in header:
        return None
    cut = header["seedLength"]
    if not is_safe_int(cut) or cut < 0:
        raise MigrationRefusedError(
            f"header seedLength {cut!r} is not a non-negative safe integer",
            rule="malformed-seed-length",
            path=context.path,
            edge=EDGE_NAME,
        )
    return int(cut)


@dataclass
class _Attempt:
    turn: int
    step: int
    first_seq: int
    seqs: list[int] = field(default_factory=list)
    stream: StreamBuilder = field(default_factory=StreamBuilder)
    last_time: int = 0
    finished: bool = False


@dataclass
class _Held:
    """An event waiting for the pending attempt to settle."""

    event: Row
    origin: int
    is_source: bool


class V1ToV2Stage(EarlyStage):
    """Streaming event transform of one format-1 log into format 2."""

    edge_name = EDGE_NAME

    def __init__(self, header: Row, context: MigrationContext, cut: int | None) -> None:
        self._path = context.path
        self._session_id = header.get("id")
        self._has_parent = "parentSession" in header
        self._cut = cut
        self._marker_done = cut is None
        self._last_time = header.get("createdAt", 0)
        self._next_source = 0
        self._next_target = 0
        self._map = SeqMap()
        self._pending: _Attempt | None = None
        self._held: list[_Held] = []
        self._open_turn: int | None = None
        self._open_step: int | None = None
        self._after_restart_splice = False
        self._lenient = context.lenient
        # Lenient only: the first chunk seq of each unclaimed attempt, by target seq, so the
        # migration note can place framing synthesized before an attempt (see made_from).
        self._attempt_origins: dict[int, int] = {}

    def source_seq(self, target: int) -> int | None:
        """The source seq of target event ``target``; ``None`` for one this edge made."""
        return self._map.source_of(target)

    def made_from(self, target: int) -> int | None:
        """The first chunk's source seq of the unclaimed attempt at ``target`` (lenient
        migrations only; ``None`` otherwise)."""
        return self._attempt_origins.get(target)

    @property
    def buffered_events(self) -> int:
        """Source events currently held back (pending chunks plus held events)."""
        pending = len(self._pending.seqs) if self._pending is not None else 0
        return pending + len(self._held)

    @property
    def seq_map_runs(self) -> int:
        """Runs stored by the seq map (grows with attempts and insertions, not events)."""
        return self._map.runs

    def feed(self, event: Row) -> Iterable[Row]:
        """Take one format-1 row (an event or a packed row); return the events now settled."""
        out: list[Row] = []
        fields = plain_chunk(event, self._next_source)
        if fields is not None:
            self.fold_plain_chunk(fields, out)
            return out
        if is_packed_row(event):
            self.fold_packed_row(event, out)
            return out
        self._check_envelope(event)
        self._admit_seq(event)
        if event["type"] == "assistant/chunk":
            self._chunk(event, out)
        else:
            self._event(event, out)
        return out

    def feed_normalized(self, event: Row, out: list[Row]) -> None:
        """Take a row of a known type other than ``assistant/chunk`` that the 0->1 edge
        has just normalized, appending the events it settles to ``out``.

        Formats 0 and 1 share the envelope, the vocabulary and the payload key sets, and
        0->1 checked the normalized row against exactly the rules :meth:`feed` checks
        first (:meth:`_check_envelope`), so those passes would pass; only the seq and the
        event's own rules remain.
        """
        self._admit_seq(event)
        self._event(event, out)

    def take_plain(self, event: Row) -> int | None:
        """Take a plain row of a fused type (:data:`._plain_chunks.FUSED_TYPES`)
        that the 0->1 edge has just admitted, when it settles nothing: no attempt pending,
        no event held, no seed marker due, no turn to close first. Returns its format-2 seq
        (the event itself is unchanged but for that seq), or None with nothing changed, for
        :meth:`feed_normalized` to take it.
        """
        if self._pending is not None or self._held or self._lenient is not None:
            return None
        seq = event["seq"]
        cut = self._cut
        if seq != self._next_source or (not self._marker_done and cut is not None and seq >= cut):
            return None
        event_type = event["type"]
        if event_type == "turn/start":
            if self._open_turn is not None:
                return None
            self._open_turn = event["data"]["turn"]
            self._open_step = None
        elif event_type == "step/start":
            self._open_step = event["data"]["step"]
        elif event_type == "step/end":
            self._open_step = None
        self._next_source = seq + 1
        self._after_restart_splice = False
        target = self._next_target
        self._map.record(seq, target)
        self._next_target = target + 1
        self._last_time = event["time"]
        return target

    def finish(self) -> Iterable[Row]:
        """Settle a pending attempt and place a seed marker still owed; return the rest."""
        out: list[Row] = []
        if self._pending is not None:
            self._settle_unclaimed(out)
        self._check_seed_length(self._cut, self._next_source)
        if not self._marker_done:
            self._emit_marker(self._last_time, out)
        return out

    # -- admission -----------------------------------------------------------------

    def _check_envelope(self, row: Row) -> None:
        event_type, seq = self._check_row(row)
        if event_type not in EVENT_TYPES:
            if self._lenient is not None and is_carried_unknown(row, event_type):
                self._check_members(row, event_type, seq, BASE_ENVELOPE)
                self._lenient.record(EDGE_NAME, seq, unknown_change(event_type))
                return
            raise self._refuse(
                "unknown-event-type",
                f"{event_type!r} is not a format-1 event type (refused even when ignorable)",
                seq,
                event_type,
            )
        chunk_like = event_type in SURFACE_TYPES or event_type == "assistant/chunk"
        allowed = SURFACE_ENVELOPE if chunk_like else BASE_ENVELOPE
        self._check_members(row, event_type, seq, allowed)
        if event_type != "assistant/chunk":
            problem = payload_problem(event_type, row["data"])
            if problem is not None:
                raise self._refuse(problem[0], problem[1], seq, event_type)

    def _admit_seq(self, row: Row) -> None:
        if row["seq"] != self._next_source:
            raise self._refuse(
                "seq-not-dense",
                f"event has seq {row['seq']}, expected {self._next_source}",
                row["seq"],
                row["type"],
            )
        self._next_source += 1

    # -- chunks and attempts -------------------------------------------------------

    def _chunk(self, row: Row, out: list[Row]) -> None:
        seq, data = row["seq"], row["data"]
        chunk = data.get("chunk")
        if (
            data.keys() != CHUNK_DATA_KEYS
            or not is_safe_int(data["turn"])
            or not is_safe_int(data["step"])
            or not isinstance(chunk, dict)
            or not isinstance(chunk.get("type"), str)
        ):
            raise self._refuse(
                "malformed-chunk",
                "assistant/chunk data must be {turn, step, chunk} with integer turn and step "
                "and a chunk object with a string type",
                seq,
                "assistant/chunk",
            )
        self.fold_plain_chunk((seq, row["time"], data["turn"], data["step"], chunk), out)

    def fold_plain_chunk(self, fields: PlainChunk, out: list[Row]) -> None:
        """Admit a chunk row that passed every admission rule and fold it into its attempt.

        ``fields`` come from :func:`._plain_chunks.plain_chunk` at this stage's next seq
        (or from the full checks); events settled by it are appended to ``out``.
        """
        seq, time, turn, step, chunk = fields
        self._next_source = seq + 1
        self._after_restart_splice = False
        pending = self._pending
        if pending is not None and (
            pending.turn != turn or pending.step != step or pending.finished
        ):
            self._settle_unclaimed(out)
            pending = None
        if pending is None:
            pending = self._pending = _Attempt(turn, step, seq)
        elif self._held:
            self._release_held(out)
        if self._cut is not None and pending.first_seq < self._cut <= seq:
            raise self._refuse(
                "cut-splits-attempt",
                f"the attempt starting at seq {pending.first_seq} straddles the inherited cut "
                f"at seq {self._cut}",
                seq,
                "assistant/chunk",
            )
        pending.seqs.append(seq)
        pending.stream.add(time, chunk)
        pending.last_time = time
        pending.finished = chunk["type"] == "finish"
        self._map.record(seq, CONSUMED)

    def fold_packed_row(self, row: Row, out: list[Row], *, shape_checked: bool = False) -> None:
        """Fold a packed row's chunks into their attempt, as a run.

        Same result and same refusals as expanding the row into its ``assistant/chunk``
        events and folding each: the first member is folded as a chunk (it may settle the
        previous attempt, release held events or start a new attempt); the others can only
        extend the run it joined, so their deltas, gaps and seqs are appended in one step.
        A row where that does not hold (tool-call deltas that the stream keeps whole, a
        seed cut inside the row, events still held) is folded member by member.
        ``shape_checked``: the 0->1 edge already checked the row's shape.
        """
        data, members, times = checked_run(
            row, path=self._path, edge=EDGE_NAME, shape_checked=shape_checked
        )
        seq = row["seq0"]
        if seq != self._next_source:
            raise self._refuse(
                "seq-not-dense",
                f"event has seq {seq}, expected {self._next_source}",
                seq,
                "assistant/chunk",
            )
        delta_type = DELTA_TYPES[row["type"]]
        turn, step = data["turn"], data["step"]
        self.fold_plain_chunk(
            (seq, times[0], turn, step, member_chunk(delta_type, data, members[0])), out
        )
        count = len(members)
        if count == 1:
            return
        last = seq + count - 1
        cut = self._cut
        whole = delta_type != "tool-call-delta" or (
            data["id"] != "" and data.get("name", "x") != ""
        )
        if not whole or self._held or (cut is not None and seq < cut <= last):
            for position in range(1, count):
                chunk = member_chunk(delta_type, data, members[position])
                self.fold_plain_chunk((seq + position, times[position], turn, step, chunk), out)
            return
        pending = self._pending
        assert pending is not None  # the first member's attempt
        pending.stream.extend_run(data["dt"], members[1:], times[-1])
        pending.seqs.extend(range(seq + 1, last + 1))
        pending.last_time = times[-1]
        self._next_source = last + 1
        self._map.record_consumed(seq + 1, count - 1)

    def _settle_unclaimed(self, out: list[Row]) -> None:
        pending = self._pending
        assert pending is not None
        self._pending = None
        attempt: Row = {
            "type": "assistant/attempt",
            "seq": 0,
            "time": pending.last_time,
            "data": {"turn": pending.turn, "step": pending.step, "stream": pending.stream.records},
        }
        self._emit(attempt, pending.first_seq, False, out)
        if self._lenient is not None:
            self._attempt_origins[out[-1]["seq"]] = pending.first_seq
        self._release_held(out)

    def _release_held(self, out: list[Row]) -> None:
        held, self._held = self._held, []
        for item in held:
            self._emit(item.event, item.origin, item.is_source, out)

    def _claim(self, row: Row, out: list[Row]) -> Row:
        seq, data = row["seq"], row["data"]
        pending = self._pending
        if pending is not None and (pending.turn, pending.step) != (data["turn"], data["step"]):
            self._settle_unclaimed(out)
            pending = None
        stream: list[dict[str, Any]] = []
        if "sourceEventSeqs" not in row:
            if pending is not None:
                raise self._refuse(
                    "claim-without-sources",
                    f"assistant/message does not cite its complete chunk attempt (pending "
                    f"chunks from seq {pending.first_seq})",
                    seq,
                    "assistant/message",
                )
        else:
            cited = self._cited(row["sourceEventSeqs"], seq, pending)
            if cited == [] and pending is not None:
                self._settle_unclaimed(out)
            elif cited != []:
                if pending is None or cited != pending.seqs:
                    expected = pending.seqs if pending is not None else []
                    raise self._refuse(
                        "inexact-chunk-claim",
                        "chunk provenance is not one complete ordered attempt: cites "
                        f"{row['sourceEventSeqs']!r}, pending attempt has {expected!r}",
                        seq,
                        "assistant/message",
                    )
                if self._cut is not None and pending.first_seq < self._cut <= seq:
                    raise self._refuse(
                        "cut-splits-attempt",
                        f"assistant/message claims chunks before the inherited cut at seq "
                        f"{self._cut}",
                        seq,
                        "assistant/message",
                    )
                stream = pending.stream.records
                self._pending = None
                self._release_held(out)
        message = {key: value for key, value in row.items() if key != "sourceEventSeqs"}
        message["data"] = {**data, "stream": stream}
        return message

    @staticmethod
    def _cited(raw: object, seq: int, pending: _Attempt | None) -> list[int] | None:
        """``expand_seq_list(raw, seq)``, at once for the usual claim: a plain list of
        exactly the pending attempt's seqs (all earlier than ``seq``) needs no decoding."""
        if (
            pending is not None
            and type(raw) is list
            and raw == pending.seqs
            and set(map(type, raw)) == _INT_TYPE
        ):
            return pending.seqs
        return expand_seq_list(raw, seq)

    # -- other events --------------------------------------------------------------

    def _event(self, row: Row, out: list[Row]) -> None:
        event_type, seq, data = row["type"], row["seq"], row["data"]
        self._check_delivery(row)
        if event_type in _ATTEMPT_CLOSERS and self._pending is not None:
            self._settle_unclaimed(out)
        if event_type == "assistant/message":
            row = self._claim(row, out)
        elif event_type == "turn/start":
            closer = self._turn_start(row)
            if closer is not None:
                self._put(closer, seq, False, out)
        elif event_type == "user/message":
            goal_change, row = self._split_goal(row)
            if goal_change is not None:
                self._put(goal_change, seq, False, out)
        if event_type == "turn/end":
            self._open_turn = self._open_step = None
        elif event_type == "step/start":
            self._open_step = data["step"]
        elif event_type == "step/end":
            self._open_step = None
        self._after_restart_splice = (
            event_type == "agent/inbox/spliced"
            and data.get("target") == "next-turn"
            and isinstance(data.get("inserted"), list)
            and bool(data["inserted"])
        )
        self._put(row, seq, True, out)

    def _put(self, event: Row, origin: int, is_source: bool, out: list[Row]) -> None:
        if self._pending is not None:
            self._held.append(_Held(event, origin, is_source))
        else:
            self._emit(event, origin, is_source, out)

    def _turn_start(self, row: Row) -> Row | None:
        """Track the open turn; return the legacy restart closer when one is due."""
        turn = row["data"]["turn"]
        closer: Row | None = None
        if self._open_turn is not None:
            # A turn that is no integer has no next turn (the payload's types are the
            # model's to refuse): no restart, as in DSH, rather than a TypeError here.
            restart = (
                self._open_step is None
                and self._after_restart_splice
                and is_safe_int(self._open_turn)
                and turn == self._open_turn + 1
            )
            if not restart:
                raise self._refuse(
                    "turn-already-open",
                    f"turn/start for turn {turn!r} while turn {self._open_turn!r} is open",
                    row["seq"],
                    "turn/start",
                )
            closer = {
                "type": "turn/end",
                "seq": 0,
                "time": row["time"],
                "data": {"turn": self._open_turn, "reason": {"kind": "interrupted"}},
            }
        self._open_turn = turn
        self._open_step = None
        return closer

    def _split_goal(self, row: Row) -> tuple[Row | None, Row]:
        """Split a legacy goal message into ``goal/change`` and the plain message."""
        source = row["data"].get("source")
        if not (isinstance(source, dict) and source.get("kind") == "goal" and "change" in source):
            return None, row
        change = source["change"]
        if not isinstance(change, dict) or payload_problem("goal/change", change) is not None:
            raise self._refuse(
                "malformed-goal-change",
                "legacy goal message source carries a change that is not a goal/change payload",
                row["seq"],
                "user/message",
            )
        goal_change: Row = {"type": "goal/change", "seq": 0, "time": row["time"], "data": change}
        message = {**row, "data": {**row["data"], "source": {"kind": "plugin", "plugin": "goal"}}}
        return goal_change, message

    def _check_delivery(self, row: Row) -> None:
        if row["type"] != "session-log-deepseek/delivery-accepted":
            return
        data = row["data"]
        if data.get("sessionFormatVersion") != 1 or data["sessionId"] == self._session_id:
            return
        inherited = self._cut is not None and row["seq"] < self._cut
        if not (inherited and self._has_parent):
            raise self._refuse(
                "foreign-delivery-marker",
                f"generation-1 delivery marker names session {data['sessionId']!r}, not this "
                f"session {self._session_id!r}, outside a child's inherited prefix",
                row["seq"],
                row["type"],
            )

    # -- emission ------------------------------------------------------------------

    def _emit(self, event: Row, origin: int, is_source: bool, out: list[Row]) -> None:
        if not self._marker_done and self._cut is not None and origin >= self._cut:
            if is_source and origin == self._cut and event["type"] == "session/end-seed":
                event = {**event, "data": {"inherited": True}}
                self._marker_done = True
            else:
                self._emit_marker(event["time"], out)
        if is_source:
            event = self._remap(event)
        event = {**event, "seq": self._next_target}
        if is_source:
            self._map.record(origin, self._next_target)
        self._next_target += 1
        self._last_time = event["time"]
        out.append(event)

    def _emit_marker(self, time: int, out: list[Row]) -> None:
        self._marker_done = True
        out.append(
            {
                "type": "session/end-seed",
                "seq": self._next_target,
                "time": time,
                "data": {"inherited": True},
            }
        )
        self._next_target += 1
        self._last_time = time

    def _target(self, source: int, row: Row) -> int:
        target = self._map.lookup(source)
        if target == CONSUMED:
            raise self._refuse(
                "consumed-chunk-reference",
                f"reference to seq {source} targets consumed assistant/chunk",
                row["seq"],
                row["type"],
            )
        if target is None:
            raise self._refuse(
                "invalid-reference",
                f"reference to seq {source} names no earlier event",
                row["seq"],
                row["type"],
            )
        return target

    def _seq_list(self, value: object, row: Row, what: str) -> list[int]:
        seqs = expand_seq_list(value, row["seq"])
        if seqs is None:
            raise self._refuse(
                "invalid-reference",
                f"{what} is not a list of earlier seqs: {value!r}",
                row["seq"],
                row["type"],
            )
        return [self._target(seq, row) for seq in seqs]

    def _seq_one(self, value: object, row: Row, what: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < row["seq"]:
            raise self._refuse(
                "invalid-reference",
                f"{what} {value!r} is not an earlier seq",
                row["seq"],
                row["type"],
            )
        return self._target(value, row)

    def _remap(self, row: Row) -> Row:
        event_type = row["type"]
        out = dict(row)
        if "sourceEventSeqs" in row:
            out["sourceEventSeqs"] = self._seq_list(row["sourceEventSeqs"], row, "sourceEventSeqs")
        surface_op = row.get("surfaceOp")
        if isinstance(surface_op, dict) and surface_op.get("op") == "replace":
            op = dict(surface_op)
            for key in ("start", "end"):
                if key in op:
                    op[key] = self._seq_one(op[key], row, f"surfaceOp.{key}")
            out["surfaceOp"] = op
        data = row["data"]
        if event_type == "command/done" and "sourceEventSeq" in data:
            out["data"] = {
                **data,
                "sourceEventSeq": self._seq_one(data["sourceEventSeq"], row, "sourceEventSeq"),
            }
        elif event_type in ("compaction/summary", "compaction/prune"):
            new_data = dict(data)
            shadowed = data["shadowedRange"]
            if not isinstance(shadowed, dict):
                raise self._refuse(
                    "invalid-reference", "shadowedRange is not an object", row["seq"], event_type
                )
            new_data["shadowedRange"] = {
                key: (
                    self._seq_one(value, row, f"shadowedRange.{key}")
                    if key in ("start", "end")
                    else value
                )
                for key, value in shadowed.items()
            }
            new_data["shadowedSeqs"] = self._seq_list(data["shadowedSeqs"], row, "shadowedSeqs")
            out["data"] = new_data
        elif event_type in ("session/title", "session/title-llm-request"):
            out["data"] = {
                **data,
                "messageSeqs": self._seq_list(data["messageSeqs"], row, "messageSeqs"),
            }
        return out


EDGE: V1ToV2Edge = V1ToV2Edge()
"""The registered 1 -> 2 edge."""

_STAGE_PROTOCOL_CHECK: type[EdgeStage] = V1ToV2Stage
