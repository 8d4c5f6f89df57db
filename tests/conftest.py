"""Shared test configuration."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
