"""Integrity verification over files, session directories and store roots (DESIGN §6.3, §8).

Verification never writes: it runs the same scan, upgrade and validation as restore and
reports one classification per file plus every finding. Walking rules:

- a ``.jsonl`` file is checked as given;
- a directory is walked recursively without following symlinked directories; a
  symlinked file is checked only when it resolves inside the walked tree;
- in a session directory only the newest generation is checked (``session.v4.jsonl``
  over ``session.v3.jsonl`` ... over ``session.jsonl``): older generations left beside
  a migrated log are its backups, not live logs;
- temp files (``*.tmp``), torn-tail sidecars (``*.torn-<offset>``) and backups
  (``*.bak``) never end in ``.jsonl`` and are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .jsonl import layout
from .restore import FileReport, examine

__all__ = ["counts_as_failure", "iter_log_files", "verify_path", "verify_paths"]


def iter_log_files(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Every log file under ``path`` (see the module docstring for the rules), sorted."""
    start = Path(path)
    if not start.is_dir():
        yield start
        return
    root = start.resolve()
    for directory, subdirs, files in os.walk(start, followlinks=False):
        subdirs.sort()
        logs = sorted(name for name in files if name.endswith(".jsonl"))
        generations = [name for name in logs if layout.generation_version(name) is not None]
        newest = max(generations, key=lambda n: layout.generation_version(n) or 0, default=None)
        for name in logs:
            if name in generations and name != newest:
                continue
            candidate = Path(directory) / name
            if candidate.is_symlink() and not _inside(candidate.resolve(), root):
                continue
            yield candidate


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def verify_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    jobs: int = 1,
    progress: Callable[[Iterable[Path]], Iterable[Path]] | None = None,
) -> list[FileReport]:
    """Examine every log file under ``paths``; ``jobs > 1`` uses worker processes."""
    files = [file for path in paths for file in iter_log_files(path)]
    if jobs > 1 and len(files) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = pool.map(examine, files, chunksize=max(1, len(files) // (jobs * 4)))
            stream: Iterable[FileReport] = results
            return list(stream)
    iterable: Iterable[Path] = progress(files) if progress is not None else files
    return [examine(file) for file in iterable]


def verify_path(path: str | os.PathLike[str], *, jobs: int = 1) -> list[FileReport]:
    """Examine one file, session directory or store root; never writes."""
    return verify_paths([path], jobs=jobs)


def counts_as_failure(
    report: FileReport,
    *,
    strict: bool = False,
    require_current: bool = False,
    allow_repairable: bool = False,
) -> bool:
    """Whether ``report`` fails ``dsh-store verify`` under these options (DESIGN §8).

    ``ok`` passes (with ``strict``, only when it has no finding at all);
    ``needs-migration`` fails only with ``require_current``; ``torn-tail`` and
    ``open-turn`` fail unless ``allow_repairable``; everything else fails.
    """
    kind = report.classification
    if kind == "ok":
        return strict and bool(report.findings)
    if kind == "needs-migration":
        return require_current or (strict and _has_extra_findings(report, {"needs-migration"}))
    if kind in ("torn-tail", "open-turn"):
        return not allow_repairable or strict
    return True


def _has_extra_findings(report: FileReport, expected: set[str]) -> bool:
    return any(finding.rule not in expected for finding in report.findings)
