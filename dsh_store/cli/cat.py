"""``dsh-store cat``: committed events as v4 JSONL on stdout."""

from __future__ import annotations

import sys

import click

from .._output import escape_json_line
from ._common import (
    SESSION,
    common_options,
    existing_or_stdin,
    fail,
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
@click.option(
    "--from-seq", type=click.IntRange(min=0), default=0, show_default=True, help="First seq."
)
@click.option("--type", "types", multiple=True, help="Only events of this type (repeatable).")
@SESSION
@common_options
@guarded
def cat(path: str, from_seq: int, types: tuple[str, ...], session: str | None) -> None:
    """Print committed events as v4 JSONL on stdout (no header line).

    PATH is a .jsonl file or a session directory (its newest generation is read), or -
    for a log on standard input, or a postgresql:// store URL with --session ID (the
    whole session is checked before its first line is printed).

    Older formats are upgraded in memory; a torn tail is never printed; committed
    corruption stops the output with an error (exit 1), and so does an empty file.

    \b
    Examples:
      dsh-store cat session.jsonl --type user/message
      dsh-store cat session.v4.jsonl --from-seq 100 | jq .type
      dsh-store cat ~/.dsh/sessions/_no-cwd/s1 --type turn/end
      git show HEAD:session.v4.jsonl | dsh-store cat -
      dsh-store cat postgresql://agent@db.internal/sessions --session s1
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..summary import stream_v4_lines

    out = sys.stdout.buffer
    wanted = set(types)

    def emit(event_type: str, seq: int, line: bytes) -> None:
        if seq >= from_seq and (not wanted or event_type in wanted):
            out.write(escape_json_line(line))

    if session_of_store(path, session):
        # only for a PostgreSQL store: the postgres modules off a JSONL command's start
        from ..database import session_events

        assert session is not None
        try:
            for event_type, seq, line in session_events(path, session):
                emit(event_type, seq, line)
        finally:
            out.flush()
        return
    with stdin_spooled((path,)) as (spooled,):
        log = one_log(spooled)
        try:
            count = stream_v4_lines(log, emit)
        finally:
            # What was checked and printed before a defect stays printed.
            out.flush()
        if count is None:  # verify classifies it `empty` and fails it; so does cat
            fail(f"{stdin_name(log)}: not a session log: the file is empty (0 bytes)")
