"""``dsh-store verify``: classify logs and report findings as text, JSON or annotations.

The cold start of this command is measured (docs/performance.md), so this module and the
library modules a verify run loads keep :mod:`pathlib` out: paths stay strings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import click

from .._output import JSON_SCHEMA_VERSION, printable
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    JOBS,
    PATHS_OR_STDIN,
    QUIET,
    VERBOSE,
    Output,
    common_options,
    echo_json,
    echo_json_line,
    fail,
    guarded,
    set_verdict,
    stdin_name,
    stdin_spooled,
    streaming,
    style,
    url_runs,
)

if TYPE_CHECKING:
    from ..restore import FileReport
    from ..verify import LeftoverTemp


@click.command()
@PATHS_OR_STDIN
@click.option("--strict", is_flag=True, help="Also fail files with any finding at all.")
@click.option("--require-current", is_flag=True, help="Fail logs older than format 4.")
@click.option(
    "--allow-repairable",
    is_flag=True,
    help="Pass torn tails and open turns (a load repairs them without loss).",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="Read older logs as `migrate --lenient` upgrades them (docs/migrations.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "jsonl", "github"]),
    default="text",
    show_default=True,
    help="Readable text, one JSON object, one JSON object per line, or GitHub workflow "
    "annotations.",
)
@QUIET
@VERBOSE
@JOBS
@common_options
@guarded
def verify(
    paths: tuple[str, ...],
    strict: bool,
    require_current: bool,
    allow_repairable: bool,
    lenient: bool,
    as_json: bool,
    output_format: str,
    quiet: bool,
    verbose: bool,
    jobs: int,
) -> None:
    """Classify every log and list its findings; never writes.

    Each file gets one classification: not-a-session, empty, unsupported-version,
    corrupt, refused, torn-tail, open-turn, needs-migration or ok. Exit 0 when every
    file passes, 1 when one fails, 2 on a usage error (including a PATH without logs).
    needs-migration fails only with --require-current (not for an older generation
    named beside a newer one: the backup a migration keeps); torn-tail and open-turn
    fail unless --allow-repairable. A publish temp an interrupted publish left beside a log
    is a leftover-temp finding of that log; one whose log was never created (a first
    write killed before its link) is listed on its own. Both fail only with --strict,
    and dsh-store repair deletes them. Each file is printed as soon as it and the ones
    before it are done. A PATH of - reads one log from standard input; a
    postgresql:// URL checks every session of that store (named URL#ID, the password
    masked).

    \b
    Examples:
      dsh-store verify ~/.dsh/sessions
      dsh-store verify fixtures/ --require-current --format github
      dsh-store verify session.v4.jsonl --json
      dsh-store verify big-store/ --jobs 4 --allow-repairable -q
      git show HEAD:session.v4.jsonl | dsh-store verify -
      dsh-store verify postgresql://agent@db.internal/sessions --json
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..verify import NoLogsError, counts_as_failure, verify_json, verify_tree

    context = click.get_current_context()
    explicit_format = context.get_parameter_source("output_format") not in (
        click.core.ParameterSource.DEFAULT,
        None,
    )
    if as_json and explicit_format and output_format != "json":
        raise click.UsageError(f"--json and --format {output_format} ask for two formats; pick one")
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose contradict each other; pick one")
    fmt = "json" if as_json else output_format
    out = Output()
    failures: set[str] = set()

    def judge(report: FileReport) -> bool:
        return counts_as_failure(
            report,
            strict=strict,
            # An older generation kept beside its upgrade is a backup, not a log to upgrade.
            require_current=require_current and superseded_by(report.path) is None,
            allow_repairable=allow_repairable,
        )

    def emit(report: FileReport) -> None:
        report = _named(report)
        failed = judge(report)
        if failed:
            failures.add(report.path)
            set_verdict(EXIT_FINDINGS)
        if quiet and not failed:
            return
        if fmt == "jsonl":
            echo_json_line({"schema": JSON_SCHEMA_VERSION, "file": report.to_json()}, out)
        elif fmt == "github":
            for line in github_annotations(report, failed=failed):
                out.echo(line)
        else:
            out.echo(_report_text(report, failed, superseded_by(report.path), verbose=verbose))

    found: list[FileReport] = []
    orphans: list[LeftoverTemp] = []
    with stdin_spooled(paths) as files:
        for is_url, run in url_runs(files):
            hook = streaming("verifying", None if fmt == "json" else emit)
            if is_url:
                # only for a PostgreSQL store: the postgres modules off a JSONL command's start
                from ..database import verify_store

                found.extend(verify_store(run[0], progress=hook))
                continue
            try:
                run_found, run_orphans = verify_tree(run, jobs=jobs, progress=hook, lenient=lenient)
            except NoLogsError as error:
                fail(str(error), EXIT_USAGE)
            found.extend(run_found)
            orphans.extend(run_orphans)
        reports = [_named(report) for report in found]
    if fmt == "json":
        failures = {report.path for report in reports if judge(report)}
    if strict:
        failures.update(temp.path for temp in orphans)
    set_verdict(EXIT_FINDINGS if failures else EXIT_OK)
    if fmt == "json":
        echo_json(verify_json(reports, orphans))
    elif fmt == "jsonl":
        for temp in cast("list[object]", verify_json((), orphans)["orphanTemps"]):
            echo_json_line({"schema": JSON_SCHEMA_VERSION, "orphanTemp": temp}, out)
        summary = verify_json(reports)["summary"]
        echo_json_line({"schema": JSON_SCHEMA_VERSION, "summary": summary}, out)
    elif fmt == "github":
        for temp in orphans:
            if strict or not quiet:
                out.echo(_orphan_annotation(temp, failed=strict))
        out.echo(_verify_summary(reports, orphans, len(failures)))
    else:
        for temp in orphans:
            if strict or not quiet:
                out.echo(_orphan_text(temp, failed=strict))
        out.echo(_verify_summary(reports, orphans, len(failures)))
    sys.exit(EXIT_FINDINGS if failures else EXIT_OK)


def _named(report: FileReport) -> FileReport:
    """``report`` with the spooled standard input named ``-``, in its path and findings."""
    path = stdin_name(report.path)
    if path == report.path:
        return report
    findings = tuple(
        finding._replace(message=stdin_name(finding.message)) for finding in report.findings
    )
    return report._replace(path=path, findings=findings)


def _orphan_text(temp: LeftoverTemp, *, failed: bool) -> str:
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..verify import orphan_temp_finding

    finding = orphan_temp_finding(temp)
    head = (
        f"{printable(temp.path)}: "
        f"{style('orphan temp', fg='red' if failed else 'yellow', bold=failed)}"
    )
    return head + (" FAIL" if failed else "") + f"\n  {finding.rule}: {_one_line(finding.message)}"


def _orphan_annotation(temp: LeftoverTemp, *, failed: bool) -> str:
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..verify import orphan_temp_finding

    finding = orphan_temp_finding(temp)
    props = f"file={_github_property(temp.path)},title={_github_property(finding.rule)}"
    return f"::{'error' if failed else 'warning'} {props}::{_github_data(finding.message)}"


def superseded_by(path: str) -> str | None:
    """The newer generation beside an older generation file ``path``, if there is one.

    ``session.v2.jsonl`` next to ``session.v4.jsonl`` is the backup a store migration
    keeps; the walk reads only the newest, and a PATH naming the old one (as pre-commit
    does, file by file) gets the newest's name here. None for any other file.
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..jsonl import layout

    directory, name = os.path.split(path)
    version = layout.generation_version(name)
    if version is None:
        return None
    for newer in range(layout.CURRENT_VERSION, version, -1):
        candidate = os.path.join(directory, layout.generation_name(newer))
        if os.path.isfile(candidate):
            return candidate
    return None


def _report_text(
    report: FileReport, failed: bool, superseded: str | None = None, *, verbose: bool = False
) -> str:
    colour = "red" if failed else ("green" if report.classification == "ok" else "yellow")
    facts = []
    if report.version is not None:
        facts.append(f"format {report.version}")
    if report.events is not None:
        facts.append(f"{report.events} events")
    if superseded is not None:
        facts.append(f"kept beside {printable(os.path.basename(superseded))}")
    verdict = " FAIL" if failed else ""
    head = f"{printable(report.path)}: {style(report.classification, fg=colour, bold=failed)}"
    if facts:
        head += f" ({', '.join(facts)})"
    lines = [head + verdict]
    for finding in report.findings:
        where = []
        if finding.line is not None:
            where.append(f"line {finding.line}")
            if verbose and finding.line >= 2:  # DSH counts event lines after the header
                where.append(f"event line {finding.line - 1}")
        if finding.offset is not None:
            where.append(f"byte {finding.offset}")
        if finding.seq is not None:
            where.append(f"seq {finding.seq}")
        location = f" [{', '.join(where)}]" if where else ""
        lines.append(f"  {printable(finding.rule)}{location}: {_one_line(finding.message)}")
    if verbose and report.lenient_would_migrate is not None:
        lenient = "migrates" if report.lenient_would_migrate else "still refuses"
        lines.append(f"  migrate --lenient {lenient} it")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """A message on one line, whitespace runs collapsed, control characters escaped."""
    return " ".join(printable(text).split())


def _verify_summary(
    reports: Sequence[FileReport], orphans: Sequence[LeftoverTemp], failing: int
) -> str:
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..verify import summary_counts

    parts = ", ".join(f"{count} {kind}" for kind, count in summary_counts(reports).items())
    verdict = f"{failing} failing" if failing else "all pass"
    extra = f"; {len(orphans)} orphan temp(s)" if orphans else ""
    return f"{len(reports)} file(s): {parts or 'none'}{extra}; {verdict}"


def _github_data(text: str) -> str:
    # Control characters are escaped first (a newline in a name stays inside its
    # annotation), then the workflow-command escapes of % CR LF apply.
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: FileReport, *, failed: bool) -> list[str]:
    """GitHub workflow commands for one report: ``::error`` when it fails verification,
    ``::warning`` for the findings of a file that passes; nothing for a spotless file.
    """
    level = "error" if failed else "warning"
    findings = report.findings
    if not findings:
        if not failed:
            return []
        return [f"::error file={_github_property(report.path)}::{report.classification}"]
    lines = []
    for finding in findings:
        props = f"file={_github_property(report.path)}"
        if finding.line is not None:
            props += f",line={finding.line}"
        props += (
            f",title={_github_property(_annotation_title(report.classification, finding.rule))}"
        )
        lines.append(f"::{level} {props}::{_github_data(_one_line(finding.message))}")
    return lines


def _annotation_title(classification: str, rule: str) -> str:
    """The rule when it names the classification already (``open-turn``, ``refused: X``),
    else ``CLASSIFICATION: RULE``: the title never says one word twice."""
    if rule == classification or rule.startswith(f"{classification}:"):
        return rule
    return f"{classification}: {rule}"
