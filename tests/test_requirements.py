"""The ``requires`` marker: a skipped test whose resource CI requires becomes a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PROBE = """
import pytest

@pytest.mark.requires({resource!r})
def test_needs_it():
    pytest.skip("resource absent")
"""

CONFTEST = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from tests.conftest import pytest_configure, pytest_runtest_makereport
"""


@pytest.mark.parametrize(
    ("required", "resource", "expected"),
    [
        ("shared", "shared", "1 failed"),
        ("shared,upstream", "upstream", "1 failed"),
        ("shared", "postgres", "1 skipped"),
        ("", "shared", "1 skipped"),
    ],
)
def test_only_a_required_resource_turns_a_skip_into_a_failure(
    tmp_path: Path, required: str, resource: str, expected: str
) -> None:
    """A skip fails exactly when its resource is named in DSH_STORE_REQUIRE."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probe.py").write_text(PROBE.format(resource=resource))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "addopts="],
        env={**os.environ, "DSH_STORE_REQUIRE": required},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert expected in proc.stdout, proc.stdout + proc.stderr
    if expected == "1 failed":
        assert "is required here" in proc.stdout
