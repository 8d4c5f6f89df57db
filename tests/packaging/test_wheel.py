"""The distribution ships ``migrations/`` only as ``dsh_store.migrations``.

Builds the wheel from this checkout, installs it into a fresh venv (no index access: the
runtime dependencies come from the running interpreter's site-packages via a .pth file)
and imports it there.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (built,) = out.glob("dsh_store-*.whl")
    return built


def test_wheel_contains_migrations_inside_the_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "dsh_store/migrations/__init__.py" in names
    assert "dsh_store/migrations/v0_to_v1.py" in names
    assert "dsh_store/migrations/v3_to_v4.py" in names
    assert "dsh_store/py.typed" in names
    assert not any(name.startswith("migrations/") for name in names)
    assert not any(name.startswith(("tests/", "scripts/", "fixtures/")) for name in names)


def test_wheel_imports_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Runtime dependencies (orjson, click, ...) from this interpreter, the package from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    zipfile.ZipFile(wheel).extractall(site)
    probe = (
        "import importlib.util, dsh_store, dsh_store.migrations as m;"
        "assert sorted(m.EDGES) == [0, 1, 2, 3];"
        "assert importlib.util.find_spec('migrations') is None;"
        "print(dsh_store.__file__)"
    )
    result = subprocess.run(
        [str(python), "-I", "-c", probe], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(site))
