"""What every ``dsh-store`` command shares: exit codes, error guarding, output helpers.

Only click, :mod:`dsh_store._output` and :mod:`dsh_store.errors` are imported here, so a
command module that imports this stays cheap to load; not even :mod:`pathlib` (``dsh-store
verify`` has no use for it): :data:`PATHS` yields strings, and a command wanting Paths
converts them.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar

import click

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


def existing(context: click.Context, param: click.Parameter, value: Any) -> Any:
    """Require every PATH to exist as a name (a broken symlink is reported, not rejected).

    Only a name that is really absent is a usage error: one that cannot be looked at
    (permission denied) goes on, so the command reports it as unreadable with the rest.
    """
    values = value if isinstance(value, tuple) else (value,)
    for path in values:
        if path is None:
            continue
        try:
            os.lstat(path)
        except FileNotFoundError:
            raise click.BadParameter(f"{printable(path)} does not exist", context, param) from None
        except OSError:
            pass
    return value


def one_log(path: str) -> str:
    """The log ``inspect`` and ``cat`` read for PATH (see :func:`dsh_store.summary.one_log_file`).

    A directory that is not a session directory is a usage error: one line, exit 2.
    """
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
    line = " ".join(printable(message).split())
    if json_requested():
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
            or any(pair == ("--format", "json") for pair in itertools.pairwise(words))
        )
    context = click.get_current_context(silent=True)
    if context is None:
        return False
    return bool(context.params.get("as_json")) or context.params.get("output_format") == "json"


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
    from ..bulk import command_message as render

    return render(error)


def _is_plain_os_error(error: Exception) -> bool:
    return isinstance(error, OSError) and not isinstance(error, DshStoreError)


def _os_message(error: BaseException) -> str:
    assert isinstance(error, OSError)
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


def _plain() -> bool:
    """No colour when NO_COLOR is set (any value) or stdout is not a terminal."""
    return "NO_COLOR" in os.environ or not sys.stdout.isatty()


def style(text: str, **styles: Any) -> str:
    """``click.style`` when stdout is a colour terminal, else the text unchanged."""
    return text if _plain() else click.style(text, **styles)


def progress(label: str) -> Callable[[Iterable[R], int], Iterable[R]]:
    """A stderr progress bar for more than a few files, only when stderr is a terminal."""

    def wrap(items: Iterable[R], length: int) -> Iterable[R]:
        if length <= _PROGRESS_MIN_FILES or not sys.stderr.isatty():
            return items
        return _bar(items, length, label)

    return wrap


def _bar(items: Iterable[R], length: int, label: str) -> Iterator[R]:
    with click.progressbar(items, length=length, label=label, file=sys.stderr) as bar:
        yield from bar


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON, non-ASCII characters kept as they are.

    DEL and the C1 controls, which a JSON encoder leaves raw, are written as ``\\u00NN``
    escapes (the same JSON value), so no string reaches a terminal as a control sequence.
    """
    click.echo(escape_json_text(json.dumps(value, indent=2, ensure_ascii=False)))
