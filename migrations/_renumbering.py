"""The shared skeleton of the 2->3 and 3->4 stages: edges that insert events and renumber.

Both read a source whose seqs must be dense from 0, write dense target seqs, remap the
declared reference fields through a :class:`SeqShift`, and check the inherited cut of a
seeded log (the ``session/end-seed {inherited: true}`` marker and the foreign delivery
markers it must cover). Every rule violation is a :class:`MigrationRefusedError` naming
the edge, path, seq and event type.
"""

from __future__ import annotations

from typing import Any, NoReturn

from dsh_store.errors import MigrationRefusedError

from . import MigrationContext, Row
from ._seq_references import BadReference, SeqShift, is_safe_int, remap_seq_list

__all__ = ["DELIVERY_MARKER", "RenumberingStage", "check_source_version", "refuse"]

DELIVERY_MARKER = "session-log-deepseek/delivery-accepted"


def refuse(
    context: MigrationContext,
    detail: str,
    rule: str,
    *,
    edge: str,
    seq: int | None = None,
    event_type: str | None = None,
) -> NoReturn:
    """Raise the refusal of edge ``edge`` for the log of ``context``."""
    raise MigrationRefusedError(
        detail, rule=rule, path=context.path, seq=seq, event_type=event_type, edge=edge
    )


def check_source_version(header: Row, version: int, context: MigrationContext, edge: str) -> None:
    """Refuse (``wrong source version``) a header whose version is not ``version``."""
    if header.get("version") != version:
        refuse(
            context,
            f"header version is {header.get('version')!r}, expected {version}",
            "wrong source version",
            edge=edge,
        )


class RenumberingStage:
    """Dense source seqs in, dense target seqs out, the inherited cut checked.

    A subclass sets :attr:`edge_name`, :attr:`generation` (the source format version, as
    delivery markers name it) and ``_header_id`` (the id its refusals quote).
    """

    edge_name: str
    generation: int
    _header_id: Any

    def __init__(self, header: Row, context: MigrationContext) -> None:
        self._context = context
        # Rows nobody else holds are rewritten in place; a caller's rows are copied first.
        self._copy_payloads = not context.owned_rows
        self._seeded = header.get("isSeeded") is True
        self._has_parent = "parentSession" in header
        self._next_source_seq = 0
        self._next_target_seq = 0
        self._shift = SeqShift()
        self._saw_inherited_marker = False
        self._foreign_markers_before_cut: list[int] = []

    # -- admission --------------------------------------------------------------------

    def _admit(self, event: Row) -> tuple[int, str]:
        """Check the event is an object with a string type and the next dense source seq."""
        event_type = event.get("type") if isinstance(event, dict) else None
        if not isinstance(event_type, str):
            self._fail(
                "row is not an event object with a string type",
                "malformed envelope",
                self._next_source_seq,
                None,
            )
        seq = event.get("seq")
        if not is_safe_int(seq) or seq != self._next_source_seq:
            self._fail(
                f"seq {seq!r} where {self._next_source_seq} was expected; the source must be "
                "dense from 0",
                "non-dense source seq",
                self._next_source_seq,
                event_type,
            )
        assert isinstance(seq, int)
        self._next_source_seq += 1
        return seq, event_type

    # -- the inherited cut ------------------------------------------------------------

    def _at_inherited_marker(self, seq: int) -> None:
        """A ``session/end-seed {inherited: true}`` at source ``seq`` marks the cut."""
        if not self._seeded:
            self._fail(
                "an inherited session/end-seed marker in a log whose header is not seeded",
                "cut disagrees with header",
                seq,
                "session/end-seed",
            )
        self._saw_inherited_marker = True
        self._foreign_markers_before_cut.clear()

    def _foreign_marker(self, session_id: object, seq: int) -> None:
        """A current-generation delivery marker at ``seq`` names another session.

        Allowed only in a seeded child, and only if a later inherited marker proves it lies
        in the prefix (checked by :meth:`_check_cut`).
        """
        if not (self._has_parent and self._seeded):
            self._fail(
                f"a generation-{self.generation} delivery marker names session {session_id!r}, "
                f"not this session {self._header_id!r}",
                "foreign delivery marker",
                seq,
                DELIVERY_MARKER,
            )
        self._foreign_markers_before_cut.append(seq)

    def _check_cut(self) -> None:
        """At the end: a seeded log has its cut, and no foreign marker lies after it."""
        if self._seeded and not self._saw_inherited_marker:
            self._fail(
                "the header says the log is seeded but no session/end-seed {inherited: true} "
                "marks the cut",
                "cut disagrees with header",
                None,
                None,
            )
        if self._foreign_markers_before_cut:
            self._fail(
                f"a generation-{self.generation} delivery marker names another session "
                "outside the inherited prefix",
                "foreign delivery marker",
                self._foreign_markers_before_cut[0],
                DELIVERY_MARKER,
            )

    # -- references -------------------------------------------------------------------

    def _remap_one(self, value: object, seq: int, event_type: str, field: str) -> int:
        try:
            return self._shift.remap(value, seq, field)
        except BadReference as bad:
            self._fail(bad.detail, bad.rule, seq, event_type)

    def _remap_source_seqs(self, value: object, seq: int, event_type: str) -> list[Any]:
        try:
            return remap_seq_list(value, seq, self._shift, "sourceEventSeqs", unique=True)
        except BadReference as bad:
            self._fail(bad.detail, bad.rule, seq, event_type)

    # -- helpers ----------------------------------------------------------------------

    def source_seq(self, target: int) -> int | None:
        """The source seq of target event ``target``; ``None`` for one this edge made."""
        return self._shift.source_of(target, self._next_source_seq)

    def _take_target_seq(self) -> int:
        seq = self._next_target_seq
        self._next_target_seq += 1
        return seq

    def _fail(self, detail: str, rule: str, seq: int | None, event_type: str | None) -> NoReturn:
        refuse(self._context, detail, rule, edge=self.edge_name, seq=seq, event_type=event_type)
