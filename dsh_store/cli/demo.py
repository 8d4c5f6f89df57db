"""``dsh-store demo``: record, crash, restore, migrate and verify in a scratch directory."""

from __future__ import annotations

import sys

import click

from ._common import guarded


@click.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="Directory to work in (default: a new temporary directory).",
)
@guarded
def demo(root: str | None) -> None:
    """Record a session, SIGKILL the writer mid-turn, restore, migrate, verify.

    Works in a new temporary directory (named in the output) unless --root says
    otherwise; never touches a real store. Exit 0 when everything verifies.

    \b
    Examples:
      dsh-store demo
      dsh-store demo --root /tmp/dsh-demo
    """
    from ..demo import run_demo

    sys.exit(run_demo(root, echo=click.echo))
