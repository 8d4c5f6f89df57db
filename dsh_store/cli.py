"""The ``dsh-store`` command line: a thin click layer over the library.

Each command parses arguments, calls one or two library functions a user can call
themselves, and renders the result (text, JSON or GitHub annotations). Library imports
happen inside the commands so that ``dsh-store --help`` starts fast. Errors reach the
user as one line (``--debug`` shows the traceback); Ctrl-C stops between files and never
leaves a half-written file, because every write path publishes atomically.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import __version__
from .errors import DshStoreError

if TYPE_CHECKING:
    from .restore import FileReport

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class _State:
    debug = False


def _fail(message: str, code: int = EXIT_FINDINGS) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _guarded(command: F) -> F:
    """Turn library errors into one clear line; ``--debug`` keeps the traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo("interrupted: no file was left half-written", err=True)
            sys.exit(130)
        except (DshStoreError, OSError, ValueError) as error:
            if _State.debug:
                traceback.print_exc()
            message = str(error) if not isinstance(error, OSError) else _os_message(error)
            _fail(message)

    return wrapper  # type: ignore[return-value]


def _os_message(error: OSError) -> str:
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


def _plain() -> bool:
    return bool(os.environ.get("NO_COLOR")) or not sys.stdout.isatty()


def _style(text: str, **styles: Any) -> str:
    return text if _plain() else click.style(text, **styles)


def _progress(label: str) -> Callable[[Iterable[Path]], Iterable[Path]] | None:
    """A stderr progress bar for multi-file work, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None

    def wrap(items: Iterable[Path]) -> Iterable[Path]:
        files = list(items)
        if len(files) <= 5:
            return files
        return _bar(files, label)

    return wrap


def _bar(files: Sequence[Path], label: str) -> Iterable[Path]:
    with click.progressbar(files, label=label, file=sys.stderr) as bar:
        yield from bar


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dsh-store")
@click.option("--debug", is_flag=True, help="Show the full traceback of an error.")
def main(debug: bool) -> None:
    """Verify, migrate, repair and inspect durable JSONL session logs.

    PATH arguments may be a store root, a session directory or a .jsonl file;
    directories are walked (symlinks are not followed out of the tree).
    """
    _State.debug = debug


# -- verify -----------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--strict", is_flag=True, help="Fail on any finding, even on files that are ok.")
@click.option("--require-current", is_flag=True, help="Fail on logs older than format 4.")
@click.option(
    "--allow-repairable",
    is_flag=True,
    help="Pass torn tails and open turns (a load repairs them without loss).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="Output: readable text, one JSON object, or GitHub workflow annotations.",
)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, help="Worker processes.")
@_guarded
def verify(
    paths: tuple[Path, ...],
    strict: bool,
    require_current: bool,
    allow_repairable: bool,
    as_json: bool,
    output_format: str,
    jobs: int,
) -> None:
    """Check log integrity; never writes. Exit 0 clean, 1 findings, 2 usage error.

    \b
    Examples:
      dsh-store verify ~/.dsh/sessions
      dsh-store verify fixtures/ --require-current --format github
      dsh-store verify session.v4.jsonl --json
    """
    from .verify import counts_as_failure, verify_paths

    reports = verify_paths(paths, jobs=jobs, progress=_progress("verifying"))
    if not reports:
        _fail("no .jsonl log files found under " + ", ".join(map(str, paths)))
    failures = [
        report
        for report in reports
        if counts_as_failure(
            report,
            strict=strict,
            require_current=require_current,
            allow_repairable=allow_repairable,
        )
    ]
    fmt = "json" if as_json else output_format
    if fmt == "json":
        click.echo(json.dumps(_verify_json(reports), indent=2))
    elif fmt == "github":
        for report in failures:
            for line in _github_annotations(report):
                click.echo(line)
        click.echo(_summary_line(reports, failures))
    else:
        for report in reports:
            click.echo(_report_text(report, report in failures))
        click.echo(_summary_line(reports, failures))
    sys.exit(EXIT_FINDINGS if failures else EXIT_OK)


def _verify_json(reports: Sequence[FileReport]) -> dict[str, Any]:
    summary: dict[str, int] = {}
    for report in reports:
        summary[report.classification] = summary.get(report.classification, 0) + 1
    return {"files": [report.to_json() for report in reports], "summary": summary}


def _report_text(report: FileReport, failed: bool) -> str:
    colour = "red" if failed else ("green" if report.classification == "ok" else "yellow")
    facts = []
    if report.version is not None:
        facts.append(f"format {report.version}")
    if report.events is not None:
        facts.append(f"{report.events} events")
    head = f"{report.path}: {_style(report.classification, fg=colour, bold=failed)}"
    if facts:
        head += f" ({', '.join(facts)})"
    lines = [head]
    for finding in report.findings:
        where = []
        if finding.line is not None:
            where.append(f"line {finding.line}")
        if finding.offset is not None:
            where.append(f"byte {finding.offset}")
        if finding.seq is not None:
            where.append(f"seq {finding.seq}")
        location = f" [{', '.join(where)}]" if where else ""
        lines.append(f"  {finding.rule}{location}: {finding.message}")
    return "\n".join(lines)


def _summary_line(reports: Sequence[FileReport], failures: Sequence[FileReport]) -> str:
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.classification] = counts.get(report.classification, 0) + 1
    parts = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    verdict = f"{len(failures)} failing" if failures else "all pass"
    return f"{len(reports)} file(s): {parts}; {verdict}"


def _github_escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_escape(text).replace(":", "%3A").replace(",", "%2C")


def _github_annotations(report: FileReport) -> list[str]:
    findings = report.findings or ()
    if not findings:
        return [f"::error file={_github_property(str(report.path))}::{report.classification}"]
    lines = []
    for finding in findings:
        props = f"file={_github_property(str(report.path))}"
        if finding.line is not None:
            props += f",line={finding.line}"
        props += f",title={_github_property(report.classification + ': ' + finding.rule)}"
        lines.append(f"::error {props}::{_github_escape(finding.message)}")
    return lines


# -- migrate ----------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if anything would change.")
@click.option("--dry-run", is_flag=True, help="Run the whole chain in memory; write nothing.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Publish the upgraded log here (one loose FILE only; never overwrites).",
)
@click.option(
    "--in-place", is_flag=True, help="Replace loose files atomically, keeping FILE.v<N>.bak."
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, help="Worker processes.")
@_guarded
def migrate(
    paths: tuple[Path, ...],
    check: bool,
    dry_run: bool,
    output: Path | None,
    in_place: bool,
    as_json: bool,
    jobs: int,
) -> None:
    """Upgrade logs of formats 0-3 to format 4, never overwriting a source.

    Store trees publish session.v4.jsonl beside each older log (the source stays as
    the backup). Loose files need --output or --in-place.

    \b
    Examples:
      dsh-store migrate ~/.dsh/sessions
      dsh-store migrate old.jsonl --output new.jsonl
      dsh-store migrate fixtures/*.jsonl --in-place
      dsh-store migrate ~/.dsh/sessions --check
    """
    from .migrate import MigrationResult

    if output is not None and in_place:
        raise click.UsageError("use either --output or --in-place")
    files = _migration_targets(paths)
    if output is not None and len(files) != 1:
        raise click.UsageError("--output takes exactly one source file")
    for file in files:
        if file.in_store is False and output is None and not in_place and not (check or dry_run):
            raise click.UsageError(f"{file.path} is a loose file: pass --output OUT or --in-place")
    jobs_args = [
        (str(file.path), None if output is None else str(output), in_place, check or dry_run)
        for file in files
    ]
    results: list[MigrationResult] = _map(_migrate_one, jobs_args, jobs)
    if as_json:
        click.echo(json.dumps({"results": [r.to_json() for r in results]}, indent=2))
    else:
        _migration_table(results)
    changes = [r for r in results if r.status in ("migrated", "would-migrate")]
    refused = [r for r in results if r.status == "refused"]
    if check and changes:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_FINDINGS if refused else EXIT_OK)


class _Target:
    def __init__(self, path: Path, in_store: bool) -> None:
        self.path = path
        self.in_store = in_store


def _migration_targets(paths: Sequence[Path]) -> list[_Target]:
    from .jsonl.layout import generation_version
    from .verify import iter_log_files

    targets: list[_Target] = []
    for path in paths:
        for file in iter_log_files(path):
            targets.append(_Target(file, generation_version(file.name) is not None))
    return targets


def _migrate_one(args: tuple[str, str | None, bool, bool]) -> Any:
    from .migrate import MigrationResult, migrate_file

    source, output, in_place, dry_run = args
    try:
        return migrate_file(source, output=output, in_place=in_place, dry_run=dry_run)
    except DshStoreError as error:
        version = getattr(error, "version", None)
        return MigrationResult(Path(source), "refused", version, reason=str(error))


T = TypeVar("T")
R = TypeVar("R")


def _map(function: Callable[[T], R], items: Sequence[T], jobs: int) -> list[R]:
    if jobs > 1 and len(items) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(function, items))
    return [function(item) for item in items]


def _migration_table(results: Sequence[Any]) -> None:
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
        version = "?" if result.source_version is None else str(result.source_version)
        line = f"{result.status:<14} v{version}  {result.source}"
        if result.target is not None and result.target != result.source:
            line += f" -> {result.target}"
        if result.backup is not None:
            line += f" (backup {result.backup})"
        click.echo(line)
        if result.reason:
            click.echo(f"  reason: {result.reason}")
    click.echo(", ".join(f"{count} {status}" for status, count in sorted(counts.items())))


# -- repair -----------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print the plan only; write nothing.")
@_guarded
def repair(paths: tuple[Path, ...], dry_run: bool) -> None:
    """Repair crashed v4 logs without loss: cut the torn tail, close the open turn.

    The torn bytes are first saved beside the log as <log>.torn-<offset>; then the log is
    truncated to its last complete line and the closers are appended as one batch.
    Committed corruption is refused, never "repaired".

    \b
    Examples:
      dsh-store repair ~/.dsh/sessions --dry-run
      dsh-store repair session.v4.jsonl
    """
    from .store import repair_file
    from .verify import iter_log_files

    failed = False
    for path in paths:
        for file in iter_log_files(path):
            try:
                plan = repair_file(file, dry_run=dry_run)
            except DshStoreError as error:
                failed = True
                click.echo(f"{file}: {_style('refused', fg='red')}: {error}")
                continue
            click.echo(plan.describe())
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


# -- inspect ----------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--events", "show_events", is_flag=True, help="List every event (seq, type, bytes).")
@click.option("--messages", "show_messages", is_flag=True, help="Show the derived messages.")
@_guarded
def inspect(path: Path, as_json: bool, show_events: bool, show_messages: bool) -> None:
    """Summarize one log: header, format, classification, counts, open turn.

    \b
    Examples:
      dsh-store inspect session.v4.jsonl
      dsh-store inspect session.jsonl --messages
    """
    from .summary import summarize

    summary = summarize(path, events=show_events, messages=show_messages)
    if as_json:
        click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    click.echo(_summary_text(summary))


def _summary_text(summary: dict[str, Any]) -> str:
    lines = [f"{summary['path']}"]
    lines.append(f"  classification: {summary['classification']}")
    if summary.get("header"):
        header = summary["header"]
        lines.append(f"  session: {header.get('id')}  created {header.get('createdAt')}")
        if header.get("cwd"):
            lines.append(f"  cwd: {header['cwd']}")
    lines.append(f"  format version: {summary.get('version')}")
    for key in ("events", "turns", "steps"):
        if summary.get(key) is not None:
            lines.append(f"  {key}: {summary[key]}")
    if summary.get("openTurn") is not None:
        lines.append(f"  open turn: {summary['openTurn']} (restore closes it as interrupted)")
    if summary.get("byType"):
        lines.append("  events by type (count, bytes):")
        for kind, info in summary["byType"].items():
            lines.append(f"    {kind:<28} {info['count']:>7} {info['bytes']:>12}")
    for finding in summary.get("findings", []):
        lines.append(f"  finding {finding['rule']}: {finding['message']}")
    for event in summary.get("eventList", []):
        lines.append(f"  #{event['seq']:<6} {event['type']:<28} {event['bytes']} B")
    for message in summary.get("messages", []):
        lines.append(f"  [{message['role']}] {message['text']}")
    return "\n".join(lines)


# -- list -------------------------------------------------------------------------------


@main.command(name="list")
@click.argument("root", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@_guarded
def list_sessions(root: Path | None, as_json: bool) -> None:
    """List the sessions of a store (reads headers only).

    ROOT defaults to $DSH_STORE_ROOT, else ~/.dsh/sessions.

    \b
    Examples:
      dsh-store list
      dsh-store list /var/lib/agent/sessions --json
    """
    from .summary import list_store

    store_root = root or Path(os.environ.get("DSH_STORE_ROOT") or Path.home() / ".dsh" / "sessions")
    rows = list_store(store_root)
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not rows:
        click.echo(f"no sessions under {store_root}")
        return
    for row in rows:
        click.echo(
            f"{row['id']:<38} v{row['version']}  {row['events']:>7} ev  {row['status']:<16} "
            f"{row['created']}  {row.get('cwd') or '-'}"
        )


# -- cat --------------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from-seq", type=click.IntRange(min=0), default=0, help="First seq to print.")
@click.option("--type", "types", multiple=True, help="Only events of this type (repeatable).")
@_guarded
def cat(path: Path, from_seq: int, types: tuple[str, ...]) -> None:
    """Print events as v4 JSONL (older formats upgraded in memory; the torn tail never).

    \b
    Examples:
      dsh-store cat session.jsonl --type user/message
      dsh-store cat session.v4.jsonl --from-seq 100 | jq .type
    """
    from .summary import iter_v4_lines

    out = sys.stdout.buffer
    wanted = set(types)
    for event_type, seq, line in iter_v4_lines(path):
        if seq >= from_seq and (not wanted or event_type in wanted):
            out.write(line)
    out.flush()


# -- demo -------------------------------------------------------------------------------


@main.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Store root to use (default: a new temporary directory).",
)
@_guarded
def demo(root: Path | None) -> None:
    """Record a session, SIGKILL the writer mid-turn, restore, migrate, verify.

    Never touches a real store unless --root says so.
    """
    from .demo import run_demo

    sys.exit(run_demo(root, echo=click.echo))


if __name__ == "__main__":  # pragma: no cover
    main()
