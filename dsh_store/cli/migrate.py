"""``dsh-store migrate``: upgrade logs of formats 0-3 to format 4."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from .._output import printable
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    JOBS,
    PATHS,
    echo_json,
    envelope,
    fail,
    guarded,
    progress,
    set_verdict,
    style,
)

if TYPE_CHECKING:
    from ..migrate import MigrationResult


@click.command()
@PATHS
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if anything would change.")
@click.option("--dry-run", is_flag=True, help="Run the whole chain in memory; write nothing.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Publish the upgraded log here (exactly one source; never overwrites).",
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Replace loose files atomically, keeping FILE.v<N>.bak (store files always "
    "publish beside their source).",
)
@click.option(
    "--store-root",
    type=click.Path(exists=True, file_okay=False),
    help="Take the child sessions of this store root as evidence for the subagent catalog "
    "(default: a store file's own store; none for a loose file).",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="Also migrate the format-0 logs DSH's reader loads but the faithful chain refuses, "
    "recording each deviation in a migration/note event (docs/migrations.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@JOBS
@guarded
def migrate(
    paths: tuple[str, ...],
    check: bool,
    dry_run: bool,
    output: str | None,
    in_place: bool,
    store_root: str | None,
    lenient: bool,
    as_json: bool,
    jobs: int,
) -> None:
    """Upgrade logs of formats 0-3 to format 4, never overwriting a source.

    In a store tree, session.v4.jsonl is published beside each older generation (the
    source stays as the backup). A loose file needs --output OUT or --in-place; a format-4
    file given --output is copied there. --check and --dry-run report what a real run
    would (current, would-migrate or refused), looking at the target too. Exit 0
    when nothing was refused; 1 when a file was refused, or with --check when anything
    would change; 2 on a usage error.

    \b
    Examples:
      dsh-store migrate ~/.dsh/sessions
      dsh-store migrate ~/.dsh/sessions --check
      dsh-store migrate old.jsonl --output new.jsonl
      dsh-store migrate fixtures/ --in-place --jobs 4
    """
    from ..bulk import MigrationOptionsError, migrate_paths
    from ..verify import NoLogsError

    if output is not None and in_place:
        raise click.UsageError("use either --output or --in-place, not both")
    try:
        results = migrate_paths(
            paths,
            output=output,
            in_place=in_place,
            dry_run=check or dry_run,
            jobs=jobs,
            progress=progress("migrating"),
            evidence_root=store_root,
            lenient=lenient,
        )
    except NoLogsError as error:
        fail(str(error), EXIT_USAGE)
    except MigrationOptionsError as error:
        raise click.UsageError(printable(str(error))) from None
    changes = any(result.status in ("migrated", "would-migrate") for result in results)
    refused = any(result.status == "refused" for result in results)
    code = EXIT_FINDINGS if refused or (check and changes) else EXIT_OK
    set_verdict(code)
    if as_json:
        echo_json(migrate_json(results))
    else:
        for line in _migration_table(results):
            click.echo(line)
    sys.exit(code)


def migrate_json(results: Sequence[MigrationResult]) -> dict[str, Any]:
    """The ``dsh-store migrate --json`` document (docs/schemas/migrate.schema.json)."""
    summary: dict[str, int] = {}
    for result in results:
        summary[result.status] = summary.get(result.status, 0) + 1
    return envelope("files", [result.to_json() for result in results], summary)


def _migration_table(results: Sequence[MigrationResult]) -> list[str]:
    colours = {"migrated": "green", "would-migrate": "yellow", "refused": "red"}
    lines = []
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
        version = "?" if result.source_version is None else str(result.source_version)
        status = style(f"{result.status:<13}", fg=colours.get(result.status))
        line = f"{status} v{version:<2} {printable(str(result.source))}"
        if result.target is not None and result.target != result.source:
            line += f" -> {printable(str(result.target))}"
        if result.events is not None and result.status != "current":
            line += f" ({result.events} events)"
        if result.backup is not None:
            line += f" (backup {printable(str(result.backup))})"
        lines.append(line)
        if result.reason:
            lines.append(f"  reason: {' '.join(printable(result.reason).split())}")
    order = ("migrated", "would-migrate", "current", "refused")
    lines.append(
        "; ".join(f"{counts.get(status, 0)} {status}" for status in order if status in counts)
    )
    return lines
