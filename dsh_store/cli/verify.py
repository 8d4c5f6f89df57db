"""``dsh-store verify``: classify logs and report findings as text, JSON or annotations.

The cold start of this command is measured (docs/performance.md), so this module and the
library modules a verify run loads keep :mod:`pathlib` out: paths stay strings.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    JOBS,
    PATHS,
    echo_json,
    fail,
    guarded,
    progress,
    set_verdict,
    style,
)

if TYPE_CHECKING:
    from ..restore import FileReport
    from ..verify import LeftoverTemp


@click.command()
@PATHS
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
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="Readable text, one JSON object, or GitHub workflow annotations.",
)
@JOBS
@guarded
def verify(
    paths: tuple[str, ...],
    strict: bool,
    require_current: bool,
    allow_repairable: bool,
    lenient: bool,
    as_json: bool,
    output_format: str,
    jobs: int,
) -> None:
    """Classify every log and list its findings; never writes.

    Each file gets one classification: not-a-session, empty, unsupported-version,
    corrupt, refused, torn-tail, open-turn, needs-migration or ok. Exit 0 when every
    file passes, 1 when one fails, 2 on a usage error (including a PATH without logs).
    needs-migration fails only with --require-current; torn-tail and open-turn fail
    unless --allow-repairable. A publish temp an interrupted publish left beside a log
    is a leftover-temp finding of that log; one whose log was never created (a first
    write killed before its link) is listed on its own. Both fail only with --strict,
    and dsh-store repair deletes them.

    \b
    Examples:
      dsh-store verify ~/.dsh/sessions
      dsh-store verify fixtures/ --require-current --format github
      dsh-store verify session.v4.jsonl --json
      dsh-store verify big-store/ --jobs 4 --allow-repairable
    """
    from ..verify import NoLogsError, counts_as_failure, verify_json, verify_tree

    try:
        reports, orphans = verify_tree(
            paths, jobs=jobs, progress=progress("verifying"), lenient=lenient
        )
    except NoLogsError as error:
        fail(str(error), EXIT_USAGE)
    failures = {
        report.path
        for report in reports
        if counts_as_failure(
            report,
            strict=strict,
            require_current=require_current,
            allow_repairable=allow_repairable,
        )
    }
    if strict:
        failures.update(temp.path for temp in orphans)
    set_verdict(EXIT_FINDINGS if failures else EXIT_OK)
    fmt = "json" if as_json else output_format
    if fmt == "json":
        echo_json(verify_json(reports, orphans))
    elif fmt == "github":
        for report in reports:
            for line in github_annotations(report, failed=report.path in failures):
                click.echo(line)
        for temp in orphans:
            click.echo(_orphan_annotation(temp, failed=strict))
        click.echo(_verify_summary(reports, orphans, len(failures)))
    else:
        for report in reports:
            click.echo(_report_text(report, report.path in failures))
        for temp in orphans:
            click.echo(_orphan_text(temp, failed=strict))
        click.echo(_verify_summary(reports, orphans, len(failures)))
    sys.exit(EXIT_FINDINGS if failures else EXIT_OK)


def _orphan_text(temp: LeftoverTemp, *, failed: bool) -> str:
    from ..verify import orphan_temp_finding

    finding = orphan_temp_finding(temp)
    head = f"{temp.path}: {style('orphan temp', fg='red' if failed else 'yellow', bold=failed)}"
    return head + (" FAIL" if failed else "") + f"\n  {finding.rule}: {finding.message}"


def _orphan_annotation(temp: LeftoverTemp, *, failed: bool) -> str:
    from ..verify import orphan_temp_finding

    finding = orphan_temp_finding(temp)
    props = f"file={_github_property(temp.path)},title={_github_property(finding.rule)}"
    return f"::{'error' if failed else 'warning'} {props}::{_github_data(finding.message)}"


def _report_text(report: FileReport, failed: bool) -> str:
    colour = "red" if failed else ("green" if report.classification == "ok" else "yellow")
    facts = []
    if report.version is not None:
        facts.append(f"format {report.version}")
    if report.events is not None:
        facts.append(f"{report.events} events")
    verdict = " FAIL" if failed else ""
    head = f"{report.path}: {style(report.classification, fg=colour, bold=failed)}"
    if facts:
        head += f" ({', '.join(facts)})"
    lines = [head + verdict]
    for finding in report.findings:
        where = []
        if finding.line is not None:
            where.append(f"line {finding.line}")
        if finding.offset is not None:
            where.append(f"byte {finding.offset}")
        if finding.seq is not None:
            where.append(f"seq {finding.seq}")
        location = f" [{', '.join(where)}]" if where else ""
        lines.append(f"  {finding.rule}{location}: {' '.join(finding.message.split())}")
    return "\n".join(lines)


def _verify_summary(
    reports: Sequence[FileReport], orphans: Sequence[LeftoverTemp], failing: int
) -> str:
    from ..verify import summary_counts

    parts = ", ".join(f"{count} {kind}" for kind, count in summary_counts(reports).items())
    verdict = f"{failing} failing" if failing else "all pass"
    extra = f"; {len(orphans)} orphan temp(s)" if orphans else ""
    return f"{len(reports)} file(s): {parts or 'none'}{extra}; {verdict}"


def _github_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


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
        props += f",title={_github_property(report.classification + ' ' + finding.rule)}"
        lines.append(f"::{level} {props}::{_github_data(finding.message)}")
    return lines
