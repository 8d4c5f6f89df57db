"""Seq renumbering for edges that insert events, and the reference fields it rewrites.

An edge that inserts events (2->3 system heads, 3->4 closers) shifts every later source
seq by the number of insertions before it. :class:`SeqShift` records only the insertion
points, so the source->target map costs memory per insertion, not per event.

The reference fields are the ones the format declares (format history, Appendix D):
envelope ``sourceEventSeqs``, ``surfaceOp`` endpoints, ``command/done.sourceEventSeq``,
compaction ``shadowedRange``/``shadowedSeqs``, title ``messageSeqs`` and (3->4 only)
``image/offload`` target seqs. Nothing else that looks like a seq is touched.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import pairwise
from typing import Any, TypeGuard

from dsh_store.model.events import encode_source_seqs

__all__ = [
    "BadReference",
    "SeqShift",
    "decode_seq_list",
    "is_safe_int",
    "remap_payload_references",
    "remap_seq_list",
]

MAX_SAFE_INTEGER = 2**53 - 1


def is_safe_int(value: object) -> TypeGuard[int]:
    """True for a non-negative safe integer (never a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SAFE_INTEGER


class BadReference(ValueError):
    """A reference field that cannot be remapped; the edge turns it into a refusal."""

    def __init__(self, detail: str, rule: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.rule = rule


class SeqShift:
    """Source seq -> target seq for a stream with a few inserted events.

    ``insert_before(s)`` records one inserted event placed before source event ``s``
    (so ``s`` and everything after it move up by one).
    """

    def __init__(self) -> None:
        self._breaks: list[int] = []

    @property
    def inserted(self) -> int:
        """How many events were inserted so far."""
        return len(self._breaks)

    def insert_before(self, source_seq: int) -> None:
        """Record one insertion in front of ``source_seq`` (non-decreasing calls)."""
        self._breaks.append(source_seq)

    def target(self, source_seq: int) -> int:
        """The target seq of the already-seen source event ``source_seq``."""
        return source_seq + bisect_right(self._breaks, source_seq)

    def source_of(self, target: int, seen: int) -> int | None:
        """The source seq (below ``seen``) whose target is ``target``; ``None`` for an
        inserted event (or one appended after the last source event)."""
        low, high = max(0, target - len(self._breaks)), min(target, seen - 1)
        while low <= high:  # target() is strictly increasing in the source seq
            middle = (low + high) // 2
            mapped = self.target(middle)
            if mapped == target:
                return middle
            if mapped < target:
                low = middle + 1
            else:
                high = middle - 1
        return None

    def remap(self, value: object, current_seq: int, field: str) -> int:
        """Map one reference held by source event ``current_seq``.

        The reference must be a safe integer naming an earlier source event.
        """
        if not is_safe_int(value):
            raise BadReference(f"{field} holds {value!r}, not a seq", "malformed reference")
        assert isinstance(value, int)
        if value >= current_seq:
            raise BadReference(
                f"{field} names seq {value}, which is not earlier than the event itself",
                "reference not earlier",
            )
        return self.target(value)


def decode_seq_list(value: object, field: str) -> tuple[list[int], bool]:
    """Expand a possibly range-encoded seq list; return ``(seqs, had_ranges)``.

    ``[start, end]`` pairs are inclusive ranges; if any pair is present the expanded list
    must be strictly increasing.
    """
    if not isinstance(value, list):
        raise BadReference(f"{field} is {type(value).__name__}, not a list", "malformed reference")
    seqs: list[int] = []
    had_ranges = False
    for item in value:
        if isinstance(item, list):
            if len(item) != 2 or not all(is_safe_int(bound) for bound in item):
                raise BadReference(
                    f"{field} holds a malformed range {item!r}", "malformed reference"
                )
            start, end = item
            if end < start:
                raise BadReference(
                    f"{field} holds a reversed range {item!r}", "malformed reference"
                )
            had_ranges = True
            seqs.extend(range(start, end + 1))
        elif is_safe_int(item):
            seqs.append(item)
        else:
            raise BadReference(f"{field} holds {item!r}, not a seq", "malformed reference")
    if had_ranges and any(b <= a for a, b in pairwise(seqs)):
        raise BadReference(
            f"{field} expands to a list that is not strictly increasing", "malformed reference"
        )
    return seqs, had_ranges


def remap_seq_list(
    value: object, current_seq: int, shift: SeqShift, field: str, *, unique: bool
) -> list[Any]:
    """Remap a (possibly range-encoded) seq list, keeping the input's encoding style.

    A list read with ranges is written back with the wire rule of the v4 model
    (:func:`dsh_store.model.encode_source_seqs`).
    """
    seqs, had_ranges = decode_seq_list(value, field)
    if unique and len(set(seqs)) != len(seqs):
        raise BadReference(f"{field} cites a seq twice", "malformed reference")
    mapped = [shift.remap(seq, current_seq, field) for seq in seqs]
    return encode_source_seqs(mapped) if had_ranges else mapped


Remapper = Callable[[object, str], int]


def remap_payload_references(
    event_type: str, data: dict[str, Any], remap: Remapper, *, image_offload: bool
) -> None:
    """Rewrite, in place, the declared reference fields of one payload (a private copy)."""
    if event_type == "command/done" and "sourceEventSeq" in data:
        data["sourceEventSeq"] = remap(data["sourceEventSeq"], "data.sourceEventSeq")
    elif event_type in ("compaction/summary", "compaction/prune"):
        shadowed_range = data.get("shadowedRange")
        if isinstance(shadowed_range, dict):
            new_range = dict(shadowed_range)
            for key in ("start", "end"):
                if key in new_range:
                    new_range[key] = remap(new_range[key], f"data.shadowedRange.{key}")
            data["shadowedRange"] = new_range
        if "shadowedSeqs" in data:
            data["shadowedSeqs"] = _remap_plain_list(
                data["shadowedSeqs"], remap, "data.shadowedSeqs"
            )
    elif event_type in ("session/title", "session/title-llm-request") and "messageSeqs" in data:
        data["messageSeqs"] = _remap_plain_list(data["messageSeqs"], remap, "data.messageSeqs")
    elif image_offload and event_type == "image/offload":
        targets = data.get("targets")
        if isinstance(targets, list):
            new_targets: list[Any] = []
            for index, target in enumerate(targets):
                if isinstance(target, dict) and "seq" in target:
                    target = dict(target)
                    target["seq"] = remap(target["seq"], f"data.targets[{index}].seq")
                new_targets.append(target)
            data["targets"] = new_targets


def _remap_plain_list(value: object, remap: Remapper, field: str) -> list[int]:
    if not isinstance(value, list):
        raise BadReference(f"{field} is {type(value).__name__}, not a list", "malformed reference")
    return [remap(item, f"{field}[{index}]") for index, item in enumerate(value)]
