"""Edge v2 -> v3: the system prompt becomes a surface node; envelopes become canonical.

What the edge does, in source order (see ``docs/migrations.md``):

* audits every source row against the released v2 rules (:mod:`._v2_audit`);
* emits an empty ``system/message`` head right after the first ``step/start`` and a
  replacing ``system/message`` before every ``request/header`` whose ``header.system``
  differs from the current prompt, then drops ``header.system`` everywhere;
* renames the PTC vocabulary (``tool/code-dispatch*`` -> ``tool/ptc-dispatch*``, preset
  ``code`` -> ``ptc``, plugin ``tools-code-mode`` -> ``tools-ptc``);
* writes canonical envelopes (``surfaceOp`` replace uses ``startSeq``/``endSeq``) and
  canonical request headers (no empty ``tools`` or ``adapterDefaults``);
* renumbers densely and remaps every declared reference field through the insertions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import orjson

from . import EdgeStage, MigrationContext, Row
from ._lenient import (
    HEAD_BEFORE_STEP,
    SYNTHESIZED_STEP_END,
    SYNTHESIZED_STEP_START,
    SYNTHESIZED_TURN_END,
    SYNTHESIZED_TURN_START,
    is_carried_unknown,
    unknown_change,
)
from ._renumbering import DELIVERY_MARKER, RenumberingStage, check_source_version
from ._seq_references import remap_payload_references
from ._v2_audit import (
    SURFACE_TYPES_V2,
    V2_EVENT_TYPES,
    AuditFailure,
    audit_v2_event,
    has_exact_members,
    iter_message_slots,
)

__all__ = ["EDGE", "SYSTEM_PROMPT_PLUGIN", "V2ToV3Edge", "synthetic_system_id"]

EDGE_NAME = "2->3"
SYSTEM_PROMPT_PLUGIN = "@deepseek-ai/dsh-system-prompt"
SYNTHETIC_ID_PREFIX = "v2-to-v3-system-"
_RENAMED_TYPES = {
    "tool/code-dispatch": "tool/ptc-dispatch",
    "tool/code-dispatch-start": "tool/ptc-dispatch-start",
}
# The three source slots whose plugin name follows the PTC rename.
_PTC_PLUGIN_SLOT_TYPES = frozenset(
    {"user/message", "agent/inbox/spliced", "session/title-llm-request"}
)
# The events an agent step holds: under the lenient opt-in, one that arrives with its turn
# or step not open gets the missing framing synthesized before it (see _frame).
_STEP_SCOPED_TYPES = frozenset(
    {"assistant/attempt", "assistant/message", "tool/call", "tool/result"}
)
_COPIED_PAYLOAD_TYPES = frozenset(
    {
        "request/header",
        "agent-preset/selected",
        "command/done",
        "compaction/summary",
        "compaction/prune",
        "session/title",
        "session/title-llm-request",
        *_PTC_PLUGIN_SLOT_TYPES,
    }
)
_SYNTHESIZED_CHANGES = {
    "turn/start": SYNTHESIZED_TURN_START,
    "step/start": SYNTHESIZED_STEP_START,
    "step/end": SYNTHESIZED_STEP_END,
    "turn/end": SYNTHESIZED_TURN_END,
}


def synthetic_system_id(header_id: str, anchor_seq: int, anchor_type: str) -> str:
    """The deterministic id of a system message synthesized for source event ``anchor_seq``.

    SHA-256 over the compact JSON array ``["session-format-v2-to-v3", header id, anchor
    source seq, anchor type]`` (JavaScript ``JSON.stringify`` form), lowercase hex.
    """
    text = json.dumps(
        ["session-format-v2-to-v3", header_id, anchor_seq, anchor_type],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return SYNTHETIC_ID_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


class V2ToV3Edge:
    """The v2 -> v3 edge (stateless; :meth:`stage` starts one log's transform)."""

    source = 2
    target = 3

    def header(self, header: Row, context: MigrationContext) -> Row:
        """Bump the version; rename an ``agentPreset`` of ``"code"`` to ``"ptc"``.

        Any other preset, ``"ptc"`` included, is kept: format-2 writers already named the
        preset ``ptc`` in their headers, and the edge only renames ``"code"``.
        """
        check_source_version(header, 2, context, EDGE_NAME)
        migrated = dict(header)
        migrated["version"] = 3
        if migrated.get("agentPreset") == "code":
            migrated["agentPreset"] = "ptc"
        return migrated

    def stage(self, header: Row, context: MigrationContext) -> EdgeStage:
        """Start the streaming transform of one v2 log whose header is ``header``."""
        return _V2ToV3Stage(header, context)


class _V2ToV3Stage(RenumberingStage):
    edge_name = EDGE_NAME
    generation = 2

    def __init__(self, header: Row, context: MigrationContext) -> None:
        super().__init__(header, context)
        self._header_id = str(header.get("id"))
        self._prompt = ""
        self._open_step: tuple[Any, Any] | None = None
        self._head_seq: int | None = None
        self._generated_ids: set[str] = set()
        # Only source ids that carry the synthetic prefix can ever collide; keep just those.
        self._prefixed_source_ids: set[str] = set()
        self._lenient = context.lenient
        # The open turn and its last step number, for the lenient head (see _early_head).
        self._open_turn: Any = None
        self._last_step: Any = 0
        # For the lenient framing (see _frame): the last turn number seen, and whether the
        # open turn's turn/start was synthesized and no step has opened in it yet.
        self._last_turn: Any = 0
        self._bare_synthesized_turn = False
        self._synthesized_turn: Any = None  # the open turn, when its turn/start was made
        self._last_time: Any = header.get("createdAt", 0)

    # -- protocol -----------------------------------------------------------------

    def feed(self, event: Row) -> Iterable[Row]:
        seq, event_type = self._admit(event)
        out: list[Row] = []
        if self._lenient is not None:
            self._frame(event, seq, event_type, out)
        if event_type in SURFACE_TYPES_V2 and self._head_seq is None:
            out.append(self._early_head(event, seq, event_type))
        if event_type == "request/header":
            replacement = self._prompt_replacement(event, seq)
            if replacement is not None:
                out.append(replacement)
        self._guard_delivery_and_cut(event, seq, event_type)
        out.append(self._convert(event, seq, event_type))
        if event_type == "step/start":
            self._open_step = (event["data"]["turn"], event["data"]["step"])
            self._last_step = event["data"]["step"]
            self._bare_synthesized_turn = False
            if self._head_seq is None:
                out.append(self._head(event, seq))
        elif event_type == "step/end":
            self._open_step = None
        elif event_type == "turn/start":
            self._open_turn, self._last_step = event["data"]["turn"], 0
            self._last_turn = self._open_turn
        elif event_type == "turn/end":
            self._open_step = self._open_turn = self._synthesized_turn = None
        self._last_time = event.get("time", self._last_time)
        return out

    def take_plain(self, event_type: str, seq: int, time: int, data: dict[str, Any]) -> int | None:
        """Take the plain row ``{type, seq, time, data}`` of a fused type
        (:data:`._plain_chunks.FUSED_TYPES`) that the early edges admitted, when
        :meth:`feed` would only renumber it (and rewrite a request header): the audit's
        payload keys hold, the faithful chain runs over owned rows, no system head is due
        after a ``step/start`` and a ``request/header``'s prompt is the current one.
        Returns its format-3 seq (its payload is passed on, a request header's rewritten
        in place), or None with nothing changed, for :meth:`feed` to take it.
        """
        if (
            self._lenient is not None
            or seq != self._next_source_seq
            or not has_exact_members(event_type, data)
        ):
            return None
        if event_type == "request/header":
            header = data["header"]
            if (
                self._copy_payloads
                or type(header) is not dict
                or header.get("system", "") != self._prompt
            ):
                return None
            self._rewrite_payload(event_type, data, seq)
        elif event_type == "step/start":
            if self._head_seq is None:
                return None
            self._open_step = (data["turn"], data["step"])
            self._last_step = data["step"]
            self._bare_synthesized_turn = False
        elif event_type == "step/end":
            self._open_step = None
        elif event_type == "turn/start":
            self._open_turn, self._last_step = data["turn"], 0
            self._last_turn = self._open_turn
        self._next_source_seq = seq + 1
        self._last_time = time
        return self._take_target_seq()

    def finish(self) -> Iterable[Row]:
        self._check_cut()
        out: list[Row] = []
        if self._lenient is not None and self._synthesized_turn is not None:
            self._close_synthesized_turn(None, out)
        return out

    # -- admission ------------------------------------------------------------------

    def _admit(self, event: Row) -> tuple[int, str]:
        seq, event_type = super()._admit(event)
        if (
            self._lenient is not None
            and event_type not in V2_EVENT_TYPES
            and is_carried_unknown(event, event_type)
        ):
            if set(event) - {"type", "seq", "time", "data", "ignorable"} or not isinstance(
                event.get("data"), dict
            ):
                self._fail(
                    "an unknown ignorable event is carried only as {type, seq, time, data, "
                    "ignorable} with an object payload",
                    "malformed envelope",
                    seq,
                    event_type,
                )
            self._lenient.record(EDGE_NAME, seq, unknown_change(event_type))
            return seq, event_type
        try:
            audit_v2_event(event)
        except AuditFailure as failure:
            self._fail(failure.detail, failure.rule, seq, event_type)
        data = event["data"]
        for slot, message in iter_message_slots(event_type, data):
            self._track_source_id(message, slot, seq, event_type)
            source = message.get("source")
            if (
                event_type in _PTC_PLUGIN_SLOT_TYPES
                and isinstance(source, dict)
                and source.get("kind") == "plugin"
                and source.get("plugin") == "tools-ptc"
            ):
                self._fail(
                    f"{slot}.source already uses the v3 plugin name 'tools-ptc'",
                    "v3 ptc tag in v2 source",
                    seq,
                    event_type,
                )
        return seq, event_type

    def _track_source_id(
        self, message: dict[str, Any], slot: str, seq: int, event_type: str
    ) -> None:
        message_id = message.get("id")
        if isinstance(message_id, str) and message_id.startswith(SYNTHETIC_ID_PREFIX):
            if message_id in self._generated_ids:
                self._fail(
                    f"{slot}.id {message_id!r} equals a synthesized system message id",
                    "synthetic system id collision",
                    seq,
                    event_type,
                )
            self._prefixed_source_ids.add(message_id)

    # -- the system head ------------------------------------------------------------

    def _new_system_id(self, anchor_seq: int, anchor_type: str) -> str:
        message_id = synthetic_system_id(self._header_id, anchor_seq, anchor_type)
        if message_id in self._prefixed_source_ids or message_id in self._generated_ids:
            self._fail(
                f"synthesized system message id {message_id!r} is already in use",
                "synthetic system id collision",
                anchor_seq,
                anchor_type,
            )
        self._generated_ids.add(message_id)
        return message_id

    def _system_message(
        self, anchor: Row, anchor_seq: int, turn: Any, step: Any, prompt: str
    ) -> Row:
        content: list[Any] = [{"type": "text", "text": prompt}] if prompt else []
        message = {
            "id": self._new_system_id(anchor_seq, anchor["type"]),
            "role": "system",
            "source": {"kind": "plugin", "plugin": SYSTEM_PROMPT_PLUGIN},
            "content": content,
        }
        row: Row = {
            "type": "system/message",
            "seq": self._take_target_seq(),
            "time": anchor["time"],
            "data": {"turn": turn, "step": step, "message": message},
        }
        return row

    def _early_head(self, event: Row, seq: int, event_type: str) -> Row:
        """The head for a surface event that comes before the first ``step/start``.

        Refused by default: the head cannot follow a step/start without moving the event
        behind it. With the lenient opt-in, and a turn open, the empty head is inserted
        just before the event, naming the open turn and the step that opens next, so it
        is surface node 0 (the prompt first, as DSH's format-0 reader builds requests).
        """
        turn = self._open_turn
        if self._lenient is None or turn is None or not isinstance(self._last_step, int):
            why = "" if self._lenient is None else " (not even leniently: no turn is open)"
            self._fail(
                "surface before first step cannot acquire a system head without changing "
                f"chronology{why}",
                "surface before first step",
                seq,
                event_type,
            )
        self._shift.insert_before(seq)
        row = self._system_message(event, seq, turn, self._last_step + 1, "")
        row["surfaceOp"] = "append"
        self._head_seq = row["seq"]
        self._lenient.record(
            EDGE_NAME,
            seq,
            {
                "change": HEAD_BEFORE_STEP,
                "sourceType": event_type,
                "messageId": row["data"]["message"]["id"],
            },
        )
        return row

    # -- the lenient framing -------------------------------------------------------

    def _frame(self, event: Row, seq: int, event_type: str, out: list[Row]) -> None:
        """Synthesize the ``turn/start``, ``step/end`` and ``step/start`` the v4 model needs
        before ``event`` (lenient only; pre-turn builds of DSH wrote none of them).

        A surface event with no turn open opens the next turn; a step-scoped event of the
        open (or next) turn whose step is not open opens it, after ending the open step
        when it names the next one. Anything else is left to the usual rules.
        """
        assert self._lenient is not None
        data = event["data"]
        if event_type == "turn/start" and self._synthesized_turn is not None:
            if not self._bare_synthesized_turn:
                self._close_synthesized_turn(seq, out)
                return
            self._fail(
                "surface before first step cannot acquire a system head without changing "
                f"chronology (not even leniently: turn {data.get('turn')!r} starts after a "
                "message already placed in a synthesized turn)",
                "surface before first step",
                seq,
                event_type,
            )
        scoped = event_type in _STEP_SCOPED_TYPES and isinstance(data, dict)
        if self._open_turn is None and isinstance(self._last_turn, int):
            if event_type in SURFACE_TYPES_V2:
                turn = self._last_turn + 1
            elif scoped and data.get("turn") == self._last_turn + 1:
                turn = data["turn"]
            else:
                return
            out.append(self._framing(event, seq, "turn/start", {"turn": turn}))
            self._open_turn, self._last_step, self._last_turn = turn, 0, turn
            self._bare_synthesized_turn = True
            self._synthesized_turn = turn
        if not scoped or data.get("turn") != self._open_turn:
            return
        step = data.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            return
        if self._open_step is not None and self._open_step == (self._open_turn, step - 1):
            out.append(
                self._framing(event, seq, "step/end", {"turn": self._open_turn, "step": step - 1})
            )
            self._open_step = None
        # A step/start whose step is no integer has no next step to frame.
        if self._open_step is None and type(self._last_step) is int and step == self._last_step + 1:
            out.append(
                self._framing(event, seq, "step/start", {"turn": self._open_turn, "step": step})
            )
            self._open_step = (self._open_turn, step)
            self._last_step = step
            self._bare_synthesized_turn = False
            if self._head_seq is None:
                self._shift.insert_before(seq)
                head = self._system_message(event, seq, self._open_turn, step, "")
                head["surfaceOp"] = "append"
                self._head_seq = head["seq"]
                out.append(head)

    def _close_synthesized_turn(self, seq: int | None, out: list[Row]) -> None:
        """End the open turn whose turn/start was synthesized (and its open step) before
        source event ``seq``, or at the end of the log (``None``): the source never opened
        it, so nothing of it is left open for a load to close (DSH's reader closes
        nothing there either). The reason is ``interrupted``: the source says no more."""
        turn = self._open_turn
        anchor = {"time": self._last_time}
        if self._open_step is not None:
            step = {"turn": turn, "step": self._open_step[1]}
            out.append(self._framing(anchor, seq, "step/end", step))
        reason = {"turn": turn, "reason": {"kind": "interrupted"}}
        out.append(self._framing(anchor, seq, "turn/end", reason))
        self._open_step = self._open_turn = self._synthesized_turn = None

    def _framing(self, anchor: Row, seq: int | None, event_type: str, data: dict[str, Any]) -> Row:
        """A synthesized framing event just before source event ``seq`` (at the end of the
        log for ``None``), recorded."""
        assert self._lenient is not None
        self._shift.insert_before(self._next_source_seq if seq is None else seq)
        row: Row = {
            "type": event_type,
            "seq": self._take_target_seq(),
            "time": anchor["time"],
            "data": data,
        }
        change = _SYNTHESIZED_CHANGES[event_type]
        if seq is None:
            self._lenient.record_at_end({"change": change, **data})
        else:
            self._lenient.record(EDGE_NAME, seq, {"change": change, **data})
        return row

    def _head(self, step_start: Row, seq: int) -> Row:
        self._shift.insert_before(seq + 1)
        data = step_start["data"]
        row = self._system_message(step_start, seq, data["turn"], data["step"], "")
        row["surfaceOp"] = "append"
        self._head_seq = row["seq"]
        return row

    def _prompt_replacement(self, request_header: Row, seq: int) -> Row | None:
        header = request_header["data"]["header"]
        if not isinstance(header, dict):
            self._fail("data.header is not an object", "malformed payload", seq, "request/header")
        prompt = header.get("system", "")
        if not isinstance(prompt, str):
            self._fail(
                f"data.header.system is {type(prompt).__name__}, not a string",
                "malformed payload",
                seq,
                "request/header",
            )
        if prompt == self._prompt:
            return None
        if self._open_step is None or self._head_seq is None:
            self._fail(
                "the request prompt changes while no step is open, so no system message can "
                "carry it",
                "changed request prompt outside an open step",
                seq,
                "request/header",
            )
        self._shift.insert_before(seq)
        turn, step = self._open_step
        previous_head = self._head_seq
        row = self._system_message(request_header, seq, turn, step, prompt)
        row["surfaceOp"] = {"op": "replace", "startSeq": previous_head, "endSeq": previous_head}
        row["sourceEventSeqs"] = [previous_head]
        self._head_seq = row["seq"]
        self._prompt = prompt
        return row

    # -- per-event rules ------------------------------------------------------------

    def _guard_delivery_and_cut(self, event: Row, seq: int, event_type: str) -> None:
        data = event["data"]
        if event_type == "session/end-seed" and data.get("inherited") is True:
            self._at_inherited_marker(seq)
        elif event_type == DELIVERY_MARKER:
            generation = data.get("sessionFormatVersion")
            if generation == 3:
                self._fail(
                    "a v2 log holds a delivery marker claiming format 3",
                    "delivery marker claims newer format",
                    seq,
                    event_type,
                )
            if generation == 2 and data.get("sessionId") != self._header_id:
                self._foreign_marker(data.get("sessionId"), seq)

    def _convert(self, event: Row, seq: int, event_type: str) -> Row:
        data = event["data"]
        if event_type in _COPIED_PAYLOAD_TYPES:
            if self._copy_payloads:
                data = orjson.loads(orjson.dumps(data))
            self._rewrite_payload(event_type, data, seq)
        out: Row = {}
        for key, value in event.items():
            if key == "type":
                out[key] = _RENAMED_TYPES.get(event_type, event_type)
            elif key == "seq":
                out[key] = self._take_target_seq()
            elif key == "data":
                out[key] = data
            elif key == "surfaceOp":
                out[key] = self._canonical_surface_op(value, seq, event_type)
            elif key == "sourceEventSeqs":
                out[key] = self._remap_source_seqs(value, seq, event_type)
            else:
                out[key] = value
        if event_type == "tool/result":
            self._check_tool_error(data, seq, event_type)
        return out

    def _rewrite_payload(self, event_type: str, data: dict[str, Any], seq: int) -> None:
        if event_type == "request/header":
            header = data["header"]
            header.pop("system", None)
            if header.get("tools") == []:
                del header["tools"]
            if header.get("adapterDefaults") == {}:
                del header["adapterDefaults"]
        elif event_type == "agent-preset/selected" and data.get("agentPreset") == "code":
            data["agentPreset"] = "ptc"
        if event_type in _PTC_PLUGIN_SLOT_TYPES:
            for _slot, message in iter_message_slots(event_type, data):
                source = message.get("source")
                if (
                    isinstance(source, dict)
                    and source.get("kind") == "plugin"
                    and source.get("plugin") == "tools-code-mode"
                ):
                    source["plugin"] = "tools-ptc"

        def remap(value: object, field: str) -> int:
            return self._remap_one(value, seq, event_type, field)

        remap_payload_references(event_type, data, remap, image_offload=False)

    def _remap_source_seqs(self, value: object, seq: int, event_type: str) -> list[Any]:
        if isinstance(value, list) and not value:
            self._fail(
                "sourceEventSeqs is present but empty", "malformed reference", seq, event_type
            )
        return super()._remap_source_seqs(value, seq, event_type)

    def _canonical_surface_op(self, value: object, seq: int, event_type: str) -> Any:
        if value == "append":
            return "append"
        if (
            not isinstance(value, dict)
            or set(value) != {"op", "start", "end"}
            or value["op"] != "replace"
        ):
            self._fail(
                f"surfaceOp {value!r} is neither 'append' nor {{op: 'replace', start, end}}",
                "malformed surfaceOp",
                seq,
                event_type,
            )
        canonical: dict[str, Any] = {}
        for key, item in value.items():
            if key == "op":
                canonical["op"] = item
            else:
                canonical[f"{key}Seq"] = self._remap_one(item, seq, event_type, f"surfaceOp.{key}")
        return canonical

    def _check_tool_error(self, data: dict[str, Any], seq: int, event_type: str) -> None:
        if "error" not in data:
            return
        content = data["message"].get("content") if isinstance(data["message"], dict) else None
        if not (
            isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and content[0].get("type") == "tool-result"
            and content[0].get("isError") is True
        ):
            self._fail(
                "data.error is set but the message is not a single tool-result block with "
                "isError: true",
                "tool error without error result",
                seq,
                event_type,
            )


EDGE = V2ToV3Edge()
