"""Small scalar predicates and the error constructor shared by the model modules."""

from __future__ import annotations

from typing import Any, NoReturn

from ..errors import EventValidationError
from ..jsonvalue import MAX_SAFE_INTEGER

__all__ = ["fail", "is_count", "is_positive", "is_text"]


def is_count(value: Any) -> bool:
    """A non-negative safe integer (never a bool, never a float such as ``-0.0``)."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def is_positive(value: Any) -> bool:
    """A positive safe integer (turn and step numbers start at 1)."""
    return type(value) is int and 1 <= value <= MAX_SAFE_INTEGER


def is_text(value: Any) -> bool:
    """A non-empty ``str``."""
    return type(value) is str and value != ""


def fail(rule: str, message: str, *, seq: int | None, event_type: str | None) -> NoReturn:
    """Raise :class:`EventValidationError` for ``rule``."""
    raise EventValidationError(message, rule=rule, seq=seq, event_type=event_type)
