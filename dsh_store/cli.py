"""The ``dsh-store`` command line: a thin click layer over the library."""

from __future__ import annotations

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dsh-store")
def main() -> None:
    """Verify, migrate, repair and inspect durable JSONL session logs."""
