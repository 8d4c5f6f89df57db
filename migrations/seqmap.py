"""Source-to-target seq bookkeeping for edges that change the event count.

:class:`SeqMap` records, in increasing source order, where each source event went: to a
target seq, or nowhere (consumed, e.g. an ``assistant/chunk`` folded into a stream).
It stores runs, not single seqs: a run of consecutive source seqs that map to consecutive
target seqs (or are all consumed) is one entry, so memory grows with the number of
insertions and removals, not with the number of events.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise

from .v0_vocabulary import is_safe_int

__all__ = ["CONSUMED", "SeqMap", "expand_seq_list"]

CONSUMED = -1
"""Target of a source event that was folded away."""


class SeqMap:
    """Run-length map from source seq to target seq (or :data:`CONSUMED`)."""

    def __init__(self) -> None:
        self._source_starts: list[int] = []
        self._target_starts: list[int] = []
        self._lengths: list[int] = []
        # The source and target that would extend the last run.
        self._next_source = 0
        self._next_target = CONSUMED

    @property
    def runs(self) -> int:
        """Number of stored runs (the map's memory footprint)."""
        return len(self._lengths)

    def record(self, source: int, target: int) -> None:
        """Record where ``source`` went; sources must arrive in increasing order."""
        if self._lengths:
            next_source = self._next_source
            if source < next_source:
                raise ValueError(f"source seq {source} recorded out of order")
            if source == next_source and target == self._next_target:
                self._lengths[-1] += 1
                self._next_source = source + 1
                if target != CONSUMED:
                    self._next_target = target + 1
                return
        self._source_starts.append(source)
        self._target_starts.append(target)
        self._lengths.append(1)
        self._next_source = source + 1
        self._next_target = CONSUMED if target == CONSUMED else target + 1

    def record_consumed(self, source: int, count: int) -> None:
        """Record ``count`` sources from ``source`` on as folded away: the same map as
        ``record(s, CONSUMED)`` for each of them in order, in one step."""
        self.record(source, CONSUMED)
        if count > 1:
            self._lengths[-1] += count - 1
            self._next_source = source + count

    def lookup(self, source: int) -> int | None:
        """Target of ``source``: a seq, :data:`CONSUMED`, or ``None`` if never recorded."""
        position = bisect_right(self._source_starts, source) - 1
        if position < 0:
            return None
        offset = source - self._source_starts[position]
        if offset >= self._lengths[position]:
            return None
        target = self._target_starts[position]
        return CONSUMED if target == CONSUMED else target + offset

    def source_of(self, target: int) -> int | None:
        """The source seq that went to ``target``, or ``None`` (an event the edge made).

        A linear walk over the runs: used only to name the source of a refused event.
        """
        for source, start, length in zip(
            self._source_starts, self._target_starts, self._lengths, strict=True
        ):
            if start != CONSUMED and start <= target < start + length:
                return source + target - start
        return None


def expand_seq_list(value: object, below: int) -> list[int] | None:
    """Decode a ``sourceEventSeqs``-style list that may hold ``[start, end]`` range pairs.

    Returns ``None`` when the value is not a list of non-negative safe integers and
    well-formed pairs, when a member is not smaller than ``below`` (references name earlier
    events; this also bounds the expansion), or when pairs were used and the expansion is
    not strictly increasing.
    """
    if not isinstance(value, list):
        return None
    seqs: list[int] = []
    had_pair = False
    for item in value:
        if is_safe_int(item) and 0 <= item < below:
            seqs.append(item)
        elif (
            isinstance(item, list)
            and len(item) == 2
            and all(is_safe_int(end) and 0 <= end < below for end in item)
            and item[0] <= item[1]
        ):
            had_pair = True
            seqs.extend(range(item[0], item[1] + 1))
        else:
            return None
    if had_pair and any(later <= earlier for earlier, later in pairwise(seqs)):
        return None
    return seqs
