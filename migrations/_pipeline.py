"""One-generator driver for the edge stages (the fast form of :func:`chain`).

:func:`chain` stacks one generator per edge, so every event crosses up to four generator
frames. :func:`fused_chain` builds the same stages in the same order and pushes each
event through them with nested loops in a single generator. The rows, their order, the
moment each ``feed``/``finish`` runs and the first refusal are exactly those of
:func:`chain`; only the per-event overhead differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from . import CURRENT_VERSION, EDGES, EdgeStage, MigrationContext, Row

__all__ = ["drive", "fused_chain"]


def fused_chain(
    header: Row, events: Iterable[Row], context: MigrationContext
) -> tuple[Row, Iterator[Row]]:
    """Like :func:`dsh_store.migrations.chain` (without ``on_header``), in one generator."""
    stages: list[EdgeStage] = []
    for source in range(header["version"], CURRENT_VERSION):
        edge = EDGES[source]
        stages.append(edge.stage(header, context))
        header = edge.header(header, context)
    return header, drive(stages, events)


def drive(stages: Sequence[EdgeStage], events: Iterable[Row]) -> Iterator[Row]:
    """Feed ``events`` through ``stages`` in order; each stage finishes when its input ends.

    Equivalent to nesting one ``for event: yield from feed(event); yield from finish()``
    generator per stage.
    """
    if len(stages) != 4:
        return _layered(stages, events)
    return _four(stages[0], stages[1], stages[2], stages[3], events)


def _four(
    first: EdgeStage,
    second: EdgeStage,
    third: EdgeStage,
    fourth: EdgeStage,
    events: Iterable[Row],
) -> Iterator[Row]:
    feed1, feed2, feed3, feed4 = first.feed, second.feed, third.feed, fourth.feed
    for event in events:
        for row1 in feed1(event):
            for row2 in feed2(row1):
                for row3 in feed3(row2):
                    yield from feed4(row3)
    for row1 in first.finish():
        for row2 in feed2(row1):
            for row3 in feed3(row2):
                yield from feed4(row3)
    for row2 in second.finish():
        for row3 in feed3(row2):
            yield from feed4(row3)
    for row3 in third.finish():
        yield from feed4(row3)
    yield from fourth.finish()


def _layered(stages: Sequence[EdgeStage], events: Iterable[Row]) -> Iterator[Row]:
    stream: Iterable[Row] = events
    for stage in stages:
        stream = _one(stage, stream)
    yield from stream


def _one(stage: EdgeStage, events: Iterable[Row]) -> Iterator[Row]:
    for event in events:
        yield from stage.feed(event)
    yield from stage.finish()
