"""The tool history: request-header tools plus the tools ``developer/message`` adds.

``Session.tool_history()`` (and :func:`fold_tool_history` for a detached log) returns
``{"tools": [ToolSchema...], "updates": [{"messageId": id, "additions": [ToolSchema...]}]}``:
the tool declarations a request projection starts from, and, in log order, each developer
message of the current declaration series with the definitions it adds. It is independent
of any route's capabilities. The rules (``docs/model.md`` lists them too):

1. Before the first ``request/header`` the history is ``{"tools": [], "updates": []}``.
2. The first ``request/header`` starts a *declaration series*: ``tools`` are its
   ``header.tools`` (none when absent) and ``updates`` is empty.
3. A later header starts a new series (its own tools, no updates) when its ``reason`` is
   ``"series"``, when it carries ``startsSeries: true``, or when it declares a tool name the
   series already holds with another definition (compared as JSON text, member order
   included). Any other later header only becomes the *active* declaration.
4. Every ``developer/message`` appends one update: its message id and the definitions of
   its ``tool-addition`` blocks, each looked up by ``toolName`` in the tools of the header
   its ``headerSeq`` names (``[]`` when it adds none, e.g. only removals).
5. A ``developer/message`` whose ``headerSeq`` is the header that started the series adds
   no update: that header declares its tools already.
6. ``tool-addition`` makes a name available, ``tool-removal`` takes it away; a removed
   tool's definition stays in the history (an earlier message still names it).
7. When the available names differ from the active header's tool names (a log written
   before additions were logged, or cut short), the history is the active header's tools
   and no updates.
8. An addition whose name the named header does not declare is refused when folded
   (rule ``tool-addition-undefined``, with the developer message's seq).

The fold is incremental: each event is read once, when first folded; every snapshot is a
fresh copy that later events never change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from ._checks import fail
from .events import SessionEvent

__all__ = ["ToolHistoryFold", "fold_tool_history"]


def _tools_of(header_event: SessionEvent) -> list[Any]:
    tools = header_event._value()["header"].get("tools")
    return tools if type(tools) is list else []


def _name(tool: Any) -> Any:
    return tool.get("name") if type(tool) is dict else None


class ToolHistoryFold:
    """The incremental tool-history fold (see the module docstring for the rules)."""

    __slots__ = (
        "_active",
        "_available",
        "_baseline",
        "_declared",
        "_headers",
        "_tools",
        "_updates",
        "seen",
    )

    def __init__(self) -> None:
        self._headers: dict[int, list[Any]] = {}
        self._declared: dict[Any, bytes] = {}  # name -> definition as JSON, this series
        self._active: list[Any] = []
        self._available: set[Any] = set()
        self._baseline: int | None = None
        self._tools: list[Any] = []
        self._updates: list[dict[str, Any]] = []
        self.seen = 0
        """How many events of the log have been folded."""

    def apply(self, event: SessionEvent) -> None:
        """Fold the next event in log order (all-or-nothing: a refusal changes nothing).

        :raises EventValidationError: ``tool-addition-undefined``.
        """
        kind = event.type
        if kind == "request/header":
            self._header(event)
        elif kind == "developer/message":
            self._developer(event)
        self.seen = event.seq + 1

    def _header(self, event: SessionEvent) -> None:
        tools = _tools_of(event)
        self._headers[event.seq] = tools
        data = event._value()
        encoded = {_name(tool): orjson.dumps(tool) for tool in tools}
        redeclared = any(
            name in self._declared and self._declared[name] != text
            for name, text in encoded.items()
        )
        if (
            self._baseline is None
            or data.get("reason") == "series"
            or data.get("startsSeries") is True
            or redeclared
        ):
            self._baseline = event.seq
            self._declared = encoded
            self._available = set(encoded)
            self._tools = tools
            self._updates = []
        self._active = tools

    def _developer(self, event: SessionEvent) -> None:
        data = event._value()
        header_seq = data.get("headerSeq")
        if header_seq is not None and header_seq == self._baseline:
            return
        content = data["message"]["content"]
        definitions = self._headers.get(header_seq, []) if header_seq is not None else []
        additions: list[Any] = []
        for block in content:
            if type(block) is not dict or block.get("type") != "tool-addition":
                continue
            wanted = block.get("toolName")
            found = next((tool for tool in definitions if _name(tool) == wanted), None)
            if found is None:
                fail(
                    "tool-addition-undefined",
                    f"the message adds tool {wanted!r}, which the request/header at seq "
                    f"{header_seq} does not declare",
                    seq=event.seq,
                    event_type=event.type,
                )
            additions.append(found)
        for tool in additions:
            self._declared[_name(tool)] = orjson.dumps(tool)
        for block in content:
            if type(block) is dict and block.get("type") == "tool-addition":
                self._available.add(block.get("toolName"))
            elif type(block) is dict and block.get("type") == "tool-removal":
                self._available.discard(block.get("toolName"))
        self._updates.append({"messageId": data["message"].get("id"), "additions": additions})

    def snapshot(self) -> dict[str, Any]:
        """The tool history after the events folded so far (a fresh copy)."""
        active = [_name(tool) for tool in self._active]
        if len(active) != len(self._available) or set(active) != self._available:
            history: dict[str, Any] = {"tools": self._active, "updates": []}
        else:
            history = {"tools": self._tools, "updates": self._updates}
        copied: dict[str, Any] = orjson.loads(orjson.dumps(history))
        return copied


def fold_tool_history(events: Iterable[SessionEvent]) -> dict[str, Any]:
    """The tool history of a whole log (see the module docstring).

    :raises EventValidationError: ``tool-addition-undefined``.
    """
    fold = ToolHistoryFold()
    for event in events:
        fold.apply(event)
    return fold.snapshot()
