"""``dsh-store list``: the sessions of a store, from each log's header and tail.

The module is not called ``list`` so that it never shadows the builtin's name.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING

import click

from ._common import common_options, count_by, echo_json, envelope, guarded, is_store_url

if TYPE_CHECKING:
    from pathlib import Path


def default_root() -> Path:
    """``$DSH_STORE_ROOT`` when set and non-empty, else ``~/.dsh/sessions``."""
    from pathlib import Path  # only here: a module --help imports stays free of pathlib

    configured = os.environ.get("DSH_STORE_ROOT")
    return Path(configured) if configured else Path.home() / ".dsh" / "sessions"


@click.command(name="list")
@click.argument("root", required=False, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@common_options
@guarded
def list_sessions(root: str | None, as_json: bool) -> None:
    """List the sessions of a store, reading only each log's header and tail.

    ROOT defaults to $DSH_STORE_ROOT, else ~/.dsh/sessions; a postgresql:// URL
    lists a PostgreSQL store (its session rows only). CREATED is the header's
    createdAt as local ISO-8601 time to the second (--json keeps the raw milliseconds).
    Status is current, needs-migration or torn-tail (or what is wrong with the header),
    or misfiled for a log whose header names another session or cwd than its directory;
    run verify for the full verdict.

    \b
    Examples:
      dsh-store list
      dsh-store list /var/lib/agent/sessions --json
      dsh-store list postgresql://agent@db.internal/sessions
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..summary import list_store, printable

    configured = os.environ.get("DSH_STORE_ROOT")
    if root is None and configured and is_store_url(configured):
        root = configured
    if root is not None and is_store_url(root):
        # only for a PostgreSQL store: the postgres modules off a JSONL command's start
        from ..database import list_sessions
        from ..postgres.url import redact

        rows = list_sessions(root)
        where = f"in {redact(root)}"
    else:
        store_root = root if root is not None else default_root()
        rows = list_store(store_root)
        where = f"under {store_root}"
    if as_json:
        echo_json(envelope("sessions", rows, count_by(rows, "status")))
        return
    if not rows:
        click.echo(printable(f"no sessions {where}"))
        return
    click.echo(f"{'ID':<36} {'VER':>3} {'EVENTS':>7}  {'STATUS':<16} {'CREATED':<25}  CWD")
    for row in rows:
        events = "?" if row["events"] is None else str(row["events"])
        version = "?" if row["version"] is None else str(row["version"])
        created = "-" if row["created"] is None else local_time(row["created"])
        ident = row["id"] if row["id"] is not None else f"({row['path']})"
        status = "misfiled" if row["misfiled"] else row["status"]
        # Ids, paths and cwds come from the logs: no control sequence reaches the terminal.
        click.echo(
            printable(
                f"{ident!s:<36} {version:>3} {events:>7}  {status:<16} "
                f"{created:<25}  {row.get('cwd') or '-'}"
            )
        )


def local_time(epoch_ms: int) -> str:
    """``epoch_ms`` (Unix milliseconds) as local ISO-8601 time to the second, with offset.

    A value no clock can show (out of the platform's range) is printed as the number.
    """
    try:
        moment = datetime.fromtimestamp(epoch_ms / 1000).astimezone()
    except (OverflowError, OSError, ValueError):
        return str(epoch_ms)
    return moment.isoformat(timespec="seconds")
