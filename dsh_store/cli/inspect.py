"""``dsh-store inspect``: summarize one log (header, format, counts, open turn)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    SESSION,
    common_options,
    echo_json,
    envelope,
    existing_or_stdin,
    guarded,
    one_log,
    session_of_store,
    stdin_name,
    stdin_spooled,
)


@click.command()
@click.argument(
    "path", type=click.Path(readable=False, allow_dash=True), callback=existing_or_stdin
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--events", "show_events", is_flag=True, help="List every event (seq, type, bytes).")
@click.option("--messages", "show_messages", is_flag=True, help="Show the derived messages.")
@SESSION
@common_options
@guarded
def inspect(
    path: str, as_json: bool, show_events: bool, show_messages: bool, session: str | None
) -> None:
    """Summarize one log: header, format, classification, counts, open turn.

    PATH is a .jsonl file or a session directory (its newest generation is read), or -
    for a log on standard input (reported as -), or a postgresql:// store URL with
    --session ID.

    Counts turns, steps and events by type with their bytes (as v4 lines; older logs
    are upgraded in memory). Never writes. Exit 1 when the log cannot be restored
    (its classification and findings are still printed).

    \b
    Examples:
      dsh-store inspect session.v4.jsonl
      dsh-store inspect session.jsonl --messages
      dsh-store inspect session.v4.jsonl --json --events
      dsh-store inspect ~/.dsh/sessions/_no-cwd/s1
      dsh-store inspect postgresql://agent@db.internal/sessions --session s1
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..summary import summarize

    if session_of_store(path, session):
        # only for a PostgreSQL store: the postgres modules off a JSONL command's start
        from ..database import summarize_session

        assert session is not None
        summary = summarize_session(path, session, events=show_events, messages=show_messages)
    else:
        with stdin_spooled((path,)) as (spooled,):
            summary = summarize(one_log(spooled), events=show_events, messages=show_messages)
            summary = _named(summary)
    if as_json:
        echo_json(envelope("files", [summary], {summary["classification"]: 1}))
    else:
        click.echo(_summary_text(summary))  # JSON stays exact; only the text is escaped
    sys.exit(EXIT_OK if summary.get("events") is not None else EXIT_FINDINGS)


def _named(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with the spooled standard input named ``-`` (path and findings)."""
    path = stdin_name(str(summary["path"]))
    if path == str(summary["path"]):
        return summary
    findings = [
        {**finding, "message": stdin_name(str(finding["message"]))}
        for finding in summary.get("findings", [])
    ]
    return {**summary, "path": path, "findings": findings}


def _summary_text(summary: dict[str, Any]) -> str:
    lines = [str(summary["path"]), f"  classification: {summary['classification']}"]
    header = summary.get("header")
    if header:
        created = header.get("createdAt")
        when = "" if created is None else f"  created {created}"
        lines.append(f"  session: {header.get('id')}{when}")
        if header.get("cwd"):
            lines.append(f"  cwd: {header['cwd']}")
    version = summary.get("version")
    lines.append(f"  format version: {'unknown' if version is None else version}")
    for key in ("events", "turns", "steps"):
        if summary.get(key) is not None:
            lines.append(f"  {key}: {summary[key]}")
    if summary.get("openTurn") is not None:
        lines.append(f"  open turn: {summary['openTurn']} (a load closes it as interrupted)")
    if summary.get("closers"):
        lines.append(f"  closers a load appends: {', '.join(summary['closers'])}")
    if summary.get("tornBytes"):
        lines.append(f"  torn tail: {summary['tornBytes']} byte(s) (a repair cuts them)")
    if summary.get("byType"):
        lines.append(f"  {'events by type':<32} {'count':>7} {'bytes':>12}")
        for kind, info in summary["byType"].items():
            lines.append(f"    {kind:<30} {info['count']:>7} {info['bytes']:>12}")
    for finding in summary.get("findings", []):
        lines.append(f"  finding {finding['rule']}: {' '.join(finding['message'].split())}")
    for event in summary.get("eventList", []):
        lines.append(f"  #{event['seq']:<6} {event['type']:<30} {event['bytes']} B")
    for message in summary.get("messages", []):
        lines.append(f"  [{message['role']}] {message['text']}")
    # Every line may hold log content (an id, a cwd, an event type, a message): escape
    # the control characters in each, so nothing from a log drives the terminal.
    from ..summary import printable

    return "\n".join(printable(line) for line in lines)
