"""The command line's package layout: one module per command, each imported only when used.

Every check that asks which modules got imported runs in a fresh interpreter, since the
rest of the suite has long since loaded every command in this one.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.cli.conftest import run_script
from tests.conftest import REPO

COMMAND_MODULES = {
    "verify": "verify",
    "migrate": "migrate",
    "repair": "repair",
    "inspect": "inspect",
    "list": "listing",
    "cat": "cat",
    "demo": "demo",
    "export": "export",
    "pg": "pg",
}
# Library modules a verify run has no use for; they load only inside their commands.
OTHER_LIBRARY_MODULES = ("bulk", "summary", "demo", "store", "migrate", "export")


def _loaded_after(code: str) -> set[str]:
    """The ``dsh_store`` modules in ``sys.modules`` once ``code`` has run (or exited)."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(*sorted(m for m in sys.modules"
        " if m.startswith('dsh_store')), file=sys.stderr))\n" + code
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    return set(done.stderr.split())


def test_a_verify_run_imports_no_other_command() -> None:
    log = next(REPO.glob("fixtures/valid/*/expected.v4.jsonl"))
    loaded = _loaded_after(
        f"sys.argv = ['dsh-store', 'verify', {str(log)!r}]\n"
        "from dsh_store.cli import main\n"
        "main()\n"
    )
    assert "dsh_store.cli.verify" in loaded
    others = {f"dsh_store.cli.{module}" for module in COMMAND_MODULES.values()} - {
        "dsh_store.cli.verify"
    }
    assert not loaded & others
    assert not loaded & {f"dsh_store.{module}" for module in OTHER_LIBRARY_MODULES}


def test_listing_the_commands_imports_none_of_them() -> None:
    loaded = _loaded_after(
        "import click\n"
        "from dsh_store.cli import main\n"
        "print(*main.list_commands(click.Context(main)), file=sys.stderr)\n"
    )
    assert set(COMMAND_MODULES) <= loaded  # the names were printed
    assert not {name for name in loaded if name.startswith("dsh_store.cli.")}


def test_group_help_lists_every_command_in_order() -> None:
    done = run_script("--help")
    assert done.returncode == 0
    rows = done.stdout.split("Commands:\n", 1)[1].splitlines()
    names = [row.split()[0] for row in rows if row.strip()]
    assert names == sorted(COMMAND_MODULES)


def test_a_near_miss_still_suggests_the_command() -> None:
    done = run_script("li")
    assert done.returncode == 2
    assert "No such command 'li'. Did you mean 'list'?" in done.stderr


def test_every_package_directory_ships() -> None:
    """A subpackage missing from pyproject's explicit list would be left out of the wheel."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "dsh_store").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk <= listed
