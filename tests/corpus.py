"""The shared corpus's placeholder rule (corpus/README.md): what the upstream loader did.

``{{cwd}}`` becomes ``/dsh-snapshot-cwd`` in every string; in a ``request/header``,
``header.tools`` of ``"{{tools}}"`` becomes ``[]`` in formats 0-2 and is dropped in
formats 3-4, and a list of tool names becomes ``{"name", "description", "parameters"}``
objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

SNAPSHOT_CWD = "/dsh-snapshot-cwd"


def substitute(value: Any) -> Any:
    """``value`` with ``{{cwd}}`` replaced in every string it holds (a new structure)."""
    if isinstance(value, str):
        return value.replace("{{cwd}}", SNAPSHOT_CWD)
    if isinstance(value, list):
        return [substitute(item) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item) for key, item in value.items()}
    return value


def materialize_tools(row: dict[str, Any], version: int) -> None:
    """Apply the ``header.tools`` rule to ``row`` in place (a no-op unless a request/header)."""
    header = row.get("data", {}).get("header") if row.get("type") == "request/header" else None
    if not isinstance(header, dict) or "tools" not in header:
        return
    tools = header["tools"]
    if tools == "{{tools}}":
        if version >= 3:
            del header["tools"]
        else:
            header["tools"] = []
    elif isinstance(tools, list) and all(isinstance(name, str) for name in tools):
        header["tools"] = [{"name": name, "description": "", "parameters": {}} for name in tools]


def loaded(row: dict[str, Any], version: int) -> dict[str, Any]:
    """``row`` as the upstream loader saw it in a log of format ``version`` (a new row)."""
    out: dict[str, Any] = substitute(row)
    materialize_tools(out, version)
    return out


def loaded_copy(path: Path, directory: Path) -> Path:
    """The corpus file as the upstream loader saw it, as ``directory/session.jsonl``.

    Every line that parses is substituted and re-encoded; any other line (a torn or
    corrupt one) is kept byte for byte, so the scanner judges the same damage.
    """
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.append(line)
            continue
        out.append(orjson.dumps(loaded(value, 0) if isinstance(value, dict) else value))
    directory.mkdir()
    copy = directory / "session.jsonl"
    copy.write_bytes(b"\n".join(out))
    return copy
