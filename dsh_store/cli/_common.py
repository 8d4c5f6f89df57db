"""What every ``dsh-store`` command shares: exit codes, error guarding, output helpers.

Only click and :mod:`dsh_store.errors` are imported here, so a command module that
imports this stays cheap to load; not even :mod:`pathlib` (``dsh-store verify`` has no use
for it): :data:`PATHS` yields strings, and a command wanting Paths converts them.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from ..errors import DshStoreError

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

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
            raise click.BadParameter(f"{path} does not exist", context, param) from None
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
JOBS = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes for multi-file work.",
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
    """Print ``error: MESSAGE`` (whitespace collapsed to one line) on stderr and exit."""
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
            fail(_os_message(error) if _is_plain_os_error(error) else str(error))
        except Exception as error:
            _print_traceback_if_debugging()
            fail(
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
    """Print ``value`` as indented JSON, non-ASCII characters kept as they are."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))
