"""Benchmarks of the ``dsh-store`` command line (``python scripts/bench.py cli``).

- cold start of ``dsh-store --help`` and of ``verify`` on one small file, as a ratio to
  ``python -c "import orjson, click"`` in the same venv (target <= 1.3x), measured twice:
  in the development venv (an editable install) and in a throwaway venv holding a regular
  ``pip install`` of the package, which is what users run. The editable install's import
  hook loads ``pathlib`` (and with it ``urllib.parse`` and ``ipaddress``) at interpreter
  start-up, so there the baseline already pays for modules ``verify`` needs anyway;
  the regular install is the stricter and the more honest figure. The CLI freezes its
  heap before exit (``dsh_store.cli.run``), so a third row compares ``verify`` with a
  baseline that does the same, which isolates the cost of our imports and of the check;
- ``verify`` of one large v4 log (500 MB, 50 MB with ``--quick``): wall time and the
  verifying process's peak RSS (target <= 150 MB).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from benchlib import REPO, Report, load_limits

MB = 1 << 20
SCRIPT = Path(sys.executable).with_name("dsh-store")


def _run(argv: Sequence[str]) -> tuple[float, int, int]:
    """Run ``argv`` to completion: (wall seconds, exit code, peak RSS in bytes)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, process.returncode, usage.ru_maxrss * 1024  # Linux reports KiB


def _alternating_medians(commands: Sequence[Sequence[str]], repeats: int) -> list[float]:
    """Median wall time of each command, run in turn ``repeats`` times (a, b, c, a, b, ...).

    Alternating keeps slow drifts of a shared machine out of the ratios: every command
    sees the same mix of quiet and busy moments.
    """
    for argv in commands:
        _run(argv)  # warm the page cache
    walls: list[list[float]] = [[] for _ in commands]
    for _ in range(repeats):
        for index, argv in enumerate(commands):
            walls[index].append(_run(argv)[0])
    return [statistics.median(samples) for samples in walls]


def write_log(path: Path, target_bytes: int) -> int:
    """Write a valid v4 log of about ``target_bytes`` from the benchmark event mix."""
    generator = load_limits().Gen(1)
    header = {
        "type": "session",
        "version": 4,
        "id": "bench-cli",
        "createdAt": 1_780_000_000_000,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    events = 0
    with open(path, "wb") as handle:
        handle.write(orjson.dumps(header) + b"\n")
        while handle.tell() < target_bytes:
            for event in generator.turn():
                handle.write(orjson.dumps(event) + b"\n")
                events += 1
    return events


def _byte_compile_package() -> None:
    """Write dsh_store's .pyc files, as ``pip install`` does for an installed package.

    The editable development install is never byte-compiled, and with
    ``PYTHONDONTWRITEBYTECODE`` set (as on the reference machine) every cold start would
    recompile the package from source, which no installed copy does; orjson and click, the
    baseline's imports, were byte-compiled when pip installed them.
    """
    package = Path(__file__).resolve().parent.parent / "dsh_store"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)


def _installed_venv(scratch: Path) -> Path | None:
    """A fresh venv with a regular (non-editable) ``pip install`` of this repository.

    Returns its ``bin`` directory, or None when the install fails (no package index).
    """
    venv = scratch / "installed-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(f"installed-venv rows skipped: pip install failed:\n{done.stderr}", file=sys.stderr)
        return None
    return venv / "bin"


def _cold_start_rows(report: Report, label: str, bin_dir: Path, small: Path, repeats: int) -> None:
    python, script = str(bin_dir / "python"), str(bin_dir / "dsh-store")
    baseline, help_time, verify_small, frozen_baseline = _alternating_medians(
        [
            [python, "-c", "import orjson, click"],
            [script, "--help"],
            [script, "verify", str(small)],
            [python, "-c", "import orjson, click, gc; gc.freeze()"],
        ],
        repeats,
    )
    report.value(
        f"{label}: baseline python -c 'import orjson, click'",
        f"{baseline * 1000:.0f} ms",
        f"median of {repeats} alternating cold starts",
    )
    imports = "python -c 'import orjson, click'"
    report.ratio(
        f"{label}: dsh-store --help (cold start)",
        help_time,
        baseline,
        "<= 1.3x",
        baseline_name=imports,
    )
    report.ratio(
        f"{label}: dsh-store verify small.jsonl (cold start)",
        verify_small,
        baseline,
        "<= 1.3x",
        baseline_name=imports,
    )
    # The CLI freezes the heap before exit (dsh_store.cli.run); the same exit given to the
    # baseline isolates what our imports and the check itself cost.
    report.ratio(
        f"{label}: verify ÷ baseline that also freezes before exit",
        verify_small,
        frozen_baseline,
        "reported",
        baseline_name=imports + " + gc.freeze()",
    )


def run(quick: bool) -> None:
    """Measure and print the cli table."""
    _byte_compile_package()
    report = Report("cli")
    repeats = 7 if quick else 25
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as scratch:
        small = Path(scratch) / "small.jsonl"
        write_log(small, 20_000)
        _cold_start_rows(report, "dev venv (editable)", SCRIPT.parent, small, repeats)
        installed = _installed_venv(Path(scratch))
        if installed is not None:
            _cold_start_rows(report, "installed wheel", installed, small, repeats)
        size = (50 if quick else 500) * MB
        big = Path(scratch) / "big.jsonl"
        events = write_log(big, size)
        elapsed, code, rss = _run([str(SCRIPT), "verify", str(big)])
        actual = big.stat().st_size
        report.value(
            f"verify {actual / MB:.0f} MB log ({events} events): wall",
            f"{elapsed:.1f} s",
            f"{actual / MB / elapsed:.0f} MB/s, exit {code}",
        )
        report.value(
            f"verify {actual / MB:.0f} MB log: peak RSS", f"{rss / MB:.0f} MB", "<= 150 MB"
        )
    report.print()
