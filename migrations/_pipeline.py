"""One-generator driver for the edge stages (the fast form of :func:`chain`).

:func:`chain` stacks one generator per edge, so every event crosses up to four generator
frames. :func:`fused_chain` builds the same stages in the same order and pushes each
event through them with nested loops in a single generator. Starting from format 0, the
0->1 and 1->2 stages run as one :class:`EarlyStages`, which hands an ordinary chunk row
(most of such a log) straight to the 1->2 fold: 0->1 would pass it on unchanged, and the
combined test admits it for both edges at once; any other row 0->1 normalizes to a known
type reaches 1->2 without its envelope and payload checks, which 0->1 has just made.

The rows, their order, the moment each ``feed``/``finish`` runs and the first refusal are
exactly those of :func:`chain`; only the per-event overhead differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, cast

from . import CURRENT_VERSION, EDGES, EdgeStage, MigrationContext, Row
from ._lenient import NoteStage
from ._plain_chunks import FUSED_TYPES
from .v0_to_v1 import V0ToV1Stage
from .v0_vocabulary import EVENT_TYPES, PACKED_ROW_TYPES
from .v1_to_v2 import V1ToV2Stage

__all__ = ["EarlyStages", "SourceSeqs", "drive", "fused_chain", "located_chain"]


def fused_chain(
    header: Row, events: Iterable[Row], context: MigrationContext
) -> tuple[Row, Iterator[Row]]:
    """Like :func:`dsh_store.migrations.chain` (without ``on_header``), in one generator."""
    header, rows, _ = located_chain(header, events, context)
    return header, rows


class _LocatingStage(Protocol):
    edge_name: str

    def source_seq(self, target: int) -> int | None: ...


class SourceSeqs:
    """Where an upgraded (v4) event came from, asked only when one is refused.

    Each stage already keeps its source-to-target seq map (run-length, per insertion):
    walking the stages backwards inverts the chain without any per-event bookkeeping.
    """

    def __init__(self, stages: Sequence[EdgeStage]) -> None:
        # Every stage class of the chain offers ``edge_name`` and ``source_seq``.
        self._stages = cast("list[_LocatingStage]", list(stages))

    def locate(self, seq: int) -> tuple[int | None, str | None]:
        """``(source seq, None)`` for an upgraded event that came from the source;
        ``(None, edge)`` for one an edge made (a system head, a closer, a settled attempt).
        """
        for stage in reversed(self._stages):
            source = stage.source_seq(seq)
            if source is None:
                return None, stage.edge_name
            seq = source
        return seq, None


def located_chain(
    header: Row, events: Iterable[Row], context: MigrationContext
) -> tuple[Row, Iterator[Row], SourceSeqs]:
    """:func:`fused_chain`, plus the :class:`SourceSeqs` of its stages."""
    stages: list[EdgeStage] = []
    source_header = header
    for source in range(header["version"], CURRENT_VERSION):
        edge = EDGES[source]
        stages.append(edge.stage(header, context))
        header = edge.header(header, context)
    if len(stages) == 4 and type(stages[0]) is V0ToV1Stage and type(stages[1]) is V1ToV2Stage:
        stages[:2] = [EarlyStages(stages[0], stages[1])]
    if context.lenient is not None and stages:
        locating = cast("list[_LocatingStage]", list(stages))
        stages.append(NoteStage(context.lenient, locating, source_header["version"], source_header))
    elif len(stages) == 3 and type(stages[0]) is EarlyStages:
        # The faithful chain from format 0: plain rows of the renumbered types take the
        # fused path (the edges' lenient framing would need the full path for every row).
        late = cast("list[_PlainTaking]", stages[1:])
        return header, _fused(stages[0], late[0], late[1], events), SourceSeqs(stages)
    return header, drive(stages, events), SourceSeqs(stages)


class _Feeding(Protocol):
    """A stage as the drivers use it: rows in through :meth:`feed`, its tail from
    :meth:`finish`."""

    def feed(self, event: Row) -> Iterable[Row]: ...

    def finish(self) -> Iterable[Row]: ...


class _PlainTaking(_Feeding, Protocol):
    """The 2->3 and 3->4 stages: :meth:`feed`, and ``take_plain`` for a fused row."""

    def take_plain(
        self, event_type: str, seq: int, time: int, data: dict[str, Any]
    ) -> int | None: ...


class EarlyStages:
    """The 0->1 and 1->2 stages of one log as a single stage (same rows, same refusals)."""

    edge_name = V1ToV2Stage.edge_name  # 0->1 keeps seqs and makes no events

    def __init__(self, first: V0ToV1Stage, second: V1ToV2Stage) -> None:
        self._first = first
        self._second = second

    def source_seq(self, target: int) -> int | None:
        """The format-0 seq of target event ``target`` (0->1 keeps seqs)."""
        return self._second.source_seq(target)

    def made_from(self, target: int) -> int | None:
        """The format-0 seq an event the 1->2 stage made stands for (see
        :meth:`V1ToV2Stage.made_from`)."""
        return self._second.made_from(target)

    def feed(self, event: Row) -> list[Row]:
        """Feed one format-0 row through both stages; return the format-2 rows settled."""
        out: list[Row] = []
        kind = event.get("type")
        if kind == "assistant/chunk":
            fields = self._first.take_plain_chunk(event)
            if fields is not None:
                # Both stages have counted the same rows, so 1->2 expects this seq.
                self._second.fold_plain_chunk(fields, out)
                return out
            for row in self._first.feed(event):
                out.extend(self._second.feed(row))
            return out
        if kind in PACKED_ROW_TYPES:
            # 0->1 checks the row's shape and seq and passes it on unchanged; 1->2 then
            # folds it as one run without checking the same shape again.
            self._first.feed(event)
            self._second.fold_packed_row(event, out, shape_checked=True)
            return out
        row = self._first.normalize(event)
        # A known event 0->1 normalized has passed the 1->2 envelope and payload rules
        # already (formats 0 and 1 share them): 1->2 does not check them again.
        kind = row["type"]
        if kind in EVENT_TYPES and kind != "assistant/chunk" and type(row["data"]) is dict:
            self._second.feed_normalized(row, out)
        else:
            out.extend(self._second.feed(row))
        return out

    def feed_plain(self, event: Row, out: list[Row]) -> int | None:
        """The format-2 seq of ``event`` when it is a plain row of a renumbered type
        (:data:`._plain_chunks.FUSED_TYPES`) that both stages pass on as it is but for
        that seq; otherwise None, with the rows :meth:`feed` returns appended to ``out``."""
        if not self._first.take_plain(event):
            out.extend(self.feed(event))
            return None
        target = self._second.take_plain(event)
        if target is None:
            # 0->1 has counted the row and would pass it on unchanged: 1->2 takes it whole.
            self._second.feed_normalized(event, out)
        return target

    def finish(self) -> list[Row]:
        """Finish 0->1 (its tail goes through 1->2), then 1->2."""
        out: list[Row] = []
        second = self._second.feed
        for row in self._first.finish():
            out.extend(second(row))
        out.extend(self._second.finish())
        return out


def drive(stages: Sequence[EdgeStage], events: Iterable[Row]) -> Iterator[Row]:
    """Feed ``events`` through ``stages`` in order; each stage finishes when its input ends.

    Equivalent to nesting one ``for event: yield from feed(event); yield from finish()``
    generator per stage.
    """
    if len(stages) == 3:
        return _three(stages[0], stages[1], stages[2], events)
    return _layered(stages, events)


def _three(
    first: EdgeStage, second: EdgeStage, third: EdgeStage, events: Iterable[Row]
) -> Iterator[Row]:
    feed1, feed2, feed3 = first.feed, second.feed, third.feed
    for event in events:
        for row1 in feed1(event):
            for row2 in feed2(row1):
                yield from feed3(row2)
    yield from _finish_three(first, second, third)


def _finish_three(first: _Feeding, second: _Feeding, third: _Feeding) -> Iterator[Row]:
    """The end of three chained stages: each one's tail through the stages after it."""
    feed2, feed3 = second.feed, third.feed
    for row1 in first.finish():
        for row2 in feed2(row1):
            yield from feed3(row2)
    for row2 in second.finish():
        yield from feed3(row2)
    yield from third.finish()


def _fused(
    early: EarlyStages, third: _PlainTaking, fourth: _PlainTaking, events: Iterable[Row]
) -> Iterator[Row]:
    """:func:`_three` over the stages from format 0, with the fused path for plain rows of
    the renumbered types: each edge's ``take_plain`` does what its ``feed`` would (count
    the seq, note the turn or step, hand out the next seq) without building the row, and
    the v4 row is built once. A stage that cannot say so (its ``take_plain`` returns None)
    gets the row from there on through ``feed``, as in :func:`_three`."""
    feed2, feed3, feed4 = early.feed, third.feed, fourth.feed
    plain2, plain3, plain4 = early.feed_plain, third.take_plain, fourth.take_plain
    for event in events:
        if event.get("type") not in FUSED_TYPES:
            for row2 in feed2(event):
                for row3 in feed3(row2):
                    yield from feed4(row3)
            continue
        out: list[Row] = []
        seq2 = plain2(event, out)
        if seq2 is None:
            for row2 in out:
                for row3 in feed3(row2):
                    yield from feed4(row3)
            continue
        kind, time, data = event["type"], event["time"], event["data"]
        seq3 = plain3(kind, seq2, time, data)
        if seq3 is None:
            for row3 in feed3({"type": kind, "seq": seq2, "time": time, "data": data}):
                yield from feed4(row3)
            continue
        seq4 = plain4(kind, seq3, time, data)
        if seq4 is None:
            yield from feed4({"type": kind, "seq": seq3, "time": time, "data": data})
        else:
            yield {"type": kind, "seq": seq4, "time": time, "data": data}
    yield from _finish_three(early, third, fourth)


def _layered(stages: Sequence[EdgeStage], events: Iterable[Row]) -> Iterator[Row]:
    stream: Iterable[Row] = events
    for stage in stages:
        stream = _one(stage, stream)
    yield from stream


def _one(stage: EdgeStage, events: Iterable[Row]) -> Iterator[Row]:
    for event in events:
        yield from stage.feed(event)
    yield from stage.finish()
