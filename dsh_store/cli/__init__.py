"""The ``dsh-store`` command line: a thin click layer over the library.

Each command parses arguments, calls one library function a user can call themselves
(:mod:`dsh_store.verify`, :mod:`dsh_store.bulk`, :mod:`dsh_store.summary`,
:mod:`dsh_store.demo`) and renders the result as text, JSON or GitHub annotations. Library
imports happen inside the commands so that ``dsh-store --help`` starts fast.

Every command lives in its own module here, imported only when that command runs (or
when the group's ``--help`` lists them): building all their click decorators on every
cold start costs more than a one-command run needs. Shared helpers are in ``_common``.

Errors reach the user as one line (``--debug`` shows the traceback). Ctrl-C stops the
command and never leaves a half-written file, because every write path publishes
atomically (temp file + fsync + link/rename, or a truncation to a committed prefix).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Mapping
from typing import Any

import click

from .. import __version__

# Command name -> (module in this package, attribute holding the click command).
_COMMANDS: Mapping[str, tuple[str, str]] = {
    "verify": ("verify", "verify"),
    "migrate": ("migrate", "migrate"),
    "repair": ("repair", "repair"),
    "inspect": ("inspect", "inspect"),
    "list": ("listing", "list_sessions"),
    "cat": ("cat", "cat"),
    "demo": ("demo", "demo"),
    "export": ("export", "export"),
    "copy": ("copying", "copy_sessions"),
    "pg": ("pg", "pg"),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported from their modules on first use.

    ``lazy_commands`` maps each command name to ``(module, attribute)`` within this
    package. Listing the names imports nothing; resolving a name imports only its module.
    """

    def __init__(
        self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, sorted as click's own groups list them."""
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command called ``cmd_name``, importing its module the first time."""
        command = self.commands.get(cmd_name)
        if command is not None or cmd_name not in self.lazy_commands:
            return command
        module_name, attribute = self.lazy_commands[cmd_name]
        # __import__ rather than importlib.import_module: only the former is reported by
        # ``python -X importtime``, which is how this lazy layout gets checked.
        __import__(f"{__name__}.{module_name}")
        module = sys.modules[f"{__name__}.{module_name}"]
        loaded = getattr(module, attribute)
        if not isinstance(loaded, click.Command):
            raise TypeError(f"{module.__name__}.{attribute} is not a click command")
        self.add_command(loaded, cmd_name)
        return loaded

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Resolve ``args[0]`` as click does; an unknown name first loads every command.

        Click suggests near misses ("Did you mean 'list'?") only among loaded commands,
        and the error path can afford importing them all.
        """
        if args and self.get_command(ctx, args[0]) is None:
            for name in self.lazy_commands:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; a usage error under ``--json`` is also a JSON document.

        Click prints the error its own way on stderr (exit 2; it quotes a bad path with
        its control characters escaped); a consumer reading stdout for JSON gets the error
        document of docs/schemas/error.schema.json there too.
        """
        # Click 8.2 moved the unparsed subcommand words to a private name (the public one
        # warns); 8.1 has only the public one.
        protected = vars(ctx).get("_protected_args", vars(ctx).get("protected_args", []))
        args = [*protected, *ctx.args]
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            # the command modules load it; a usage error may come before any of them
            from ._common import (
                echo_json,
                echo_json_line,
                error_document,
                json_requested,
                jsonl_requested,
            )

            if json_requested(args):
                message = " ".join(error.format_message().split())
                document = error_document(message, error.exit_code)
                (echo_json_line if jsonl_requested(args) else echo_json)(document)
            raise


@click.group(
    cls=LazyGroup,
    lazy_commands=_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="dsh-store")
@click.option("--debug", is_flag=True, help="Show the full traceback of an error.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the output: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces), "
    "always or never.",
)
@click.pass_context
def main(context: click.Context, debug: bool, color: str) -> None:
    """Verify, migrate, repair and inspect durable JSONL session logs.

    PATH arguments may be a store root, a session directory or a .jsonl file;
    directories are walked (symlinks are not followed out of the tree, and in a
    session directory only the newest generation is read). Where a store root is
    taken, a postgresql:// URL names a PostgreSQL store (its password is never
    printed).

    \b
    Exit codes: 0 success, 1 a failing file or a failed operation, 2 usage
    error, 130 interrupted. With --json (or --format jsonl), errors are JSON on
    stdout too. --debug and --color are accepted after any subcommand as well.

    \b
    Examples:
      dsh-store verify ~/.dsh/sessions
      dsh-store migrate ~/.dsh/sessions --check
      dsh-store demo
    """
    from ._common import apply_colour  # with a command module: not for `--version`

    context.obj = {"debug": debug}
    apply_colour(context, color)
    _escape_unencodable_output()


def _escape_unencodable_output() -> None:
    """Print what the terminal's encoding cannot hold as backslash escapes, not a crash.

    File names that are not valid UTF-8 reach Python as lone surrogates; a strict stream
    would raise on them, and a ``surrogateescape`` one (the C locale) would emit raw
    bytes that break ``--json``. ``\\udcff`` is readable text and a valid JSON escape.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) != "backslashreplace":
            reconfigure(errors="backslashreplace")


def run() -> None:
    """The console-script entry point: run :func:`main`, then let the process end fast.

    Everything the process imported lives until exit, so the interpreter's final
    collection walking those tens of thousands of objects finds nothing to free; it cost
    about a tenth of a short command's run. Freezing them first (:func:`gc.freeze`) skips
    that walk. Nothing else changes at exit: streams are flushed, atexit handlers and
    module teardown still run.
    """
    try:
        main()
    finally:
        gc.freeze()
