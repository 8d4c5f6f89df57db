"""``dsh-store export``: a session as a readable transcript (Markdown or HTML)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ._common import SESSION, common_options, existing, guarded, one_log, session_of_store

if TYPE_CHECKING:
    from ..export import ExportFormat


@click.command()
@click.argument("path", type=click.Path(readable=False), callback=existing)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["markdown", "html"]),
    default="markdown",
    show_default=True,
    help="Markdown, or one self-contained HTML page (inline CSS, no scripts, no network).",
)
@click.option(
    "--output",
    "-o",
    default="-",
    show_default=True,
    help="File to write (replaced atomically once complete); - is stdout.",
)
@SESSION
@common_options
@guarded
def export(path: str, output_format: str, output: str, session: str | None) -> None:
    """Render a session as the conversation a person reads.

    PATH is a .jsonl file of any format version or a session directory (its newest
    generation is read), or a postgresql:// store URL with --session ID. Turns,
    messages, reasoning (collapsed), tool calls with their arguments and results,
    errors, interruptions, the closers a restore or fork wrote and the fork point are
    shown; everything from the log is escaped. The log is read and the
    transcript written event by event, so memory stays small on any log size.

    \b
    Examples:
      dsh-store export session.v4.jsonl > transcript.md
      dsh-store export ~/.dsh/sessions/_no-cwd/s1 --format html -o s1.html
      dsh-store export postgresql://agent@db.internal/sessions --session s1
    """
    fmt: ExportFormat = "html" if output_format == "html" else "markdown"
    if session_of_store(path, session):
        # only for a PostgreSQL store: the postgres modules off a JSONL command's start
        from ..database import spooled_log

        assert session is not None
        with spooled_log(path, session) as log:
            _export(log, fmt, output)
        return
    _export(one_log(path), fmt, output)


def _export(log: str, fmt: ExportFormat, output: str) -> None:
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..export import export_file, export_transcript

    if output == "-":
        out = sys.stdout
        try:
            export_transcript(log, out.write, format=fmt)
        finally:
            out.flush()  # what was rendered before a defect stays printed
        return
    summary = export_file(log, output, format=fmt)
    click.echo(f"wrote {output}: {summary.events} events, {summary.turns} turns", err=True)
