"""The in-memory result of restoring one log: :class:`Inspection`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .jsonl.rows import Finding
from .jsonl.scan import TornTail
from .model import SessionEvent, SessionHeader

__all__ = ["Inspection"]


@dataclass(frozen=True)
class Inspection:
    """A restorable log as a balanced v4 view, computed without writing.

    ``events`` are the committed events (upgraded in memory when the file is older),
    ``closers`` the synthetic events that would close a turn a crash left open, ``torn``
    the crash tail that a repair would cut (None when the file ends cleanly).
    """

    path: Path
    header: SessionHeader
    events: tuple[SessionEvent, ...]
    closers: tuple[SessionEvent, ...]
    source_version: int
    torn: TornTail | None
    committed_size: int
    file_size: int
    findings: tuple[Finding, ...]
    classification: str
    revision: str

    @property
    def balanced(self) -> tuple[SessionEvent, ...]:
        """The committed events followed by the closers: what a load makes durable."""
        return self.events + self.closers

    @property
    def needs_repair(self) -> bool:
        """True when a load would write: a torn tail to cut or a turn to close."""
        return self.torn is not None or bool(self.closers)
