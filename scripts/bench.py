"""Performance benchmarks, reported as ratios to baselines measured in the same run.

Usage: ``python scripts/bench.py GROUP...`` with GROUP in model, store, migrate, cli, zstd
or all. Each group lives in ``scripts/bench_<group>.py`` and exposes ``run(quick: bool)``.
With several groups each one runs in its own fresh interpreter, so that one group's
memory (e.g. a 500 MB restore) never shows up in another's peak-RSS figures, which read
``RUSAGE_CHILDREN`` (the largest child a process ever waited for). Nothing here asserts a
time: the tables go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

GROUPS = ("model", "store", "migrate", "cli", "zstd")


def main(argv: list[str]) -> int:
    """Run the named benchmark groups and print their ratio tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("groups", nargs="+", choices=(*GROUPS, "all"))
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller inputs")
    args = parser.parse_args(argv)
    selected = GROUPS if "all" in args.groups else tuple(dict.fromkeys(args.groups))
    if len(selected) > 1:
        status = 0
        for group in selected:
            command = [sys.executable, __file__, group, *(["--quick"] if args.quick else [])]
            status = max(status, subprocess.run(command, check=False).returncode)
        return status
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    module = importlib.import_module(f"bench_{selected[0]}")
    module.run(quick=args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
