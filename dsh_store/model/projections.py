"""Plugin-owned message projections: log-only events that change existing messages.

A *message projection* is a pure interpreter of one event type whose events change the
content of messages already on the surface, without changing which nodes are there or their
identities (v4 spec, "Plugin-owned message projections"). The session validates the whole
decision through its definition before the event commits, then keeps the changed messages,
keyed by their original seqs, for :meth:`Session.derive_messages`.

A reader must interpret every such event: one whose type is declared as a projection
(:data:`MESSAGE_PROJECTION_TYPES`) or has a registered definition, and for which the
session has no definition, is refused (rule ``projection-missing``) on append, on restore
and by :func:`fold_surface` alike, because deriving messages without it would show the
model content the log says it no longer sees.

The first-party definition, :data:`IMAGE_OFFLOAD`, interprets ``image/offload``: it marks
selected image blocks ``"offloaded": true``. Its rules (each refusal an
:class:`EventValidationError` with the event's seq and type):

- ``image-offload-shape``: ``data`` is exactly ``{"targets": [...]}`` with a non-empty list;
- ``image-offload-target``: each target is exactly ``{"seq", "imageIndexes"}``, ``seq`` a
  non-negative safe integer and ``imageIndexes`` a non-empty list;
- ``image-offload-duplicate``: no two targets name the same seq;
- ``image-offload-not-on-surface``: the seq is a current surface node;
- ``image-offload-target-type``: that node is a ``user/message`` or ``tool/result``;
- ``image-offload-indexes``: the indexes are strictly increasing non-negative safe integers;
- ``image-offload-missing-image``: every index names an image of the message; images are
  counted depth-first, through the ``content`` of nested ``tool-result`` blocks, offloaded
  ones included (blocks that are not objects are kept and not counted; a ``null`` block
  or a ``tool-result`` block whose ``content`` is not a list cannot be walked and refuses
  the decision, rule ``image-offload-walk``);
- ``image-offload-already-offloaded``: no selected image is offloaded already.

Targets are read in order, and each is projected before the next is read, so an earlier
target's error wins over a later one's. A projection starts from the message as previously
projected (or the event's own message), keeps every other member and block in place, and
sets ``"offloaded": true`` on the selected image blocks; nothing commits unless every target
succeeds. As in JSON, a number such as ``5.0`` is the integer 5 (and a duplicate of 5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

from ..jsonvalue import MAX_SAFE_INTEGER
from ._checks import fail
from .events import SessionEvent

__all__ = [
    "FIRST_PARTY_PROJECTIONS",
    "IMAGE_OFFLOAD",
    "MESSAGE_PROJECTION_TYPES",
    "ImageOffloadProjection",
    "MessageProjection",
    "ProjectionContext",
    "carries_image",
    "projection_registry",
    "projection_types",
    "run_projection",
]

MESSAGE_PROJECTION_TYPES: Final = frozenset({"image/offload"})
"""Known types whose events change message content: each needs an interpreter to be read."""


class ProjectionContext(NamedTuple):
    """The committed history right before a projection event (read-only views).

    ``nodes``: current surface seqs in model-visible order; ``node_types``: the event type
    of each current node; ``events``: committed events by seq (a streaming check holds
    only the nodes that carry an image, all a first-party definition reads);
    ``messages``: messages changed by earlier projections, keyed by their original seqs.
    """

    nodes: tuple[int, ...]
    node_types: Mapping[int, str]
    events: Mapping[int, SessionEvent]
    messages: Mapping[int, Any]


@runtime_checkable
class MessageProjection(Protocol):
    """A pure interpreter of one event type that changes existing messages."""

    @property
    def type(self) -> str:
        """The event type this definition interprets."""
        ...

    def project(self, event: SessionEvent, context: ProjectionContext) -> Mapping[int, Any]:
        """Validate the whole decision and return the changed messages by original seq.

        Must not mutate ``context`` or the messages in it: return new values.

        :raises EventValidationError: the decision cannot apply to this history.
        """
        ...


def projection_registry(
    projections: Iterable[MessageProjection] | None,
) -> dict[str, MessageProjection]:
    """``type -> definition`` for a session; None means the first-party catalog.

    :raises EventValidationError: ``projection-duplicate`` when two definitions name one
        type, ``projection-invalid`` when a value is not a :class:`MessageProjection`.
    """
    chosen = FIRST_PARTY_PROJECTIONS if projections is None else tuple(projections)
    registry: dict[str, MessageProjection] = {}
    for definition in chosen:
        kind = getattr(definition, "type", None)
        if not isinstance(definition, MessageProjection) or type(kind) is not str or not kind:
            fail(
                "projection-invalid",
                f"a message projection needs a non-empty str type and a project() method, "
                f"got {definition!r:.80}",
                seq=None,
                event_type=None,
            )
        if kind in registry:
            fail(
                "projection-duplicate",
                f"two message projections interpret {kind!r}; register one per type",
                seq=None,
                event_type=kind,
            )
        registry[kind] = definition
    return registry


def projection_types(registry: Mapping[str, MessageProjection]) -> frozenset[str]:
    """Every type that must be interpreted: the declared ones and the registered ones."""
    return MESSAGE_PROJECTION_TYPES | frozenset(registry)


def run_projection(
    registry: Mapping[str, MessageProjection], event: SessionEvent, context: ProjectionContext
) -> dict[int, Any]:
    """The messages ``event`` changes, validated by its definition.

    :raises EventValidationError: ``projection-missing`` when the session has no
        definition for the type; otherwise whatever the definition refuses.
    """
    definition = registry.get(event.type)
    if definition is None:
        fail(
            "projection-missing",
            f"{event.type} changes message content, but this session has no message "
            "projection for it; create or restore the session with its definition",
            seq=event.seq,
            event_type=event.type,
        )
    return dict(definition.project(event, context))


def _index(value: object) -> int | None:
    """A JSON number that is a non-negative safe integer, as an int (``5.0`` is 5)."""
    if type(value) is int:
        return value if 0 <= value <= MAX_SAFE_INTEGER else None
    if (
        type(value) is float
        and value.is_integer()
        and 0 <= value <= MAX_SAFE_INTEGER
        and math.copysign(1.0, value) > 0  # -0 is no index
    ):
        return int(value)
    return None


class ImageOffloadProjection:
    """The first-party interpreter of ``image/offload`` (see the module docstring)."""

    __slots__ = ()

    @property
    def type(self) -> str:
        """``image/offload``."""
        return "image/offload"

    def project(self, event: SessionEvent, context: ProjectionContext) -> Mapping[int, Any]:
        """Mark the selected images ``offloaded``; refuse the whole decision on any error."""
        seq, kind = event.seq, event.type
        data = event._value()
        targets = data.get("targets") if type(data) is dict else None
        if type(data) is not dict or list(data) != ["targets"] or type(targets) is not list:
            fail(
                "image-offload-shape",
                'data must be exactly {"targets": [...]}',
                seq=seq,
                event_type=kind,
            )
        if not targets:
            fail("image-offload-shape", "data.targets must not be empty", seq=seq, event_type=kind)
        on_surface = set(context.nodes)
        changed: dict[int, Any] = {}
        for position, target in enumerate(targets):
            path = f"data.targets[{position}]"
            if (
                type(target) is not dict
                or sorted(target) != ["imageIndexes", "seq"]
                or _index(target["seq"]) is None
                or type(target["imageIndexes"]) is not list
                or not target["imageIndexes"]
            ):
                fail(
                    "image-offload-target",
                    f"{path} must be exactly {{seq, imageIndexes}} with a non-negative safe "
                    "integer seq and a non-empty list of indexes",
                    seq=seq,
                    event_type=kind,
                )
            node = _index(target["seq"])
            assert node is not None
            if node in changed:
                fail(
                    "image-offload-duplicate",
                    f"{path} names seq {node} again; one target per message",
                    seq=seq,
                    event_type=kind,
                )
            if node not in on_surface:
                fail(
                    "image-offload-not-on-surface",
                    f"{path}.seq {node} is not a current surface node",
                    seq=seq,
                    event_type=kind,
                )
            node_type = context.node_types.get(node)
            if node_type not in ("user/message", "tool/result"):
                fail(
                    "image-offload-target-type",
                    f"{path}.seq {node} is a {node_type}; only user/message and tool/result "
                    "images can be offloaded",
                    seq=seq,
                    event_type=kind,
                )
            indexes: list[int] = []
            for raw in target["imageIndexes"]:
                index = _index(raw)
                if index is None or (indexes and index <= indexes[-1]):
                    fail(
                        "image-offload-indexes",
                        f"{path}.imageIndexes must be strictly increasing non-negative safe "
                        f"integers, got {target['imageIndexes']!r:.80}",
                        seq=seq,
                        event_type=kind,
                    )
                indexes.append(index)
            message = context.messages.get(node)
            if message is None:
                message = _own_message(context.events.get(node))
            changed[node] = _offload(message, indexes, node, seq, kind)
        return changed


def _own_message(source: SessionEvent | None) -> Any:
    """The message a node projects by itself (None: a node a streaming check did not keep
    because it carries no image)."""
    if source is None:
        return None
    value = source._value()
    return value if source.type == "user/message" else value["message"]


def _offload(message: Any, indexes: Sequence[int], node: int, seq: int, kind: str) -> Any:
    """``message`` with the images at ``indexes`` (depth-first) marked offloaded."""
    count = 0
    wanted = 0

    def visit(blocks: list[Any]) -> list[Any]:
        nonlocal count, wanted
        out: list[Any] | None = None
        for position, block in enumerate(blocks):
            new = block
            if block is None:
                fail(
                    "image-offload-walk",
                    f"seq {node} holds a null content block, which cannot be walked",
                    seq=seq,
                    event_type=kind,
                )
            if type(block) is dict and block.get("type") == "image":
                if wanted < len(indexes) and count == indexes[wanted]:
                    if block.get("offloaded") is True:
                        fail(
                            "image-offload-already-offloaded",
                            f"image {count} of seq {node} is already offloaded",
                            seq=seq,
                            event_type=kind,
                        )
                    new = {**block, "offloaded": True}
                    wanted += 1
                count += 1
            elif type(block) is dict and block.get("type") == "tool-result":
                inner = block.get("content")
                if type(inner) is not list:
                    fail(
                        "image-offload-walk",
                        f"seq {node} holds a tool-result block whose content is not a list",
                        seq=seq,
                        event_type=kind,
                    )
                walked = visit(inner)
                if walked is not inner:
                    new = {**block, "content": walked}
            if new is not block and out is None:
                out = blocks[:position]
            if out is not None:
                out.append(new)
        return blocks if out is None else out

    content = message.get("content") if type(message) is dict else []
    walked = visit(content) if type(content) is list else content
    if wanted != len(indexes):
        fail(
            "image-offload-missing-image",
            f"seq {node} has no image {indexes[wanted]} (it holds {count})",
            seq=seq,
            event_type=kind,
        )
    return {**message, "content": walked}


IMAGE_OFFLOAD: Final = ImageOffloadProjection()
"""The first-party ``image/offload`` definition."""

FIRST_PARTY_PROJECTIONS: Final[tuple[MessageProjection, ...]] = (IMAGE_OFFLOAD,)
"""The installed catalog: the definitions a session gets when given none."""


def carries_image(message: Any) -> bool:
    """Whether a message holds an image block anywhere a depth-first walk reaches."""
    content = message.get("content") if type(message) is dict else None
    stack = [content] if type(content) is list else []
    while stack:
        for block in stack.pop():
            if type(block) is dict:
                kind = block.get("type")
                if kind == "image":
                    return True
                if kind == "tool-result" and type(block.get("content")) is list:
                    stack.append(block["content"])
    return False
