"""The shared vocabulary of stored logs: what every reader and backend reports in.

A :class:`Finding` (a rule name, a message and where), the decoded header
(:class:`HeaderInfo`), one committed row (:class:`ScannedRow`) and the crash tail
(:class:`TornTail`), and what one pass of a reader found (:class:`PassResults`). This
module sits at the bottom of the layers, next to
:mod:`dsh_store.errors`: the physical layer (:mod:`dsh_store.jsonl`), the storage seam
(:mod:`dsh_store.backend`) and the use cases all import these from here. It imports
nothing of the package.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Finding", "HeaderInfo", "PassResults", "ScannedRow", "TornTail"]


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


class PassResults:
    """What one pass of a stored-log reader found: the results every backend's reader
    exposes with the same meaning (:class:`dsh_store.backend.StoredLogReader`).

    A reader calls :meth:`_begin_pass` when a pass starts and sets the fields as it reads:
    the header, the crash tail, the size of the header and the accepted rows
    (``committed_size``), the size of everything stored that the pass looked at
    (``file_size``) and the findings in log order. ``empty`` and ``revision`` are here
    for a store of rows, where no log exists without its header and the revision is the
    one the pass read; the JSONL scanner gives its own (a file may hold no byte; its
    revision is that of its ``fstat``).
    """

    _header: HeaderInfo | None
    _torn: TornTail | None
    _committed_size: int
    _file_size: int
    _findings: list[Finding]
    _revision: str | None

    def _begin_pass(self) -> None:
        self._header = None
        self._torn = None
        self._committed_size = 0
        self._file_size = 0
        self._findings = []
        self._revision = None

    @property
    def header(self) -> HeaderInfo | None:
        """The header the pass (or ``read_header``) last decoded; None before."""
        return self._header

    @property
    def empty(self) -> bool:
        """True for a stored log of no bytes at all; never for a store of rows."""
        return False

    @property
    def torn(self) -> TornTail | None:
        """The crash tail after the committed region; None when the log ends cleanly."""
        return self._torn

    @property
    def committed_size(self) -> int:
        """Bytes of the header plus every accepted row."""
        return self._committed_size

    @property
    def file_size(self) -> int:
        """Bytes stored when the pass began (the bytes it looked at)."""
        return self._file_size

    @property
    def findings(self) -> list[Finding]:
        """Every problem noticed (header shape, framing, the crash tail), in log order."""
        return list(self._findings)

    @property
    def revision(self) -> str | None:
        """The revision token of what the pass read; None before it read anything."""
        return self._revision
