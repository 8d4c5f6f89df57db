"""Generate the reference docs from the code (or check the committed ones).

    python scripts/gen_docs.py           # (re)write docs/events.md and docs/cli-reference.md
    python scripts/gen_docs.py --check   # exit 1 if either differs from what the code says

``docs/events.md`` is built from the vocabulary (``dsh_store.model.vocabulary``), the
payload types (``dsh_store.payloads``) and the model's own behaviour: every lifecycle and
envelope statement in it is the outcome of appending a sample event to a real
``Session`` in that situation, so the page cannot claim a rule the model does not apply.
``docs/cli-reference.md`` is every command's ``--help``, rendered by click itself.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import click

from dsh_store import payloads
from dsh_store.errors import DshStoreError
from dsh_store.model import Session, SessionEvent, SessionHeader
from dsh_store.model.vocabulary import (
    CORE_TYPES,
    LOG_ONLY_TYPES,
    PLUGIN_PREFIX,
    SURFACE_TYPES,
    TURN_STEP_TYPES,
)

REPO = Path(__file__).resolve().parent.parent
EVENTS_MD = REPO / "docs" / "events.md"
CLI_REFERENCE_MD = REPO / "docs" / "cli-reference.md"
HELP_WIDTH = 88

# The core types in the order a turn uses them.
CORE_ORDER = (
    "turn/start",
    "step/start",
    "request/header",
    "request/context",
    "system/message",
    "developer/message",
    "user/message",
    "assistant/message",
    "assistant/attempt",
    "tool/call",
    "tool/result",
    "step/end",
    "turn/end",
    "session/end-seed",
)


# -- samples and probes ------------------------------------------------------------------


def _samples() -> dict[str, Any]:
    """A valid payload of every core type for turn 1, step 1 (tool/result answers call-1)."""
    p = payloads
    return {
        "turn/start": p.turn_start(1),
        "turn/end": p.turn_end(1),
        "step/start": p.step_start(1, 1),
        "step/end": p.step_end(1, 1),
        "system/message": p.system_message(1, 1, "You are careful.", id="sys-1"),
        "developer/message": {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "developer",
                "content": [{"type": "text", "text": "Plan mode is on."}],
                "source": {"kind": "plan-mode"},
                "id": "dev-1",
            },
        },
        "user/message": p.user_message("Count the files.", id="user-1"),
        "assistant/message": p.assistant_message(
            1, 1, "There are 42.", provider="deepseek", model="deepseek-chat", id="a-1"
        ),
        "assistant/attempt": {"turn": 1, "step": 1, "stream": []},
        "tool/call": p.tool_call(1, 1, "call-1", "bash", '{"command": "ls"}'),
        "tool/result": p.tool_result(1, 1, "call-1", "42"),
        "request/header": p.request_header("deepseek", "deepseek-chat"),
        "request/context": {"provider": "deepseek", "model": "deepseek-chat"},
        "session/end-seed": {},
    }


SITUATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("between turns", ()),
    ("in a turn, no step open", ("turn/start",)),
    ("in the open step", ("turn/start", "step/start")),
)


def _session(setup: Iterable[str], samples: Mapping[str, Any]) -> Session:
    session = Session.create("probe", clock=lambda: 0)
    for event_type in setup:
        _append(session, event_type, samples[event_type])
    return session


def _append(
    session: Session,
    event_type: str,
    data: Any,
    *,
    surface_op: str | bool | None = True,
    source_event_seqs: list[int] | None = None,
    ignorable: bool = False,
) -> None:
    op: str | None
    if surface_op is True:
        op = "append" if event_type in SURFACE_TYPES else None
    elif surface_op is False:
        op = None
    else:
        op = surface_op
    session.append(
        event_type, data, surface_op=op, source_event_seqs=source_event_seqs, ignorable=ignorable
    )


def _outcome(attempt: Callable[[], object]) -> str:
    """``ok`` or the rule of the refusal."""
    try:
        attempt()
    except DshStoreError as error:
        rule = getattr(error, "rule", None)
        return f"`{rule}`" if rule else type(error).__name__
    return "ok"


def _placement(event_type: str, samples: Mapping[str, Any]) -> list[str]:
    """The outcome of appending ``event_type`` in each situation."""
    cells = []
    for _, setup in SITUATIONS:
        setup_events = list(setup)
        if event_type == "tool/result" and "step/start" in setup_events:
            setup_events.append("tool/call")
        session = _session(setup_events, samples)
        cells.append(_outcome(partial(_append, session, event_type, samples[event_type])))
    return cells


def _special_rules(samples: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Per type: (what is tried, outcome) for the numbering, pairing and envelope rules."""
    s = dict(samples)
    step = ("turn/start", "step/start")

    def probe(setup: Iterable[str], event_type: str, data: Any, **options: Any) -> str:
        session = _session(setup, s)
        return _outcome(lambda: _append(session, event_type, data, **options))

    assistant_call = payloads.assistant_message(
        1,
        1,
        [payloads.tool_call_block("call-1", "bash", "{}")],
        provider="deepseek",
        model="deepseek-chat",
        id="a-1",
    )
    rules: dict[str, list[tuple[str, str]]] = {
        "turn/start": [
            ("turn 2 as the log's first turn", probe((), "turn/start", payloads.turn_start(2))),
        ],
        "step/start": [
            (
                "step 2 as the turn's first step",
                probe(("turn/start",), "step/start", payloads.step_start(1, 2)),
            ),
            (
                "naming turn 2 while turn 1 is open",
                probe(("turn/start",), "step/start", payloads.step_start(2, 1)),
            ),
        ],
        "tool/result": [
            ("answering a call nobody requested", probe(step, "tool/result", s["tool/result"])),
            (
                "answering a tool-call block of the step's assistant/message",
                _outcome(lambda: _pair_block(s, assistant_call)),
            ),
            ("a second result for the same call", _outcome(lambda: _second_result(s))),
            (
                "data.error while message.isError is false",
                probe(
                    (*step, "tool/call"),
                    "tool/result",
                    {**s["tool/result"], "error": payloads.tool_failure("E", "C")},
                ),
            ),
        ],
        "tool/call": [
            ("the same callId twice in a step", _outcome(lambda: _second_call(s))),
        ],
        "assistant/message": [
            (
                "with sourceEventSeqs",
                probe(step, "assistant/message", s["assistant/message"], source_event_seqs=[1]),
            ),
        ],
        "developer/message": [
            (
                "a tool-addition block without headerSeq",
                probe(
                    step,
                    "developer/message",
                    {
                        **s["developer/message"],
                        "message": {
                            **s["developer/message"]["message"],
                            "content": [{"type": "tool-addition", "tools": []}],
                        },
                    },
                ),
            ),
        ],
        "session/end-seed": [
            ("`{inherited: false}`", probe((), "session/end-seed", {"inherited": False})),
        ],
    }
    for event_type in sorted(CORE_TYPES):
        situation: tuple[str, ...] = (
            step if event_type in TURN_STEP_TYPES or event_type == "step/end" else ()
        )
        if event_type == "tool/result":
            situation = (*step, "tool/call")
        elif event_type == "user/message":
            situation = ("turn/start",)
        data = s[event_type]
        if event_type in SURFACE_TYPES:
            tried = ("without surfaceOp", probe(situation, event_type, data, surface_op=False))
            rules.setdefault(event_type, []).append(tried)
        else:
            rules.setdefault(event_type, []).extend(
                [
                    (
                        'with surfaceOp "append"',
                        probe(situation, event_type, data, surface_op="append"),
                    ),
                    (
                        "with sourceEventSeqs",
                        probe(situation, event_type, data, surface_op=False, source_event_seqs=[0]),
                    ),
                ]
            )
    return rules


def _pair_block(samples: Mapping[str, Any], assistant: Any) -> None:
    session = _session(("turn/start", "step/start"), samples)
    _append(session, "assistant/message", assistant)
    _append(session, "tool/result", samples["tool/result"])


def _second_result(samples: Mapping[str, Any]) -> None:
    session = _session(("turn/start", "step/start", "tool/call", "tool/result"), samples)
    _append(session, "tool/result", {**samples["tool/result"], "message": _renamed(samples)})


def _renamed(samples: Mapping[str, Any]) -> Any:
    return {**samples["tool/result"]["message"], "id": "result-call-1-again"}


def _second_call(samples: Mapping[str, Any]) -> None:
    session = _session(("turn/start", "step/start", "tool/call"), samples)
    _append(session, "tool/call", samples["tool/call"])


# -- payload shapes ----------------------------------------------------------------------


def _typeddict_name(tp: Any) -> str | None:
    return tp.__name__ if typing.is_typeddict(tp) else None


ALIASES: tuple[tuple[str, Any], ...] = (
    ("ContentBlock", payloads.ContentBlock),
    ("StreamRecord", payloads.StreamRecord),
    ("TurnEndReason", payloads.TurnEndReason),
)


def _render_type(tp: Any, found: list[type], *, expand: bool = False) -> str:
    """A TypeScript-like spelling of ``tp``; nested TypedDicts are linked and collected."""
    for alias, value in ALIASES:
        if not expand and tp == value:
            return f"[{alias}](#unions)"
    name = _typeddict_name(tp)
    if name is not None:
        if tp not in found:
            found.append(tp)
        return f"[{name}](#type-{name.lower()})"
    if tp is Any:
        return "JSON"
    if tp is str:
        return "string"
    if tp is int:
        return "integer"
    if tp is bool:
        return "boolean"
    if tp is float:
        return "number"
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return " \\| ".join(
            f'`"{value}"`' if isinstance(value, str) else f"`{value!r}`".lower() for value in args
        )
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_render_type(arg, found) for arg in args)
    if origin is list:
        inner = _render_type(args[0], found)
        return f"({inner})[]" if " \\| " in inner else f"{inner}[]"
    if origin is not None and getattr(origin, "__name__", "") == "Mapping":
        return "object"
    raise TypeError(f"no rendering for {tp!r}")


def _fields(td: Any, found: list[type]) -> list[str]:
    # NotRequired is read from the hints: with postponed annotations Python 3.11 cannot
    # see it when it builds __required_keys__.
    hints = typing.get_type_hints(td, include_extras=True)
    rows = ["| field | type | required |", "| --- | --- | --- |"]
    for field, hint in hints.items():
        optional = typing.get_origin(hint) is typing.NotRequired
        tp = typing.get_args(hint)[0] if optional else hint
        required = "no" if optional else "yes"
        rows.append(f"| `{field}` | {_render_type(tp, found)} | {required} |")
    if len(hints) == 0:
        rows.append("| (none) | | |")
    return rows


def _doc(obj: Any) -> str:
    """The docstring as one Markdown paragraph (reST double backquotes become single)."""
    text = (obj.__doc__ or "").replace("``", "`")
    return " ".join(text.split())


def _constructors() -> dict[str, list[str]]:
    """Payload type name -> the constructors of ``dsh_store.payloads`` returning it."""
    made: dict[str, list[str]] = {}
    for name in payloads.__all__:
        value = getattr(payloads, name)
        if not isinstance(value, types.FunctionType):
            continue
        returned = typing.get_type_hints(value).get("return")
        payload_name = _typeddict_name(returned)
        if payload_name is not None:
            made.setdefault(payload_name, []).append(name)
    return made


# -- docs/events.md ----------------------------------------------------------------------

EVENTS_PREAMBLE = """\
<!-- Generated by scripts/gen_docs.py from the vocabulary, the payload types and the model's
behaviour; do not edit. tests/test_generated_docs.py fails when it is stale. -->

# Event reference

Every event type a v4 log holds: {core} core types ({surface} of them surface types),
{log_only} first-party log-only types, and `plugin:*` records. For each core type: its
payload ([`dsh_store.payloads`](../dsh_store/payloads.py)), whether it joins the ordered
surface, and where the model admits it. Every outcome below (`ok` or the refused rule) is
what `Session.append` does when the sample event is appended in that situation; the rules
are explained in [model.md](model.md).

## Typed payloads

The payloads are `TypedDict`s, not dataclasses: a `TypedDict` is the plain `dict` that
`append` has always taken, so typed and untyped callers share one code path, nothing is
converted on the hot path (the TypedDicts cost nothing at runtime), `event.data` reads
back as the same shape, and the wire key order is the order the constructors build.
Frozen dataclasses would need a `to_json` per append and a parse per read.

`Session.append`, `LiveSession.append` and `AsyncLiveSession.append` are overloaded on the
event type literal: `append("tool/call", data)` takes a `ToolCallData`, a surface type
requires `surface_op` and a log-only core type refuses it. A call with a core type literal
whose arguments match no typed signature (a dict literal with a misspelled field, a
payload of another type, a missing `surface_op`) selects an overload marked deprecated,
so `mypy --enable-error-code deprecated` (or `enable_error_code = ["deprecated"]` in the
mypy configuration) reports it and names the expected payload type. Plain `mypy --strict`
reports misspelled or missing arguments of the constructors and wrong fields of a value
annotated with a payload type. A variable typed `dict[str, Any]` passed with a core type
literal counts as a mismatch: annotate it with the payload type, or pass the type as a
`str`. A value typed `Any` is accepted, and so is any payload of any other event type (a
`str` variable, log-only and `plugin:` types). Every payload is still validated when it
is appended.

Constructors build the common payloads in DSH's key order: `turn_start`, `turn_end`,
`step_start`, `step_end`, `request_header` (with `tool_schema`), `system_message`,
`user_message`, `assistant_message` (with `text_block`, `reasoning_block`,
`tool_call_block`), `tool_call`, `tool_result` (with `tool_failure`). `AssistantStream`
records a provider's timed deltas as the compact embedded stream (consecutive deltas of
one block form one run; a tool-call delta starts a new run unless it has the same id and
the same name, present or absent) and assembles the content blocks they spell.
"""


def events_markdown() -> str:
    """The text of ``docs/events.md``."""
    samples = _samples()
    assert set(CORE_ORDER) == CORE_TYPES == set(payloads.PAYLOAD_TYPES)
    special = _special_rules(samples)
    constructors = _constructors()
    found: list[type] = []
    out = [
        EVENTS_PREAMBLE.format(
            core=len(CORE_TYPES), surface=len(SURFACE_TYPES), log_only=len(LOG_ONLY_TYPES)
        ),
        "## Core types",
        "",
        "| type | surface | payload | " + " | ".join(name for name, _ in SITUATIONS) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in SITUATIONS) + " |",
    ]
    for event_type in CORE_ORDER:
        payload = payloads.PAYLOAD_TYPES[event_type]
        cells = _placement(event_type, samples)
        surface = "yes" if event_type in SURFACE_TYPES else "no"
        anchor = event_type.replace("/", "").replace("-", "-")
        out.append(
            f"| [`{event_type}`](#{anchor}) | {surface} | `{payload.__name__}` | "
            + " | ".join(cells)
            + " |"
        )
    out.append("")
    for event_type in CORE_ORDER:
        payload = payloads.PAYLOAD_TYPES[event_type]
        out += [f"### `{event_type}`", ""]
        if event_type in SURFACE_TYPES:
            sources = (
                "cannot cite `sourceEventSeqs`"
                if event_type == "assistant/message"
                else "may cite earlier events in `sourceEventSeqs`"
            )
            out.append(
                f'Surface type: requires `surfaceOp` (`"append"` or a replace) and {sources}.'
            )
        else:
            out.append("Log-only: never on the surface.")
        made = constructors.get(payload.__name__)
        built = f" Built by {', '.join(f'`{name}()`' for name in made)}." if made else ""
        out += ["", f"Payload `{payload.__name__}`: {_doc(payload)}{built}", ""]
        out += _fields(payload, found)
        out += ["", "| appended | outcome |", "| --- | --- |"]
        for (situation, _), cell in zip(SITUATIONS, _placement(event_type, samples), strict=True):
            out.append(f"| {situation} | {cell} |")
        for tried, outcome in special.get(event_type, []):
            out.append(f"| {tried} | {outcome} |")
        out.append("")
    out += ["## Payload types", ""]
    index = 0
    while index < len(found):
        td = found[index]
        index += 1
        out += [f"### type `{td.__name__}`", "", _doc(td), ""]
        out += _fields(td, found)
        out.append("")
    unions = ["## Unions", ""]
    for alias, value in ALIASES:
        unions.append(f"- `{alias}` = {_render_type(value, found, expand=True)}")
    unions.append("")
    while index < len(found):  # members of the unions not reached from a field
        td = found[index]
        index += 1
        out += [f"### type `{td.__name__}`", "", _doc(td), ""]
        out += _fields(td, found)
        out.append("")
    out += unions
    out += _log_only_section(samples)
    return "\n".join(out).rstrip() + "\n"


def _log_only_section(samples: Mapping[str, Any]) -> list[str]:
    example = "todo/write"

    def in_step() -> None:
        session = _session(("turn/start", "step/start"), samples)
        session.append(example, {"todos": []})

    def between() -> None:
        Session.create("probe", clock=lambda: 0).append(example, {"todos": []})

    def with_op() -> None:
        Session.create("probe", clock=lambda: 0).append(example, {"todos": []}, surface_op="append")

    def plugin(ignorable: bool) -> Callable[[], object]:
        return lambda: Session.create("probe", clock=lambda: 0).append(
            f"{PLUGIN_PREFIX}my-tool/state", {"any": "json"}, ignorable=ignorable
        )

    def unknown() -> None:
        Session.create("probe", clock=lambda: 0).append("someone/else", {"x": 1})

    def restored(event_type: str, ignorable: bool) -> Callable[[], object]:
        header = SessionHeader(id="probe", created_at=0)
        event = SessionEvent(event_type, 0, 0, {"x": 1}, ignorable=ignorable)
        return lambda: Session.from_restore(header, [event])

    lines = [
        "## First-party log-only types",
        "",
        f"{len(LOG_ONLY_TYPES)} types of DSH's own plugins. The model knows them (restoring "
        f"a log with a `{example}` that is not ignorable: {_outcome(restored(example, False))})"
        " and never puts them on the surface; their payloads belong to "
        "their plugins, so only the envelope and lossless JSON are checked and the payloads "
        "are typed `Any`. They may stand anywhere, including between turns "
        f"(`{example}` between turns: {_outcome(between)}; in a step: {_outcome(in_step)}; "
        f"with a surfaceOp: {_outcome(with_op)}).",
        "",
    ]
    lines += [", ".join(f"`{name}`" for name in sorted(LOG_ONLY_TYPES)), ""]
    lines += [
        "## `plugin:*` records",
        "",
        f"A type starting with `{PLUGIN_PREFIX}` is an experimental plugin record: never on "
        "the surface, standing anywhere, payload unchecked beyond lossless JSON, and it "
        "must be marked `ignorable` so a reader without the plugin can skip it (appended "
        f"ignorable: {_outcome(plugin(True))}; not ignorable: {_outcome(plugin(False))}).",
        "",
        "## Unknown types",
        "",
        "A live session accepts an unknown type (it never stalls on vocabulary growth; "
        f"`someone/else` appended: {_outcome(unknown)}), while restoring a log that holds "
        f"one gives {_outcome(restored('someone/else', False))} unless it is `ignorable` "
        f"({_outcome(restored('someone/else', True))}): mark records that other readers may "
        "skip as ignorable.",
    ]
    return lines


# -- docs/cli-reference.md ---------------------------------------------------------------

CLI_PREAMBLE = """\
<!-- Generated by scripts/gen_docs.py from the click commands; do not edit.
tests/test_generated_docs.py fails when it is stale. -->

# `dsh-store` option reference

Every command's `--help`, as click renders it at {width} columns. The behaviour behind
the options is described in [cli.md](cli.md).
"""


def cli_reference_markdown() -> str:
    """The text of ``docs/cli-reference.md``."""
    from dsh_store.cli import main

    # make_context (not a bare Context) applies the group's context_settings, such as
    # its -h alias, as a real run does; resilient parsing invokes nothing.
    widths: dict[str, Any] = {"terminal_width": HELP_WIDTH, "max_content_width": HELP_WIDTH}
    root = main.make_context("dsh-store", [], resilient_parsing=True, **widths)
    out = [
        CLI_PREAMBLE.format(width=HELP_WIDTH),
        "## dsh-store",
        "",
        "```",
        main.get_help(root),
        "```",
        "",
    ]
    assert isinstance(main, click.Group)
    for name in main.list_commands(root):
        command = main.get_command(root, name)
        assert command is not None
        context = command.make_context(name, [], parent=root, resilient_parsing=True, **widths)
        out += [f"## dsh-store {name}", "", "```", command.get_help(context), "```", ""]
        if isinstance(command, click.Group):  # a command group: each subcommand too
            for sub_name in command.list_commands(context):
                sub = command.get_command(context, sub_name)
                assert sub is not None
                sub_context = sub.make_context(
                    sub_name, [], parent=context, resilient_parsing=True, **widths
                )
                title = f"## dsh-store {name} {sub_name}"
                out += [title, "", "```", sub.get_help(sub_context), "```", ""]
    return "\n".join(out).rstrip() + "\n"


# -- main --------------------------------------------------------------------------------

TARGETS: tuple[tuple[Path, Callable[[], str]], ...] = (
    (EVENTS_MD, events_markdown),
    (CLI_REFERENCE_MD, cli_reference_markdown),
)


def main(argv: list[str] | None = None) -> int:
    """Write the generated docs, or with ``--check`` report the stale ones (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    stale = 0
    for path, render in TARGETS:
        text = render()
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        if args.check:
            stale += 1
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                str(path.relative_to(REPO)),
                "generated",
                n=1,
            )
            sys.stdout.writelines(list(diff)[:40])
            print(f"{path.relative_to(REPO)} is stale: run python scripts/gen_docs.py")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
