"""Type-checker signatures of ``append``: each core event type literal takes its payload type.

``Session.append``, ``LiveSession.append`` and ``AsyncLiveSession.append`` are decorated with
:func:`typed_append`, which returns the function unchanged at runtime. For a type checker the
decorated method is overloaded: ``append("tool/call", data)`` takes a
:class:`~dsh_store.payloads.ToolCallData`, a surface type requires ``surface_op`` and a
log-only core type refuses it. A core type literal whose arguments match no typed signature
selects a signature marked deprecated, so ``mypy --enable-error-code deprecated`` (or
``enable_error_code = ["deprecated"]``) reports the call, naming the expected payload type.
Any other event type (a ``str`` variable, log-only and ``plugin:`` types) takes any
payload, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, Literal, Protocol, TypeAlias, overload

    from typing_extensions import deprecated

    from .model.events import SurfaceReplace
    from .payloads import (
        AssistantAttemptData,
        AssistantMessageData,
        DeveloperMessageData,
        EndSeedData,
        RequestContextData,
        RequestHeaderData,
        StepData,
        SystemMessageData,
        ToolCallData,
        ToolResultData,
        TurnEndData,
        TurnStartData,
        UserMessage,
    )

__all__ = ["typed_append"]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

if TYPE_CHECKING:
    _SurfaceOp: TypeAlias = Literal["append"] | SurfaceReplace | Mapping[str, Any]

    class BoundAppend(Protocol[R_co]):
        """The overloaded call signature of a bound ``append``."""

        @overload
        def __call__(
            self,
            type: Literal["turn/start"],
            data: TurnStartData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["turn/end"],
            data: TurnEndData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["step/start"],
            data: StepData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["step/end"],
            data: StepData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["system/message"],
            data: SystemMessageData,
            *,
            surface_op: _SurfaceOp,
            source_event_seqs: Sequence[int] | None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["developer/message"],
            data: DeveloperMessageData,
            *,
            surface_op: _SurfaceOp,
            source_event_seqs: Sequence[int] | None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["user/message"],
            data: UserMessage,
            *,
            surface_op: _SurfaceOp,
            source_event_seqs: Sequence[int] | None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["assistant/message"],
            data: AssistantMessageData,
            *,
            surface_op: _SurfaceOp,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["assistant/attempt"],
            data: AssistantAttemptData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["tool/call"],
            data: ToolCallData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["tool/result"],
            data: ToolResultData,
            *,
            surface_op: _SurfaceOp,
            source_event_seqs: Sequence[int] | None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["request/header"],
            data: RequestHeaderData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["request/context"],
            data: RequestContextData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: Literal["session/end-seed"],
            data: EndSeedData,
            *,
            surface_op: None = None,
            source_event_seqs: None = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("turn/start: data must be a payloads.TurnStartData; no surface_op")
        def __call__(
            self,
            type: Literal["turn/start"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("turn/end: data must be a payloads.TurnEndData; no surface_op")
        def __call__(
            self,
            type: Literal["turn/end"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("step/start: data must be a payloads.StepData; no surface_op")
        def __call__(
            self,
            type: Literal["step/start"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("step/end: data must be a payloads.StepData; no surface_op")
        def __call__(
            self,
            type: Literal["step/end"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated(
            "system/message: data must be a payloads.SystemMessageData; surface_op required"
        )
        def __call__(
            self,
            type: Literal["system/message"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated(
            "developer/message: data must be a payloads.DeveloperMessageData; surface_op required"
        )
        def __call__(
            self,
            type: Literal["developer/message"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("user/message: data must be a payloads.UserMessage; surface_op required")
        def __call__(
            self,
            type: Literal["user/message"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated(
            "assistant/message: data must be a payloads.AssistantMessageData; "
            "surface_op required, no source_event_seqs"
        )
        def __call__(
            self,
            type: Literal["assistant/message"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated(
            "assistant/attempt: data must be a payloads.AssistantAttemptData; no surface_op"
        )
        def __call__(
            self,
            type: Literal["assistant/attempt"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("tool/call: data must be a payloads.ToolCallData; no surface_op")
        def __call__(
            self,
            type: Literal["tool/call"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("tool/result: data must be a payloads.ToolResultData; surface_op required")
        def __call__(
            self,
            type: Literal["tool/result"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("request/header: data must be a payloads.RequestHeaderData; no surface_op")
        def __call__(
            self,
            type: Literal["request/header"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("request/context: data must be a payloads.RequestContextData; no surface_op")
        def __call__(
            self,
            type: Literal["request/context"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        @deprecated("session/end-seed: data must be a payloads.EndSeedData; no surface_op")
        def __call__(
            self,
            type: Literal["session/end-seed"],
            data: object,
            *,
            surface_op: object = None,
            source_event_seqs: object = None,
            ignorable: bool = False,
        ) -> R_co: ...
        @overload
        def __call__(
            self,
            type: str,
            data: Any,
            *,
            surface_op: Any = None,
            source_event_seqs: Sequence[int] | None = None,
            ignorable: bool = False,
        ) -> R_co: ...

    class TypedAppend(Protocol[R_co]):
        """A method whose bound form is a :class:`BoundAppend`."""

        def __get__(self, instance: object, owner: type | None = None) -> BoundAppend[R_co]: ...

    def typed_append(function: Callable[..., R]) -> TypedAppend[R]:
        """Give ``function`` (an ``append`` method) the typed signatures."""
        ...

else:

    def typed_append(function: Callable[..., R]) -> Callable[..., R]:
        """Give ``function`` (an ``append`` method) the typed signatures: the identity at
        runtime, so the hot path pays nothing."""
        return function
