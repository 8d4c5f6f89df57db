"""What a ``dsh-store verify`` run imports beyond click and orjson: no pathlib.

pathlib brings urllib.parse, ipaddress, fnmatch and ntpath along, several milliseconds of
a cold start that is benchmarked against ``import orjson, click`` alone. So the verify
path works on ``str`` paths (``FileReport.path``, ``iter_log_files``, ``leftover_temps``).

Each run happens in a fresh interpreter started with ``-S``: the editable install's ``.pth``
hook imports pathlib at start-up, which would hide any import the verify path makes.
``sys.path`` is then set by hand to the repository and this environment's site-packages.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO

V4_LOG = REPO / "fixtures" / "valid" / "v4-current" / "session.v4.jsonl"
# pathlib and what it imports; none of them is imported by click or orjson. And the
# migration chain, which a v4 log never needs (its import costs about 35 ms).
UNWANTED = ("pathlib", "urllib.parse", "ipaddress", "fnmatch", "ntpath", "dsh_store.migrations")


def _verify_in_bare_interpreter(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``dsh-store verify ARGS`` under ``python -S``; the UNWANTED modules it loaded."""
    return _run_in_bare_interpreter("verify", *args)


def _run_in_bare_interpreter(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``dsh-store ARGS`` under ``python -S``; the UNWANTED modules it loaded."""
    paths = sysconfig.get_paths()
    search = list(dict.fromkeys([str(REPO), paths["purelib"], paths["platlib"]]))
    probe = (
        "import sys\n"
        f"sys.path[:0] = {search!r}\n"
        f"sys.argv = ['dsh-store', *{list(args)!r}]\n"
        "from dsh_store.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    assert 'site' not in sys.modules, 'the site hook ran'\n"
        f"    loaded = [name for name in {UNWANTED!r} if name in sys.modules]\n"
        "    print('unwanted:', *loaded, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    marker = [line for line in done.stderr.splitlines() if line.startswith("unwanted:")]
    assert marker, done.stderr
    return done, set(marker[-1].split()[1:])


def test_the_bare_interpreter_has_no_pathlib_of_its_own() -> None:
    """The probe is meaningful: without the site hook, click and orjson load no pathlib."""
    paths = sysconfig.get_paths()
    search = [str(REPO), paths["purelib"], paths["platlib"]]
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            f"import sys; sys.path[:0] = {search!r}; import click, orjson, dsh_store; "
            f"print(*[name for name in {UNWANTED!r} if name in sys.modules])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == []


@pytest.mark.parametrize("extra", [[], ["--json"], ["--format", "github"]])
def test_verifying_a_file_imports_no_pathlib(extra: list[str]) -> None:
    done, unwanted = _verify_in_bare_interpreter(str(V4_LOG.relative_to(REPO)), *extra)
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout
    assert unwanted == set()


def test_verifying_a_store_tree_with_a_leftover_temp_imports_no_pathlib(tmp_path: Path) -> None:
    session = tmp_path / "--work-project--" / "fixture-session"  # where its header files it
    session.mkdir(parents=True)
    log = session / "session.v4.jsonl"
    shutil.copyfile(V4_LOG, log)
    shutil.copyfile(V4_LOG, session / "session.v4.jsonl.0123456789ab.tmp")
    done, unwanted = _verify_in_bare_interpreter(str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"{log}: ok" in done.stdout
    assert "leftover-temp" in done.stdout
    assert unwanted == set()


def test_paths_are_spelled_as_pathlib_spells_them() -> None:
    from pathlib import PurePosixPath

    from dsh_store.verify import clean_path

    for text in ("x", "./x", "a//b/", "/", "//a/./b", ".", "./", "../a/./b/..", "a/.hidden/."):
        expected = str(PurePosixPath(text))
        if text.startswith("//") and not text.startswith("///"):
            expected = "/" + expected.lstrip("/")  # pathlib keeps POSIX's special '//' root
        assert clean_path(text) == expected, text


def test_the_command_list_imports_no_pathlib() -> None:
    # ``--help`` loads every command module for its short help; they convert their path
    # arguments inside the command bodies, so listing them stays as cheap as verify.
    done, unwanted = _run_in_bare_interpreter("--help")
    assert done.returncode == 0, done.stderr
    assert "verify" in done.stdout and "migrate" in done.stdout
    # click renders help at the terminal's width (shutil.get_terminal_size), and shutil
    # imports fnmatch: that one is click's cost of printing help, not ours.
    assert unwanted <= {"fnmatch"}
    assert "pathlib" not in unwanted
