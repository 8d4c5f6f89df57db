"""What every ``dsh-store`` output shares: the one escaping rule for text, and the version
of the ``--json`` documents.

Kept free of heavy imports (only :mod:`re`), so the command line's cold start can use it.
"""

from __future__ import annotations

import re

__all__ = [
    "JSON_SCHEMA_VERSION",
    "escape_json_line",
    "escape_json_text",
    "printable",
    "printable_lines",
]

JSON_SCHEMA_VERSION = 1
"""The ``schema`` number of every ``--json`` document (docs/schemas/); bumped on any change
of a document's shape, so a consumer can rely on the schema of the number it checked."""

_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# JSON encoders escape C0 controls in strings but leave DEL and the C1 controls raw.
_JSON_RAW_CONTROL = re.compile("[\x7f-\x9f]")
_JSON_RAW_CONTROL_BYTES = re.compile(b"\x7f|\xc2[\x80-\x9f]")


def printable(text: str) -> str:
    """``text`` safe for a terminal and for one output record.

    C0 and C1 control characters and DEL (tab excepted) become ``\\xNN``: log content and
    file names (a cwd, a message, a path holding ``ESC[2J`` or a newline) can neither move
    the cursor, clear the screen or retitle the window, nor split one output line in two.
    Apply it to a value before styling it (colour codes are control sequences themselves).
    """
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def printable_lines(text: str) -> str:
    """:func:`printable` for text whose newlines are its own (a transcript): every control
    character but tab and newline becomes ``\\xNN``."""
    return _CONTROL_BUT_NEWLINE.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def escape_json_text(document: str) -> str:
    """A JSON document with DEL and C1 controls as ``\\u00NN`` escapes (the same JSON value).

    Only strings can hold those characters, and ``\\u00NN`` means the same character there.
    """
    return _JSON_RAW_CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", document)


def escape_json_line(line: bytes) -> bytes:
    """:func:`escape_json_text` for one UTF-8 JSON line; the common line is returned as is."""
    if b"\x7f" not in line and b"\xc2" not in line:
        return line
    return _JSON_RAW_CONTROL_BYTES.sub(lambda match: b"\\u%04x" % ord(match.group().decode()), line)
