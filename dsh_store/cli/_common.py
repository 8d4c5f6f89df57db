"""What every ``dsh-store`` command shares: exit codes, error guarding, output helpers.

Only click, :mod:`dsh_store._output` and :mod:`dsh_store.errors` are imported here, so a
command module that imports this stays cheap to load; not even :mod:`pathlib` (``dsh-store
verify`` has no use for it): :data:`PATHS` yields strings, and a command wanting Paths
converts them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from .._interrupt import HeldInterrupt
from .._output import JSON_SCHEMA_VERSION, escape_json_text, printable
from ..errors import DshStoreError

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

MAX_JOBS = 64
"""The most worker processes ``--jobs`` accepts (``auto`` picks at most this many too)."""

_PROGRESS_MIN_FILES = 5


STDIN = "-"
"""The PATH that means standard input (``verify``, ``cat``, ``inspect``)."""

_STDIN_CHUNK = 1 << 20

# (temp file holding stdin, the name it is reported by) while a command reads stdin.
_stdin_alias: tuple[str, str] | None = None


def existing_or_stdin(context: click.Context, param: click.Parameter, value: Any) -> Any:
    """:func:`existing`, with ``-`` (standard input) allowed once among the PATHs."""
    values = value if isinstance(value, tuple) else (value,)
    if values.count(STDIN) > 1:
        raise click.BadParameter("- (standard input) can be given only once", context, param)
    existing(context, param, tuple(path for path in values if path != STDIN))
    return value


@contextlib.contextmanager
def stdin_spooled(paths: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """``paths`` with ``-`` replaced by a private temp file holding all of standard input.

    The log readers need a file they can seek in and reopen, so stdin is copied there in
    1 MiB chunks (memory stays small on any input) and the file is removed afterwards.
    Reports and error messages name it ``-`` (:func:`stdin_name`).
    """
    global _stdin_alias
    if STDIN not in paths:
        yield paths
        return
    # only when stdin is read: off every command's cold start (shutil imports fnmatch)
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="dsh-store-stdin-")
    spooled = os.path.join(directory, "stdin.jsonl")
    try:
        with open(spooled, "xb") as copy:
            shutil.copyfileobj(sys.stdin.buffer, copy, _STDIN_CHUNK)
        _stdin_alias = (spooled, STDIN)
        yield tuple(spooled if path == STDIN else path for path in paths)
    finally:
        _stdin_alias = None
        shutil.rmtree(directory, ignore_errors=True)


def stdin_name(text: str) -> str:
    """``text`` with the spooled stdin file's path spelled ``-`` (unchanged otherwise)."""
    if _stdin_alias is None:
        return text
    spooled, name = _stdin_alias
    return text.replace(spooled, name)


def is_store_url(value: str) -> bool:
    """Whether a PATH argument is a PostgreSQL store URL (``postgresql://``, ``postgres://``)."""
    # when a command runs, not for `dsh-store --help`
    from ..postgres.url import is_postgres_url

    return is_postgres_url(value)


def url_runs(paths: tuple[str, ...]) -> list[tuple[bool, tuple[str, ...]]]:
    """``paths`` cut into runs in their order: ``(True, (url,))`` for each store URL,
    ``(False, (path, ...))`` for each stretch of paths between them."""
    runs: list[tuple[bool, tuple[str, ...]]] = []
    for path in paths:
        if is_store_url(path):
            runs.append((True, (path,)))
        elif runs and not runs[-1][0]:
            runs[-1] = (False, (*runs[-1][1], path))
        else:
            runs.append((False, (path,)))
    return runs


def existing(context: click.Context, param: click.Parameter, value: Any) -> Any:
    """Require every PATH to exist as a name (a broken symlink is reported, not rejected).

    Only a name that is really absent is a usage error: one that cannot be looked at
    (permission denied) goes on, so the command reports it as unreadable with the rest.
    A PostgreSQL store URL is not a name on disk: it is passed on as it is.
    """
    values = value if isinstance(value, tuple) else (value,)
    for path in values:
        if path is None or is_store_url(path):
            continue
        try:
            os.lstat(path)
        except FileNotFoundError:
            raise click.BadParameter(f"{printable(path)} does not exist", context, param) from None
        except OSError:
            pass
    return value


def session_of_store(path: str, session: str | None) -> bool:
    """Whether ``inspect``, ``cat`` or ``export`` reads session ``session`` of a store URL
    (True) or the log at ``path`` (False); a missing or misplaced ``--session`` is a usage
    error. The URL is never repeated in the message (it may hold a password)."""
    if is_store_url(path):
        if session is None:
            raise click.UsageError(
                "a store URL holds many sessions: name one with --session ID "
                "(dsh-store list URL lists them)"
            )
        return True
    if session is not None:
        raise click.UsageError(
            "--session names a session of a PostgreSQL store URL; for a JSONL store pass "
            "the session directory or its .jsonl file instead"
        )
    return False


SESSION = click.option(
    "--session",
    "session",
    metavar="ID",
    help="With a postgresql:// store URL as PATH: the session to read.",
)
"""``--session ID`` of ``inspect``, ``cat`` and ``export``."""


def one_log(path: str) -> str:
    """The log ``inspect`` and ``cat`` read for PATH (see :func:`dsh_store.summary.one_log_file`).

    A directory that is not a session directory is a usage error: one line, exit 2.
    """
    # imported when the command runs: off `dsh-store --help`'s cold start
    from ..summary import NotASessionDirectoryError, one_log_file

    try:
        return one_log_file(path)
    except NotASessionDirectoryError as error:
        fail(str(error), EXIT_USAGE)


# readable=False: an unreadable file is the command's finding to report, not a usage error.
PATHS = click.argument(
    "paths", nargs=-1, required=True, type=click.Path(readable=False), callback=existing
)
"""The PATH... argument of verify, migrate and repair: a tuple of ``str``, each existing."""

PATHS_OR_STDIN = click.argument(
    "paths",
    nargs=-1,
    required=True,
    type=click.Path(readable=False, allow_dash=True),
    callback=existing_or_stdin,
)
"""PATH... where ``-`` (once) is standard input: ``verify``'s argument."""

QUIET = click.option(
    "--quiet", "-q", is_flag=True, help="Print only the failing files and the summary."
)
VERBOSE = click.option("--verbose", "-v", is_flag=True, help="Add detail to each finding.")


class JobCount(click.ParamType):  # type: ignore[type-arg]
    """``--jobs``: an integer from 1 to :data:`MAX_JOBS`, or ``auto`` (the usable CPUs)."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The number of worker processes ``value`` asks for."""
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lower() == "auto":
            return min(MAX_JOBS, usable_cpus())
        else:
            try:
                number = int(str(value))
            except ValueError:
                self.fail(f"{value!r} is neither a whole number nor 'auto'", param, ctx)
        if not 1 <= number <= MAX_JOBS:
            self.fail(f"{number} is not in the range 1 to {MAX_JOBS} (or 'auto')", param, ctx)
        return number


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


JOBS = click.option(
    "--jobs",
    "-j",
    type=JobCount(),
    default=1,
    show_default=True,
    help=f"Worker processes for multi-file work: 1 to {MAX_JOBS}, or auto (one per usable CPU).",
)


_verdict = EXIT_OK


def set_verdict(code: int) -> None:
    """Record the exit code a command has decided before it prints its results.

    If the reader of stdout goes away while they are printed (``verify ... | head``), the
    command still exits with this code instead of 0, so a pipe never hides a failure.
    """
    global _verdict
    _verdict = code


def fail(message: str, code: int = EXIT_FINDINGS) -> NoReturn:
    """Print ``error: MESSAGE`` (one line, control characters escaped) on stderr and exit.

    Under ``--json`` the error is also printed on stdout as the JSON error document
    (:func:`error_document`), so a consumer parsing stdout always gets JSON.
    """
    # Escaped before the whitespace is collapsed: a newline in a name stays visible.
    line = " ".join(printable(stdin_name(message)).split())
    if jsonl_requested():
        echo_json_line(error_document(line, code))
    elif json_requested():
        echo_json(error_document(line, code))
    click.echo(f"error: {line}", err=True)
    sys.exit(code)


def error_document(message: str, code: int) -> dict[str, Any]:
    """The ``--json`` document of a command that failed (docs/schemas/error.schema.json)."""
    kind = {EXIT_USAGE: "usage", EXIT_INTERRUPTED: "interrupted"}.get(code, "error")
    return {
        "schema": JSON_SCHEMA_VERSION,
        "error": {"kind": kind, "exitCode": code, "message": message},
    }


def json_requested(args: Iterable[str] | None = None) -> bool:
    """Whether the running command was asked for JSON output.

    With ``args`` (a command line not parsed yet): whether it holds ``--json`` or
    ``--format json``. Without: whether the current command's parsed options say so.
    """
    if args is not None:
        words = list(args)
        if "--" in words:
            words = words[: words.index("--")]
        return (
            "--json" in words
            or "--format=json" in words
            or "--format=jsonl" in words
            or any(
                pair in (("--format", "json"), ("--format", "jsonl"))
                for pair in itertools.pairwise(words)
            )
        )
    context = click.get_current_context(silent=True)
    if context is None:
        return False
    return bool(context.params.get("as_json")) or context.params.get("output_format") in (
        "json",
        "jsonl",
    )


def jsonl_requested(args: Iterable[str] | None = None) -> bool:
    """Whether the running command (or the unparsed ``args``) asked for ``--format jsonl``."""
    if args is not None:
        words = list(args)
        if "--" in words:
            words = words[: words.index("--")]
        return "--format=jsonl" in words or any(
            pair == ("--format", "jsonl") for pair in itertools.pairwise(words)
        )
    context = click.get_current_context(silent=True)
    return context is not None and context.params.get("output_format") == "jsonl"


def envelope(key: str, items: list[Any], summary: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The one ``--json`` shape: ``{"schema": N, KEY: [...], ..., "summary": {...}}``."""
    return {"schema": JSON_SCHEMA_VERSION, key: items, **extra, "summary": summary}


def count_by(items: Iterable[dict[str, Any]], key: str) -> dict[str, int]:
    """``{value: count}`` of ``item[key]`` over ``items``, in first-seen order."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item[key]] = counts.get(item[key], 0) + 1
    return counts


def _debug() -> bool:
    context = click.get_current_context(silent=True)
    root = context.find_root() if context is not None else None
    return bool(root is not None and isinstance(root.obj, dict) and root.obj.get("debug"))


def _print_traceback_if_debugging() -> None:
    if _debug():
        import traceback  # only on failure: keeps it off the cold start

        traceback.print_exc()


def guarded(command: F) -> F:
    """Turn every failure into one clear line on stderr; ``--debug`` adds the traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            fail("interrupted; no file was left half-written", EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (``dsh-store cat ... | head``): not an error in itself,
            # but a verdict reached before the output was cut still decides the exit code.
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the exit flush
            sys.exit(_verdict)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except (DshStoreError, OSError) as error:
            _print_traceback_if_debugging()
            fail(_os_message(error) if _is_plain_os_error(error) else command_message(error))
        except Exception as error:
            _print_traceback_if_debugging()
            fail(
                f"unexpected {type(error).__name__}: {error} (this is a bug; rerun with "
                "--debug for the traceback and report it)"
            )

    return wrapper  # type: ignore[return-value]


def command_message(error: BaseException) -> str:
    """A library error's message as a command reports it (see ``bulk.command_message``)."""
    # only when a command fails: bulk off the read commands' cold start
    from ..bulk import command_message as render

    return render(error)


def _is_plain_os_error(error: Exception) -> bool:
    return isinstance(error, OSError) and not isinstance(error, DshStoreError)


def _os_message(error: BaseException) -> str:
    assert isinstance(error, OSError)
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


COLOR_CHOICES = ("auto", "always", "never")


def colour_wanted(choice: str = "auto") -> bool:
    """Whether output gets ANSI colour, as pytest decides it.

    ``--color always`` / ``never`` win; with ``auto``, ``NO_COLOR`` (set to anything)
    turns colour off, else ``FORCE_COLOR`` (set to anything) turns it on, else stdout
    being a terminal decides.
    """
    if choice != "auto":
        return choice == "always"
    if "NO_COLOR" in os.environ:
        return False
    if "FORCE_COLOR" in os.environ:
        return True
    return sys.stdout.isatty()


def apply_colour(context: click.Context, choice: str) -> None:
    """Record the colour decision on ``context`` and its parents (click.echo reads it:
    it keeps ANSI codes on a pipe only when the context says colour)."""
    wanted = colour_wanted(choice)
    node: click.Context | None = context
    while node is not None:
        node.color = wanted
        if isinstance(node.obj, dict):
            node.obj["color"] = wanted
        node = node.parent


def _plain() -> bool:
    """No colour unless :func:`colour_wanted` said so for this command."""
    context = click.get_current_context(silent=True)
    root = context.find_root() if context is not None else None
    if root is not None and isinstance(root.obj, dict) and "color" in root.obj:
        return not root.obj["color"]
    return not colour_wanted()


def style(text: str, **styles: Any) -> str:
    """``click.style`` when colour is wanted (:func:`colour_wanted`), else the text unchanged."""
    return text if _plain() else click.style(text, **styles)


def _set_debug(context: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        root = context.find_root()
        if not isinstance(root.obj, dict):
            root.obj = {}
        root.obj["debug"] = True


def _set_colour(context: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        apply_colour(context, value)


DEBUG = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=_set_debug,
    help="Show the full traceback of an unexpected error.",
)
COLOR = click.option(
    "--color",
    type=click.Choice(COLOR_CHOICES),
    expose_value=False,
    callback=_set_colour,
    help="Colour the output: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces), "
    "always or never.",
)


def common_options(command: F) -> F:
    """``--debug`` and ``--color``, accepted by every subcommand as by the group."""
    return DEBUG(COLOR(command))


def progress(label: str) -> Callable[[Iterable[R], int], Iterable[R]]:
    """A stderr progress bar for more than a few files, only when stderr is a terminal."""
    no_emit: Callable[[R], None] | None = None
    return streaming(label, no_emit)


def streaming(
    label: str, emit: Callable[[R], None] | None
) -> Callable[[Iterable[R], int], Iterable[R]]:
    """A library ``progress`` hook that hands each result to ``emit`` as it arrives.

    Results arrive in input order as soon as every one before them is done
    (:func:`dsh_store.verify.iter_files`). A stderr progress bar runs beside them for more
    than a few files when stderr is a terminal; it is wiped before each line ``emit``
    prints. On Ctrl-C the results finished by then are still emitted (the interrupt is
    thrown into the stream, which yields them) before the interrupt goes on.
    """

    def wrap(items: Iterable[R], length: int) -> Iterable[R]:
        show_bar = length > _PROGRESS_MIN_FILES and sys.stderr.isatty()
        if emit is None and not show_bar:
            return items
        return _streamed(items, length, label, emit, show_bar)

    return wrap


def _streamed(
    items: Iterable[R],
    length: int,
    label: str,
    emit: Callable[[R], None] | None,
    show_bar: bool,
) -> Iterator[R]:
    iterator = iter(items)
    bar = click.progressbar(length=length, label=label, file=sys.stderr) if show_bar else None

    def deliver(item: R) -> None:
        if emit is not None:
            if bar is not None:
                sys.stderr.write("\r\x1b[2K")  # the bar's line, so the result reads clean
                sys.stderr.flush()
            emit(item)
        if bar is not None:
            bar.update(1)

    try:
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                return
            try:
                # A result is printed whole or the interrupt waits for it: cut between
                # the stream's work and its line, a file would change unreported.
                with HeldInterrupt() as held:
                    deliver(item)
                if held.pending:
                    raise KeyboardInterrupt
                yield item
            except KeyboardInterrupt:
                # Interrupted here, not in the stream: let the stream yield what it has done.
                throw = getattr(iterator, "throw", None)
                if throw is None:
                    raise
                try:
                    item = throw(KeyboardInterrupt)
                    while True:
                        deliver(item)
                        item = next(iterator)
                except StopIteration:
                    pass
                raise
    finally:
        if bar is not None:
            bar.render_finish()


class Output:
    """Where a command's results go: stdout, or nothing once its reader has gone away.

    When the reader of stdout leaves (``verify ... | head``), the command still works
    every file and exits with the verdict of them all; only the printing stops.
    """

    def __init__(self, *, err: bool = False) -> None:
        self.err = err
        self.closed = False

    def echo(self, text: str) -> None:
        """Print one result, flushed at once (a pipe's reader sees it when it is known)."""
        if self.closed:
            return
        try:
            click.echo(text, err=self.err)
            (sys.stderr if self.err else sys.stdout).flush()
        except BrokenPipeError:
            self.closed = True
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the exit flush


def echo_json_line(value: Any, out: Output | None = None) -> None:
    """One compact JSON object on one line (``--format jsonl``), escaped as :func:`echo_json`."""
    text = escape_json_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    if out is None:
        click.echo(text)
    else:
        out.echo(text)


STDOUT = "-"
"""The ``--output`` that means standard output."""

OUTPUT_FORMAT = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "jsonl"]),
    default="text",
    show_default=True,
    help="Readable text, one JSON object, or one JSON object per line as each file is done.",
)
"""``--format`` of migrate and repair (verify's adds ``github``)."""


def output_choice(as_json: bool, output_format: str, *, quiet: bool, verbose: bool) -> str:
    """The output format asked for (``--json`` is ``--format json``); a conflict is a usage
    error."""
    context = click.get_current_context()
    explicit = context.get_parameter_source("output_format") not in (
        click.core.ParameterSource.DEFAULT,
        None,
    )
    if as_json and explicit and output_format != "json":
        raise click.UsageError(f"--json and --format {output_format} ask for two formats; pick one")
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose contradict each other; pick one")
    return "json" if as_json else output_format


@contextlib.contextmanager
def stdout_spool(wanted: bool, name: str = "stdout.jsonl") -> Iterator[str | None]:
    """A path (not yet created) in a private temp directory for ``--output -``, else None.

    The command publishes there as it would to any ``--output`` (complete, or not at all)
    and copies the file to stdout afterwards (:func:`copy_to_stdout`), so a failed run
    never leaves half a log on stdout. The directory is removed afterwards. ``name`` is
    the file's name (its suffix chooses the encoding a migration writes).
    """
    if not wanted:
        yield None
        return
    # only for `--output -`: off every command's cold start (shutil imports fnmatch)
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="dsh-store-stdout-")
    try:
        yield os.path.join(directory, name)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def copy_to_stdout(path: str) -> None:
    """Copy the file at ``path`` to stdout's bytes, 1 MiB at a time."""
    import shutil  # only for `--output -`, as above

    sys.stdout.flush()
    with open(path, "rb") as source:
        shutil.copyfileobj(source, sys.stdout.buffer, _STDIN_CHUNK)
    sys.stdout.buffer.flush()


def json_text(value: Any) -> str:
    """``value`` as :func:`echo_json` prints it."""
    return escape_json_text(json.dumps(value, indent=2, ensure_ascii=False))


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON, non-ASCII characters kept as they are.

    DEL and the C1 controls, which a JSON encoder leaves raw, are written as ``\\u00NN``
    escapes (the same JSON value), so no string reaches a terminal as a control sequence.
    """
    click.echo(escape_json_text(json.dumps(value, indent=2, ensure_ascii=False)))
