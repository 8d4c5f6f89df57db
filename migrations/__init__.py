"""The version-chained migration edges of the session log format (v0 -> v4).

Ships as ``dsh_store.migrations`` (never as a top-level ``migrations`` package). Each
adjacent edge vN -> vN+1 lives in its own module and exposes one :class:`Edge`. Edges are
pure and streaming: they see wire-format JSON values (``dict`` rows exactly as decoded
from the log, camelCase keys), never files, and hold at most what one turn needs.

The registry below is static: it is built at import from the edge modules and refuses a
gap or a duplicate immediately, so a missing edge is an import error, not a surprise on
the first old log a user opens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._lenient import LenientLog

__all__ = [
    "CURRENT_VERSION",
    "EDGES",
    "OLDEST_VERSION",
    "Edge",
    "EdgeStage",
    "MigrationContext",
    "Row",
    "build_registry",
    "chain",
]

Row = dict[str, Any]
"""One decoded log row (header or event) in the wire format of its version."""

OLDEST_VERSION = 0
CURRENT_VERSION = 4


@dataclass(frozen=True)
class MigrationContext:
    """What an edge may know besides the rows themselves.

    :param path: the source file, named in every refusal (may be ``None`` in memory).
    :param session_id: the session's id from its header.
    :param child_headers: headers (wire dicts, any version) of the sessions in the same
        store root whose header names this session as ``parentSession``; used by 3->4 to
        complete ``subagent/catalog``. ``None`` means "unknown" (a loose file with no
        store root); an empty tuple means "known to have no children".
    :param lenient: set for the lenient opt-in (:mod:`._lenient`): the edges then migrate
        the two kinds of format-0 logs DSH's reader loads but they refuse by default, and
        record each deviation here. ``None``: the faithful default.
    :param owned_rows: the event rows are fresh values that nothing else holds and that
        are used once (a scanner's decoded rows): an edge may then rewrite a payload in
        place instead of copying it first. ``False`` (rows a caller handed in, which must
        not change): every rewritten payload is a copy.
    """

    path: str | None = None
    session_id: str | None = None
    child_headers: tuple[Mapping[str, Any], ...] | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    lenient: LenientLog | None = None
    owned_rows: bool = False


class EdgeStage(Protocol):
    """The streaming event transform of one edge, for one log.

    ``feed`` takes the source-version events in log order and returns the target-version
    events it can emit now (possibly none, possibly several); ``finish`` returns the rest.
    Refusals raise :class:`dsh_store.errors.MigrationRefusedError` naming path, seq, event
    type and rule.
    """

    def feed(self, event: Row) -> Iterable[Row]: ...

    def finish(self) -> Iterable[Row]: ...


class Edge(Protocol):
    """One adjacent edge ``source -> source + 1``."""

    source: int
    target: int

    def header(self, header: Row, context: MigrationContext) -> Row:
        """Transform a source-version header row into a target-version header row."""
        ...

    def stage(self, header: Row, context: MigrationContext) -> EdgeStage:
        """Start a streaming event transform for a log whose source header is ``header``."""
        ...


def build_registry(edges: Iterable[Edge]) -> dict[int, Edge]:
    """Index edges by source version, refusing duplicates, gaps and non-adjacent edges."""
    registry: dict[int, Edge] = {}
    for edge in edges:
        if edge.target != edge.source + 1:
            raise ImportError(f"migration edge {edge.source}->{edge.target} is not adjacent")
        if edge.source in registry:
            raise ImportError(f"two migration edges start at version {edge.source}")
        registry[edge.source] = edge
    expected = list(range(OLDEST_VERSION, CURRENT_VERSION))
    if sorted(registry) != expected:
        missing = sorted(set(expected) - set(registry))
        extra = sorted(set(registry) - set(expected))
        raise ImportError(
            f"migration chain {OLDEST_VERSION}->{CURRENT_VERSION} is incomplete: "
            f"missing edges from {missing}, unexpected edges from {extra}"
        )
    return registry


def _load_edges() -> dict[int, Edge]:
    from . import v0_to_v1, v1_to_v2, v2_to_v3, v3_to_v4

    return build_registry([v0_to_v1.EDGE, v1_to_v2.EDGE, v2_to_v3.EDGE, v3_to_v4.EDGE])


EDGES: dict[int, Edge] = _load_edges()


def chain(
    header: Row,
    events: Iterable[Row],
    context: MigrationContext,
    *,
    on_header: Callable[[Row], None] | None = None,
) -> tuple[Row, Iterable[Row]]:
    """Compose the edges from ``header['version']`` to :data:`CURRENT_VERSION`.

    Returns the v4 header row and a lazy iterator of v4 event rows. Intermediate
    versions exist only in memory, one event (or one turn) at a time.
    """
    version = header["version"]
    source_header = header
    stream: Iterable[Row] = events
    stages: list[Any] = []
    for source in range(version, CURRENT_VERSION):
        edge = EDGES[source]
        stage = edge.stage(header, context)
        stages.append(stage)
        header = edge.header(header, context)
        if on_header is not None:
            on_header(header)
        stream = _run_stage(stage, stream)
    if context.lenient is not None and stages:
        from ._lenient import NoteStage

        note = NoteStage(context.lenient, stages, version, source_header)
        stream = _run_stage(note, stream)
    return header, stream


def _run_stage(stage: EdgeStage, events: Iterable[Row]) -> Iterable[Row]:
    for event in events:
        yield from stage.feed(event)
    yield from stage.finish()
