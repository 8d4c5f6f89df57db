"""Shared test configuration."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import pluggy
import pytest
from hypothesis import HealthCheck, settings

from dsh_store.jsonl import files
from tests.postgres.server import pg_url, postgres_missing_reason

__all__ = ["pg_url"]  # a fixture for every test folder (the contract suite included)

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

# Resources some tests need and a user's clone may lack: ``shared`` (the sibling ``../shared``
# folder), ``upstream`` (npm and DSH's released packages), ``postgres`` (a throwaway server).
# Such a test is marked ``@pytest.mark.requires("NAME")`` and skips with a one-line reason when
# the resource is absent. CI names the resources it provides in DSH_STORE_REQUIRE
# (comma-separated); there a skip of a test requiring one of them is a failure.
REQUIRED = frozenset(name for name in os.environ.get("DSH_STORE_REQUIRE", "").split(",") if name)


def shared_missing_reason() -> str | None:
    """Why tests that read ``../shared`` cannot run here, or ``None`` when it is present."""
    if SHARED.is_dir():
        return None
    return f"needs the shared reference folder beside the project ({SHARED}), absent here"


def shared_params(values: Callable[[], Sequence[Any]]) -> list[Any]:
    """Parameters read from ``../shared`` by ``values()``, or one placeholder when it is absent.

    For ``parametrize`` at collection time: without the folder nothing is read, and the one
    ``shared-absent`` case of the test (marked ``requires("shared")``) skips with the reason.
    """
    if shared_missing_reason() is not None:
        return [pytest.param(None, id="shared-absent")]
    return list(values())


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``requires("shared")`` when ``../shared`` is absent, and one
    marked ``requires("postgres")`` when no PostgreSQL server answers (see tests/postgres)."""
    needs = {marker.args[0] for marker in item.iter_markers("requires") if marker.args}
    if "shared" in needs:
        reason = shared_missing_reason()
        if reason is not None:
            pytest.skip(reason)
    if "postgres" in needs:
        reason = postgres_missing_reason()
        if reason is not None:
            pytest.skip(reason)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``requires`` marker; give Ctrl-C back to a suite started with it ignored."""
    config.addinivalue_line(
        "markers", "requires(resource): the test needs RESOURCE (shared, upstream, postgres)"
    )
    # A shell without job control starts `cmd &` with SIGINT ignored, and an ignored signal
    # stays ignored across exec: every command the Ctrl-C tests start would then run to the
    # end. A handler (unlike SIG_IGN) is reset to the default on exec, as a terminal has it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Turn the skip of a test whose required resource CI provides into a failure."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped:
        return
    for marker in item.iter_markers("requires"):
        resource = str(marker.args[0])
        if resource in REQUIRED:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            report.outcome = "failed"
            report.longrepr = (
                f"{resource!r} is required here (DSH_STORE_REQUIRE={','.join(sorted(REQUIRED))}) "
                f"but the test skipped: {reason}"
            )
            return


settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def fsynced_dirs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every directory fsynced through ``dsh_store.jsonl.files.fsync_dir`` from now on."""
    calls: list[Path] = []
    real = files.fsync_dir

    def recording(path: str | os.PathLike[str]) -> None:
        calls.append(Path(path))
        real(path)

    monkeypatch.setattr(files, "fsync_dir", recording)
    return calls
