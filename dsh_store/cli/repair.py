"""``dsh-store repair``: mend crashed v4 logs without loss, delete stale publish temps."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import click

from .._output import JSON_SCHEMA_VERSION, printable
from ..errors import location_text
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
    count_by,
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
    url_runs,
)

if TYPE_CHECKING:
    from ..bulk import RepairOutcome


@click.command()
@PATHS
@click.option("--dry-run", is_flag=True, help="Print the plan only; write nothing.")
@click.option(
    "--salvage",
    is_flag=True,
    help="Copy the valid prefix of a corrupt log (one PATH) to --output; the log is kept.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Where --salvage publishes the salvaged log (never overwritten); - is stdout.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@OUTPUT_FORMAT
@QUIET
@VERBOSE
@JOBS
@common_options
@guarded
def repair(
    paths: tuple[str, ...],
    dry_run: bool,
    salvage: bool,
    output: str | None,
    as_json: bool,
    output_format: str,
    quiet: bool,
    verbose: bool,
    jobs: int,
) -> None:
    """Repair crashed v4 logs without loss: cut the torn tail, close the open turn.

    The plan comes first: which bytes are cut and which closing events are appended.
    The torn bytes are saved beside the log as <log>.torn-<offset> before the log is
    truncated to its last committed line; then the closers are appended as one batch.
    Committed corruption and older formats are refused (migrate those), never
    "repaired". Publish temps (<log>.<12 hex>.tmp) left by an interrupted publish are
    deleted once they are 10 minutes old, including orphans whose log was never created;
    younger ones are kept and listed. Each file is printed as soon as it and the ones
    before it are done. Exit 0 when every file is clean or repaired, 1 when one was
    refused. A postgresql:// URL repairs every session of that store that needs it,
    each in one transaction under its advisory lock (--dry-run only reads).

    With --salvage --output OUT, a log with committed corruption is not repaired but
    salvaged: its events up to the first bad one, plus closers, are published as the
    new file OUT (--output - writes them to stdout, the result to stderr), and the log
    itself is left as it is. Exit 0 when salvaged, 1 when refused.

    \b
    Examples:
      dsh-store repair ~/.dsh/sessions --dry-run
      dsh-store repair ~/.dsh/sessions --jobs 4 -q
      dsh-store repair session.v4.jsonl
      dsh-store repair session.v4.jsonl --salvage --output salvaged.jsonl
    """
    fmt = output_choice(as_json, output_format, quiet=quiet, verbose=verbose)
    if salvage or output is not None:
        _salvage(paths, output, salvage=salvage, dry_run=dry_run, fmt=fmt)
        return
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..bulk import repair_paths
    from ..verify import NoLogsError

    out = Output()
    shown = 0

    def emit(result: RepairOutcome) -> None:
        nonlocal shown
        shown += 1
        _show(result, fmt, quiet, out)

    results: list[RepairOutcome] = []
    for is_url, run in url_runs(paths):
        hook = streaming("repairing", None if fmt == "json" else emit)
        shown = 0
        if is_url:
            # only for a PostgreSQL store: the postgres modules off a JSONL command's start
            from ..database import repair_store

            results.extend(repair_store(run[0], dry_run=dry_run, progress=hook))
            continue
        try:
            run_results = repair_paths(run, dry_run=dry_run, jobs=jobs, progress=hook)
        except NoLogsError as error:
            fail(str(error), EXIT_USAGE)
        if fmt != "json":
            for result in run_results[shown:]:  # the orphan temps, found after the logs
                _show(result, fmt, quiet, out)
        results.extend(run_results)
    refused = any(result.status == "refused" for result in results)
    set_verdict(EXIT_FINDINGS if refused else EXIT_OK)
    documents = [result.to_json() for result in results]
    if fmt == "json":
        echo_json(envelope("files", documents, count_by(documents, "status")))
    else:
        summary = count_by(documents, "status")
        if fmt == "jsonl":
            echo_json_line({"schema": JSON_SCHEMA_VERSION, "summary": summary}, out)
        elif quiet:  # the default lists every file: its output stays as scripts know it
            out.echo(_repair_summary(summary))
    sys.exit(EXIT_FINDINGS if refused else EXIT_OK)


def _show(result: RepairOutcome, fmt: str, quiet: bool, out: Output) -> None:
    if result.status == "refused":
        set_verdict(EXIT_FINDINGS)
    elif quiet:
        return
    if fmt == "jsonl":
        echo_json_line({"schema": JSON_SCHEMA_VERSION, "file": result.to_json()}, out)
    else:
        out.echo(repair_text(result))


def _repair_summary(summary: dict[str, int]) -> str:
    return "; ".join(f"{count} {status}" for status, count in summary.items()) or "no files"


def _salvage(
    paths: tuple[str, ...], output: str | None, *, salvage: bool, dry_run: bool, fmt: str
) -> None:
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..bulk import salvage_path

    if not salvage:
        raise click.UsageError("--output is only for --salvage")
    if output is None:
        raise click.UsageError("--salvage needs --output OUT (the source is never rewritten)")
    if len(paths) != 1:
        raise click.UsageError(f"--salvage takes exactly one log file; {len(paths)} were given")
    if is_store_url(paths[0]):
        raise click.UsageError(
            "--salvage takes a log file, not a store URL: a PostgreSQL store commits whole "
            "batches, so it holds no torn or corrupt bytes to salvage from"
        )
    if os.path.isdir(paths[0]):
        raise click.UsageError(
            f"--salvage takes a log file, and {printable(paths[0])} is a directory"
        )
    to_stdout = output == STDOUT
    with stdout_spool(to_stdout) as spool:
        outcome = salvage_path(paths[0], spool or output, dry_run=dry_run)
        result = outcome.to_json()
        if spool is not None:
            result = {**result, "output": STDOUT}
            if outcome.status == "salvaged" and os.path.exists(spool):
                copy_to_stdout(spool)
    document = envelope("files", [result], count_by([result], "status"))
    if fmt == "json":
        if to_stdout:
            click.echo(json_text(document), err=True)
        else:
            echo_json(document)
    elif fmt == "jsonl":
        out = Output(err=to_stdout)
        echo_json_line({"schema": JSON_SCHEMA_VERSION, "file": result}, out)
        echo_json_line({"schema": JSON_SCHEMA_VERSION, "summary": document["summary"]}, out)
    else:
        click.echo(salvage_text(_escaped(result), style), err=to_stdout)
    sys.exit(EXIT_FINDINGS if result["status"] == "refused" else EXIT_OK)


def _escaped(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with every string from a path or a log made terminal-safe, on one line.

    Escaping the values (not the rendered text) keeps a newline in a name inside its line.
    """
    safe: dict[str, Any] = {}
    for key, value in result.items():
        if isinstance(value, str):
            safe[key] = " ".join(printable(value).split()) if key == "reason" else printable(value)
        elif isinstance(value, list):
            safe[key] = [printable(item) if isinstance(item, str) else item for item in value]
        elif isinstance(value, dict):
            safe[key] = _escaped(value)
        else:
            safe[key] = value
    if isinstance(result.get("message"), str):
        safe["message"] = " ".join(printable(result["message"]).split())
    return safe


def _plain(text: str, **_styles: Any) -> str:
    return text


_VERBS: Final = {
    "salvaged": "salvaged to",
    "already-salvaged": "already salvaged to",
    "would-salvage": "would salvage to",
}


def salvage_text(result: Mapping[str, Any], style: Callable[..., str] = _plain) -> str:
    """Readable lines for one salvage result (its ``to_json()`` shape); ``style`` colours
    the verdict."""
    if result["status"] == "refused":
        return f"{result['path']}: {style('refused', fg='red')}: {result['reason']}"
    verb = style(_VERBS[result["status"]], fg="green")
    kept = result["keptEvents"]
    lines = [
        f"{result['path']}: {verb} {result['output']}",
        f"  kept {kept} event(s), seqs 0..{kept - 1}: bytes 0..{result['keptBytes']} of the "
        "log, copied unchanged",
    ]
    stop = result["stop"]
    if stop is None:
        lines.append("  the log is valid to its end: nothing dropped")
    else:
        where = (
            location_text(None, stop["line"], stop["offset"], stop["seq"]) or "the end of the log"
        )
        # Scanner messages already end in their rule; name it once.
        rule = "" if f"[{stop['rule']}]" in stop["message"] else f" [{stop['rule']}]"
        lines.append(f"  stopped at {where}: {stop['message']}{rule}")
    if result["droppedBytes"]:
        start = f"line {stop['line']}, " if stop is not None and stop["line"] else ""
        lines.append(
            f"  dropped {result['droppedBytes']} byte(s): from {start}offset "
            f"{result['keptBytes']} to the end"
        )
    if result["closers"]:
        lines.append(f"  closers appended: {', '.join(result['closers'])}")
    lines.append(f"  the original {result['path']} is left untouched")
    return "\n".join(lines)


def repair_text(outcome: RepairOutcome) -> str:
    """Readable lines for one :func:`dsh_store.bulk.repair_paths` outcome."""
    result = _escaped(outcome.to_json())
    status = result["status"]
    if status == "refused":
        return f"{result['path']}: {style('refused', fg='red')}: {result['reason']}"
    if result["classification"] is None:  # an orphan publish temp: no log of its own
        verb = {"repaired": "deleted", "would-repair": "would delete"}.get(status)
        # only for an orphan temp's line: off `dsh-store --help`'s cold start
        from ..jsonl.layout import is_repair_partial

        if is_repair_partial(os.path.basename(result["path"])):
            if verb is None:
                return f"{result['path']}: kept recent repair scratch copy (deleted at 10 min old)"
            return (
                f"{result['path']}: {style(verb, fg='green')} repair scratch copy (a torn "
                "tail's copy; its log is gone)"
            )
        if verb is None:
            return (
                f"{result['path']}: kept recent orphan temp (a first publish may still be "
                "writing it; deleted once 10 minutes old)"
            )
        return (
            f"{result['path']}: {style(verb, fg='green')} orphan temp (a first publish "
            "killed before its link; nothing in it was acknowledged)"
        )
    if status == "clean":
        lines = [f"{result['path']}: {result['classification']}, nothing to repair"]
    else:
        verb = "repaired" if status == "repaired" else "would repair"
        lines = [f"{result['path']}: {style(verb, fg='green')} ({result['classification']})"]
    if result["truncateAt"] is not None:
        lines.append(
            f"  cut {result['tornBytes']} torn byte(s) at offset {result['truncateAt']}, "
            f"saved first to {result['sidecar']}"
        )
    elif result["tornBytes"]:  # a database's rows: no file offset, kept in a table
        lines.append(
            f"  cut {result['tornBytes']} byte(s) of stored rows past the last good one, "
            f"kept in table {result['sidecar']}"
        )
    if result["closers"]:
        lines.append(f"  append closers: {', '.join(result['closers'])}")
    if result["classification"] == "empty" and status != "clean":
        removed = "removed" if status == "repaired" else "remove"
        lines.append(f"  {removed} the empty log (0 bytes: no header, nothing acknowledged)")
    delete = "deleted" if status == "repaired" else "delete"
    lines.extend(f"  {delete} leftover temp {temp}" for temp in result["deletedTemps"])
    lines.extend(
        f"  kept recent temp {temp} (a publish may still be writing it; "
        "deleted once 10 minutes old)"
        for temp in result["keptTemps"]
    )
    return "\n".join(lines)
