"""The ordered message surface: incremental manager and the pure full fold."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ._checks import fail
from .events import SessionEvent, SurfaceOp, SurfaceReplace
from .projections import (
    MessageProjection,
    ProjectionContext,
    projection_registry,
    projection_types,
    run_projection,
)
from .vocabulary import SURFACE_TYPES

__all__ = ["SurfaceFold", "SurfaceManager", "SurfaceReplacement", "SurfaceView", "fold_surface"]


class SurfaceView(NamedTuple):
    """A snapshot of the surface: node seqs in model-visible order, the rewrite count and
    the content count (rewrites plus committed message projections)."""

    nodes: tuple[int, ...]
    replace_generation: int
    content_generation: int = 0


class SurfaceReplacement(NamedTuple):
    """One replacement seen by :func:`fold_surface`: the actual nodes it shadowed."""

    seq: int
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]


class SurfaceFold(NamedTuple):
    """Result of replaying every surface operation of a log.

    ``projected_messages`` holds the messages changed by message projections
    (:mod:`.projections`), keyed by their original seqs; pass it to
    :func:`~dsh_store.model.messages.derive_event_message` to project a node as the
    session does.
    """

    nodes: tuple[int, ...]
    replacements: tuple[SurfaceReplacement, ...]
    projected_messages: Mapping[int, Any] = MappingProxyType({})

    @property
    def replace_generation(self) -> int:
        """Number of replacements (equals the live manager's counter)."""
        return len(self.replacements)


class SurfaceManager:
    """Validates and applies surface operations one event at a time.

    Appends cost O(1); a replace costs O(surface) and bumps ``replace_generation``.
    """

    __slots__ = ("_node_types", "content_generation", "nodes", "replace_generation")

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self._node_types: dict[int, str] = {}
        self.replace_generation = 0
        # Replacements plus committed message projections: what a message cache keys on.
        self.content_generation = 0

    def copy(self) -> SurfaceManager:
        """An independent copy (used to stage a batch)."""
        twin = SurfaceManager()
        twin.nodes = list(self.nodes)
        twin._node_types = dict(self._node_types)
        twin.replace_generation = self.replace_generation
        twin.content_generation = self.content_generation
        return twin

    def check(
        self,
        event_type: str,
        seq: int,
        op: SurfaceOp | None,
        sources: tuple[int, ...] | None,
    ) -> tuple[int, int] | None:
        """Check a candidate's surface operation; return the replaced index span, if any."""
        if event_type not in SURFACE_TYPES or type(op) is not SurfaceReplace:
            return None
        types = self._node_types
        for endpoint in (op.start_seq, op.end_seq):
            if endpoint not in types:
                fail(
                    "replace-endpoint-not-on-surface",
                    f"replace endpoint {endpoint} is not a current surface node",
                    seq=seq,
                    event_type=event_type,
                )
        first = self.nodes.index(op.start_seq)
        last = first if op.end_seq == op.start_seq else self.nodes.index(op.end_seq)
        if last < first:
            fail(
                "replace-order",
                f"replace start {op.start_seq} comes after end {op.end_seq} on the surface",
                seq=seq,
                event_type=event_type,
            )
        shadowed = self.nodes[first : last + 1]
        cited = set(sources or ())
        missing = [node for node in shadowed if node not in cited]
        if missing:
            fail(
                "replace-coverage",
                f"sourceEventSeqs must include every shadowed surface node; missing {missing[:5]}",
                seq=seq,
                event_type=event_type,
            )
        if (
            first == 0
            and types[self.nodes[0]] == "system/message"
            and (event_type != "system/message")
        ):
            fail(
                "replace-system-head",
                "the system head (surface node 0) may only be replaced by a system/message",
                seq=seq,
                event_type=event_type,
            )
        return first, last

    def apply(self, event_type: str, seq: int, span: tuple[int, int] | None) -> None:
        """Apply a checked operation (``span`` from :meth:`check`)."""
        if event_type not in SURFACE_TYPES:
            return
        if span is None:
            self.nodes.append(seq)
        else:
            first, last = span
            for node in self.nodes[first : last + 1]:
                del self._node_types[node]
            self.nodes[first : last + 1] = [seq]
            self.replace_generation += 1
            self.content_generation += 1
        self._node_types[seq] = event_type

    def shadowed(self, span: tuple[int, int]) -> tuple[int, ...]:
        """The nodes a checked replacement removes."""
        return tuple(self.nodes[span[0] : span[1] + 1])

    def node_types(self) -> Mapping[int, str]:
        """A read-only view of the event type of each current node."""
        return MappingProxyType(self._node_types)

    def view(self) -> SurfaceView:
        """An immutable snapshot."""
        return SurfaceView(tuple(self.nodes), self.replace_generation, self.content_generation)


def fold_surface(
    events: Iterable[SessionEvent], projections: Iterable[MessageProjection] | None = None
) -> SurfaceFold:
    """Replay the surface operations of ``events`` from scratch, with message projections.

    Opaque (unknown-type) events never join the surface. ``projections`` are the
    interpreters of plugin-owned message changes (None: the first-party catalog); an
    event that needs one the fold lacks is refused, as a session refuses it.

    :raises EventValidationError: when an operation or projection is invalid at its position.
    """
    registry = projection_registry(projections)
    kinds = projection_types(registry)
    manager = SurfaceManager()
    replacements: list[SurfaceReplacement] = []
    messages: dict[int, Any] = {}
    by_seq: dict[int, SessionEvent] = {}
    for event in events:
        span = manager.check(event.type, event.seq, event.surface_op, event.source_event_seqs)
        if span is not None:
            op = event.surface_op
            assert type(op) is SurfaceReplace
            replacements.append(
                SurfaceReplacement(event.seq, op.start_seq, op.end_seq, manager.shadowed(span))
            )
        changed = None
        if event.type in kinds:
            context = ProjectionContext(
                tuple(manager.nodes),
                manager.node_types(),
                MappingProxyType(by_seq),
                MappingProxyType(messages),
            )
            changed = run_projection(registry, event, context)
        manager.apply(event.type, event.seq, span)
        if changed:
            messages.update(changed)
            manager.content_generation += 1
        by_seq[event.seq] = event
    return SurfaceFold(tuple(manager.nodes), tuple(replacements), MappingProxyType(messages))
