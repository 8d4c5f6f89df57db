"""Performance benchmarks, reported as ratios to baselines measured in the same run.

Usage: ``python scripts/bench.py {model,store,migrate,cli,all}``. See docs/performance.md.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Run the named benchmark groups and print their ratios."""
    print("no benchmark groups yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
