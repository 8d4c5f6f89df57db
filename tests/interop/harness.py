"""Running the upstream driver and putting both sides' results in one comparable shape.

The comparison (see ``tests/interop/__init__.py`` for the whole contract) reduces a verdict
on one log to :class:`Verdict`: accepted or refused, how many stored events were kept, the
closers as (type, callId, code, text, reason) facts, and the model-visible conversation as
normalized messages plus the system prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_store.errors import DshStoreError
from dsh_store.jsonl.scan import LogScanner
from dsh_store.model import Session
from dsh_store.restore import read_log
from tests.interop.upstream import Upstream

__all__ = ["DriverError", "Verdict", "ours", "run_driver", "theirs"]

DRIVER_TIMEOUT_S = 120.0


class DriverError(AssertionError):
    """The driver itself failed (not a refusal of a log: a broken command or install)."""


def run_driver(upstream: Upstream, command: dict[str, Any]) -> dict[str, Any]:
    """Run one driver command to completion and return its final JSON result."""
    done = subprocess.run(
        [str(upstream.node), str(upstream.driver), str(upstream.packages)],
        input=json.dumps(command).encode(),
        capture_output=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("{")]
    if not lines:
        raise DriverError(f"driver printed no result (exit {done.returncode}): {done.stderr!r}")
    result: dict[str, Any] = json.loads(lines[-1])
    if done.returncode != 0 or not result.get("ok"):
        raise DriverError(f"driver failed: {result.get('error')} {done.stderr.decode()[-2000:]}")
    return result


def spawn_driver(upstream: Upstream, command: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start a driver command (for the kill tests); its stdin is written and closed."""
    process = subprocess.Popen(
        [str(upstream.node), str(upstream.driver), str(upstream.packages)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(command).encode())
    process.stdin.close()
    return process


@dataclass(frozen=True)
class Verdict:
    """One side's verdict on one log, in the shared shape."""

    accepted: bool
    error: str | None = None
    kept: int | None = None
    closers: tuple[tuple[Any, ...], ...] = ()
    conversation: tuple[Any, ...] | None = field(default=None, compare=False)
    system: str | None = field(default=None, compare=False)

    @property
    def structure(self) -> tuple[Any, ...]:
        """Verdict, kept count and closers without their texts (text compared apart)."""
        return (self.accepted, self.kept, tuple(closer[:3] + closer[4:] for closer in self.closers))

    @property
    def closer_texts(self) -> tuple[Any, ...]:
        return tuple(closer[3] for closer in self.closers)

    @property
    def tool_closers(self) -> bool:
        return any(closer[0] == "tool/result" for closer in self.closers)


def assert_same_read(name: str, our_verdict: Verdict, upstream_verdict: Verdict) -> None:
    """Both sides accepted ``name`` and read it alike: events kept, closers (with their
    texts), conversation and system prompt."""
    assert upstream_verdict.accepted, (name, upstream_verdict.error)
    assert our_verdict.accepted, (name, our_verdict.error)
    assert our_verdict.structure == upstream_verdict.structure, name
    assert our_verdict.closer_texts == upstream_verdict.closer_texts, name
    assert our_verdict.conversation == upstream_verdict.conversation, name
    assert our_verdict.system == upstream_verdict.system, name


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _part(part: Any) -> tuple[Any, ...]:
    if part.get("type") in {"text", "reasoning"} and set(part) == {"type", "text"}:
        return (part["type"], part["text"])
    if part.get("type") == "tool-call":
        return ("tool-call", part["id"], part["name"], part["arguments"])
    return (part.get("type"), _canonical(part))


def _texts(parts: list[Any]) -> tuple[Any, ...]:
    return tuple(_part(part) for part in parts)


def _format0_message(message: Any) -> list[tuple[Any, ...]]:
    role = message["role"]
    if role == "user" and any(part.get("type") == "tool-result" for part in message["content"]):
        return [
            ("tool", part["toolCallId"], bool(part.get("isError", False)), _texts(part["content"]))
            for part in message["content"]
        ]
    if role == "assistant":
        return [("assistant", message.get("id"), _texts(message["content"]))]
    return [(role, message.get("id"), message["source"]["kind"], _texts(message["content"]))]


def _v4_message(message: Any) -> list[tuple[Any, ...]]:
    role = message["role"]
    if role == "tool":
        return [
            (
                "tool",
                message["toolCallId"],
                bool(message.get("isError", False)),
                _texts(message["content"]),
            )
        ]
    if role == "assistant":
        return [("assistant", message.get("id"), _texts(message["content"]))]
    return [(role, message.get("id"), message["source"]["kind"], _texts(message["content"]))]


def _v4_closer(event: Any) -> tuple[Any, ...]:
    if event.type == "tool/result":
        message = event.data["message"]
        text = "".join(part["text"] for part in message["content"] if part["type"] == "text")
        return ("tool/result", message["toolCallId"], event.data["error"]["code"], text, None)
    if event.type == "turn/end":
        return ("turn/end", None, None, None, _canonical(event.data["reason"]))
    return (event.type, None, None, None, None)


def _upstream_closer(facts: Any) -> tuple[Any, ...]:
    reason = facts.get("reason")
    return (
        facts["type"],
        facts.get("callId"),
        facts.get("code"),
        facts.get("text"),
        None if reason is None else _canonical(reason),
    )


def theirs(report: dict[str, Any]) -> Verdict:
    """The upstream driver's per-log report as a :class:`Verdict`."""
    if not report["ok"]:
        return Verdict(False, error=f"{report['error']['name']}: {report['error']['message']}")
    conversation = None
    if "messages" in report:
        conversation = tuple(
            item for message in report["messages"] for item in _format0_message(message)
        )
    return Verdict(
        True,
        kept=report["kept"],
        closers=tuple(_upstream_closer(facts) for facts in report["closers"]),
        conversation=conversation,
        system=report.get("system") or None,
    )


def ours(path: str | os.PathLike[str], *, lenient: bool = False, messages: bool = True) -> Verdict:
    """dsh-store's verdict on the format-0 log at ``path`` (``read_log``, never writes).

    ``kept`` is the number of source events in dsh-store's committed prefix (packed rows
    count their members), the closers are the v4 closers of the migrated view, and the
    conversation is ``derive_messages()`` of the migrated, balanced session.
    """
    try:
        # Passed only when asked for, so the default path never depends on the opt-in.
        options: dict[str, Any] = {"lenient": True} if lenient else {}
        inspection = read_log(path, **options)
    except DshStoreError as error:
        return Verdict(False, error=f"{type(error).__name__}: {error}")
    scanner = LogScanner(Path(path))
    if lenient:  # the scan of read_log(lenient=True): lone surrogates read as U+FFFD
        scanner.on_lone_surrogates = lambda seq, line, found: None
    kept = scanner.exhaust().event_count
    conversation = None
    system = None
    if messages:
        session = Session.from_restore(inspection.header, inspection.balanced)
        derived = session.derive_messages()
        systems = [message for message in derived if message["role"] == "system"]
        if systems:
            system = "".join(
                part["text"] for part in systems[-1]["content"] if part["type"] == "text"
            )
        conversation = tuple(
            item
            for message in derived
            if message["role"] != "system"
            for item in _v4_message(message)
        )
    return Verdict(
        True,
        kept=kept,
        closers=tuple(_v4_closer(event) for event in inspection.closers),
        conversation=conversation,
        system=system or None,
    )
