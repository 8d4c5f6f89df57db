"""Integrity verification over files, session directories and store roots (DESIGN §6.3, §8).

Verification never writes: it runs the same scan, upgrade and validation as restore and
reports one classification per file plus every finding. Walking rules:

- a file given explicitly is checked as given, whatever its name;
- a directory is walked recursively without following symlinked directories; a
  symlinked file is checked only when it resolves inside the walked tree (a symlink
  loop resolves inside and is reported as unreadable);
- in a session directory only the newest generation is checked (``session.v4.jsonl``
  over ``session.v3.jsonl`` ... over ``session.jsonl``): older generations left beside
  a migrated log are its backups, not live logs;
- only names ending in ``.jsonl`` are logs, so temp files (``*.tmp``), torn-tail
  sidecars (``*.torn-<offset>``) and backups (``*.bak``) are skipped.

A publish temp left beside a reported log by an interrupted publish (see
:func:`dsh_store.jsonl.layout.temp_owner` for which log it belongs to) is reported as a
``leftover-temp`` finding of that log; it never changes the classification. A publish
temp that belongs to no log (a new session, fork, salvage or ``--output`` migration
killed before its first link) is an *orphan*: :func:`verify_tree` reports those found in
the walked directories beside the reports.

Paths are plain strings throughout (``os.path`` and ``os.scandir``, no :mod:`pathlib`,
which would cost ``dsh-store verify`` several milliseconds of start-up): a path given is
kept as spelled, a walked one is ``os.path.join(directory, name)``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from ._interrupt import HeldInterrupt
from ._output import JSON_SCHEMA_VERSION
from .binding import BINDING_RULE, check_binding, store_root_of
from .errors import DshStoreError, NoLogsError
from .jsonl import layout
from .jsonl.layout import clean_path as clean_path  # re-exported: verify.clean_path
from .jsonl.rows import Finding
from .jsonl.scan import LogScanner
from .jsonl.temps import TEMP_GRACE_S, LeftoverTemp, by_directory, leftover_temps, orphan_temps_in
from .restore import CLASSIFICATIONS, FileReport, examine

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = [
    "ENCODING_CONVERSION_RULE",
    "STORE_ENCODING_RULE",
    "TEMP_GRACE_S",
    "LeftoverTemp",
    "NoLogsError",
    "Progress",
    "VerifyResult",
    "by_directory",
    "clean_path",
    "collect_log_files",
    "counts_as_failure",
    "encoding_findings",
    "examine_file",
    "iter_files",
    "iter_log_files",
    "leftover_temp_finding",
    "leftover_temps",
    "map_files",
    "orphan_temp_finding",
    "orphan_temps_in",
    "summary_counts",
    "verify_json",
    "verify_path",
    "verify_paths",
    "verify_tree",
]

T = TypeVar("T")
R = TypeVar("R")

Progress = Callable[[Iterable[R], int], Iterable[R]]
"""Wraps the stream of per-file results (and knows their count), e.g. for a progress bar."""


def iter_log_files(
    path: str | os.PathLike[str], *, orphans: list[LeftoverTemp] | None = None
) -> Iterator[str]:
    """Every log file under ``path`` (see the module docstring for the rules), sorted.

    Paths are spelled as :class:`pathlib.PurePath` spells them (no ``.`` parts, no
    repeated or trailing separator): a ``path`` that is not a directory is yielded alone,
    files under a directory as ``os.path.join(directory, name)``. With ``orphans``, the
    orphan publish temps of each walked directory are appended to it on the way
    (:func:`orphan_temps_in`), so one walk finds both.
    """
    start = clean_path(path)
    if not os.path.isdir(start):
        yield start
        return
    root = os.path.realpath(start)
    # A directory that cannot be listed is yielded itself, so that it is reported (as
    # unreadable) instead of its logs going unchecked without a word.
    unlistable: list[OSError] = []
    for directory, subdirs, files in os.walk(start, followlinks=False, onerror=unlistable.append):
        yield from _drain_unlistable(unlistable)
        subdirs.sort()
        if orphans is not None:
            orphans.extend(orphan_temps_in(directory, files))
        logs = sorted(name for name in files if name.endswith((".jsonl", ".jsonl.zstd")))
        generations = [name for name in logs if layout.generation_version(name) is not None]
        newest = max(generations, key=lambda n: layout.generation_version(n) or 0, default=None)
        for name in logs:
            if name in generations and name != newest:
                continue
            candidate = clean_path(os.path.join(directory, name))  # "./x" is spelled "x"
            # realpath never raises (a loop stays inside), unlike Path.resolve.
            if os.path.islink(candidate) and not _inside(os.path.realpath(candidate), root):
                continue
            yield candidate
    yield from _drain_unlistable(unlistable)


def _drain_unlistable(errors: list[OSError]) -> Iterator[str]:
    while errors:
        error = errors.pop(0)
        if error.filename is not None:
            yield clean_path(error.filename)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def collect_log_files(
    paths: Sequence[str | os.PathLike[str]], *, orphans: list[LeftoverTemp] | None = None
) -> list[str]:
    """All log files under ``paths`` in argument order, each once (spelled as
    :func:`iter_log_files` spells them, so ``x`` and ``./x`` count once).

    With ``orphans``, the orphan publish temps under ``paths`` are appended to it (each
    once), and a directory holding orphans but no log is accepted.

    :raises NoLogsError: one of ``paths`` is a directory holding no log (nor, when
        ``orphans`` is given, an orphan temp).
    """
    seen: set[str] = set()
    files: list[str] = []
    orphan_paths = {temp.path for temp in orphans} if orphans is not None else set()
    for path in paths:
        found_orphans: list[LeftoverTemp] | None = [] if orphans is not None else None
        found = list(iter_log_files(path, orphans=found_orphans))
        if found_orphans and orphans is not None:
            for temp in found_orphans:
                if temp.path not in orphan_paths:
                    orphan_paths.add(temp.path)
                    orphans.append(temp)
        if not found and not found_orphans:
            raise NoLogsError(os.fspath(path))
        for file in found:
            if file not in seen:
                seen.add(file)
                files.append(file)
    return files


def map_files(
    function: Callable[[T], R],
    items: Sequence[T],
    *,
    jobs: int = 1,
    progress: Progress[R] | None = None,
    finish_current: bool = False,
) -> list[R]:
    """``[function(item) for item in items]``, in order, on ``jobs`` worker processes.

    Processes, not threads: the work is CPU-bound JSON parsing and validation. With
    ``jobs > 1``, ``function`` and the items must be picklable (module-level functions).
    ``progress`` sees each result as soon as it and every one before it are done
    (:func:`iter_files`, which also says what ``finish_current`` does on Ctrl-C), so it can
    print results while later files are still worked on.
    """
    results: Iterable[R] = iter_files(function, items, jobs=jobs, finish_current=finish_current)
    if progress is not None:
        results = progress(results, len(items))
    return list(results)


def iter_files(
    function: Callable[[T], R],
    items: Sequence[T],
    *,
    jobs: int = 1,
    finish_current: bool = False,
) -> Iterator[R]:
    """``function(item)`` for each item, yielded in input order as soon as it is known.

    With ``jobs > 1`` the items run on worker processes; a result that finishes early waits
    only for the ones before it. On Ctrl-C (SIGINT, a :exc:`KeyboardInterrupt` here or one
    thrown in at a ``yield``) no further item is started, and every result finished by then
    is still yielded, in input order (a gap where an item never ran), before the interrupt
    is raised again: a caller that prints what it gets has printed every item done.

    The workers ignore SIGINT, so the items they are running finish first; in the main
    thread the parent holds a first SIGINT and takes it between results (within 50 ms while
    it waits for one), so none is lost on its way to the caller. In this process
    (``jobs == 1``) the interrupt lands inside the running item, unless ``finish_current``:
    then, in the main thread, a first SIGINT is held until the item returns and its result
    has been taken by the caller, and only then raised. With either hold a second SIGINT
    interrupts at once. An item that writes one file atomically is so either reported or
    not done.
    """
    if jobs <= 1 or len(items) <= 1:
        if not finish_current:
            for item in items:
                yield function(item)
            return
        # Held across each yield too: a first SIGINT landing after an item returned but
        # before its consumer took the result (a few bytecodes) would drop that result.
        with HeldInterrupt() as held:
            for item in items:
                result = function(item)
                yield result
                if held.pending:
                    raise KeyboardInterrupt
        return
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=min(jobs, len(items)), initializer=_ignore_sigint)
    futures = []
    delivered = 0
    # In the main thread a first SIGINT is only noted, and taken at the points below, so
    # no result is lost between its future and its consumer; a second one is at once.
    with HeldInterrupt() as held:
        try:
            futures = [pool.submit(function, item) for item in items]
            for future in futures:
                result = _result_unless_interrupted(future, held)
                delivered += 1
                yield result
                if held.pending:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            pool.shutdown(wait=True, cancel_futures=True)
            for future in futures[delivered:]:
                if future.done() and not future.cancelled() and future.exception() is None:
                    yield future.result()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


_POLL_S = 0.05  # how soon a held Ctrl-C is taken while waiting for a worker's result


def _result_unless_interrupted(future: Future[R], held: HeldInterrupt) -> R:
    """``future.result()``, raising KeyboardInterrupt once a held SIGINT is pending."""
    from concurrent.futures import TimeoutError as FutureTimeout  # only with workers

    while True:
        if held.pending:
            raise KeyboardInterrupt
        try:
            return future.result(timeout=_POLL_S)
        except FutureTimeout:
            continue


def _ignore_sigint() -> None:
    """Worker initializer: Ctrl-C is the parent's to handle (see :func:`iter_files`)."""
    import signal  # in a worker process only

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def examine_file(path: str, *, lenient: bool = False) -> FileReport:
    """:func:`dsh_store.restore.examine`, with an unexpected failure naming the file.

    A directory here is one the walk could not list (:func:`iter_log_files`): it is
    reported ``not-a-session`` with an ``unreadable`` finding, since its logs went unchecked.
    """
    try:
        report = examine(path, lenient=lenient)
    except DshStoreError:
        raise
    except Exception as error:  # a library defect: say which file triggered it
        raise DshStoreError(
            f"{path}: verification failed unexpectedly ({type(error).__name__}: {error}); "
            "this is a bug in dsh-store, please report it with the file"
        ) from error
    if report.classification not in _UNBOUND:
        report = _with_binding(report)
    # Only a report that is not a session can be about a directory: files pay no stat.
    if report.classification == "not-a-session" and os.path.isdir(path):
        try:
            with os.scandir(path):
                pass
        except OSError as error:
            message = (
                f"cannot list this directory: {error.strerror or error}; the logs in it "
                "were not checked"
            )
            return FileReport(path, "not-a-session", None, None, (Finding("unreadable", message),))
    return report


# Classifications of files whose header names no session to bind (nothing to check).
_UNBOUND = frozenset({"not-a-session", "empty", "unsupported-version"})


def _with_binding(report: FileReport) -> FileReport:
    """``report``, made ``corrupt`` with an ``identity-binding`` finding when the log sits
    in a store (:func:`dsh_store.binding.store_root_of`) but its header's id and cwd derive
    another directory. Committed corruption found first keeps its own finding first."""
    if store_root_of(report.path) is None:
        return report  # a loose file: named by its path alone
    try:
        info = LogScanner(report.path).read_header()
    except (DshStoreError, OSError):
        return report  # the report already says what is wrong with the header
    misfiled = check_binding(report.path, None if info is None else info.value)
    if misfiled is None:
        return report
    finding = Finding(BINDING_RULE, f"misfiled log: {misfiled.message}", line=1, offset=0)
    return report._replace(classification="corrupt", findings=(*report.findings, finding))


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{int(seconds)} s"
    if seconds < 120 * 60:
        return f"{int(seconds // 60)} min"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def leftover_temp_finding(
    temp: LeftoverTemp, *, now: float | None = None, grace_s: float = TEMP_GRACE_S
) -> Finding:
    """The ``leftover-temp`` finding for one temp (no line, offset or seq)."""
    age = (time.time() if now is None else now) - temp.mtime
    name = os.path.basename(temp.path)
    if layout.is_repair_partial(name):
        return Finding("leftover-temp", _partial_message(name, temp, age, grace_s))
    if temp.linked:
        message = (
            f"{name}: a second name of this log ({temp.size} bytes, no space of its "
            "own) left by an interrupted publish; dsh-store repair deletes it"
        )
    elif age >= grace_s:
        message = (
            f"{name}: {temp.size} bytes left by an interrupted publish "
            f"{_age(age)} ago; dsh-store repair deletes it"
        )
    else:
        message = (
            f"{name}: {temp.size} bytes written {_age(age)} ago, perhaps by a "
            f"publish still running; dsh-store repair deletes it once it is "
            f"{_age(grace_s)} old"
        )
    return Finding("leftover-temp", message)


def orphan_temp_finding(
    temp: LeftoverTemp, *, now: float | None = None, grace_s: float = TEMP_GRACE_S
) -> Finding:
    """The ``leftover-temp`` finding for an orphan publish temp (one that belongs to no log)."""
    age = (time.time() if now is None else now) - temp.mtime
    name = os.path.basename(temp.path)
    final = layout.temp_final_name(name) or name
    if age >= grace_s:
        tail = "dsh-store repair deletes it"
    else:
        tail = (
            "perhaps still being written; dsh-store repair deletes it once it is "
            f"{_age(grace_s)} old"
        )
    if layout.is_repair_partial(name):
        message = (
            f"{name}: {temp.size} bytes left {_age(age)} ago by a repair of {final} stopped "
            f"while saving a torn tail; {final} no longer exists; {tail}"
        )
    else:
        message = (
            f"{name}: {temp.size} bytes left {_age(age)} ago by a publish of {final} killed "
            f"before its link; {final} was never created and nothing in the temp was "
            f"acknowledged; {tail}"
        )
    return Finding("leftover-temp", message)


def _partial_message(name: str, temp: LeftoverTemp, age: float, grace_s: float) -> str:
    """A repair's scratch copy of a torn tail: its bytes are in the log or in the sidecar."""
    if age >= grace_s:
        tail = "dsh-store repair deletes it"
    else:
        tail = (
            f"perhaps a repair still running; dsh-store repair deletes it once it is "
            f"{_age(grace_s)} old"
        )
    return (
        f"{name}: {temp.size} bytes left {_age(age)} ago by a repair stopped while saving a "
        f"torn tail (those bytes are still in the log, or already in its sidecar); {tail}"
    )


class VerifyResult(NamedTuple):
    """What :func:`verify_tree` found: one report per log, and the orphan publish temps."""

    reports: list[FileReport]
    orphans: list[LeftoverTemp]


def verify_tree(
    paths: Sequence[str | os.PathLike[str]],
    *,
    jobs: int = 1,
    progress: Progress[FileReport] | None = None,
    lenient: bool = False,
) -> VerifyResult:
    """Examine every log file under ``paths`` and find the orphan temps; never writes.

    ``reports`` are those of :func:`verify_paths`. ``orphans`` are the publish temps in the
    walked directories that belong to no log (:func:`orphan_temps_in`), in walk order; a
    directory holding only such temps is not a usage error.

    :raises NoLogsError: one of ``paths`` is a directory holding neither a log nor an
        orphan temp.
    """
    orphans: list[LeftoverTemp] = []
    files = collect_log_files(paths, orphans=orphans)
    return VerifyResult(_with_temps(files, jobs=jobs, progress=progress, lenient=lenient), orphans)


def verify_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    jobs: int = 1,
    progress: Progress[FileReport] | None = None,
    lenient: bool = False,
) -> list[FileReport]:
    """Examine every log file under ``paths``; never writes.

    One report per file of :func:`collect_log_files`, in that order, with that ``path``
    string. Each report ends with one ``leftover-temp`` finding per publish temp of its log
    (:func:`leftover_temps`); the classification does not depend on them.

    ``lenient`` reads older logs with the lenient opt-in of
    :func:`dsh_store.migrate.upgrade` (:func:`dsh_store.restore.examine`).

    :raises NoLogsError: one of ``paths`` is a directory holding no log.
    """
    return _with_temps(collect_log_files(paths), jobs=jobs, progress=progress, lenient=lenient)


def _with_temps(
    files: list[str], *, jobs: int, progress: Progress[FileReport] | None, lenient: bool = False
) -> list[FileReport]:
    examine_one = partial(examine_file, lenient=True) if lenient else examine_file
    temps = leftover_temps(files)
    encodings = encoding_findings(files)
    now = time.time()
    # The temps join each report as it arrives, so a progress hook sees the whole report.
    reports: Iterable[FileReport] = (
        report._replace(
            findings=report.findings
            + encodings.get(report.path, ())
            + tuple(leftover_temp_finding(temp, now=now) for temp in temps.get(report.path, ()))
        )
        if report.path in temps or report.path in encodings
        else report
        for report in iter_files(examine_one, files, jobs=jobs)
    )
    if progress is not None:
        reports = progress(reports, len(files))
    return list(reports)


STORE_ENCODING_RULE = "store-encoding"
"""Finding rule: a store log whose encoding is not its root's (docs/format.md §7.2)."""

ENCODING_CONVERSION_RULE = "encoding-conversion"
"""Finding rule: a session directory holding its log in both encodings (§7.4)."""


def encoding_findings(files: Iterable[str]) -> dict[str, tuple[Finding, ...]]:
    """The store logs among ``files`` that their root's encoding refuses, by path.

    A store root belongs to one encoding, that of its first session log in walk order
    (:func:`dsh_store.jsonl.layout.root_encoding`, the one ``JsonlStore`` detects): a log
    of the other encoding gets a ``store-encoding`` finding, and one with the other
    encoding's generation beside it (an interrupted ``migrate --encoding``) an
    ``encoding-conversion`` finding. A loose file gets neither. Only names are read.
    """
    roots: dict[str, str | None] = {}
    found: dict[str, tuple[Finding, ...]] = {}
    for path in files:
        location = store_root_of(path)
        if location is None:
            continue
        root = location[0]
        if root not in roots:
            roots[root] = layout.root_encoding(root)
        expected = roots[root]
        own = layout.encoding_of(os.path.basename(path))
        findings: list[Finding] = []
        if expected is not None and own != expected:
            findings.append(
                Finding(
                    STORE_ENCODING_RULE,
                    f"a {own} log in a {expected} store root ({root}: its first log is "
                    f"{expected}); a root belongs to one encoding: convert this log with "
                    f"`dsh-store migrate --encoding {expected} {path}`, or the root with "
                    f"`dsh-store migrate --encoding {own} {root}`",
                )
            )
        twin = layout.encoding_twin(path)
        if twin is not None:
            directory = os.path.dirname(path) or "."
            findings.append(
                Finding(
                    ENCODING_CONVERSION_RULE,
                    f"the session's v4 log is here in both encodings (also {twin}): an "
                    "encoding conversion stopped before it retired its source; finish it "
                    f"with `dsh-store migrate --encoding raw {directory}` (or zstd)",
                )
            )
        if findings:
            found[path] = tuple(findings)
    return found


def verify_path(
    path: str | os.PathLike[str], *, jobs: int = 1, lenient: bool = False
) -> list[FileReport]:
    """Examine one file, session directory or store root; never writes.

    :func:`verify_paths` for a single PATH: each report's ``path`` is a string.
    """
    return verify_paths([path], jobs=jobs, lenient=lenient)


def counts_as_failure(
    report: FileReport,
    *,
    strict: bool = False,
    require_current: bool = False,
    allow_repairable: bool = False,
) -> bool:
    """Whether ``report`` fails ``dsh-store verify`` under these options (DESIGN §8).

    ``ok`` passes (with ``strict``, only when it has no finding at all);
    ``needs-migration`` fails only with ``require_current`` (or, with ``strict``, when it
    has a finding besides its own); ``torn-tail`` and ``open-turn`` fail unless
    ``allow_repairable`` (``strict`` overrides it); everything else fails. A log its store
    root refuses (:func:`encoding_findings`) always fails.
    """
    kind = report.classification
    if any(finding.rule in _STORE_RULES for finding in report.findings):
        return True  # the store refuses to read it, whatever the file holds
    if kind == "ok":
        return strict and bool(report.findings)
    if kind == "needs-migration":
        return require_current or (strict and _has_extra_findings(report, {"needs-migration"}))
    if kind in ("torn-tail", "open-turn"):
        return not allow_repairable or strict
    return True


_STORE_RULES = frozenset({STORE_ENCODING_RULE, ENCODING_CONVERSION_RULE})


def _has_extra_findings(report: FileReport, expected: set[str]) -> bool:
    return any(finding.rule not in expected for finding in report.findings)


def summary_counts(reports: Iterable[FileReport]) -> dict[str, int]:
    """``{classification: count}`` over ``reports``, in precedence order."""
    counts = dict.fromkeys(CLASSIFICATIONS, 0)
    for report in reports:
        counts[report.classification] = counts.get(report.classification, 0) + 1
    return {kind: count for kind, count in counts.items() if count}


def verify_json(
    reports: Sequence[FileReport], orphans: Sequence[LeftoverTemp] = ()
) -> dict[str, object]:
    """The ``dsh-store verify --json`` document (docs/schemas/verify.schema.json)."""
    now = time.time()
    return {
        "schema": JSON_SCHEMA_VERSION,
        "files": [report.to_json() for report in reports],
        "orphanTemps": [
            {
                "path": temp.path,
                "bytes": temp.size,
                "ageSeconds": max(0, int(now - temp.mtime)),
                "message": orphan_temp_finding(temp, now=now).message,
            }
            for temp in orphans
        ],
        "summary": summary_counts(reports),
    }
