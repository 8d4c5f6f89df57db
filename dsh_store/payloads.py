"""Typed payloads of the v4 core events, and constructors for the common ones.

Every payload is a :class:`~typing.TypedDict`: at runtime it *is* the plain ``dict`` that
``append`` has always taken (no conversion, no cost), while a type checker knows its
fields. ``mypy --strict`` reports a misspelled or missing argument of a constructor and a
wrong field of a value annotated with a payload type. ``Session.append``,
``LiveSession.append`` and ``AsyncLiveSession.append`` are overloaded on the event type
literal; with ``--enable-error-code deprecated`` mypy also reports a core event whose
payload (a dict literal, or a value of the wrong payload type) or ``surface_op`` does not
match its type. Plain dicts keep working: a value typed ``Any`` (``json.loads``) is
accepted, and any payload is accepted when the event type is a ``str`` variable.

The constructors build the payloads in DSH's key order, so a typical agent loop is written
without one hand-built dict::

    live.append("turn/start", turn_start(1))
    live.append("user/message", user_message("List the files.", id="u1"), surface_op="append")

Open-ended parts stay open: a content block other than text, reasoning, tool-call and
image, a message ``source``, tool ``parameters``, ``meta`` and adapter defaults are typed
as JSON objects; log-only and ``plugin:`` payloads belong to their plugins and are typed
``Any``. Every payload is still validated at append time (shape and lossless JSON).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, cast

__all__ = [
    "PAYLOAD_TYPES",
    "AbortedReason",
    "AssistantAttemptData",
    "AssistantMessage",
    "AssistantMessageData",
    "AssistantStream",
    "BlockedReason",
    "CancelCause",
    "CompletedReason",
    "ContentBlock",
    "DeveloperMessage",
    "DeveloperMessageData",
    "EndSeedData",
    "EpochHeader",
    "ErrorReason",
    "ForkedReason",
    "ImageBlock",
    "InterruptedReason",
    "JsonObject",
    "JsonValue",
    "LlmCallConfig",
    "LlmFailure",
    "MaxTokensReason",
    "ModelSource",
    "RawChunkRecord",
    "ReasoningBlock",
    "RequestContextData",
    "RequestHeaderData",
    "RequestHeaderReason",
    "StepData",
    "StreamRecord",
    "SystemMessage",
    "SystemMessageData",
    "TextBlock",
    "TextChunksRecord",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallChunksRecord",
    "ToolCallData",
    "ToolFailure",
    "ToolResultData",
    "ToolResultMessage",
    "ToolSchema",
    "ToolSource",
    "TurnEndData",
    "TurnEndReason",
    "TurnStartData",
    "UserMessage",
    "assistant_message",
    "reasoning_block",
    "request_header",
    "step_end",
    "step_start",
    "system_message",
    "text_block",
    "tool_call",
    "tool_call_block",
    "tool_failure",
    "tool_result",
    "tool_schema",
    "turn_end",
    "turn_start",
    "user_message",
]

JsonValue: TypeAlias = Any
"""Any lossless JSON value; ``append`` checks it (no NaN, no -0.0, safe integers)."""

JsonObject: TypeAlias = Mapping[str, Any]
"""A JSON object whose members the core does not prescribe."""


# -- content blocks ----------------------------------------------------------------------


class TextBlock(TypedDict):
    """Model-visible text."""

    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    """The model's reasoning, kept beside its answer."""

    type: Literal["reasoning"]
    text: str


class ToolCallBlock(TypedDict):
    """A tool invocation requested inside an assistant message."""

    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str
    """The raw arguments JSON text exactly as the model produced it."""


class ImageBlock(TypedDict):
    """An image; ``attachment`` is owned by the producing harness."""

    type: Literal["image"]
    attachment: JsonValue


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ImageBlock | JsonObject
"""One block of a message's ``content``; other kinds (``file``, ``plugin:*``) are objects."""


# -- messages ----------------------------------------------------------------------------


class ModelSource(TypedDict):
    """The source of an assistant message: the route that produced it."""

    kind: Literal["model"]
    provider: str
    model: str
    replayState: NotRequired[JsonValue]


class ToolSource(TypedDict):
    """The source of a tool result message."""

    kind: Literal["tool"]
    callId: str


class UserMessage(TypedDict):
    """A user-role message; it is the whole ``user/message`` payload.

    ``source`` tells a human prompt (``{"kind": "user"}``) from injected context.
    """

    content: list[ContentBlock]
    source: JsonObject
    role: Literal["user"]
    id: str


class AssistantMessage(TypedDict):
    """The assembled model output of one step."""

    role: Literal["assistant"]
    content: list[ContentBlock]
    source: ModelSource
    id: str


class ToolResultMessage(TypedDict):
    """A tool-role message answering the tool call ``toolCallId``."""

    role: Literal["tool"]
    source: ToolSource
    toolCallId: str
    content: list[ContentBlock]
    isError: NotRequired[bool]
    id: str


class SystemMessage(TypedDict):
    """A system prompt node (``source`` is ``{"kind": "system-prompt"}`` for the prompt)."""

    role: Literal["system"]
    content: list[ContentBlock]
    source: JsonObject
    id: str


class DeveloperMessage(TypedDict):
    """An incremental agent session change (its blocks include ``tool-addition``)."""

    role: Literal["developer"]
    content: list[JsonObject]
    source: JsonObject
    id: str


# -- the embedded assistant stream --------------------------------------------------------


class TextChunksRecord(TypedDict):
    """A run of text or reasoning deltas of content block ``index``.

    ``dt[i]`` is the gap in milliseconds between delta ``i`` and delta ``i + 1``.
    """

    type: Literal["text-chunks", "reasoning-chunks"]
    time0: int
    index: int
    dt: list[int]
    texts: list[str]


class ToolCallChunksRecord(TypedDict):
    """A run of argument deltas of one tool call."""

    type: Literal["tool-call-chunks"]
    time0: int
    index: int
    dt: list[int]
    id: str
    name: NotRequired[str]
    args: list[str]


class RawChunkRecord(TypedDict):
    """Any other stream chunk (``block-start``, ``block-end``, ``usage``, ``finish``)."""

    type: Literal["chunk"]
    time: int
    chunk: JsonObject


StreamRecord: TypeAlias = TextChunksRecord | ToolCallChunksRecord | RawChunkRecord
"""One record of an embedded assistant stream."""


class TokenUsage(TypedDict):
    """Token accounting reported by the adapter for one step."""

    inputTokens: int
    outputTokens: int
    cacheReadTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]
    totalTokens: NotRequired[int]


# -- turn end reasons ---------------------------------------------------------------------


class CancelCause(TypedDict):
    """Why a turn was cancelled: ``user``, ``parent``, ``hook`` (with ``reason``),
    ``disposed`` or ``legacy``."""

    kind: Literal["user", "parent", "hook", "disposed", "legacy"]
    reason: NotRequired[str]


class LlmFailure(TypedDict):
    """A structured failure: the error facts, or ``{message, code: "UNKNOWN"}``."""

    message: str
    code: str


class CompletedReason(TypedDict):
    """The turn ran to its end."""

    kind: Literal["completed"]


class AbortedReason(TypedDict):
    """A cancellation request interrupted the live turn."""

    kind: Literal["aborted"]
    reason: CancelCause


class BlockedReason(TypedDict):
    """The turn was blocked."""

    kind: Literal["blocked"]


class ErrorReason(TypedDict):
    """The turn failed with a structured failure."""

    kind: Literal["error"]
    error: LlmFailure


class MaxTokensReason(TypedDict):
    """A step reached its output-token ceiling."""

    kind: Literal["max-tokens"]


class InterruptedReason(TypedDict):
    """Written by restore for a turn a crash left open; a live loop never writes it."""

    kind: Literal["interrupted"]


class ForkedReason(TypedDict):
    """Written by fork-seed construction for a turn open at the fork boundary."""

    kind: Literal["forked"]


TurnEndReason: TypeAlias = (
    CompletedReason
    | AbortedReason
    | BlockedReason
    | ErrorReason
    | MaxTokensReason
    | InterruptedReason
    | ForkedReason
)
"""Why a turn ended."""


# -- request state ------------------------------------------------------------------------


class LlmCallConfig(TypedDict):
    """The call configuration; further sampling scalars may be added as extra keys."""

    provider: str
    model: str
    reasoningEffort: NotRequired[str]
    maxTokens: NotRequired[int]
    stop: NotRequired[list[str]]


class ToolSchema(TypedDict):
    """One tool offered to the model."""

    name: str
    description: str
    parameters: JsonObject
    deferLoading: NotRequired[Literal[True]]


class EpochHeader(TypedDict):
    """Request state outside derived history; empty ``tools``/``adapterDefaults`` are omitted."""

    config: LlmCallConfig
    adapterDefaults: NotRequired[JsonObject]
    tools: NotRequired[list[ToolSchema]]


RequestHeaderReason: TypeAlias = Literal["initial", "resume", "change", "series"]
"""Why a ``request/header`` snapshot was appended."""


# -- event payloads -----------------------------------------------------------------------


class TurnStartData(TypedDict):
    """``turn/start``: opens turn ``turn`` (1, 2, … across the log)."""

    turn: int


class TurnEndData(TypedDict):
    """``turn/end``: closes turn ``turn``."""

    turn: int
    reason: TurnEndReason


class StepData(TypedDict):
    """``step/start`` and ``step/end``: step ``step`` (1, 2, … in each turn) of ``turn``."""

    turn: int
    step: int


class SystemMessageData(TypedDict):
    """``system/message``: the rendered system prompt on the surface."""

    turn: int
    step: int
    message: SystemMessage


class DeveloperMessageData(TypedDict):
    """``developer/message``; ``headerSeq`` exactly when the message adds tools."""

    turn: int
    step: int
    message: DeveloperMessage
    headerSeq: NotRequired[int]


class AssistantMessageData(TypedDict):
    """``assistant/message``: the step's model output with its exact stream."""

    turn: int
    step: int
    message: AssistantMessage
    stream: list[StreamRecord]
    usage: NotRequired[TokenUsage]
    interrupted: NotRequired[Literal[True]]


class AssistantAttemptData(TypedDict):
    """``assistant/attempt``: a model attempt that committed no message."""

    turn: int
    step: int
    stream: list[StreamRecord]


class ToolCallData(TypedDict):
    """``tool/call``: the model asked for ``name`` with raw ``arguments`` JSON text."""

    turn: int
    step: int
    callId: str
    name: str
    arguments: str


class ToolFailure(TypedDict):
    """A failed tool's identity and user-facing reason, outside the model's content."""

    name: str
    code: str
    reason: NotRequired[str]


class ToolResultData(TypedDict):
    """``tool/result``; ``error`` only when ``message.isError`` is true."""

    turn: int
    step: int
    message: ToolResultMessage
    error: NotRequired[ToolFailure]
    meta: NotRequired[JsonValue]


class RequestHeaderData(TypedDict):
    """``request/header``: the full header of the next request."""

    header: EpochHeader
    reason: RequestHeaderReason
    startsSeries: NotRequired[Literal[True]]


class RequestContextData(TypedDict):
    """``request/context``: metadata of the route the next request resolved to."""

    provider: str
    model: str
    contextWindow: NotRequired[int]
    systemPromptUpdate: NotRequired[str]


class EndSeedData(TypedDict):
    """``session/end-seed``: ``{}`` or ``{"inherited": true}`` at a fork cut."""

    inherited: NotRequired[Literal[True]]


PAYLOAD_TYPES: Final[Mapping[str, type]] = {
    "turn/start": TurnStartData,
    "turn/end": TurnEndData,
    "step/start": StepData,
    "step/end": StepData,
    "system/message": SystemMessageData,
    "developer/message": DeveloperMessageData,
    "user/message": UserMessage,
    "assistant/message": AssistantMessageData,
    "assistant/attempt": AssistantAttemptData,
    "tool/call": ToolCallData,
    "tool/result": ToolResultData,
    "request/header": RequestHeaderData,
    "request/context": RequestContextData,
    "session/end-seed": EndSeedData,
}
"""The payload type of every core event type."""


# -- constructors -------------------------------------------------------------------------


def _new_id(prefix: str) -> str:
    # Unique across processes and restarts without a clock or a counter file.
    import uuid

    return f"{prefix}-{uuid.uuid4().hex}"


def text_block(text: str) -> TextBlock:
    """A text content block."""
    return {"type": "text", "text": text}


def reasoning_block(text: str) -> ReasoningBlock:
    """A reasoning content block."""
    return {"type": "reasoning", "text": text}


def tool_call_block(call_id: str, name: str, arguments: str) -> ToolCallBlock:
    """A tool-call content block; ``arguments`` is the raw JSON text the model produced."""
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def _content(content: str | Iterable[ContentBlock]) -> list[ContentBlock]:
    if isinstance(content, str):
        return [text_block(content)]
    return list(content)


def user_message(
    content: str | Iterable[ContentBlock],
    *,
    id: str | None = None,
    source: JsonObject | None = None,
) -> UserMessage:
    """A ``user/message`` payload: a human prompt unless ``source`` says otherwise.

    ``content`` is text or a list of blocks; ``id`` defaults to a new ``user-<uuid>``.
    """
    return {
        "content": _content(content),
        "source": {"kind": "user"} if source is None else source,
        "role": "user",
        "id": _new_id("user") if id is None else id,
    }


def system_message(turn: int, step: int, text: str, *, id: str | None = None) -> SystemMessageData:
    """A ``system/message`` payload carrying the rendered system prompt."""
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "system",
            "content": [text_block(text)],
            "source": {"kind": "system-prompt"},
            "id": _new_id("system") if id is None else id,
        },
    }


def assistant_message(
    turn: int,
    step: int,
    content: str | Iterable[ContentBlock],
    *,
    provider: str,
    model: str,
    id: str | None = None,
    stream: AssistantStream | list[StreamRecord] | None = None,
    usage: TokenUsage | None = None,
    interrupted: bool = False,
) -> AssistantMessageData:
    """An ``assistant/message`` payload for step ``step`` of turn ``turn``.

    ``content`` is text or blocks (:func:`text_block`, :func:`reasoning_block`,
    :func:`tool_call_block`); each ``tool-call`` block is a request a ``tool/result`` may
    answer. ``stream`` is the exact model stream (an :class:`AssistantStream` or its
    records); when omitted, the stream of ``content`` as one delta per block at time 0 is
    logged, via :meth:`AssistantStream.of`. ``interrupted=True`` marks the delivered prefix
    of a turn cancelled mid-stream.
    """
    blocks = _content(content)
    if stream is None:
        records = AssistantStream.of(blocks).records
    elif isinstance(stream, AssistantStream):
        records = stream.records
    else:
        records = list(stream)
    data: AssistantMessageData = {
        "turn": turn,
        "step": step,
        "message": {
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", "provider": provider, "model": model},
            "id": _new_id("assistant") if id is None else id,
        },
        "stream": records,
    }
    if usage is not None:
        data["usage"] = usage
    if interrupted:
        data["interrupted"] = True
    return data


def tool_call(turn: int, step: int, call_id: str, name: str, arguments: str) -> ToolCallData:
    """A ``tool/call`` payload: the call is about to run (flush before running it)."""
    return {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}


def tool_failure(name: str, code: str, reason: str | None = None) -> ToolFailure:
    """The ``error`` of a failed ``tool/result``: failure identity and user-facing reason."""
    failure: ToolFailure = {"name": name, "code": code}
    if reason is not None:
        failure["reason"] = reason
    return failure


def tool_result(
    turn: int,
    step: int,
    call_id: str,
    content: str | Iterable[ContentBlock],
    *,
    id: str | None = None,
    is_error: bool = False,
    error: ToolFailure | None = None,
    meta: JsonValue = None,
) -> ToolResultData:
    """A ``tool/result`` payload answering ``call_id``.

    Passing ``error`` (see :func:`tool_failure`) marks the message ``isError: true``;
    ``is_error=True`` alone marks a failure without an identity. ``meta`` is the tool's
    own JSON presentation payload (omitted when ``None``). ``id`` defaults to
    ``result-<call_id>``.
    """
    message: ToolResultMessage = {
        "role": "tool",
        "source": {"kind": "tool", "callId": call_id},
        "toolCallId": call_id,
        "content": _content(content),
        "isError": is_error or error is not None,
        "id": f"result-{call_id}" if id is None else id,
    }
    data: ToolResultData = {"turn": turn, "step": step, "message": message}
    if error is not None:
        data["error"] = error
    if meta is not None:
        data["meta"] = meta
    return data


def turn_start(turn: int) -> TurnStartData:
    """A ``turn/start`` payload."""
    return {"turn": turn}


_SIMPLE_REASONS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted", "forked"})


def turn_end(
    turn: int,
    reason: Literal["completed", "blocked", "max-tokens"] | TurnEndReason = "completed",
) -> TurnEndData:
    """A ``turn/end`` payload; ``reason`` is a kind without facts or a full reason object.

    Build the others as objects, e.g. ``{"kind": "aborted", "reason": {"kind": "user"}}``
    or ``{"kind": "error", "error": {"message": ..., "code": ...}}``.
    """
    if isinstance(reason, str):
        if reason not in _SIMPLE_REASONS:
            raise ValueError(f"turn_end reason {reason!r} needs a full reason object")
        full = cast(TurnEndReason, {"kind": reason})
    else:
        full = reason
    return {"turn": turn, "reason": full}


def step_start(turn: int, step: int) -> StepData:
    """A ``step/start`` payload."""
    return {"turn": turn, "step": step}


def step_end(turn: int, step: int) -> StepData:
    """A ``step/end`` payload."""
    return {"turn": turn, "step": step}


def tool_schema(name: str, description: str, parameters: JsonObject) -> ToolSchema:
    """One tool of a request header; ``parameters`` is its JSON Schema."""
    return {"name": name, "description": description, "parameters": parameters}


def request_header(
    provider: str,
    model: str,
    *,
    tools: Iterable[ToolSchema] = (),
    reason: RequestHeaderReason = "initial",
    reasoning_effort: str | None = None,
    max_tokens: int | None = None,
    starts_series: bool = False,
) -> RequestHeaderData:
    """A ``request/header`` payload (log-only): the full header of the next request.

    ``reason`` is ``initial`` for a new conversation's first request, ``resume`` for a loop
    instance's first request over an existing log, ``change`` when the header changed,
    ``series`` for an unchanged header starting a new message series. Empty ``tools`` are
    omitted, as the canonical form requires.
    """
    config: LlmCallConfig = {"provider": provider, "model": model}
    if reasoning_effort is not None:
        config["reasoningEffort"] = reasoning_effort
    if max_tokens is not None:
        config["maxTokens"] = max_tokens
    header: EpochHeader = {"config": config}
    schemas = list(tools)
    if schemas:
        header["tools"] = schemas
    data: RequestHeaderData = {"header": header, "reason": reason}
    if starts_series:
        data["startsSeries"] = True
    return data


class AssistantStream:
    """Builds the exact embedded stream of one model attempt from its timed chunks.

    Feed it what the provider streams, in order, with the time (epoch ms) each piece
    arrived: :meth:`text`, :meth:`reasoning`, :meth:`tool_call` deltas and any other
    :meth:`chunk` (``block-start``, ``usage``, ``finish``). :attr:`records` is the compact
    form DSH logs: consecutive deltas of one block become one run record, never joined,
    so the stream expands back to the exact chunks. :meth:`content` assembles the
    message blocks the deltas spell.
    """

    __slots__ = ("_blocks", "_builder")

    def __init__(self) -> None:
        # the migrations package only once a stream is built: off the payload types' import
        from .migrations.streams import StreamBuilder

        self._builder = StreamBuilder()
        self._blocks: dict[int, dict[str, Any]] = {}

    @classmethod
    def of(cls, content: Iterable[ContentBlock], *, time: int = 0) -> AssistantStream:
        """The stream of finished ``content``: one delta per text, reasoning and tool-call
        block, all at ``time``; other blocks are not streamed."""
        stream = cls()
        blocks: Iterable[Mapping[str, Any]] = content
        for index, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "text":
                stream.text(block["text"], index=index, time=time)
            elif kind == "reasoning":
                stream.reasoning(block["text"], index=index, time=time)
            elif kind == "tool-call":
                stream.tool_call(
                    block["arguments"], index=index, id=block["id"], name=block["name"], time=time
                )
        return stream

    @property
    def records(self) -> list[StreamRecord]:
        """A copy of the stream records so far (later deltas do not change it)."""
        records: list[Any] = [
            {key: list(value) if type(value) is list else value for key, value in record.items()}
            for record in self._builder.records
        ]
        return records

    def text(self, delta: str, *, index: int, time: int) -> None:
        """A text delta of content block ``index``."""
        self._builder.add(time, {"type": "text-delta", "index": index, "text": delta})
        self._extend(index, "text", delta)

    def reasoning(self, delta: str, *, index: int, time: int) -> None:
        """A reasoning delta of content block ``index``."""
        self._builder.add(time, {"type": "reasoning-delta", "index": index, "text": delta})
        self._extend(index, "reasoning", delta)

    def tool_call(
        self, arguments_delta: str, *, index: int, id: str, name: str | None, time: int
    ) -> None:
        """An arguments delta of the tool call ``id`` in content block ``index``.

        ``name`` is given with the deltas that carry it (usually the first) and ``None``
        otherwise.
        """
        chunk: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": id}
        if name is not None:
            chunk["name"] = name
        chunk["argumentsDelta"] = arguments_delta
        self._builder.add(time, chunk)
        block = self._blocks.setdefault(
            index, {"type": "tool-call", "id": id, "name": "", "arguments": ""}
        )
        if name:
            block["name"] = name
        block["arguments"] += arguments_delta

    def chunk(self, chunk: JsonObject, *, time: int) -> None:
        """Any other chunk, kept whole (``{"type": "finish", "reason": {...}}``, …)."""
        self._builder.add(time, dict(chunk))

    def content(self) -> list[ContentBlock]:
        """The message blocks the deltas spell, in block-index order."""
        return [dict(self._blocks[index]) for index in sorted(self._blocks)]

    def _extend(self, index: int, kind: str, delta: str) -> None:
        block = self._blocks.setdefault(index, {"type": kind, "text": ""})
        block["text"] += delta
