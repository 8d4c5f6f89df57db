"""Per-type payload checks for the core vocabulary, and the facts later rules need.

Checking a payload yields an :class:`EventFacts`: the few scalars (turn, step, call ids,
emptiness) that lifecycle, pairing and projection rules read. They are taken from the
caller's value before it is encoded, so no rule ever has to decode a logged line again.
Payloads of first-party log-only and unknown types are owned by their plugins and are only
checked for being lossless JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple, NoReturn

from ..jsonvalue import MAX_SAFE_INTEGER
from ._checks import fail, is_count, is_positive, is_text

__all__ = ["PLAIN_PAYLOAD_SIZES", "EventFacts", "check_payload", "fast_payload_facts"]

_REQUEST_REASONS: Final = frozenset({"initial", "resume", "change", "series"})


class EventFacts(NamedTuple):
    """Scalars read from a core payload; ``None`` where the type has no such field."""

    turn: int | None = None
    step: int | None = None
    call_id: str | None = None
    requested_calls: tuple[str, ...] = ()
    header_seq: int | None = None
    inherited: bool = False
    projects: bool = True


NO_FACTS: Final = EventFacts()


class _Payload:
    """Field readers that raise a precise ``data-shape`` error naming the JSON path."""

    __slots__ = ("event_type", "seq")

    def __init__(self, event_type: str, seq: int | None) -> None:
        self.event_type = event_type
        self.seq = seq

    def fail(self, rule: str, message: str) -> NoReturn:
        fail(rule, message, seq=self.seq, event_type=self.event_type)

    def obj(self, value: Any, path: str) -> dict[str, Any]:
        if type(value) is not dict:
            self.fail("data-shape", f"{path} must be an object, got {_kind(value)}")
        return value

    def field(self, parent: dict[str, Any], key: str, path: str) -> Any:
        if key not in parent:
            self.fail("data-shape", f"{path}.{key} is required")
        return parent[key]

    def positive(self, parent: dict[str, Any], key: str, path: str) -> int:
        value = self.field(parent, key, path)
        if not is_positive(value):
            self.fail("data-shape", f"{path}.{key} must be a positive safe integer, got {value!r}")
        number: int = value
        return number

    def text(self, parent: dict[str, Any], key: str, path: str, *, empty: bool = False) -> str:
        value = self.field(parent, key, path)
        if type(value) is not str or (not empty and value == ""):
            wanted = "a string" if empty else "a non-empty string"
            self.fail("data-shape", f"{path}.{key} must be {wanted}, got {_short(value)}")
        return value

    def array(self, parent: dict[str, Any], key: str, path: str) -> list[Any]:
        value = self.field(parent, key, path)
        if type(value) is not list:
            self.fail("data-shape", f"{path}.{key} must be an array, got {_kind(value)}")
        return value

    def only_true(self, parent: dict[str, Any], key: str, path: str) -> None:
        if key in parent and parent[key] is not True:
            self.fail(
                "data-shape", f"{path}.{key} must be exactly true when present, got {parent[key]!r}"
            )

    def message(self, data: dict[str, Any], role: str, path: str) -> dict[str, Any]:
        message = (
            self.obj(data, path)
            if path == "data"
            else self.obj(self.field(data, "message", "data"), path)
        )
        if message.get("role") != role:
            self.fail(
                "message-role",
                f"{path}.role must be {role!r} for this event type, got {message.get('role')!r}",
            )
        self.array(message, "content", path)
        return message


def _kind(value: Any) -> str:
    return type(value).__name__ if value is not None else "null"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text_is_empty(content: list[Any]) -> bool:
    # A system node is empty when no text block carries any text.
    return all(
        type(block) is dict and block.get("type") == "text" and block.get("text") == ""
        for block in content
    )


def check_payload(event_type: str, data: Any, seq: int | None) -> EventFacts:
    """Check the payload of a core event and return its facts.

    Non-core types return empty facts. ``seq`` only locates errors.

    :raises EventValidationError: with a stable rule name and the JSON path in the message.
    """
    if type(data) is dict:
        compiled = fast_payload_facts
        if compiled is not None:
            facts = compiled(event_type, data)
        else:
            fast = _FAST.get(event_type)
            facts = fast(data) if fast is not None else None
        if facts is not None:
            return facts
    checker = _CHECKERS.get(event_type)
    if checker is None:
        return NO_FACTS
    payload = _Payload(event_type, seq)
    return checker(payload, payload.obj(data, "data"))


def _turn_start(p: _Payload, data: dict[str, Any]) -> EventFacts:
    return EventFacts(turn=p.positive(data, "turn", "data"))


def _turn_end(p: _Payload, data: dict[str, Any]) -> EventFacts:
    turn = p.positive(data, "turn", "data")
    reason = p.obj(p.field(data, "reason", "data"), "data.reason")
    p.text(reason, "kind", "data.reason")
    return EventFacts(turn=turn)


def _step(p: _Payload, data: dict[str, Any]) -> EventFacts:
    return EventFacts(turn=p.positive(data, "turn", "data"), step=p.positive(data, "step", "data"))


def _system(p: _Payload, data: dict[str, Any]) -> EventFacts:
    facts = _step(p, data)
    message = p.message(data, "system", "data.message")
    return facts._replace(projects=not _text_is_empty(message["content"]))


def _developer(p: _Payload, data: dict[str, Any]) -> EventFacts:
    facts = _step(p, data)
    message = p.message(data, "developer", "data.message")
    additions = any(
        type(block) is dict and block.get("type") == "tool-addition" for block in message["content"]
    )
    header_seq = data.get("headerSeq")
    if "headerSeq" in data and not is_count(header_seq):
        p.fail(
            "developer-header-seq",
            f"data.headerSeq must be a non-negative safe integer, got {header_seq!r}",
        )
    if additions and header_seq is None:
        p.fail(
            "developer-header-seq",
            "data.headerSeq is required when the message adds tools (it names the "
            "request/header that defines them)",
        )
    if not additions and header_seq is not None:
        p.fail(
            "developer-header-seq",
            "data.headerSeq is only allowed when the message adds tools",
        )
    return facts._replace(header_seq=header_seq)


def _user(p: _Payload, data: dict[str, Any]) -> EventFacts:
    p.message(data, "user", "data")
    return NO_FACTS


def _assistant(p: _Payload, data: dict[str, Any]) -> EventFacts:
    facts = _step(p, data)
    message = p.message(data, "assistant", "data.message")
    source = p.obj(p.field(message, "source", "data.message"), "data.message.source")
    if not (is_text(source.get("provider")) and is_text(source.get("model"))):
        p.fail(
            "assistant-route",
            "data.message.source must name the provider and model that produced the message",
        )
    p.array(data, "stream", "data")
    p.only_true(data, "interrupted", "data")
    calls: list[str] = []
    for index, block in enumerate(message["content"]):
        if type(block) is dict and block.get("type") == "tool-call":
            p.text(block, "id", f"data.message.content[{index}]")
            calls.append(block["id"])
    return facts._replace(requested_calls=tuple(calls), projects=bool(message["content"]))


def _attempt(p: _Payload, data: dict[str, Any]) -> EventFacts:
    facts = _step(p, data)
    p.array(data, "stream", "data")
    return facts


def _tool_call(p: _Payload, data: dict[str, Any]) -> EventFacts:
    facts = _step(p, data)
    call_id = p.text(data, "callId", "data")
    p.text(data, "name", "data")
    p.text(data, "arguments", "data", empty=True)
    return facts._replace(call_id=call_id)


def _tool_result(p: _Payload, data: dict[str, Any]) -> EventFacts:
    facts = _step(p, data)
    message = p.message(data, "tool", "data.message")
    call_id = p.text(message, "toolCallId", "data.message")
    is_error = message.get("isError", False)
    if type(is_error) is not bool:
        p.fail("data-shape", f"data.message.isError must be a bool, got {is_error!r}")
    if "error" in data:
        if is_error is not True:
            p.fail(
                "tool-error-without-is-error",
                "data.error is only allowed when data.message.isError is true",
            )
        error = p.obj(data["error"], "data.error")
        p.text(error, "name", "data.error")
        p.text(error, "code", "data.error")
        if "reason" in error and type(error["reason"]) is not str:
            p.fail("data-shape", "data.error.reason must be a string when present")
    return facts._replace(call_id=call_id)


def _request_header(p: _Payload, data: dict[str, Any]) -> EventFacts:
    header = p.obj(p.field(data, "header", "data"), "data.header")
    if "system" in header:
        p.fail(
            "header-system",
            "data.header.system is retired; the system prompt is a system/message event",
        )
    if "tools" in header:
        tools = header["tools"]
        if type(tools) is not list:
            p.fail("data-shape", f"data.header.tools must be an array, got {_kind(tools)}")
        if not tools:
            p.fail("header-empty-tools", "data.header.tools must be omitted, not empty")
    if "adapterDefaults" in header:
        defaults = p.obj(header["adapterDefaults"], "data.header.adapterDefaults")
        if not defaults:
            p.fail(
                "header-empty-adapter-defaults",
                "data.header.adapterDefaults must be omitted, not empty",
            )
    config = p.obj(p.field(header, "config", "data.header"), "data.header.config")
    p.text(config, "provider", "data.header.config")
    p.text(config, "model", "data.header.config")
    reason = p.field(data, "reason", "data")
    if type(reason) is not str or reason not in _REQUEST_REASONS:
        p.fail(
            "data-shape",
            f"data.reason must be one of initial, resume, change, series; got {_short(reason)}",
        )
    p.only_true(data, "startsSeries", "data")
    return NO_FACTS


def _request_context(p: _Payload, data: dict[str, Any]) -> EventFacts:
    p.text(data, "provider", "data")
    p.text(data, "model", "data")
    if "contextWindow" in data and not is_count(data["contextWindow"]):
        p.fail("data-shape", "data.contextWindow must be a non-negative safe integer")
    if "systemPromptUpdate" in data and type(data["systemPromptUpdate"]) is not str:
        p.fail("data-shape", "data.systemPromptUpdate must be a string when present")
    return NO_FACTS


def _end_seed(p: _Payload, data: dict[str, Any]) -> EventFacts:
    if data == {}:
        return NO_FACTS
    if len(data) == 1 and data.get("inherited") is True:
        return EventFacts(inherited=True)
    p.fail("end-seed-shape", f"data must be {{}} or {{inherited: true}}, got {_short(data)}")


_CHECKERS: Final = {
    "turn/start": _turn_start,
    "turn/end": _turn_end,
    "step/start": _step,
    "step/end": _step,
    "system/message": _system,
    "developer/message": _developer,
    "user/message": _user,
    "assistant/message": _assistant,
    "assistant/attempt": _attempt,
    "tool/call": _tool_call,
    "tool/result": _tool_result,
    "request/header": _request_header,
    "request/context": _request_context,
    "session/end-seed": _end_seed,
}


# -- fast paths ------------------------------------------------------------------------------
# Each returns the facts for a well-formed payload, or None to let the precise checker above
# find (and name) the problem. They accept a subset of what the precise checkers accept.

_MAX: Final = MAX_SAFE_INTEGER
_new_facts: Final = tuple.__new__


def _facts(
    turn: int | None,
    step: int | None,
    call_id: str | None = None,
    requested: tuple[str, ...] = (),
    header_seq: int | None = None,
    inherited: bool = False,
    projects: bool = True,
) -> EventFacts:
    return _new_facts(EventFacts, (turn, step, call_id, requested, header_seq, inherited, projects))


def _fast_turn(data: Any) -> EventFacts | None:
    turn = data.get("turn")
    if type(turn) is int and 0 < turn <= _MAX:
        return _facts(turn, None)
    return None


def _fast_turn_end(data: Any) -> EventFacts | None:
    turn = data.get("turn")
    reason = data.get("reason")
    if type(turn) is int and 0 < turn <= _MAX and type(reason) is dict:
        kind = reason.get("kind")
        if type(kind) is str and kind:
            return _facts(turn, None)
    return None


def _fast_step(data: Any) -> EventFacts | None:
    turn = data.get("turn")
    step = data.get("step")
    if type(turn) is int and type(step) is int and 0 < turn <= _MAX and 0 < step <= _MAX:
        return _new_facts(EventFacts, (turn, step, None, (), None, False, True))
    return None


def _fast_user(data: Any) -> EventFacts | None:
    if data.get("role") == "user" and type(data.get("content")) is list:
        return NO_FACTS
    return None


def _fast_assistant(data: Any) -> EventFacts | None:
    turn = data.get("turn")
    step = data.get("step")
    message = data.get("message")
    if not (
        type(turn) is int
        and type(step) is int
        and 0 < turn <= _MAX
        and 0 < step <= _MAX
        and type(message) is dict
        and message.get("role") == "assistant"
        and type(data.get("stream")) is list
        and data.get("interrupted", True) is True
    ):
        return None
    content = message.get("content")
    source = message.get("source")
    if type(content) is not list or type(source) is not dict:
        return None
    provider = source.get("provider")
    model = source.get("model")
    if not (type(provider) is str and provider and type(model) is str and model):
        return None
    calls: list[str] = []
    for block in content:
        if type(block) is dict and block.get("type") == "tool-call":
            call_id = block.get("id")
            if type(call_id) is not str or not call_id:
                return None
            calls.append(call_id)
    return _facts(turn, step, None, tuple(calls), None, False, bool(content))


def _fast_tool_call(data: Any) -> EventFacts | None:
    facts = _fast_step(data)
    call_id = data.get("callId")
    name = data.get("name")
    if (
        facts is not None
        and type(call_id) is str
        and call_id
        and type(name) is str
        and name
        and type(data.get("arguments")) is str
    ):
        return _facts(facts.turn, facts.step, call_id)
    return None


def _fast_tool_result(data: Any) -> EventFacts | None:
    facts = _fast_step(data)
    message = data.get("message")
    if facts is None or type(message) is not dict or "error" in data:
        return None
    call_id = message.get("toolCallId")
    if (
        message.get("role") == "tool"
        and type(message.get("content")) is list
        and type(call_id) is str
        and call_id
        and type(message.get("isError", False)) is bool
    ):
        return _facts(facts.turn, facts.step, call_id)
    return None


def _fast_request_header(data: Any) -> EventFacts | None:
    header = data.get("header")
    reason = data.get("reason")
    if type(header) is not dict or "system" in header or type(reason) is not str:
        return None
    if reason not in _REQUEST_REASONS:
        return None
    if data.get("startsSeries", True) is not True:
        return None
    tools = header.get("tools", _PRESENT)
    defaults = header.get("adapterDefaults", _PRESENT)
    config = header.get("config")
    if tools is not _PRESENT and not (type(tools) is list and tools):
        return None
    if defaults is not _PRESENT and not (type(defaults) is dict and defaults):
        return None
    if type(config) is not dict:
        return None
    provider = config.get("provider")
    model = config.get("model")
    if type(provider) is str and provider and type(model) is str and model:
        return NO_FACTS
    return None


_PRESENT: Final = object()

PLAIN_PAYLOAD_SIZES: Final = {"turn/start": 1, "step/start": 2, "step/end": 2, "tool/call": 5}
"""Types whose payload, once :func:`check_payload` accepted it with exactly this many keys,
holds nothing but its required fields, each checked to be an exact ``int`` or ``str``: the
lossless encoder's type screen has nothing left to find in it."""

fast_payload_facts: Callable[[str, Any], EventFacts | None] | None
"""The fast checks above in C (``dsh_store._jsonscreen.payload_facts``), or None on an
install without a C compiler: ``fast_payload_facts(event_type, data)`` is what
:func:`check_payload` returns for a common core payload in its well-formed shape, or None
where that is not proven (then :func:`check_payload` decides and names any refusal)."""
try:
    from .._jsonscreen import configure_facts, payload_facts
except ImportError:  # installed without a C compiler
    fast_payload_facts = None
else:
    configure_facts(EventFacts, NO_FACTS)
    fast_payload_facts = payload_facts

_FAST: Final = {
    "turn/start": _fast_turn,
    "turn/end": _fast_turn_end,
    "step/start": _fast_step,
    "step/end": _fast_step,
    "user/message": _fast_user,
    "assistant/message": _fast_assistant,
    "assistant/attempt": None,
    "tool/call": _fast_tool_call,
    "tool/result": _fast_tool_result,
    "request/header": _fast_request_header,
}
