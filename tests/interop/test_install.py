"""The installer's crash story: an install killed midway is never taken for a complete one.

The install is built in ``<cache>.tmp-*`` and renamed to ``<cache>`` only after it has been
checked, so a SIGKILL at any moment leaves either no cache (the next run installs again)
or a complete one. These tests install into their own cache directory (through the
registry, like the suite's install), kill one install with SIGKILL while npm runs, and
damage a complete cache.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.interop.upstream import PACKAGES, Upstream, install

pytestmark = pytest.mark.requires("upstream")

_INSTALL = "from tests.interop.upstream import install; install(); print('installed')"


def _installer(cache: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DSH_STORE_UPSTREAM_CACHE": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-c", _INSTALL],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_a_killed_install_leaves_no_cache_and_the_next_one_completes(
    upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "upstream"
    process = _installer(cache)
    deadline = time.monotonic() + 60
    # Wait until npm has started writing into the temp directory, then kill the whole
    # process group (the installer and npm) with SIGKILL.
    while time.monotonic() < deadline and not list(tmp_path.glob("upstream.tmp-*/node_modules")):
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert not cache.exists()
    assert list(tmp_path.glob("upstream.tmp-*"))  # the interrupted attempt, never renamed
    monkeypatch.setenv("DSH_STORE_UPSTREAM_CACHE", str(cache))
    installed = install()
    assert installed.cache == cache
    assert (cache / "install-complete.json").is_file()

    # A damaged complete cache is set aside and installed afresh.
    name = next(iter(PACKAGES))
    (installed.packages / name / "package.json").unlink()
    again = install()
    assert (again.packages / name / "package.json").is_file()
    assert (cache / "install-complete.json").is_file()
    # The damaged copy was set aside as a stale temp, which the same install removed.
    assert not list(tmp_path.glob("upstream.tmp-damaged-*"))
