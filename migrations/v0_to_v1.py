"""Edge v0 -> v1: a version bump plus a bounded set of legacy normalizations.

Every seq is kept (nothing is inserted or removed), so no reference field changes.
Packed assistant-delta rows pass through untouched (the 1->2 edge folds them). Every
other row is normalized in this order and then checked against the exact format-0
payload key sets (:mod:`.v0_vocabulary`):

1. ``compact/start|summary|end|prune`` are renamed ``compaction/*``.
2. ``request/header-delta``, ``mode/set`` and ``request/header`` with reason ``fallback``
   are refused: they predate the released format and have no faithful successor.
3. ``turn/start {turn, trigger}`` loses ``trigger``.
4. ``turn/end`` legacy reasons: ``aborted`` without a cause gets ``reason:{kind:"legacy"}``,
   ``disposed`` becomes ``aborted`` with ``reason:{kind:"disposed"}``, the two legacy
   ``error`` shapes become ``{kind:"error", error:{...}}``; unknown kinds are kept.
5. ``request/header.data.header.messagePrefix`` (an array) is dropped.
6. ``steering/message`` becomes ``user/message``.
7. ``llm/retry`` without ``retryId`` reuses the last id of its chain (turn, step, provider,
   policyKey) in the current turn, else gets ``legacy-retry:<sessionId>:<seq>``.
8. ``compaction/start`` without ``compactionId`` gets ``legacy-compaction:<sessionId>:<seq>``;
   the open compaction's id fills a missing id on the following ``compaction/summary``,
   ``compaction/end`` and compact-plugin ``user/message`` sources.
9. Pre-identity message wrappers get message objects with ids
   ``legacy-message:<sessionId>:<seq>`` (a legacy ``tool/result`` that replaces surface
   nodes takes the id of the message at the replaced ``start``).
10. A format-0 delivery marker must name this session (except in a child's inherited prefix).

Refusal rules (``MigrationRefusedError.rule``, edge ``"0->1"``):

- ``wrong-source-version``: the header's version is not 0.

A header without ``delegationDepth`` (written by early format-0 builds) gets ``0``.
- ``malformed-envelope``: a row that is not ``{type, seq, time, data}`` with a string type,
  safe-integer seq and time and an object payload.
- ``seq-not-dense``: a row's seq (or packed ``seq0``) is not the running event count.
- ``malformed-packed-row``: a packed row without the exact packed shape.
- ``removed-event-type``: ``request/header-delta`` or ``mode/set``.
- ``fallback-request-reason``: a ``request/header`` whose reason is ``fallback``.
- ``unknown-event-type``: a type outside the 51 format-0 types, even when ignorable
  (with ``context.lenient``, an ignorable type no format knows is carried unchanged).
- ``envelope-member``: an envelope key the type may not carry, or ``ignorable`` not ``true``.
- ``malformed-legacy-shape``: a legacy shape (trigger, turn-end reason, messagePrefix,
  steering message, message wrapper) that is not exactly one of the known forms.
- ``replaced-message-without-id``: a legacy ``tool/result`` replaces a surface range whose
  first node has no known message id.
- ``missing-payload-member`` / ``unexpected-payload-member``: payload keys are not exact.
- ``subagent-descriptor-version``: a ``subagent/descriptor`` whose version is not 1, 2 or 3
  (real format-0 logs carry version 2, so the stricter "only 3" reading is not used).
- ``seed-beyond-log``: the header's ``seedLength`` exceeds the number of events.
- ``foreign-delivery-marker``: a format-0 delivery marker naming another session outside
  the inherited prefix of a child session.

Memory: the stage holds no events. It keeps the message id of each current surface node
(an int and a short string per node, pruned when a replacement shadows a range) so that a
legacy replacing ``tool/result`` can take the replaced message's id, plus the retry chain
ids of the current turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
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
from ._plain_chunks import FUSED_TYPES, PLAIN_ROW_KEYS, PlainChunk, plain_chunk
from .packed import check_packed_row, is_packed_row
from .v0_vocabulary import (
    EVENT_TYPES,
    MAX_SAFE_INTEGER,
    SURFACE_TYPES,
    is_safe_int,
    payload_problem,
)

__all__ = ["EDGE", "V0ToV1Edge", "V0ToV1Stage"]

EDGE_NAME = "0->1"

_COMPACT_RENAMES = {
    "compact/start": "compaction/start",
    "compact/summary": "compaction/summary",
    "compact/end": "compaction/end",
    "compact/prune": "compaction/prune",
}
_REMOVED_TYPES = frozenset({"request/header-delta", "mode/set"})
_BARE_REASON_KINDS = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
_FAILURE_KEYS = frozenset({"message", "code", "status", "providerRetryAfterMs", "requestId"})
# Released format-0 writers wrote descriptor versions 1-3 (the 3->4 edge reads all three);
# real format-0 logs carry version 2, so only other values are refused.
_DESCRIPTOR_VERSIONS = (1, 2, 3)


class V0ToV1Edge:
    """The 0 -> 1 edge (see the module docstring for its rules)."""

    source = 0
    target = 1

    def header(self, header: Row, context: MigrationContext) -> Row:
        """Return the format-1 header: the same keys with ``version`` 1.

        Some early format-0 writers omitted ``delegationDepth``; such a log is a top-level
        session, so the edge supplies ``0`` (the physical reader reports the missing field
        as a finding) instead of refusing an otherwise faithful log.
        """
        check_source_version(header, 0, context, EDGE_NAME)
        out = {key: (1 if key == "version" else value) for key, value in header.items()}
        out.setdefault("delegationDepth", 0)
        return out

    def stage(self, header: Row, context: MigrationContext) -> V0ToV1Stage:
        """Start the event transform for a log with format-0 header ``header``."""
        check_source_version(header, 0, context, EDGE_NAME)
        return V0ToV1Stage(header, context)


class V0ToV1Stage(EarlyStage):
    """Streaming event transform of one format-0 log into format 1."""

    edge_name = EDGE_NAME

    def __init__(self, header: Row, context: MigrationContext) -> None:
        self._path = context.path
        self._session_id = header.get("id")
        seed_length = header.get("seedLength")
        self._seed_length = seed_length if is_safe_int(seed_length) else None
        self._has_parent = "parentSession" in header
        self._next_seq = 0
        self._retry_ids: dict[str, str] = {}
        self._compaction_id: str | None = None
        self._surface_ids: dict[int, str | None] = {}
        self._lenient = context.lenient

    @property
    def tracked_surface_ids(self) -> int:
        """How many surface-node message ids the stage currently remembers."""
        return len(self._surface_ids)

    def source_seq(self, target: int) -> int | None:
        """Seqs are kept by this edge: the source seq of ``target`` is ``target``."""
        return target

    def feed(self, event: Row) -> Iterable[Row]:
        """Normalize one format-0 row; returns exactly one format-1 row."""
        # An ordinary chunk row passes every rule of _normalize unchanged (a rename, a
        # removed type, an envelope member or a payload change cannot apply to it); one
        # combined test admits it, anything else takes the full path and its refusals.
        if event.get("type") == "assistant/chunk" and event.keys() == PLAIN_ROW_KEYS:
            data = event["data"]
            if self._continues(event) and data.keys() == CHUNK_DATA_KEYS:
                self._next_seq += 1
                return [dict(event)]
        if is_packed_row(event):
            return [self._pass_packed(event)]
        return [self._normalize(event)]

    def _continues(self, event: Row) -> bool:
        """Whether a row of the plain envelope (:data:`PLAIN_ROW_KEYS`) continues the log:
        its seq is the next one, seq and time are safe integers and its data is an object."""
        seq, time = event["seq"], event["time"]
        return (
            type(seq) is int
            and seq == self._next_seq
            and seq <= MAX_SAFE_INTEGER
            and type(time) is int
            and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
            and type(event["data"]) is dict
        )

    def normalize(self, event: Row) -> Row:
        """What :meth:`feed` returns for a row that is neither an ``assistant/chunk`` nor a
        packed row, for a driver that has already told the row kinds apart."""
        return self._normalize(event)

    def take_plain_chunk(self, event: Row) -> PlainChunk | None:
        """Count ``event`` and return its fields when it is an ordinary chunk row.

        For a driver that hands such rows straight to the 1->2 stage: this edge would pass
        them on unchanged. Returns None (and counts nothing) for any other row.
        """
        fields = plain_chunk(event, self._next_seq)
        if fields is not None:
            self._next_seq += 1
        return fields

    def take_plain(self, event: Row) -> bool:
        """Count ``event`` and return True when it is a plain row of a fused type
        (:data:`._plain_chunks.FUSED_TYPES`) that :meth:`feed` would pass on unchanged.

        For a driver that hands such rows straight on: every rule of :meth:`_normalize`
        holds for it and none changes it. Returns False (and counts nothing) for any other
        row, which :meth:`feed` then judges.
        """
        event_type = event.get("type")
        if event_type not in FUSED_TYPES or event.keys() != PLAIN_ROW_KEYS:
            return False
        data = event["data"]
        if not (self._continues(event) and payload_problem(event_type, data) is None):
            return False
        if event_type == "request/header":
            header = data["header"]
            if data["reason"] == "fallback" or (
                isinstance(header, dict) and "messagePrefix" in header
            ):
                return False
        self._next_seq += 1
        if event_type == "turn/start":
            self._retry_ids.clear()
        return True

    def finish(self) -> Iterable[Row]:
        """Nothing is ever held back; only check that the inherited cut lies in the log."""
        self._check_seed_length(self._seed_length, self._next_seq)
        return []

    # -- helpers -------------------------------------------------------------------

    def _legacy_id(self, kind: str, seq: int) -> str:
        return f"legacy-{kind}:{self._session_id}:{seq}"

    def _pass_packed(self, row: Row) -> Row:
        count = check_packed_row(row, path=self._path, edge=EDGE_NAME)
        if row["seq0"] != self._next_seq:
            raise self._refuse(
                "seq-not-dense",
                f"packed row starts at seq {row['seq0']}, expected {self._next_seq}",
                row["seq0"],
                row["type"],
            )
        self._next_seq += count
        return row

    def _normalize(self, row: Row) -> Row:
        event_type, seq = self._check_row(row)
        if seq != self._next_seq:
            raise self._refuse(
                "seq-not-dense", f"row has seq {seq}, expected {self._next_seq}", seq, event_type
            )
        self._next_seq += 1
        event_type = _COMPACT_RENAMES.get(event_type, event_type)
        self._refuse_removed(event_type, row, seq)
        data: dict[str, Any] = row["data"]
        if event_type == "steering/message":
            event_type, data = "user/message", self._steering(data, seq)
        if event_type not in EVENT_TYPES:
            if self._lenient is not None and is_carried_unknown(row, event_type):
                self._check_members(row, event_type, seq, BASE_ENVELOPE)
                self._lenient.record(EDGE_NAME, seq, unknown_change(event_type))
                return dict(row)
            raise self._refuse(
                "unknown-event-type",
                f"{event_type!r} is not a format-0 event type (refused even when ignorable)",
                seq,
                event_type,
            )
        self._check_envelope(row, event_type, seq)
        data = self._normalize_payload(event_type, data, row, seq)
        problem = payload_problem(event_type, data)
        if problem is not None:
            raise self._refuse(problem[0], problem[1], seq, event_type)
        self._check_semantics(event_type, data, seq)
        out = dict(row)
        out["type"] = event_type
        out["data"] = data
        if event_type in SURFACE_TYPES:
            self._track_surface(event_type, out, seq)
        return out

    def _refuse_removed(self, event_type: str, row: Row, seq: int) -> None:
        if event_type in _REMOVED_TYPES:
            raise self._refuse(
                "removed-event-type",
                f"{event_type} was removed before format 0 was released and has no successor",
                seq,
                event_type,
            )
        if event_type == "request/header" and row["data"].get("reason") == "fallback":
            raise self._refuse(
                "fallback-request-reason",
                "request/header reason 'fallback' was removed before format 0 was released",
                seq,
                event_type,
            )

    def _check_envelope(self, row: Row, event_type: str, seq: int) -> None:
        allowed = SURFACE_ENVELOPE if event_type in SURFACE_TYPES else BASE_ENVELOPE
        self._check_members(row, event_type, seq, allowed)

    def _malformed(self, detail: str, seq: int, event_type: str) -> MigrationRefusedError:
        return self._refuse(
            "malformed-legacy-shape", f"malformed pre-react-loop {detail}", seq, event_type
        )

    # -- per-type normalizations ---------------------------------------------------

    def _normalize_payload(
        self, event_type: str, data: dict[str, Any], row: Row, seq: int
    ) -> dict[str, Any]:
        if event_type == "turn/start":
            self._retry_ids.clear()
            if "trigger" in data:
                return self._drop_trigger(data, seq)
        elif event_type == "turn/end":
            return self._turn_end(data, seq)
        elif event_type == "request/header":
            return self._drop_message_prefix(data, seq)
        elif event_type == "user/message":
            return self._user_message(data, seq)
        elif event_type == "assistant/message":
            return self._assistant_wrapper(data, seq)
        elif event_type == "tool/result":
            return self._tool_wrapper(data, row, seq)
        elif event_type == "llm/retry":
            return self._retry_id(data, seq)
        elif event_type.startswith("compaction/") or event_type == "session/end-seed":
            return self._compaction_id_of(event_type, data, seq)
        return data

    def _drop_trigger(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        turn, trigger = data.get("turn"), data.get("trigger")
        if (
            set(data) != {"turn", "trigger"}
            or not is_safe_int(turn)
            or turn < 1
            or not isinstance(trigger, dict)
            or not isinstance(trigger.get("kind"), str)
            or not trigger["kind"]
        ):
            raise self._malformed("turn/start trigger", seq, "turn/start")
        return {"turn": turn}

    def _turn_end(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        turn, reason = data.get("turn"), data.get("reason")
        if (
            set(data) != {"turn", "reason"}
            or not is_safe_int(turn)
            or turn < 1
            or not isinstance(reason, dict)
            or not isinstance(reason.get("kind"), str)
        ):
            raise self._malformed("turn/end (expected exactly {turn, reason})", seq, "turn/end")
        kind = reason["kind"]
        new_reason: dict[str, Any] = reason
        if kind in _BARE_REASON_KINDS:
            if set(reason) != {"kind"}:
                raise self._malformed(
                    f"turn/end reason {kind!r} (expected only kind)", seq, "turn/end"
                )
        elif kind == "aborted" and "reason" not in reason:
            if set(reason) != {"kind"}:
                raise self._malformed("turn/end aborted reason", seq, "turn/end")
            new_reason = {"kind": "aborted", "reason": {"kind": "legacy"}}
        elif kind == "disposed":
            if set(reason) != {"kind"}:
                raise self._malformed("turn/end disposed reason", seq, "turn/end")
            new_reason = {"kind": "aborted", "reason": {"kind": "disposed"}}
        elif kind == "error" and "error" not in reason:
            new_reason = {"kind": "error", "error": self._legacy_failure(reason, seq)}
        return {"turn": turn, "reason": new_reason}

    def _legacy_failure(self, reason: dict[str, Any], seq: int) -> dict[str, Any]:
        failure = reason.get("failure")
        if set(reason) == {"kind", "step", "failure"}:
            if (
                isinstance(failure, dict)
                and failure.keys() <= _FAILURE_KEYS
                and isinstance(failure.get("message"), str)
                and isinstance(failure.get("code"), str)
            ):
                return failure
        elif {"kind", "step", "message"} <= reason.keys() <= {"kind", "step", "message", "code"}:
            code = reason.get("code")
            if isinstance(reason["message"], str) and (code is None or isinstance(code, str)):
                return {"message": reason["message"], "code": code or "UNKNOWN"}
        raise self._malformed("turn/end error reason", seq, "turn/end")

    def _drop_message_prefix(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        header = data.get("header")
        if not isinstance(header, dict) or "messagePrefix" not in header:
            return data
        if not isinstance(header["messagePrefix"], list):
            raise self._malformed(
                "request/header messagePrefix (not an array)", seq, "request/header"
            )
        new_header = {key: value for key, value in header.items() if key != "messagePrefix"}
        return {**data, "header": new_header}

    def _steering(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        if set(data) == {"turn", "message"} and isinstance(data["message"], dict):
            return dict(data["message"])
        if set(data) == {"turn", "content", "source"}:
            return {
                "content": data["content"],
                "source": data["source"],
                "id": self._legacy_id("message", seq),
                "role": "user",
            }
        raise self._malformed("steering/message", seq, "steering/message")

    def _user_message(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        if "id" not in data and "message" not in data and {"content", "source"} <= data.keys():
            if data.get("role", "user") != "user":
                raise self._malformed(
                    "user/message wrapper (role is not user)", seq, "user/message"
                )
            data = {**data, "id": self._legacy_id("message", seq), "role": "user"}
        source = data.get("source")
        if (
            isinstance(source, dict)
            and source.get("kind") == "plugin"
            and source.get("plugin") == "compact"
            and "compactionId" not in source
            and self._compaction_id is not None
        ):
            data = {**data, "source": {**source, "compactionId": self._compaction_id}}
        return data

    def _assistant_wrapper(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        if "message" in data or not {"content", "provenance"} <= data.keys():
            return data
        provenance = data["provenance"]
        if not isinstance(provenance, dict):
            raise self._malformed(
                "assistant/message provenance (not an object)", seq, "assistant/message"
            )
        message = {
            "id": self._legacy_id("message", seq),
            "role": "assistant",
            "content": data["content"],
            "source": {**provenance, "kind": "model"},
        }
        return _replace_keys(data, ("content", "provenance"), "message", message)

    def _tool_wrapper(self, data: dict[str, Any], row: Row, seq: int) -> dict[str, Any]:
        if "message" in data or not {"callId", "content", "isError"} <= data.keys():
            return data
        call_id = data["callId"]
        message_id = self._legacy_id("message", seq)
        surface_op = row.get("surfaceOp")
        if isinstance(surface_op, dict) and surface_op.get("op") == "replace":
            start = surface_op.get("start")
            known = self._surface_ids.get(start) if is_safe_int(start) else None
            if known is None:
                raise self._refuse(
                    "replaced-message-without-id",
                    f"legacy tool/result replaces surface seq {start!r}, which has no known "
                    "message id to inherit",
                    seq,
                    "tool/result",
                )
            message_id = known
        message = {
            "id": message_id,
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": data["content"],
                    "isError": data["isError"],
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        }
        return _replace_keys(data, ("callId", "content", "isError"), "message", message)

    def _retry_id(self, data: dict[str, Any], seq: int) -> dict[str, Any]:
        chain = json.dumps(
            [data.get(key) for key in ("turn", "step", "provider", "policyKey")],
            sort_keys=True,
        )
        if "retryId" in data:
            if isinstance(data["retryId"], str) and data["retryId"]:
                self._retry_ids[chain] = data["retryId"]
            return data
        retry_id = self._retry_ids.get(chain) or self._legacy_id("retry", seq)
        self._retry_ids[chain] = retry_id
        return {"retryId": retry_id, **data}

    def _compaction_id_of(self, event_type: str, data: dict[str, Any], seq: int) -> dict[str, Any]:
        if event_type == "session/end-seed":
            self._compaction_id = None
            return data
        if event_type == "compaction/start":
            if "compactionId" not in data:
                data = {"compactionId": self._legacy_id("compaction", seq), **data}
            compaction_id = data["compactionId"]
            self._compaction_id = compaction_id if isinstance(compaction_id, str) else None
        elif event_type in ("compaction/summary", "compaction/end"):
            if "compactionId" not in data and self._compaction_id is not None:
                data = {"compactionId": self._compaction_id, **data}
            if event_type == "compaction/end":
                self._compaction_id = None
        return data

    # -- checks after normalization ------------------------------------------------

    def _check_semantics(self, event_type: str, data: dict[str, Any], seq: int) -> None:
        if event_type == "subagent/descriptor" and data["version"] not in _DESCRIPTOR_VERSIONS:
            raise self._refuse(
                "subagent-descriptor-version",
                f"subagent/descriptor version must be 1, 2 or 3, found {data['version']!r}",
                seq,
                event_type,
            )
        if event_type == "session-log-deepseek/delivery-accepted":
            generation = data.get("sessionFormatVersion", 0)
            if generation == 0 and data["sessionId"] != self._session_id:
                inherited = self._seed_length is not None and seq < self._seed_length
                if not (inherited and self._has_parent):
                    raise self._refuse(
                        "foreign-delivery-marker",
                        f"delivery marker names session {data['sessionId']!r}, not this "
                        f"session {self._session_id!r}, outside a child's inherited prefix",
                        seq,
                        event_type,
                    )

    def _track_surface(self, event_type: str, event: Row, seq: int) -> None:
        surface_op = event.get("surfaceOp")
        if isinstance(surface_op, dict) and surface_op.get("op") == "replace":
            start, end = surface_op.get("start"), surface_op.get("end")
            if is_safe_int(start) and is_safe_int(end):
                for shadowed in [key for key in self._surface_ids if start <= key <= end]:
                    del self._surface_ids[shadowed]
        data = event["data"]
        holder = data if event_type == "user/message" else data.get("message")
        message_id = holder.get("id") if isinstance(holder, dict) else None
        self._surface_ids[seq] = message_id if isinstance(message_id, str) else None


def _replace_keys(
    data: dict[str, Any], old_keys: tuple[str, ...], new_key: str, new_value: Any
) -> dict[str, Any]:
    """Copy ``data`` with ``old_keys`` removed and ``new_key`` at the first one's position."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in old_keys:
            if new_key not in out:
                out[new_key] = new_value
        else:
            out[key] = value
    return out


EDGE: V0ToV1Edge = V0ToV1Edge()
"""The registered 0 -> 1 edge."""

_STAGE_PROTOCOL_CHECK: type[EdgeStage] = V0ToV1Stage
