from typing import TypeVar

_Span = TypeVar("_Span", bound=tuple[object, ...])

def plain_frames(
    window: bytes | bytearray | memoryview,
    start: int,
    base: int,
    most: int,
    span_type: type[_Span],
    /,
) -> tuple[list[_Span], int]:
    """The plain complete zstd frames that follow one another from ``window[start]`` and lie
    wholly in the window (at most ``most``), as ``span_type`` instances, and the window
    index where that run ends."""

def whole_lines(plaintext: bytes | bytearray | memoryview, /) -> list[bytes] | None:
    """The lines of a frame's plaintext without their newlines, when it is empty or ends in
    a newline; None when it ends inside a line."""
