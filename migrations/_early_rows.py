"""Row rules the 0->1 and 1->2 edges share: source version, envelope, seed length.

Formats 0 and 1 have the same envelope: ``{type, seq, time, data}`` with a string type,
safe-integer seq and time and an object payload, ``ignorable`` (exactly ``true``) on any
row, and ``surfaceOp`` / ``sourceEventSeqs`` only on surface rows. Every refusal is a
:class:`MigrationRefusedError` naming the edge, path, seq and event type.
"""

from __future__ import annotations

from collections.abc import Set

from dsh_store.errors import MigrationRefusedError

from . import MigrationContext, Row
from .v0_vocabulary import is_safe_int

__all__ = [
    "BASE_ENVELOPE",
    "CHUNK_DATA_KEYS",
    "SURFACE_ENVELOPE",
    "EarlyStage",
    "check_source_version",
]

BASE_ENVELOPE = frozenset({"type", "seq", "time", "data", "ignorable"})
"""The envelope members any format-0/1 row may carry."""

SURFACE_ENVELOPE = BASE_ENVELOPE | {"surfaceOp", "sourceEventSeqs"}
"""The envelope members a surface row may carry."""

CHUNK_DATA_KEYS = frozenset({"turn", "step", "chunk"})
"""The exact payload members of an ``assistant/chunk``."""


def check_source_version(header: Row, version: int, context: MigrationContext, edge: str) -> None:
    """Refuse (``wrong-source-version``) a header whose version is not exactly ``version``."""
    if header.get("version") != version or type(header.get("version")) is not int:
        raise MigrationRefusedError(
            f"header version is {header.get('version')!r}, this edge reads version {version}",
            rule="wrong-source-version",
            path=context.path,
            edge=edge,
        )


class EarlyStage:
    """The refusals of a 0->1 or 1->2 stage; a subclass sets ``edge_name`` and ``_path``."""

    edge_name: str
    _path: str | None

    def _refuse(
        self, rule: str, detail: str, seq: int | None, event_type: str | None
    ) -> MigrationRefusedError:
        return MigrationRefusedError(
            detail, rule=rule, path=self._path, seq=seq, event_type=event_type, edge=self.edge_name
        )

    def _check_row(self, row: Row) -> tuple[str, int]:
        """Refuse (``malformed-envelope``) a row without a string type, a non-negative
        safe-integer seq and time, or an object payload; return its type and seq."""
        event_type, seq = row.get("type"), row.get("seq")
        if not isinstance(event_type, str) or not is_safe_int(seq) or seq < 0:
            raise self._refuse(
                "malformed-envelope",
                "row lacks a string type or a non-negative safe-integer seq",
                seq if is_safe_int(seq) else None,
                event_type if isinstance(event_type, str) else None,
            )
        if not is_safe_int(row.get("time")) or not isinstance(row.get("data"), dict):
            raise self._refuse(
                "malformed-envelope",
                "row lacks a safe-integer time or an object data",
                seq,
                event_type,
            )
        return event_type, seq

    def _check_members(self, row: Row, event_type: str, seq: int, allowed: Set[str]) -> None:
        """Refuse (``envelope-member``) a member outside ``allowed`` or a non-true
        ``ignorable``."""
        if not row.keys() <= allowed:
            extra = sorted(row.keys() - allowed)
            raise self._refuse(
                "envelope-member",
                f"{event_type} may not carry envelope member(s) {', '.join(extra)}",
                seq,
                event_type,
            )
        if "ignorable" in row and row["ignorable"] is not True:
            raise self._refuse(
                "envelope-member", "ignorable must be exactly true when present", seq, event_type
            )

    def _check_seed_length(self, seed_length: int | None, events: int) -> None:
        """Refuse (``seed-beyond-log``) a header ``seedLength`` beyond the log's events."""
        if seed_length is not None and seed_length > events:
            raise self._refuse(
                "seed-beyond-log",
                f"header seedLength {seed_length} exceeds the {events} event(s) in the log",
                None,
                None,
            )
