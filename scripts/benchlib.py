"""Shared helpers for scripts/bench.py groups: the event mix, timing and ratio rows."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LIMITS_PATH = REPO.parent / "shared" / "bench" / "limits.py"


def load_limits() -> ModuleType:
    """Import ``../shared/bench/limits.py`` (the baselines and the realistic event mix)."""
    spec = importlib.util.spec_from_file_location("dsh_bench_limits", LIMITS_PATH)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {LIMITS_PATH}; run from a checkout beside shared/")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def event_mix(turns: int = 100, seed: int = 1) -> list[dict[str, Any]]:
    """The realistic v4 event mix of limits.py (100 turns ~ 2,000 events, ~5 KB average)."""
    mix: list[dict[str, Any]] = load_limits().make_mix(turns, seed)
    return mix


def median_seconds(run: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of ``repeats`` calls of ``run`` (one warm-up call first)."""
    run()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@dataclass
class Report:
    """Rows of ``name, value, unit, target`` printed as one table per group."""

    group: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def ratio(self, name: str, ours: float, baseline: float, target: str) -> float:
        """Record ``ours / baseline`` (both in the same unit) with its target."""
        value = ours / baseline
        self.rows.append((name, f"{value:.2f}x", target))
        return value

    def value(self, name: str, text: str, target: str = "") -> None:
        """Record a plain measured value."""
        self.rows.append((name, text, target))

    def print(self) -> None:
        """Print the table."""
        width = max((len(name) for name, _, _ in self.rows), default=10)
        print(f"\n## {self.group}")
        for name, value, target in self.rows:
            print(f"{name:<{width}}  {value:>12}  {target}")
