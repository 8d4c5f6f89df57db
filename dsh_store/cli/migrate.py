"""``dsh-store migrate``: upgrade logs of formats 0-3 to format 4."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from .._output import JSON_SCHEMA_VERSION, printable
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    JOBS,
    OUTPUT_FORMAT,
    PATHS,
    QUIET,
    STDOUT,
    VERBOSE,
    Output,
    common_options,
    copy_to_stdout,
    echo_json,
    echo_json_line,
    envelope,
    fail,
    guarded,
    is_store_url,
    json_text,
    output_choice,
    set_verdict,
    stdout_spool,
    streaming,
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
    help="Publish the upgraded log here (exactly one source; never overwrites); - is stdout.",
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
@click.option(
    "--encoding",
    type=click.Choice(["raw", "zstd"]),
    help="Publish v4 logs in this encoding: store files beside themselves (a v4 log of the "
    "other encoding is re-encoded and kept as its .v4.bak), --output named for it.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@OUTPUT_FORMAT
@QUIET
@VERBOSE
@JOBS
@common_options
@guarded
def migrate(
    paths: tuple[str, ...],
    check: bool,
    dry_run: bool,
    output: str | None,
    in_place: bool,
    store_root: str | None,
    lenient: bool,
    encoding: str | None,
    as_json: bool,
    output_format: str,
    quiet: bool,
    verbose: bool,
    jobs: int,
) -> None:
    """Upgrade logs of formats 0-3 to format 4, never overwriting a source.

    In a store tree, session.v4.jsonl is published beside each older generation (the
    source stays as the backup). A loose file needs --output OUT or --in-place; a format-4
    file given --output is copied there; --output - writes the upgraded log to stdout (the
    result then goes to stderr). --encoding raw|zstd publishes the v4 logs in that
    encoding: a v4 store log of the other one is re-encoded beside itself and kept as
    its .v4.bak, so a whole root converts. --check and --dry-run report what a real run
    would (current, would-migrate or refused), looking at the target too. A
    postgresql:// URL is skipped with a note: such a store holds format 4 only. Each file is
    printed as soon as it and the ones before it are done. Exit 0
    when nothing was refused; 1 when a file was refused, or with --check when anything
    would change; 2 on a usage error.

    \b
    Examples:
      dsh-store migrate ~/.dsh/sessions
      dsh-store migrate ~/.dsh/sessions --check
      dsh-store migrate old.jsonl --output new.jsonl
      dsh-store migrate old.jsonl --output - | dsh-store verify -
      dsh-store migrate fixtures/ --in-place --jobs 4
      dsh-store migrate ~/.dsh/sessions --encoding zstd
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..bulk import MigrationOptionsError, migrate_paths
    from ..verify import NoLogsError

    fmt = output_choice(as_json, output_format, quiet=quiet, verbose=verbose)
    if output is not None and in_place:
        raise click.UsageError("use either --output or --in-place, not both")
    to_stdout = output == STDOUT
    out = Output(err=to_stdout)
    counts: dict[str, int] = {}
    urls = [path for path in paths if is_store_url(path)]
    if urls:
        if output is not None or in_place:
            raise click.UsageError("--output and --in-place take log files, not a store URL")
        for url in urls:
            click.echo(f"note: {_nothing_to_migrate(url)}", err=True)
        paths = tuple(path for path in paths if not is_store_url(path))
        if not paths:
            if fmt == "json":
                echo_json(migrate_json([]))
            elif fmt == "jsonl":
                echo_json_line({"schema": JSON_SCHEMA_VERSION, "summary": {}}, out)
            sys.exit(EXIT_OK)

    def emit(result: MigrationResult) -> None:
        result = _named(result, spool)
        counts[result.status] = counts.get(result.status, 0) + 1
        if result.status == "refused" or (check and result.status == "would-migrate"):
            set_verdict(EXIT_FINDINGS)
        if quiet and result.status != "refused":
            return
        if fmt == "jsonl":
            echo_json_line({"schema": JSON_SCHEMA_VERSION, "file": result.to_json()}, out)
        else:
            for line in _result_lines(result):
                out.echo(line)

    spool_name = "stdout.jsonl.zstd" if encoding == "zstd" else "stdout.jsonl"
    with stdout_spool(to_stdout, spool_name) as spool:
        try:
            results = migrate_paths(
                paths,
                output=spool if to_stdout else output,
                in_place=in_place,
                dry_run=check or dry_run,
                jobs=jobs,
                progress=streaming("migrating", None if fmt == "json" else emit),
                evidence_root=store_root,
                lenient=lenient,
                encoding=encoding,
            )
        except NoLogsError as error:
            fail(str(error), EXIT_USAGE)
        except MigrationOptionsError as error:
            raise click.UsageError(printable(str(error))) from None
        results = [_named(result, spool) for result in results]
        if spool is not None and os.path.exists(spool):
            copy_to_stdout(spool)
    changes = any(result.status in ("migrated", "would-migrate") for result in results)
    refused = any(result.status == "refused" for result in results)
    code = EXIT_FINDINGS if refused or (check and changes) else EXIT_OK
    set_verdict(code)
    if fmt == "json":
        document = migrate_json(results)
        if to_stdout:
            click.echo(json_text(document), err=True)
        else:
            echo_json(document)
    elif fmt == "jsonl":
        echo_json_line(
            {"schema": JSON_SCHEMA_VERSION, "summary": migrate_json(results)["summary"]}, out
        )
    else:
        out.echo(_counts_line(counts))
    sys.exit(code)


def _nothing_to_migrate(url: str) -> str:
    """Why ``migrate URL`` does nothing (the URL's password masked)."""
    # only for a PostgreSQL URL: off a JSONL migration's start
    from ..postgres.url import redact

    return printable(
        f"{redact(url)}: a PostgreSQL store holds format-4 sessions only, so there is nothing "
        "to migrate; to bring older logs there, migrate their JSONL store first, then "
        "`dsh-store copy ROOT URL`"
    )


def _named(result: MigrationResult, spool: str | None) -> MigrationResult:
    """``result`` with the stdout spool file (``--output -``) named ``-``."""
    if spool is None or result.target is None or str(result.target) != spool:
        return result
    # only for `--output -`: off `dsh-store --help`'s cold start
    from dataclasses import replace
    from pathlib import Path

    return replace(result, target=Path(STDOUT))


def migrate_json(results: Sequence[MigrationResult]) -> dict[str, Any]:
    """The ``dsh-store migrate --json`` document (docs/schemas/migrate.schema.json)."""
    summary: dict[str, int] = {}
    for result in results:
        summary[result.status] = summary.get(result.status, 0) + 1
    return envelope("files", [result.to_json() for result in results], summary)


_COLOURS = {"migrated": "green", "would-migrate": "yellow", "refused": "red"}
_ORDER = ("migrated", "would-migrate", "current", "refused")


def _result_lines(result: MigrationResult) -> list[str]:
    """The text lines of one result: status, version, source and where it went."""
    version = "?" if result.source_version is None else str(result.source_version)
    status = style(f"{result.status:<13}", fg=_COLOURS.get(result.status))
    line = f"{status} v{version:<2} {printable(str(result.source))}"
    if result.target is not None and result.target != result.source:
        line += f" -> {printable(str(result.target))}"
    if result.events is not None and result.status != "current":
        line += f" ({result.events} events)"
    if result.backup is not None:
        line += f" (backup {printable(str(result.backup))})"
    lines = [line]
    if result.reason:
        lines.append(f"  reason: {' '.join(printable(result.reason).split())}")
    return lines


def _counts_line(counts: dict[str, int]) -> str:
    return "; ".join(f"{counts.get(status, 0)} {status}" for status in _ORDER if status in counts)
