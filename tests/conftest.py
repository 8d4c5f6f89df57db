"""Shared test configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from dsh_store.jsonl import files

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

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
