"""A session as the conversation a person reads: Markdown or one self-contained HTML file.

:func:`export_transcript` streams: it reads the log event by event through
:func:`dsh_store.summary.stream_v4_lines` (so every format version works, each event is
checked as a restore checks it, and an older log is upgraded on the fly) and writes each
piece of the transcript as soon as its event is read. Memory is one event plus the tool
names of the open step, whatever the log's size.

What is shown: turns and steps; user, assistant, system and developer messages; reasoning
collapsed (``<details>``); tool calls with their arguments and their results; errors,
interruptions and the closers a restore or a fork wrote (marked as such); the fork point
(``session/end-seed {inherited: true}``) and resume points; request headers and log-only
records as one-line notes. A log that ends inside a turn (a crash nobody restored yet) ends
with a notice naming the open turn and the calls without a result.

Everything taken from the log is escaped: in HTML every text goes through
:func:`html.escape` and the page carries a Content-Security-Policy that forbids scripts and
every network load; in Markdown, ``&``, ``<`` and ``>`` of message text become entities
(so raw HTML in a log cannot render as markup) and code is fenced with more backticks than
it contains. In both, every control character but tab and newline is written as ``\\xNN``
(:func:`dsh_store._output.printable_lines`), so a transcript shown on a terminal cannot
clear the screen or move the cursor.
"""

from __future__ import annotations

import datetime
import html
import os
import re
from collections.abc import Callable
from typing import Any, Final, Literal, NamedTuple

import orjson

from ._output import printable_lines
from .errors import DshStoreError, NotASessionError
from .jsonl.scan import LogScanner
from .model.vocabulary import SESSION_FORMAT_VERSION
from .summary import stream_v4_lines

__all__ = ["ExportFormat", "ExportSummary", "export_file", "export_transcript"]

ExportFormat = Literal["markdown", "html"]

_CLOSER_ID_PREFIX: Final = "interrupted-tool-result-"
_NOTE_LIMIT: Final = 2000  # characters of a log-only payload shown in its note


class ExportSummary(NamedTuple):
    """What an export rendered."""

    events: int
    turns: int
    open_turn: int | None
    """The turn the log ends inside (never ended), or None."""


def export_transcript(
    path: str | os.PathLike[str], write: Callable[[str], object], *, format: ExportFormat
) -> ExportSummary:
    """Render the log at ``path`` as a transcript, calling ``write`` with each piece.

    The pieces are written as the events are read; a defect in the log stops the export
    with the typed error after the part before it was written.

    :raises CorruptLogError: committed corruption.
    :raises MigrationRefusedError: an older log that cannot be upgraded faithfully.
    :raises NotASessionError: the file is not a session log (an empty file included).
    :raises UnsupportedVersionError: a newer (or invalid) format version.
    """
    log = os.fspath(path)
    info = LogScanner(log).read_header()
    if info is None:
        raise NotASessionError(log, "the file is empty")

    # Log text reaches terminals (`export log` on a TTY, `cat transcript.md`): control
    # characters are shown as \xNN, as every command shows them; newlines are the
    # transcript's own.
    def safe_write(piece: str) -> object:
        return write(printable_lines(piece))

    renderer: _Renderer = _Html(safe_write) if format == "html" else _Markdown(safe_write)
    walker = _Walker(renderer)
    renderer.begin(_v4_header(info.value, info.version, log), info.version)
    stream_v4_lines(log, walker.feed)
    walker.finish()
    renderer.end()
    return ExportSummary(walker.events, walker.turns, walker.open_turn)


def export_file(
    path: str | os.PathLike[str], output: str | os.PathLike[str], *, format: ExportFormat
) -> ExportSummary:
    """Render the log at ``path`` into the file ``output``, replacing it only when complete.

    The transcript is written to a temp file beside ``output`` (``.<name>.<hex>.tmp``),
    fsynced, then renamed over ``output`` and the directory fsynced. A crash or an error
    before the rename leaves ``output`` as it was (or absent) and at most the temp file; an
    error removes the temp file.
    """
    # only when writing a file: off an export to stdout
    from .jsonl.files import fsync_dir

    target = os.fspath(output)
    directory = os.path.dirname(target) or "."
    temp = os.path.join(directory, f".{os.path.basename(target)}.{os.urandom(6).hex()}.tmp")
    with open(temp, "x", encoding="utf-8", newline="") as handle:
        try:
            summary = export_transcript(path, handle.write, format=format)
            handle.flush()
            os.fsync(handle.fileno())
        except BaseException:
            os.unlink(temp)
            raise
    os.replace(temp, target)
    fsync_dir(directory)
    return summary


def _v4_header(value: dict[str, Any], version: int, log: str) -> dict[str, Any]:
    """The header row upgraded to v4 (an older ``seedLength`` becomes ``isSeeded``)."""
    if version == SESSION_FORMAT_VERSION:
        return value
    # the chain only for an older header: off a v4 export's start
    from .migrations import EDGES, MigrationContext

    context = MigrationContext(path=log, session_id=value.get("id"))
    try:
        for source in range(version, SESSION_FORMAT_VERSION):
            value = EDGES[source].header(value, context)
    except (DshStoreError, KeyError, TypeError, ValueError):
        pass  # the event stream below reports what is wrong with it
    return value


# -- the walk: events to transcript elements ------------------------------------------------


class _Walker:
    """Turns v4 events into renderer calls, keeping only the open step's tool names."""

    def __init__(self, renderer: _Renderer) -> None:
        self.out = renderer
        self.events = 0
        self.turns = 0
        self.open_turn: int | None = None
        self.open_step: int | None = None
        self.tool_names: dict[str, str] = {}  # call id -> tool name, open step only
        self.resolved: set[str] = set()

    def feed(self, event_type: str, seq: int, line: bytes) -> None:
        self.events += 1
        event = orjson.loads(line)
        data = event.get("data")
        data = data if isinstance(data, dict) else {}
        handler = _HANDLERS.get(event_type)
        if handler is not None:
            handler(self, seq, data)
        else:
            text = orjson.dumps(data).decode()
            if len(text) > _NOTE_LIMIT:
                text = text[:_NOTE_LIMIT] + " …"
            self.out.note(seq, event_type, text)
        op = event.get("surfaceOp")
        if isinstance(op, dict) and op.get("op") == "replace":
            self.out.note(
                seq,
                "surface",
                f"this message replaces the messages from seq {op.get('startSeq')} through "
                f"seq {op.get('endSeq')} in what the model sees",
            )

    def finish(self) -> None:
        if self.open_step is not None:
            self.out.step_end()
        if self.open_turn is not None:
            pending = [call for call in self.tool_names if call not in self.resolved]
            self.out.open_at_end(self.open_turn, pending)
            self.out.turn_end(None)

    # handlers

    def turn_start(self, seq: int, data: dict[str, Any]) -> None:
        self.turns += 1
        self.open_turn = _int(data.get("turn"))
        self.out.turn_start(self.open_turn, seq)

    def turn_end(self, seq: int, data: dict[str, Any]) -> None:
        reason = data.get("reason")
        self.out.turn_end(reason if isinstance(reason, dict) else {"kind": "?"})
        self.open_turn = None
        self._clear()

    def step_start(self, seq: int, data: dict[str, Any]) -> None:
        self.open_step = _int(data.get("step"))
        self._clear()
        self.out.step_start(self.open_step)

    def step_end(self, seq: int, data: dict[str, Any]) -> None:
        self.open_step = None
        self._clear()
        self.out.step_end()

    def _clear(self) -> None:
        self.tool_names = {}
        self.resolved = set()

    def user(self, seq: int, data: dict[str, Any]) -> None:
        source = data.get("source")
        kind = source.get("kind") if isinstance(source, dict) else None
        label = "User" if kind in (None, "user") else f"User ({kind})"
        self.out.message("user", label, seq, _blocks(data.get("content")), [])

    def system(self, seq: int, data: dict[str, Any]) -> None:
        message = _dict(data.get("message"))
        blocks = _blocks(message.get("content"))
        self.out.collapsed("system", "System prompt", seq, _plain_text(blocks) or "(empty)")

    def developer(self, seq: int, data: dict[str, Any]) -> None:
        message = _dict(data.get("message"))
        self.out.message("developer", "Developer", seq, _blocks(message.get("content")), [])

    def assistant(self, seq: int, data: dict[str, Any]) -> None:
        message = _dict(data.get("message"))
        source = _dict(message.get("source"))
        label = "Assistant"
        if isinstance(source.get("provider"), str) and isinstance(source.get("model"), str):
            label += f" ({source['provider']}/{source['model']})"
        blocks = _blocks(message.get("content"))
        for block in blocks:
            if block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                self.tool_names[block["id"]] = str(block.get("name", "?"))
        marks = []
        if data.get("interrupted") is True:
            marks.append("interrupted mid-stream: only the delivered prefix")
        usage = data.get("usage")
        if isinstance(usage, dict):
            marks.append(
                f"tokens: {usage.get('inputTokens', '?')} in, {usage.get('outputTokens', '?')} out"
            )
        self.out.message("assistant", label, seq, blocks, marks)

    def attempt(self, seq: int, data: dict[str, Any]) -> None:
        stream = data.get("stream")
        count = len(stream) if isinstance(stream, list) else 0
        self.out.notice(
            "attempt", seq, f"A model attempt ended without a message ({count} stream records)."
        )

    def tool_call(self, seq: int, data: dict[str, Any]) -> None:
        call_id = str(data.get("callId", "?"))
        name = str(data.get("name", "?"))
        if call_id in self.tool_names:
            self.out.notice("tool-start", seq, f"Tool {name} started ({call_id}).")
        else:
            self.tool_names[call_id] = name
            self.out.tool_call(seq, name, call_id, str(data.get("arguments", "")))

    def tool_result(self, seq: int, data: dict[str, Any]) -> None:
        message = _dict(data.get("message"))
        call_id = str(message.get("toolCallId", "?"))
        self.resolved.add(call_id)
        name = self.tool_names.get(call_id, "tool")
        error = data.get("error")
        failure = None
        if message.get("isError") is True:
            failure = "error"
            if isinstance(error, dict):
                failure = f"error {error.get('name', '?')} ({error.get('code', '?')})"
                if isinstance(error.get("reason"), str):
                    failure += f": {error['reason']}"
        closer = str(message.get("id", "")).startswith(_CLOSER_ID_PREFIX)
        text = _plain_text(_blocks(message.get("content")))
        self.out.tool_result(seq, name, call_id, text, failure, closer)

    def request_header(self, seq: int, data: dict[str, Any]) -> None:
        header = _dict(data.get("header"))
        config = _dict(header.get("config"))
        tools = header.get("tools")
        names = (
            [str(tool.get("name")) for tool in tools if isinstance(tool, dict)]
            if (isinstance(tools, list))
            else []
        )
        text = f"{config.get('provider', '?')}/{config.get('model', '?')}"
        text += f", tools: {', '.join(names)}" if names else ", no tools"
        self.out.note(seq, f"request/header ({data.get('reason', '?')})", text)

    def end_seed(self, seq: int, data: dict[str, Any]) -> None:
        if data.get("inherited") is True:
            self.out.notice(
                "fork", seq, "Fork point: everything above is inherited from the parent session."
            )
        else:
            self.out.notice(
                "resume", seq, "Resumed here: the session was reopened (after a close or a crash)."
            )


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [block if isinstance(block, dict) else {"type": "?"} for block in content]


def _plain_text(blocks: list[dict[str, Any]]) -> str:
    return "\n\n".join(
        block["text"] for block in blocks if isinstance(block.get("text"), str) and block["text"]
    )


_HANDLERS: Final[dict[str, Callable[[_Walker, int, dict[str, Any]], None]]] = {
    "turn/start": _Walker.turn_start,
    "turn/end": _Walker.turn_end,
    "step/start": _Walker.step_start,
    "step/end": _Walker.step_end,
    "user/message": _Walker.user,
    "system/message": _Walker.system,
    "developer/message": _Walker.developer,
    "assistant/message": _Walker.assistant,
    "assistant/attempt": _Walker.attempt,
    "tool/call": _Walker.tool_call,
    "tool/result": _Walker.tool_result,
    "request/header": _Walker.request_header,
    "session/end-seed": _Walker.end_seed,
}


def _reason_text(reason: dict[str, Any]) -> tuple[str, str]:
    """(css class, words) for a turn's end."""
    kind = str(reason.get("kind", "?"))
    if kind == "completed":
        return "ok", "completed"
    if kind == "interrupted":
        return "bad", "interrupted: closed by a restore after a crash"
    if kind == "forked":
        return "bad", "forked: closed at the fork point"
    if kind == "aborted":
        cause = _dict(reason.get("reason"))
        return "bad", f"aborted ({cause.get('kind', '?')})"
    if kind == "error":
        error = _dict(reason.get("error"))
        return "bad", f"error {error.get('code', '?')}: {error.get('message', '?')}"
    return "bad", kind


def _created(header: dict[str, Any]) -> str:
    created = header.get("createdAt")
    if type(created) is not int:
        return "?"
    try:
        moment = datetime.datetime.fromtimestamp(created / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return str(created)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _pretty_arguments(arguments: str) -> str:
    """Arguments JSON indented for reading; text that is not JSON is shown as it is."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


# -- renderers --------------------------------------------------------------------------------


class _Renderer:
    """The transcript elements; each call writes its piece at once."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self.write = write

    def begin(self, header: dict[str, Any], version: int) -> None: ...
    def end(self) -> None: ...
    def turn_start(self, turn: int, seq: int) -> None: ...
    def turn_end(self, reason: dict[str, Any] | None) -> None: ...
    def step_start(self, step: int) -> None: ...
    def step_end(self) -> None: ...
    def message(
        self, role: str, label: str, seq: int, blocks: list[dict[str, Any]], marks: list[str]
    ) -> None: ...
    def collapsed(self, role: str, label: str, seq: int, text: str) -> None: ...
    def tool_call(self, seq: int, name: str, call_id: str, arguments: str) -> None: ...
    def tool_result(
        self, seq: int, name: str, call_id: str, text: str, failure: str | None, closer: bool
    ) -> None: ...
    def notice(self, kind: str, seq: int, text: str) -> None: ...
    def note(self, seq: int, label: str, text: str) -> None: ...
    def open_at_end(self, turn: int, pending: list[str]) -> None: ...

    @staticmethod
    def header_facts(header: dict[str, Any], version: int) -> list[tuple[str, str]]:
        facts = [("created", _created(header))]
        for key, label in (("cwd", "cwd"), ("parentSession", "parent session")):
            if isinstance(header.get(key), str):
                facts.append((label, header[key]))
        if header.get("isSeeded") is True:
            facts.append(("forked", "yes: it starts with an inherited prefix"))
        facts.append(
            ("format", f"v{version}" + (" (upgraded to v4 for reading)" if version != 4 else ""))
        )
        return facts


def _md_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _fence(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}\n\n"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in _md_text(text).split("\n"))


class _Markdown(_Renderer):
    def begin(self, header: dict[str, Any], version: int) -> None:
        title = _md_text(str(header.get("id", "?")))
        facts = "".join(
            f"- {label}: {_md_text(value)}\n" for label, value in self.header_facts(header, version)
        )
        self.write(f"# Session {title}\n\n{facts}\n")

    def turn_start(self, turn: int, seq: int) -> None:
        self.write(f"## Turn {turn}\n\n")

    def turn_end(self, reason: dict[str, Any] | None) -> None:
        if reason is not None:
            _, words = _reason_text(reason)
            self.write(f"*Turn ended: {_md_text(words)}.*\n\n")

    def step_start(self, step: int) -> None:
        self.write(f"### Step {step}\n\n")

    def message(
        self, role: str, label: str, seq: int, blocks: list[dict[str, Any]], marks: list[str]
    ) -> None:
        parts = [f"**{_md_text(label)}** (seq {seq})\n\n"]
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(_quote(block["text"]) + "\n\n")
            elif kind == "reasoning" and isinstance(block.get("text"), str):
                parts.append(
                    "<details><summary>Reasoning</summary>\n\n"
                    + _quote(block["text"])
                    + "\n\n</details>\n\n"
                )
            elif kind == "tool-call":
                name = _md_text(str(block.get("name", "?")))
                call_id = _md_text(str(block.get("id", "?")))
                parts.append(f"Tool call **{name}** ({call_id}):\n\n")
                parts.append(_fence(_pretty_arguments(str(block.get("arguments", ""))), "json"))
            else:
                parts.append(f"*[{_md_text(str(kind))} block]*\n\n")
        for mark in marks:
            parts.append(f"*{_md_text(mark)}*\n\n")
        self.write("".join(parts))

    def collapsed(self, role: str, label: str, seq: int, text: str) -> None:
        self.write(
            f"<details><summary>{_md_text(label)} (seq {seq})</summary>\n\n"
            f"{_quote(text)}\n\n</details>\n\n"
        )

    def tool_call(self, seq: int, name: str, call_id: str, arguments: str) -> None:
        self.write(
            f"Tool call **{_md_text(name)}** ({_md_text(call_id)}), seq {seq}:\n\n"
            + _fence(_pretty_arguments(arguments), "json")
        )

    def tool_result(
        self, seq: int, name: str, call_id: str, text: str, failure: str | None, closer: bool
    ) -> None:
        status = f"failed, {failure}" if failure else "ok"
        origin = " (written by a restore or fork, not by the tool)" if closer else ""
        self.write(
            f"**Result of {_md_text(name)}** ({_md_text(call_id)}), seq {seq}: "
            f"{_md_text(status)}{origin}\n\n" + _fence(text)
        )

    def notice(self, kind: str, seq: int, text: str) -> None:
        self.write(f"> **{_md_text(text)}** (seq {seq})\n\n")

    def note(self, seq: int, label: str, text: str) -> None:
        self.write(f"<sub>seq {seq} · {_md_text(label)}: {_md_text(text)}</sub>\n\n")

    def open_at_end(self, turn: int, pending: list[str]) -> None:
        calls = f" Calls without a result: {', '.join(pending)}." if pending else ""
        self.write(
            f"> **The log ends inside turn {turn}** (a crash not yet restored, or a writer "
            f"still running); opening or repairing it closes the turn as interrupted."
            f"{_md_text(calls)}\n\n"
        )


_CSS: Final = """
body{font:15px/1.5 system-ui,sans-serif;max-width:54rem;margin:2rem auto;padding:0 1rem;
color:#1d1d1f;background:#fff}
header dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;color:#555}
section.turn{border-top:2px solid #ccc;margin-top:1.5rem}
div.step{border-left:3px solid #e3e3e3;padding-left:.8rem;margin:.6rem 0}
h3{font-size:.85rem;color:#777;margin:.4rem 0}
article{border-radius:8px;padding:.5rem .8rem;margin:.5rem 0;background:#f5f5f7}
article.user{background:#e8f0fe}article.assistant{background:#f3f3f3}
article.tool{background:#fbfbf2}article.failed{background:#fdecea}
.label{font-weight:600;font-size:.85rem}.seq{color:#888;font-size:.75rem;margin-left:.4rem}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
pre{background:#fff;border:1px solid #ddd;padding:.5rem;overflow-x:auto;white-space:pre-wrap}
details{margin:.3rem 0}summary{cursor:pointer;color:#555}
.notice{border:1px dashed #b00;color:#900;padding:.4rem .8rem;margin:.5rem 0;border-radius:6px}
.notice.fork,.notice.resume{border-color:#06c;color:#036}
.notice.tool-start,.notice.attempt{border-color:#aaa;color:#555}
.note{color:#888;font-size:.75rem;margin:.2rem 0;overflow-wrap:anywhere}
.end{font-size:.85rem;margin:.5rem 0}.end.ok{color:#17702f}.end.bad,.end.open{color:#b00}
.mark{font-size:.8rem;color:#666}.mark.warn{color:#b00}
"""


def _e(text: str) -> str:
    return html.escape(text, quote=True)


class _Html(_Renderer):
    def begin(self, header: dict[str, Any], version: int) -> None:
        title = _e(str(header.get("id", "?")))
        facts = "".join(
            f"<dt>{_e(label)}</dt><dd>{_e(value)}</dd>"
            for label, value in self.header_facts(header, version)
        )
        self.write(
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>Session {title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"<header><h1>Session {title}</h1><dl>{facts}</dl></header>\n<main>\n"
        )

    def end(self) -> None:
        self.write("</main>\n</body>\n</html>\n")

    def turn_start(self, turn: int, seq: int) -> None:
        self.write(f'<section class="turn" id="turn-{turn}">\n<h2>Turn {turn}</h2>\n')

    def turn_end(self, reason: dict[str, Any] | None) -> None:
        if reason is None:
            self.write("</section>\n")
            return
        css, words = _reason_text(reason)
        self.write(f'<p class="end {css}">Turn ended: {_e(words)}.</p>\n</section>\n')

    def step_start(self, step: int) -> None:
        self.write(f'<div class="step">\n<h3>Step {step}</h3>\n')

    def step_end(self) -> None:
        self.write("</div>\n")

    def _head(self, label: str, seq: int) -> str:
        return f'<div class="label">{_e(label)}<span class="seq">seq {seq}</span></div>\n'

    def message(
        self, role: str, label: str, seq: int, blocks: list[dict[str, Any]], marks: list[str]
    ) -> None:
        parts = [f'<article class="{_e(role)}">\n', self._head(label, seq)]
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(f'<div class="text">{_e(block["text"])}</div>\n')
            elif kind == "reasoning" and isinstance(block.get("text"), str):
                parts.append(
                    '<details class="reasoning"><summary>Reasoning</summary>'
                    f'<div class="text">{_e(block["text"])}</div></details>\n'
                )
            elif kind == "tool-call":
                name = _e(str(block.get("name", "?")))
                call_id = _e(str(block.get("id", "?")))
                arguments = _e(_pretty_arguments(str(block.get("arguments", ""))))
                parts.append(
                    f'<div class="tool-call">Tool call <b>{name}</b> ({call_id})'
                    f"<pre>{arguments}</pre></div>\n"
                )
            else:
                parts.append(f'<div class="mark">[{_e(str(kind))} block]</div>\n')
        for mark in marks:
            warn = " warn" if mark.startswith("interrupted") else ""
            parts.append(f'<div class="mark{warn}">{_e(mark)}</div>\n')
        parts.append("</article>\n")
        self.write("".join(parts))

    def collapsed(self, role: str, label: str, seq: int, text: str) -> None:
        self.write(
            f'<details class="{_e(role)}"><summary>{_e(label)} (seq {seq})</summary>'
            f'<div class="text">{_e(text)}</div></details>\n'
        )

    def tool_call(self, seq: int, name: str, call_id: str, arguments: str) -> None:
        self.write(
            f'<article class="tool-call">{self._head(f"Tool call {name} ({call_id})", seq)}'
            f"<pre>{_e(_pretty_arguments(arguments))}</pre></article>\n"
        )

    def tool_result(
        self, seq: int, name: str, call_id: str, text: str, failure: str | None, closer: bool
    ) -> None:
        css = "tool failed" if failure else "tool"
        status = f"failed, {failure}" if failure else "ok"
        origin = (
            '<div class="mark warn">written by a restore or fork, not by the tool</div>'
            if closer
            else ""
        )
        self.write(
            f'<article class="{css}">'
            f"{self._head(f'Result of {name} ({call_id}): {status}', seq)}{origin}"
            f"<pre>{_e(text)}</pre></article>\n"
        )

    def notice(self, kind: str, seq: int, text: str) -> None:
        self.write(
            f'<p class="notice {_e(kind)}">{_e(text)}<span class="seq">seq {seq}</span></p>\n'
        )

    def note(self, seq: int, label: str, text: str) -> None:
        self.write(f'<p class="note">seq {seq} · {_e(label)}: {_e(text)}</p>\n')

    def open_at_end(self, turn: int, pending: list[str]) -> None:
        calls = f" Calls without a result: {', '.join(pending)}." if pending else ""
        self.write(
            f'<p class="notice open">The log ends inside turn {turn} (a crash not yet '
            "restored, or a writer still running); opening or repairing it closes the turn "
            f"as interrupted.{_e(calls)}</p>\n"
        )
