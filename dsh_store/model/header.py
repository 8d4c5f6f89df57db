"""The immutable session header: the first line of every v4 log."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, NoReturn

from .. import jsonvalue
from ..errors import EventValidationError
from ._checks import is_count, is_text
from .vocabulary import SESSION_FORMAT_VERSION

__all__ = ["MAX_HEADER_LINE_BYTES", "SessionHeader"]

MAX_HEADER_LINE_BYTES: Final = 1 << 20
"""Longest header line (``\\n`` included) a reader takes for a session header (1 MiB).

The writer refuses a longer one, so it never publishes a log its own reader would call
*not a session*; ``dsh_store.jsonl.scan.MAX_HEADER_BYTES`` is the same limit on read.
"""
# Bytes a header spends on keys, numbers and punctuation, beyond its four strings.
_HEADER_FRAME_BYTES: Final = 256
_MAX_BYTES_PER_CHAR: Final = 6  # a control character is escaped as \u00XX

_KEYS: Final = (
    "type",
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "isSeeded",
    "origin",
    "delegationDepth",
    "agentPreset",
)
_REQUIRED: Final = ("type", "version", "id", "createdAt", "isSeeded", "delegationDepth")
_RETIRED: Final = frozenset({"sandboxMode", "approvalPolicy", "seedLength"})
# POSIX root, a Windows drive root (C:\ or C:/) or a UNC path.
_ABSOLUTE: Final = re.compile(r"/|[A-Za-z]:[\\/]|\\\\")


# Constructor order of SessionHeader's fields (also its equality, hash and pickle order).
_FIELDS: Final = (
    "id",
    "created_at",
    "is_seeded",
    "delegation_depth",
    "cwd",
    "parent_session",
    "origin",
    "agent_preset",
)


def _bad(rule: str, message: str) -> EventValidationError:
    return EventValidationError(message, rule=rule, event_type="session")


class SessionHeader:
    """Storage metadata of one session, kept outside the event log.

    ``version`` is always :data:`SESSION_FORMAT_VERSION`; older headers are upgraded by the
    migration chain before they become a ``SessionHeader``. Construction validates every
    field and raises :class:`EventValidationError` with a ``header-*`` rule. Instances are
    immutable, compare and hash by value, and pickle.
    """

    # A hand-written immutable record rather than a frozen dataclass: building a dataclass
    # costs ~1.5 ms at import, which every ``dsh-store verify`` cold start would pay.
    __slots__ = _FIELDS

    id: str
    created_at: int
    is_seeded: bool
    delegation_depth: int
    cwd: str | None
    parent_session: str | None
    origin: str | None
    agent_preset: str | None

    def __init__(
        self,
        id: str,
        created_at: int,
        is_seeded: bool = False,
        delegation_depth: int = 0,
        cwd: str | None = None,
        parent_session: str | None = None,
        origin: str | None = None,
        agent_preset: str | None = None,
    ) -> None:
        values = (
            id,
            created_at,
            is_seeded,
            delegation_depth,
            cwd,
            parent_session,
            origin,
            agent_preset,
        )
        for name, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)
        self._validate()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"SessionHeader is immutable: cannot assign {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"SessionHeader is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not SessionHeader:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"SessionHeader({fields})"

    def __reduce__(self) -> tuple[type[SessionHeader], tuple[Any, ...]]:
        return (SessionHeader, self._fields())

    def _validate(self) -> None:
        if not is_text(self.id):
            raise _bad("header-id", f"session id must be a non-empty string, got {self.id!r}")
        if not is_count(self.created_at):
            raise _bad(
                "header-created-at",
                "createdAt must be a non-negative safe integer (epoch ms), "
                f"got {self.created_at!r}",
            )
        if type(self.is_seeded) is not bool:
            raise _bad("header-is-seeded", f"isSeeded must be a bool, got {self.is_seeded!r}")
        if not is_count(self.delegation_depth):
            raise _bad(
                "header-delegation-depth",
                "delegationDepth must be a non-negative safe integer, "
                f"got {self.delegation_depth!r}",
            )
        if self.cwd is not None and not (
            type(self.cwd) is str and _ABSOLUTE.match(self.cwd) is not None
        ):
            raise _bad("header-cwd", f"cwd must be an absolute path, got {self.cwd!r}")
        if self.parent_session is not None and not is_text(self.parent_session):
            raise _bad(
                "header-parent-session",
                f"parentSession must be a non-empty string, got {self.parent_session!r}",
            )
        if self.origin is not None and self.origin != "subagent":
            raise _bad("header-origin", f'origin must be "subagent" or absent, got {self.origin!r}')
        if self.agent_preset is not None and type(self.agent_preset) is not str:
            raise _bad(
                "header-agent-preset", f"agentPreset must be a string, got {self.agent_preset!r}"
            )
        texts = 0
        for name in ("id", "cwd", "parent_session", "agent_preset"):
            value = getattr(self, name)
            if value is not None:
                jsonvalue.check_json(value, event_type="session", path=name)
                texts += len(value)
        # Only a header that might be too long is encoded to measure it.
        if texts * _MAX_BYTES_PER_CHAR + _HEADER_FRAME_BYTES > MAX_HEADER_LINE_BYTES:
            size = len(self.encode())
            if size > MAX_HEADER_LINE_BYTES:
                raise _bad(
                    "header-too-long",
                    f"the header line would be {size} bytes, longer than the "
                    f"{MAX_HEADER_LINE_BYTES} bytes a reader takes for a session header; "
                    "shorten the id, cwd, parentSession or agentPreset",
                )

    @property
    def version(self) -> int:
        """The format version: always :data:`SESSION_FORMAT_VERSION`."""
        return SESSION_FORMAT_VERSION

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SessionHeader:
        """Build a header from its v4 wire object (the decoded first line).

        Exactly the v4 keys are admitted; unknown or retired keys, a missing required key,
        a wrong ``type``/``version`` or a bad field raise :class:`EventValidationError`.
        """
        if not isinstance(obj, Mapping):
            raise _bad("header-not-object", f"the header must be a JSON object, got {obj!r:.80}")
        for key in obj:
            if key in _RETIRED:
                raise _bad(
                    "header-retired-key",
                    f"header key {key!r} was retired before format 4; migrate the log",
                )
            if key not in _KEYS:
                raise _bad("header-unknown-key", f"header key {key!r} is not part of format 4")
        for key in _REQUIRED:
            if key not in obj:
                raise _bad("header-missing-key", f"header key {key!r} is required")
        if obj["type"] != "session":
            raise _bad("header-type", f'header type must be "session", got {obj["type"]!r}')
        version = obj["version"]
        if type(version) is not int or version != SESSION_FORMAT_VERSION:
            raise _bad(
                "header-version",
                f"header version must be {SESSION_FORMAT_VERSION}, got {version!r}",
            )
        for key in ("cwd", "parentSession", "origin", "agentPreset"):
            if key in obj and obj[key] is None:
                raise _bad("header-null", f"header key {key!r} is null; omit it instead")
        return cls(
            id=obj["id"],
            created_at=obj["createdAt"],
            is_seeded=obj["isSeeded"],
            delegation_depth=obj["delegationDepth"],
            cwd=obj.get("cwd"),
            parent_session=obj.get("parentSession"),
            origin=obj.get("origin"),
            agent_preset=obj.get("agentPreset"),
        )

    def to_json(self) -> dict[str, Any]:
        """The v4 wire object: DSH key order, optional keys omitted, never null."""
        wire: dict[str, Any] = {
            "type": "session",
            "version": SESSION_FORMAT_VERSION,
            "id": self.id,
            "createdAt": self.created_at,
        }
        if self.cwd is not None:
            wire["cwd"] = self.cwd
        if self.parent_session is not None:
            wire["parentSession"] = self.parent_session
        wire["isSeeded"] = self.is_seeded
        if self.origin is not None:
            wire["origin"] = self.origin
        wire["delegationDepth"] = self.delegation_depth
        if self.agent_preset is not None:
            wire["agentPreset"] = self.agent_preset
        return wire

    def encode(self) -> bytes:
        """The canonical header line, including the trailing newline."""
        return jsonvalue.encode(self.to_json(), event_type="session", path="") + b"\n"
