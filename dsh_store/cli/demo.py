"""``dsh-store demo``: record, crash, restore, migrate and verify in a scratch directory."""

from __future__ import annotations

import sys

import click

from .._output import printable
from ._common import EXIT_USAGE, common_options, fail, guarded


@click.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="Directory to work in (default: a new temporary directory).",
)
@common_options
@guarded
def demo(root: str | None) -> None:
    """Record a session, SIGKILL the writer mid-turn, restore, migrate, verify.

    Works in a new temporary directory (named in the output) unless --root names a
    directory that does not exist yet or is empty (anything else is a usage error, and
    nothing is written); never touches a real store. Exit 0 when everything verifies.

    \b
    Examples:
      dsh-store demo
      dsh-store demo --root /tmp/dsh-demo
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..demo import DemoRootError, run_demo

    try:
        # Each line names paths under --root, which may hold any character.
        code = run_demo(root, echo=lambda line: click.echo(printable(line)))
    except DemoRootError as error:
        fail(str(error), EXIT_USAGE)
    sys.exit(code)
