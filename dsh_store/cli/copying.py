"""``dsh-store copy``: sessions from one store into another (JSONL roots, PostgreSQL URLs)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .._output import printable
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    Output,
    common_options,
    count_by,
    echo_json,
    envelope,
    guarded,
    is_store_url,
    set_verdict,
    streaming,
    style,
)

_COLOURS = {"copied": "green", "would-copy": "yellow", "conflict": "red", "refused": "red"}


@click.command(name="copy")
@click.argument("source", metavar="SRC")
@click.argument("target", metavar="DST")
@click.option(
    "--session",
    "sessions",
    multiple=True,
    metavar="ID",
    help="Copy only this session (repeatable); default: every session of SRC.",
)
@click.option(
    "--encoding",
    type=click.Choice(["raw", "zstd"]),
    help="Encoding of the logs written to a JSONL DST (default: DST's own, raw for a new root).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be copied; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON document.")
@common_options
@guarded
def copy_sessions(
    source: str,
    target: str,
    sessions: tuple[str, ...],
    encoding: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Copy sessions from the store SRC into the store DST, never overwriting one.

    SRC and DST are each a JSONL store root or a postgresql:// URL. A session is copied
    byte for byte (its header line as dsh-store writes it, then every event's line), in
    one atomic step: a transaction in PostgreSQL, temp file + fsync + link in a JSONL
    root. A session DST already holds with the same content is skipped as present, so a
    copy that was interrupted or killed is finished by running it again; one DST holds
    with other content is a conflict and left alone. Only sessions that verify ok are
    copied: one that needs a repair or a migration is refused with the command to run.
    Exit 0 when every session was copied or present, 1 on a conflict or a refusal.

    \b
    Examples:
      dsh-store copy ~/.dsh/sessions postgresql://agent@db.internal/sessions
      dsh-store copy postgresql://agent@db.internal/sessions ./backup --encoding zstd
      dsh-store copy ~/.dsh/sessions postgresql://agent@db.internal/sessions --session s1
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..copying import copy_sessions as copy_all

    for where, role in ((source, "SRC"), (target, "DST")):
        if not is_store_url(where) and os.path.exists(where) and not os.path.isdir(where):
            raise click.UsageError(f"{role} {printable(where)} is not a store root (a directory)")
    if not is_store_url(source) and not os.path.isdir(source):
        raise click.UsageError(f"SRC {printable(source)} does not exist")
    if encoding is not None and is_store_url(target):
        raise click.UsageError("--encoding is for a JSONL DST; a PostgreSQL store keeps rows")
    if encoding is not None and os.path.isdir(target):
        # imported when the command runs: off `dsh-store --help`'s cold start
        from ..store import JsonlStore

        found = JsonlStore(target).encoding  # the encoding of the logs it holds, if any
        if found != encoding and any(JsonlStore(target).session_logs()):
            raise click.UsageError(
                f"DST holds {found} logs and a store root keeps one encoding: drop "
                f"--encoding {encoding} or copy to a new root"
            )
    out = Output()

    def emit(result: dict[str, Any]) -> None:
        if result["status"] in ("conflict", "refused"):
            set_verdict(EXIT_FINDINGS)
        out.echo(_result_text(result))

    results = copy_all(
        source,
        target,
        sessions=list(sessions) or None,
        encoding=encoding,
        dry_run=dry_run,
        progress=streaming("copying", None if as_json else emit),
    )
    failed = any(result["status"] in ("conflict", "refused") for result in results)
    set_verdict(EXIT_FINDINGS if failed else EXIT_OK)
    summary = count_by(results, "status")
    if as_json:
        echo_json(envelope("sessions", results, summary))
    else:
        counts = ", ".join(f"{count} {status}" for status, count in summary.items())
        out.echo(f"{len(results)} session(s): {counts or 'none'}")
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


def _result_text(result: dict[str, Any]) -> str:
    status = result["status"]
    head = f"{result['session']}: {style(status, fg=_COLOURS.get(status))}"
    if status in ("copied", "would-copy"):
        head += f" ({result['events']} events, {result['bytes']} bytes) to {result['target']}"
    elif status == "present":
        head += f" (identical in {result['target']}; skipped)"
    if result["reason"]:
        head += f": {' '.join(result['reason'].split())}"
    return printable(head)
