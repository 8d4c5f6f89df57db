from collections.abc import Callable
from typing import Any

def plain(value: object, /) -> bool:
    """Whether ``value``, which the lossless encoder accepted, holds only exact builtin JSON
    types and only finite floats other than ``-0.0``."""

def configure(
    dumps: Callable[..., bytes],
    error: type[BaseException],
    default: Callable[[Any], Any],
    option: int,
    /,
) -> None:
    """Set the encoder :func:`framed_line` calls: ``dumps(frame, default=, option=)``,
    whose refusals raise ``error``."""

def framed_line(frame: dict[str, Any], inner: object, /) -> bytes | None:
    """The configured encoding of ``frame`` plus a newline, if the encoder accepts ``frame``
    and ``inner`` passes the type screen (:func:`plain`); else None. The line holds about
    its own size."""

def configure_facts(facts_type: type[tuple[Any, ...]], no_facts: tuple[Any, ...], /) -> None:
    """Set the ``EventFacts`` class (a 7-field NamedTuple) and its empty value that
    :func:`payload_facts` returns."""

def payload_facts(event_type: str, data: dict[str, Any], /) -> Any:
    """The ``EventFacts`` of a common core payload in its well-formed shape, or None (the
    precise check in Python decides)."""

def configure_event(event_class: type, slots: tuple[Any, ...], unset: object, /) -> None:
    """Set the class :func:`new_event` builds, the descriptors of the slots it fills (in
    its parameters' order, then ``_data``) and the value ``_data`` starts with."""

def new_event(
    event_type: str,
    seq: int,
    time: int,
    line: bytes,
    ignorable: bool,
    op: Any,
    sources: tuple[int, ...] | None,
    facts: tuple[Any, ...],
    /,
) -> Any:
    """A new event of the configured class with its slots filled."""
