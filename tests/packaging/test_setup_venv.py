"""``scripts/setup-venv``: rebuild for another interpreter, reinstall only when needed.

The script runs for real (bash) in a scratch checkout holding it and a ``pyproject.toml``;
the interpreters are small stand-ins that report a chosen identity, log how they are
called and pretend to install, so the decisions are observed without a package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

VENV_PYTHON = """#!/usr/bin/env bash
echo "venv-python $*" >>"{log}"
case "$1" in
    -c) if [[ "$2" == *cache_tag* ]]; then echo "{identity}"; else exec "{real}" "$@"; fi ;;
    -m) exit 0 ;;  # pip: pretend to install
esac
"""

BASE_PYTHON = """#!/usr/bin/env bash
echo "base-python $*" >>"{log}"
if [ "$1" = -c ]; then echo "{identity}"; exit 0; fi
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin"
    cp "{venv_python}" "$3/bin/python"
    chmod +x "$3/bin/python"
fi
"""


def _interpreter(tmp: Path, name: str, identity: str, log: Path) -> Path:
    """A base interpreter whose venvs report ``identity`` too."""
    venv_python = tmp / f"{name}-venv-python"
    venv_python.write_text(VENV_PYTHON.format(log=log, identity=identity, real=sys.executable))
    base = tmp / name
    base.write_text(BASE_PYTHON.format(log=log, identity=identity, venv_python=venv_python))
    base.chmod(0o755)
    return base


def _run(checkout: Path, python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(checkout / "scripts" / "setup-venv")],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_setup_venv_rebuilds_for_another_interpreter_and_installs_only_on_change(
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup-venv", checkout / "scripts" / "setup-venv")
    shutil.copyfile(REPO / "pyproject.toml", checkout / "pyproject.toml")
    log = tmp_path / "calls.log"
    py311 = _interpreter(tmp_path, "py311", "cpython-311 3.11.7 /opt/py311", log)
    py312 = _interpreter(tmp_path, "py312", "cpython-312 3.12.1 /opt/py312", log)

    def installs() -> int:
        return log.read_text().count("-m pip install --quiet -e .[test]") if log.exists() else 0

    _run(checkout, py311)
    assert installs() == 1
    again = _run(checkout, py311)
    assert installs() == 1, "an unchanged checkout was reinstalled"
    assert again.stderr == ""

    switched = _run(checkout, py312)
    assert "rebuilding it with" in switched.stderr
    assert log.read_text().count("base-python -m venv .venv") == 2
    assert installs() == 2
    assert (checkout / ".venv" / ".setup-stamp").read_text().startswith("cpython-312 3.12.1")
    _run(checkout, py312)
    assert installs() == 2

    with open(checkout / "pyproject.toml", "a") as handle:
        handle.write("\n# a changed dependency list\n")
    _run(checkout, py312)
    assert installs() == 3
