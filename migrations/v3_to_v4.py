"""Edge v3 -> v4: tool-role results, producer source kinds and the ``plugin:`` namespace.

What the edge does, in source order (see ``docs/migrations.md``):

* inserts ``turn/end {reason: interrupted}`` before a ``turn/start`` that restarts an
  interrupted turn (open turn, no open step, previous event a non-empty next-turn splice);
* renames unknown ignorable events to ``plugin:<type>`` and refuses unknown required ones;
* rewrites ``{kind: 'plugin', plugin}`` message sources to producer kinds, lifts user-role
  tool-result wrappers to ``role: 'tool'`` messages and tags unknown content blocks;
* refuses ``deferLoading`` on v3 tool definitions and delivery markers it cannot vouch for;
* at EOF appends ``subagent/catalog`` facts for children the parent does not list yet.

Child evidence comes from :attr:`MigrationContext.child_headers` (plus, optionally,
``context.extras["child_descriptors"]``: child id -> that child's own
``subagent/descriptor`` payloads). ``None`` means the children are unknown (a loose file
with no store root): the catalog is then left exactly as the source wrote it, because
the edge cannot invent children it has not seen. Pass
``extras={"require_child_evidence": True}`` to refuse instead, as a store publishing a
permanent v4 generation should.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from dsh_store.model.vocabulary import KNOWN_TYPES

from . import EdgeStage, MigrationContext, Row
from ._renumbering import DELIVERY_MARKER, RenumberingStage, check_source_version, refuse
from ._seq_references import BadReference, is_safe_int, remap_payload_references
from ._v4_catalog import CatalogRefusal, CatalogTracker, ChildFact, check_catalog_fact
from ._v4_messages import (
    MessageRefusal,
    convert_source,
    iter_owned_content,
    lift_tool_result,
    message_slots,
    tag_content,
    tag_stream,
)

__all__ = ["EDGE", "V3_EVENT_TYPES", "V3ToV4Edge"]

EDGE_NAME = "3->4"

V3_EVENT_TYPES: frozenset[str] = KNOWN_TYPES - {"developer/message"}
"""The frozen v3 vocabulary (58 names): the v4 one without ``developer/message``, the
only type v4 added. The count below keeps it frozen should the v4 vocabulary change."""
assert len(V3_EVENT_TYPES) == 58

_COPIED_PAYLOAD_TYPES = frozenset(
    {
        "user/message",
        "system/message",
        "assistant/message",
        "assistant/attempt",
        "tool/result",
        "agent/inbox/spliced",
        "session/title-llm-request",
        "team/message/queued",
        "compaction/summary",
        "tool/ptc-dispatch",
    }
)
_REFERENCE_PAYLOAD_TYPES = frozenset(
    {
        "command/done",
        "compaction/summary",
        "compaction/prune",
        "session/title",
        "session/title-llm-request",
        "image/offload",
    }
)


class V3ToV4Edge:
    """The v3 -> v4 edge (stateless; :meth:`stage` starts one log's transform)."""

    source = 3
    target = 4

    def header(self, header: Row, context: MigrationContext) -> Row:
        """Bump the version; nothing else in the header changes."""
        check_source_version(header, 3, context, EDGE_NAME)
        migrated = dict(header)
        migrated["version"] = 4
        return migrated

    def stage(self, header: Row, context: MigrationContext) -> EdgeStage:
        """Start the streaming transform of one v3 log whose header is ``header``."""
        return _V3ToV4Stage(header, context, _child_facts(context))


def _child_facts(context: MigrationContext) -> list[ChildFact] | None:
    if context.child_headers is None:
        if context.extras.get("require_child_evidence"):
            refuse(
                context,
                "the children of this session are unknown; pass the headers of the sessions "
                "that name it as parentSession (an empty list if there are none)",
                "missing child evidence",
                edge=EDGE_NAME,
            )
        return None
    descriptors: Mapping[str, Sequence[Mapping[str, Any]]] = context.extras.get(
        "child_descriptors", {}
    )
    try:
        return [
            ChildFact.from_header(child, descriptors.get(str(child.get("id")), ()))
            for child in context.child_headers
        ]
    except CatalogRefusal as refusal:
        refuse(context, refusal.detail, refusal.rule, edge=EDGE_NAME)


class _V3ToV4Stage(RenumberingStage):
    edge_name = EDGE_NAME
    generation = 3

    def __init__(
        self, header: Row, context: MigrationContext, children: list[ChildFact] | None
    ) -> None:
        super().__init__(header, context)
        self._header_id = header.get("id")
        self._created_at = header.get("createdAt")
        self._children = children
        self._open_turn: Any = None
        self._step_open = False
        self._after_next_turn_splice = False
        self._last_time: Any = None
        self._catalog = CatalogTracker()

    # -- protocol -----------------------------------------------------------------

    def feed(self, event: Row) -> Iterable[Row]:
        seq, event_type = self._admit(event)
        out: list[Row] = []
        if event_type not in V3_EVENT_TYPES:
            if event.get("ignorable") is not True:
                self._fail(
                    f"required event type {event_type!r} is not part of the v3 vocabulary; a "
                    "reader cannot know what it means",
                    "unknown required event",
                    seq,
                    event_type,
                )
            out.append(self._as_plugin_record(event, event_type))
        else:
            data = event.get("data")
            if not isinstance(data, dict):
                self._fail("data is not an object", "malformed payload", seq, event_type)
            if event_type == "turn/start":
                closer = self._interrupted_closer(event, seq)
                if closer is not None:
                    out.append(closer)
            self._track_lifecycle(event_type, data)
            out.append(self._convert(event, seq, event_type))
        self._after_next_turn_splice = (
            event_type == "agent/inbox/spliced"
            and isinstance(event.get("data"), dict)
            and event["data"].get("target") == "next-turn"
            and isinstance(event["data"].get("inserted"), list)
            and len(event["data"]["inserted"]) > 0
        )
        self._last_time = event.get("time")
        return out

    def take_plain(self, event_type: str, seq: int, time: int, data: dict[str, Any]) -> int | None:
        """Take the plain row ``{type, seq, time, data}`` of a fused type
        (:data:`._plain_chunks.FUSED_TYPES`) that the earlier edges passed on, when
        :meth:`feed` would only renumber it: no interrupted ``turn/end`` due before a
        ``turn/start``, no ``deferLoading`` tool in a ``request/header``. Returns its v4
        seq (its payload is passed on as it is), or None with nothing changed, for
        :meth:`feed` to take it.
        """
        if seq != self._next_source_seq or (
            event_type == "turn/start" and self._after_next_turn_splice
        ):
            return None
        if event_type == "request/header" and _defers_loading(data):
            return None
        self._next_source_seq = seq + 1
        self._track_lifecycle(event_type, data)
        self._after_next_turn_splice = False
        self._last_time = time
        return self._take_target_seq()

    def finish(self) -> Iterable[Row]:
        self._check_cut()
        if self._children is None:
            return ()
        try:
            facts = self._catalog.completion(self._children)
        except CatalogRefusal as refusal:
            self._fail(refusal.detail, refusal.rule, refusal.seq, "subagent/catalog")
        time = self._last_time if self._last_time is not None else self._created_at
        return [
            {"type": "subagent/catalog", "seq": self._take_target_seq(), "time": time, "data": fact}
            for fact in facts
        ]

    # -- lifecycle --------------------------------------------------------------------

    def _interrupted_closer(self, turn_start: Row, seq: int) -> Row | None:
        turn = turn_start["data"].get("turn")
        if (
            self._open_turn is None
            or self._step_open
            or not self._after_next_turn_splice
            or not is_safe_int(self._open_turn)
            or turn != self._open_turn + 1
        ):
            return None
        self._shift.insert_before(seq)
        return {
            "type": "turn/end",
            "seq": self._take_target_seq(),
            "time": turn_start["time"],
            "data": {"turn": self._open_turn, "reason": {"kind": "interrupted"}},
        }

    def _track_lifecycle(self, event_type: str, data: dict[str, Any]) -> None:
        if event_type == "turn/start":
            self._open_turn = data.get("turn")
            self._step_open = False
        elif event_type == "turn/end":
            self._open_turn = None
            self._step_open = False
        elif event_type == "step/start":
            self._step_open = True
        elif event_type == "step/end":
            self._step_open = False

    # -- conversion ---------------------------------------------------------------------

    def _as_plugin_record(self, event: Row, event_type: str) -> Row:
        # Unknown ignorable envelopes stay opaque: only the name and the seq change.
        out: Row = {}
        for key, value in event.items():
            if key == "type":
                out[key] = f"plugin:{event_type}"
            elif key == "seq":
                out[key] = self._take_target_seq()
            else:
                out[key] = value
        return out

    def _convert(self, event: Row, seq: int, event_type: str) -> Row:
        data: dict[str, Any] = event["data"]
        shifted = self._shift.inserted > 0
        if self._copy_payloads and (
            event_type in _COPIED_PAYLOAD_TYPES
            or (shifted and event_type in _REFERENCE_PAYLOAD_TYPES)
        ):
            data = orjson.loads(orjson.dumps(data))
        try:
            self._rewrite_payload(event_type, data, seq)
        except MessageRefusal as refusal:
            self._fail(refusal.detail, refusal.rule, seq, event_type)
        except CatalogRefusal as refusal:
            self._fail(refusal.detail, refusal.rule, seq, event_type)
        if shifted:
            self._remap_payload(event_type, data, seq)
        out: Row = {}
        for key, value in event.items():
            if key == "seq":
                out[key] = self._take_target_seq()
            elif key == "data":
                out[key] = data
            elif key == "surfaceOp" and shifted:
                out[key] = self._remap_surface_op(value, seq, event_type)
            elif key == "sourceEventSeqs" and shifted:
                out[key] = self._remap_source_seqs(value, seq, event_type)
            else:
                out[key] = value
        return out

    def _rewrite_payload(self, event_type: str, data: dict[str, Any], seq: int) -> None:
        if event_type == "request/header":
            self._refuse_defer_loading(data, seq)
        elif event_type == DELIVERY_MARKER:
            self._guard_delivery(data, seq)
        elif event_type == "session/end-seed" and data.get("inherited") is True:
            self._at_inherited_marker(seq)
        elif event_type == "subagent/catalog":
            check_catalog_fact(data)
            self._catalog.add(seq, data)
        for slot, message in message_slots(event_type, data):
            convert_source(message, slot)
            if event_type == "tool/result":
                if message.get("role") != "user":
                    raise MessageRefusal(
                        f"data.message.role is {message.get('role')!r}; a v3 tool result is a "
                        "user-role wrapper",
                        "malformed tool-result wrapper",
                    )
                data["message"] = lift_tool_result(message)
            elif "content" in message:
                message["content"] = tag_content(message["content"], f"{slot}.content")
        for path, holder, key in iter_owned_content(event_type, data):
            if key in holder:
                holder[key] = tag_content(holder[key], path)
        if event_type in ("assistant/message", "assistant/attempt"):
            tag_stream(data.get("stream"))
        if (
            event_type == "tool/result"
            and "error" in data
            and data["message"].get("isError") is not True
        ):
            raise MessageRefusal(
                "data.error is set but the tool message does not have isError: true",
                "tool error without error result",
            )

    def _refuse_defer_loading(self, data: dict[str, Any], seq: int) -> None:
        header = data.get("header")
        tools = header.get("tools") if isinstance(header, dict) else None
        if not isinstance(tools, list):
            return
        for index, tool in enumerate(tools):
            if isinstance(tool, dict) and "deferLoading" in tool:
                self._fail(
                    f"data.header.tools[{index}] carries deferLoading, a field that exists only "
                    "in v4",
                    "deferLoading in v3 tool",
                    seq,
                    "request/header",
                )

    def _guard_delivery(self, data: dict[str, Any], seq: int) -> None:
        generation = data.get("sessionFormatVersion", 0)
        if not is_safe_int(generation):
            self._fail(
                f"sessionFormatVersion {generation!r} is not a non-negative integer",
                "malformed delivery marker",
                seq,
                DELIVERY_MARKER,
            )
        if generation == 4:
            self._fail(
                "a v3 log holds a delivery marker claiming format 4",
                "delivery marker claims newer format",
                seq,
                DELIVERY_MARKER,
            )
        if generation != 3:
            return
        session_id = data.get("sessionId")
        through = data.get("throughSeq")
        if not isinstance(session_id, str) or not session_id:
            self._fail(
                "a generation-3 delivery marker needs a non-empty sessionId",
                "malformed delivery marker",
                seq,
                DELIVERY_MARKER,
            )
        if not is_safe_int(through) or through >= seq:
            self._fail(
                f"throughSeq {through!r} is not an earlier seq",
                "malformed delivery marker",
                seq,
                DELIVERY_MARKER,
            )
        if session_id != self._header_id:
            self._foreign_marker(session_id, seq)

    def _at_inherited_marker(self, seq: int) -> None:
        super()._at_inherited_marker(seq)
        self._catalog.reset_at_inherited_marker()

    # -- references (only after an inserted closer) -------------------------------------

    def _remap_payload(self, event_type: str, data: dict[str, Any], seq: int) -> None:
        def remap(value: object, field: str) -> int:
            return self._remap_one(value, seq, event_type, field)

        try:
            remap_payload_references(event_type, data, remap, image_offload=True)
        except BadReference as bad:
            self._fail(bad.detail, bad.rule, seq, event_type)

    def _remap_surface_op(self, value: object, seq: int, event_type: str) -> Any:
        if not isinstance(value, dict):
            return value
        remapped: dict[str, Any] = {}
        for key, item in value.items():
            if key in ("startSeq", "endSeq"):
                remapped[key] = self._remap_one(item, seq, event_type, f"surfaceOp.{key}")
            else:
                remapped[key] = item
        return remapped


def _defers_loading(data: dict[str, Any]) -> bool:
    """True when a request header lists a tool carrying ``deferLoading`` (which
    :meth:`_V3ToV4Stage._refuse_defer_loading` refuses)."""
    header = data.get("header")
    tools = header.get("tools") if isinstance(header, dict) else None
    return isinstance(tools, list) and any(
        isinstance(tool, dict) and "deferLoading" in tool for tool in tools
    )


EDGE = V3ToV4Edge()
