"""The ``dsh-store`` command line: a thin click layer over the library.

Each command parses arguments, calls one library function a user can call themselves
(:mod:`dsh_store.verify`, :mod:`dsh_store.bulk`, :mod:`dsh_store.summary`,
:mod:`dsh_store.demo`) and renders the result as text, JSON or GitHub annotations. Library
imports happen inside the commands so that ``dsh-store --help`` starts fast.

Errors reach the user as one line (``--debug`` shows the traceback). Ctrl-C stops the
command and never leaves a half-written file, because every write path publishes
atomically (temp file + fsync + link/rename, or a truncation to a committed prefix).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import __version__
from .errors import DshStoreError

if TYPE_CHECKING:
    from .migrate import MigrationResult
    from .restore import FileReport

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_PROGRESS_MIN_FILES = 5


def _existing(context: click.Context, param: click.Parameter, value: Any) -> Any:
    """Require every PATH to exist as a name (a broken symlink is reported, not rejected)."""
    values = value if isinstance(value, tuple) else (value,)
    for path in values:
        if path is not None and not os.path.lexists(path):
            raise click.BadParameter(f"{path} does not exist", context, param)
    return value


_PATHS = click.argument(
    "paths", nargs=-1, required=True, type=click.Path(path_type=Path), callback=_existing
)
_JOBS = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes for multi-file work.",
)


def _fail(message: str, code: int = EXIT_FINDINGS) -> None:
    click.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(code)


def _debug() -> bool:
    context = click.get_current_context(silent=True)
    root = context.find_root() if context is not None else None
    return bool(root is not None and isinstance(root.obj, dict) and root.obj.get("debug"))


def _print_traceback_if_debugging() -> None:
    if _debug():
        import traceback  # only on failure: keeps it off the cold start

        traceback.print_exc()


def _guarded(command: F) -> F:
    """Turn every failure into one clear line on stderr; ``--debug`` adds the traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            _fail("interrupted; no file was left half-written", EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (``dsh-store cat ... | head``): not an error.
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the exit flush
            sys.exit(EXIT_OK)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except (DshStoreError, OSError) as error:
            _print_traceback_if_debugging()
            _fail(_os_message(error) if _is_plain_os_error(error) else str(error))
        except Exception as error:
            _print_traceback_if_debugging()
            _fail(
                f"unexpected {type(error).__name__}: {error} (this is a bug; rerun with "
                "--debug for the traceback and report it)"
            )

    return wrapper  # type: ignore[return-value]


def _is_plain_os_error(error: Exception) -> bool:
    return isinstance(error, OSError) and not isinstance(error, DshStoreError)


def _os_message(error: BaseException) -> str:
    assert isinstance(error, OSError)
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


def _plain() -> bool:
    """No colour when NO_COLOR is set (any value) or stdout is not a terminal."""
    return "NO_COLOR" in os.environ or not sys.stdout.isatty()


def _style(text: str, **styles: Any) -> str:
    return text if _plain() else click.style(text, **styles)


def _progress(label: str) -> Callable[[Iterable[R], int], Iterable[R]]:
    """A stderr progress bar for more than a few files, only when stderr is a terminal."""

    def wrap(items: Iterable[R], length: int) -> Iterable[R]:
        if length <= _PROGRESS_MIN_FILES or not sys.stderr.isatty():
            return items
        return _bar(items, length, label)

    return wrap


def _bar(items: Iterable[R], length: int, label: str) -> Iterator[R]:
    with click.progressbar(items, length=length, label=label, file=sys.stderr) as bar:
        yield from bar


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dsh-store")
@click.option("--debug", is_flag=True, help="Show the full traceback of an error.")
@click.pass_context
def main(context: click.Context, debug: bool) -> None:
    """Verify, migrate, repair and inspect durable JSONL session logs.

    PATH arguments may be a store root, a session directory or a .jsonl file;
    directories are walked (symlinks are not followed out of the tree, and in a
    session directory only the newest generation is read).

    \b
    Exit codes: 0 success, 1 findings or a failed operation, 2 usage error,
    130 interrupted.

    \b
    Examples:
      dsh-store verify ~/.dsh/sessions
      dsh-store migrate ~/.dsh/sessions --check
      dsh-store demo
    """
    context.obj = {"debug": debug}


# -- verify -----------------------------------------------------------------------------


@main.command()
@_PATHS
@click.option("--strict", is_flag=True, help="Also fail files with any finding at all.")
@click.option("--require-current", is_flag=True, help="Fail logs older than format 4.")
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
    help="Readable text, one JSON object, or GitHub workflow annotations.",
)
@_JOBS
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
    """Classify every log and list its findings; never writes.

    Each file gets one classification: not-a-session, empty, unsupported-version,
    corrupt, refused, torn-tail, open-turn, needs-migration or ok. Exit 0 when every
    file passes, 1 when one fails, 2 on a usage error (including a PATH without logs).
    needs-migration fails only with --require-current; torn-tail and open-turn fail
    unless --allow-repairable.

    \b
    Examples:
      dsh-store verify ~/.dsh/sessions
      dsh-store verify fixtures/ --require-current --format github
      dsh-store verify session.v4.jsonl --json
      dsh-store verify big-store/ --jobs 4 --allow-repairable
    """
    from .verify import NoLogsError, counts_as_failure, verify_json, verify_paths

    try:
        reports = verify_paths(paths, jobs=jobs, progress=_progress("verifying"))
    except NoLogsError as error:
        _fail(str(error), EXIT_USAGE)
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
    fmt = "json" if as_json else output_format
    if fmt == "json":
        _echo_json(verify_json(reports))
    elif fmt == "github":
        for report in reports:
            for line in github_annotations(report, failed=report.path in failures):
                click.echo(line)
        click.echo(_verify_summary(reports, len(failures)))
    else:
        for report in reports:
            click.echo(_report_text(report, report.path in failures))
        click.echo(_verify_summary(reports, len(failures)))
    sys.exit(EXIT_FINDINGS if failures else EXIT_OK)


def _report_text(report: FileReport, failed: bool) -> str:
    colour = "red" if failed else ("green" if report.classification == "ok" else "yellow")
    facts = []
    if report.version is not None:
        facts.append(f"format {report.version}")
    if report.events is not None:
        facts.append(f"{report.events} events")
    verdict = " FAIL" if failed else ""
    head = f"{report.path}: {_style(report.classification, fg=colour, bold=failed)}"
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


def _verify_summary(reports: Sequence[FileReport], failing: int) -> str:
    from .verify import summary_counts

    parts = ", ".join(f"{count} {kind}" for kind, count in summary_counts(reports).items())
    verdict = f"{failing} failing" if failing else "all pass"
    return f"{len(reports)} file(s): {parts}; {verdict}"


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
        return [f"::error file={_github_property(str(report.path))}::{report.classification}"]
    lines = []
    for finding in findings:
        props = f"file={_github_property(str(report.path))}"
        if finding.line is not None:
            props += f",line={finding.line}"
        props += f",title={_github_property(report.classification + ' ' + finding.rule)}"
        lines.append(f"::{level} {props}::{_github_data(finding.message)}")
    return lines


# -- migrate ----------------------------------------------------------------------------


@main.command()
@_PATHS
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if anything would change.")
@click.option("--dry-run", is_flag=True, help="Run the whole chain in memory; write nothing.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Publish the upgraded log here (exactly one source; never overwrites).",
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Replace loose files atomically, keeping FILE.v<N>.bak (store files always "
    "publish beside their source).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@_JOBS
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

    In a store tree, session.v4.jsonl is published beside each older generation (the
    source stays as the backup). A loose file needs --output OUT or --in-place. Exit 0
    when nothing was refused; 1 when a file was refused, or with --check when anything
    would change; 2 on a usage error.

    \b
    Examples:
      dsh-store migrate ~/.dsh/sessions
      dsh-store migrate ~/.dsh/sessions --check
      dsh-store migrate old.jsonl --output new.jsonl
      dsh-store migrate fixtures/ --in-place --jobs 4
    """
    from .bulk import MigrationOptionsError, migrate_paths
    from .verify import NoLogsError

    if output is not None and in_place:
        raise click.UsageError("use either --output or --in-place, not both")
    try:
        results = migrate_paths(
            paths,
            output=output,
            in_place=in_place,
            dry_run=check or dry_run,
            jobs=jobs,
            progress=_progress("migrating"),
        )
    except NoLogsError as error:
        _fail(str(error), EXIT_USAGE)
    except MigrationOptionsError as error:
        raise click.UsageError(str(error)) from None
    if as_json:
        _echo_json(migrate_json(results))
    else:
        for line in _migration_table(results):
            click.echo(line)
    changes = any(result.status in ("migrated", "would-migrate") for result in results)
    refused = any(result.status == "refused" for result in results)
    sys.exit(EXIT_FINDINGS if refused or (check and changes) else EXIT_OK)


def migrate_json(results: Sequence[MigrationResult]) -> dict[str, Any]:
    """The ``dsh-store migrate --json`` document (docs/schemas/migrate.schema.json)."""
    summary: dict[str, int] = {}
    for result in results:
        summary[result.status] = summary.get(result.status, 0) + 1
    return {"results": [result.to_json() for result in results], "summary": summary}


def _migration_table(results: Sequence[MigrationResult]) -> list[str]:
    colours = {"migrated": "green", "would-migrate": "yellow", "refused": "red"}
    lines = []
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
        version = "?" if result.source_version is None else str(result.source_version)
        status = _style(f"{result.status:<13}", fg=colours.get(result.status))
        line = f"{status} v{version:<2} {result.source}"
        if result.target is not None and result.target != result.source:
            line += f" -> {result.target}"
        if result.events is not None and result.status != "current":
            line += f" ({result.events} events)"
        if result.backup is not None:
            line += f" (backup {result.backup})"
        lines.append(line)
        if result.reason:
            lines.append(f"  reason: {' '.join(result.reason.split())}")
    order = ("migrated", "would-migrate", "current", "refused")
    lines.append(
        "; ".join(f"{counts.get(status, 0)} {status}" for status in order if status in counts)
    )
    return lines


# -- repair -----------------------------------------------------------------------------


@main.command()
@_PATHS
@click.option("--dry-run", is_flag=True, help="Print the plan only; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@_guarded
def repair(paths: tuple[Path, ...], dry_run: bool, as_json: bool) -> None:
    """Repair crashed v4 logs without loss: cut the torn tail, close the open turn.

    The plan comes first: which bytes are cut and which closing events are appended.
    The torn bytes are saved beside the log as <log>.torn-<offset> before the log is
    truncated to its last committed line; then the closers are appended as one batch.
    Committed corruption and older formats are refused (migrate those), never
    "repaired". Exit 0 when every file is clean or repaired, 1 when one was refused.

    \b
    Examples:
      dsh-store repair ~/.dsh/sessions --dry-run
      dsh-store repair session.v4.jsonl
    """
    from .bulk import repair_paths
    from .verify import NoLogsError

    try:
        results = repair_paths(paths, dry_run=dry_run)
    except NoLogsError as error:
        _fail(str(error), EXIT_USAGE)
    if as_json:
        _echo_json({"results": results})
    else:
        for result in results:
            click.echo(_repair_text(result))
    refused = any(result["status"] == "refused" for result in results)
    sys.exit(EXIT_FINDINGS if refused else EXIT_OK)


def _repair_text(result: dict[str, Any]) -> str:
    status = result["status"]
    if status == "refused":
        return f"{result['path']}: {_style('refused', fg='red')}: {result['reason']}"
    if status == "clean":
        return f"{result['path']}: {result['classification']}, nothing to repair"
    verb = "repaired" if status == "repaired" else "would repair"
    lines = [f"{result['path']}: {_style(verb, fg='green')} ({result['classification']})"]
    if result["truncateAt"] is not None:
        lines.append(
            f"  cut {result['tornBytes']} torn byte(s) at offset {result['truncateAt']}, "
            f"saved first to {result['sidecar']}"
        )
    if result["closers"]:
        lines.append(f"  append closers: {', '.join(result['closers'])}")
    return "\n".join(lines)


# -- inspect ----------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), callback=_existing)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--events", "show_events", is_flag=True, help="List every event (seq, type, bytes).")
@click.option("--messages", "show_messages", is_flag=True, help="Show the derived messages.")
@_guarded
def inspect(path: Path, as_json: bool, show_events: bool, show_messages: bool) -> None:
    """Summarize one log: header, format, classification, counts, open turn.

    Counts turns, steps and events by type with their bytes (as v4 lines; older logs
    are upgraded in memory). Never writes. Exit 1 when the log cannot be restored
    (its classification and findings are still printed).

    \b
    Examples:
      dsh-store inspect session.v4.jsonl
      dsh-store inspect session.jsonl --messages
      dsh-store inspect session.v4.jsonl --json --events
    """
    from .summary import summarize

    summary = summarize(path, events=show_events, messages=show_messages)
    if as_json:
        _echo_json(summary)
    else:
        click.echo(_summary_text(summary))
    sys.exit(EXIT_OK if summary.get("events") is not None else EXIT_FINDINGS)


def _summary_text(summary: dict[str, Any]) -> str:
    lines = [str(summary["path"]), f"  classification: {summary['classification']}"]
    header = summary.get("header")
    if header:
        lines.append(f"  session: {header.get('id')}  created {header.get('createdAt')}")
        if header.get("cwd"):
            lines.append(f"  cwd: {header['cwd']}")
    lines.append(f"  format version: {summary.get('version')}")
    for key in ("events", "turns", "steps"):
        if summary.get(key) is not None:
            lines.append(f"  {key}: {summary[key]}")
    if summary.get("openTurn") is not None:
        lines.append(f"  open turn: {summary['openTurn']} (a load closes it as interrupted)")
    if summary.get("tornBytes"):
        lines.append(f"  torn tail: {summary['tornBytes']} byte(s) (a repair cuts them)")
    if summary.get("byType"):
        lines.append(f"  {'events by type':<32} {'count':>7} {'bytes':>12}")
        for kind, info in summary["byType"].items():
            lines.append(f"    {kind:<30} {info['count']:>7} {info['bytes']:>12}")
    for finding in summary.get("findings", []):
        lines.append(f"  finding {finding['rule']}: {' '.join(finding['message'].split())}")
    for event in summary.get("eventList", []):
        lines.append(f"  #{event['seq']:<6} {event['type']:<30} {event['bytes']} B")
    for message in summary.get("messages", []):
        lines.append(f"  [{message['role']}] {message['text']}")
    return "\n".join(lines)


# -- list -------------------------------------------------------------------------------


def default_root() -> Path:
    """``$DSH_STORE_ROOT`` when set and non-empty, else ``~/.dsh/sessions``."""
    configured = os.environ.get("DSH_STORE_ROOT")
    return Path(configured) if configured else Path.home() / ".dsh" / "sessions"


@main.command(name="list")
@click.argument("root", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@_guarded
def list_sessions(root: Path | None, as_json: bool) -> None:
    """List the sessions of a store, reading only each log's header and tail.

    ROOT defaults to $DSH_STORE_ROOT, else ~/.dsh/sessions. Status is current,
    needs-migration or torn-tail (or what is wrong with the header); run verify for
    the full verdict.

    \b
    Examples:
      dsh-store list
      dsh-store list /var/lib/agent/sessions --json
    """
    from .summary import list_store

    store_root = root if root is not None else default_root()
    rows = list_store(store_root)
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo(f"no sessions under {store_root}")
        return
    click.echo(f"{'ID':<36} {'VER':>3} {'EVENTS':>7}  {'STATUS':<16} {'CREATED':<13}  CWD")
    for row in rows:
        events = "?" if row["events"] is None else str(row["events"])
        version = "?" if row["version"] is None else str(row["version"])
        ident = row["id"] if row["id"] is not None else f"({row['path']})"
        click.echo(
            f"{ident!s:<36} {version:>3} {events:>7}  {row['status']:<16} "
            f"{row['created']!s:<13}  {row.get('cwd') or '-'}"
        )


# -- cat --------------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), callback=_existing)
@click.option(
    "--from-seq", type=click.IntRange(min=0), default=0, show_default=True, help="First seq."
)
@click.option("--type", "types", multiple=True, help="Only events of this type (repeatable).")
@_guarded
def cat(path: Path, from_seq: int, types: tuple[str, ...]) -> None:
    """Print committed events as v4 JSONL on stdout (no header line).

    Older formats are upgraded in memory; a torn tail is never printed; committed
    corruption stops the output with an error (exit 1).

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
    help="Directory to work in (default: a new temporary directory).",
)
@_guarded
def demo(root: Path | None) -> None:
    """Record a session, SIGKILL the writer mid-turn, restore, migrate, verify.

    Works in a new temporary directory (named in the output) unless --root says
    otherwise; never touches a real store. Exit 0 when everything verifies.

    \b
    Examples:
      dsh-store demo
      dsh-store demo --root /tmp/dsh-demo
    """
    from .demo import run_demo

    sys.exit(run_demo(root, echo=click.echo))


if __name__ == "__main__":  # pragma: no cover
    main()
