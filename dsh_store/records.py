"""The shared vocabulary of stored logs: what every reader and backend reports in.

A :class:`Finding` (a rule name, a message and where), the decoded header
(:class:`HeaderInfo`), one committed row (:class:`ScannedRow`) and the crash tail
(:class:`TornTail`). This module sits at the bottom of the layers, next to
:mod:`dsh_store.errors`: the physical layer (:mod:`dsh_store.jsonl`), the storage seam
(:mod:`dsh_store.backend`) and the use cases all import these from here. It imports
nothing of the package.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Finding", "HeaderInfo", "ScannedRow", "TornTail"]


class Finding(NamedTuple):
    """One problem a reader noticed: a stable rule name, a message and where it is.

    ``line`` is the 1-based physical line, ``offset`` the byte offset of that line's start,
    ``seq`` the logical seq involved (the expected one for sequence defects); each is None
    when it does not apply.
    """

    rule: str
    message: str
    line: int | None = None
    offset: int | None = None
    seq: int | None = None


class HeaderInfo(NamedTuple):
    """The decoded first line of a session log.

    ``value`` is the parsed header object, ``raw`` its bytes without BOM and line ending,
    ``size`` the number of bytes the physical line occupies (BOM and newline included),
    ``findings`` the shape problems and framing oddities noticed on it.
    """

    version: int
    value: dict[str, Any]
    raw: bytes
    size: int
    findings: list[Finding]


class ScannedRow(NamedTuple):
    """One accepted row of the committed prefix.

    ``line`` is the 1-based physical line, ``offset`` the byte offset of the line start,
    ``raw`` the line bytes without the line ending, ``value`` the decoded object,
    ``first_seq``/``seq_count`` the logical seqs it covers (``seq_count`` > 1 only for a
    V0/V1 packed chunk row, which is passed through unexpanded).
    """

    line: int
    offset: int
    raw: bytes
    value: dict[str, Any]
    first_seq: int
    seq_count: int


class TornTail(NamedTuple):
    """The crash tail: bytes ``[offset, offset + length)`` that are not part of the log.

    ``line`` is the physical line where it starts, ``seq`` the seq the next row should have
    carried, ``rule`` the defect that starts it and ``reason`` a readable description.
    """

    offset: int
    length: int
    line: int
    reason: str
    seq: int
    rule: str
