"""Multi-file migration and repair behind ``dsh-store migrate`` and ``repair``.

Each function walks its PATH arguments like :mod:`dsh_store.verify` does, handles every
file independently (one refusal never stops the others) and returns one plain result per
file. A *store file* is a generation file (``session.jsonl`` or ``session.vN.jsonl``)
that really lies in a store's session directory (:func:`store_root` gives the rule); any
other ``.jsonl`` is a *loose file*. ``repair --salvage`` takes exactly one file
(:func:`salvage_path`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .binding import BINDING_RULE, check_binding
from .children import store_location
from .children import store_root as store_root  # re-exported: bulk.store_root
from .errors import (
    CorruptLogError,
    DshStoreError,
    MigrationOptionsError,
    SessionLockedError,
    StorageError,
)
from .jsonl import layout
from .jsonl.rows import Finding, HeaderInfo
from .jsonl.scan import LogScanner, header_version
from .migrate import MigrationResult, classify_header, migrate_file
from .verify import LeftoverTemp, Progress, collect_log_files, map_files

if TYPE_CHECKING:
    from .repair import RepairPlan
    from .salvage import SalvagePlan

__all__ = [
    "MigrationOptionsError",
    "MigrationRequest",
    "RepairOutcome",
    "SalvageOutcome",
    "command_message",
    "is_store_file",
    "migrate_paths",
    "one_line",
    "repair_paths",
    "salvage_path",
    "store_root",
]


def is_store_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a store file (see :func:`store_root`), False for a loose file."""
    return store_location(Path(path)) is not None


class MigrationRequest:
    """How to migrate one file: where it goes and whether anything may be written.

    ``child_headers`` are the header rows of the sessions in the same store naming this
    one as parent (None for a loose file: unknown). ``loose`` says whether ``source`` is
    a loose file (None: decided by :func:`is_store_file` when the request runs).
    ``lenient`` asks for the lenient opt-in of the chain; ``encoding`` is
    :func:`~dsh_store.migrate.migrate_file`'s.
    """

    __slots__ = (
        "child_headers",
        "dry_run",
        "encoding",
        "in_place",
        "lenient",
        "loose",
        "output",
        "source",
    )

    def __init__(
        self,
        source: Path,
        output: Path | None,
        in_place: bool,
        dry_run: bool,
        child_headers: tuple[Mapping[str, Any], ...] | None = None,
        loose: bool | None = None,
        lenient: bool = False,
        encoding: str | None = None,
    ) -> None:
        self.source = source
        self.output = output
        self.in_place = in_place
        self.dry_run = dry_run
        self.child_headers = child_headers
        self.loose = loose
        self.lenient = lenient
        self.encoding = encoding

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            MigrationRequest,
            (
                self.source,
                self.output,
                self.in_place,
                self.dry_run,
                self.child_headers,
                self.loose,
                self.lenient,
                self.encoding,
            ),
        )


def migrate_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    output: str | os.PathLike[str] | None = None,
    in_place: bool = False,
    dry_run: bool = False,
    jobs: int = 1,
    progress: Progress[MigrationResult] | None = None,
    evidence_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
    encoding: str | None = None,
) -> list[MigrationResult]:
    """Migrate every log under ``paths`` to format 4; refusals are results, not errors.

    Store files (:func:`store_root`) publish ``session.v4.jsonl`` beside the untouched
    source (``in_place`` is for loose files only), or go to ``output``. An older loose
    file needs ``output`` (exactly one source) or ``in_place``, with ``dry_run`` too.
    ``dry_run`` runs the chain in memory, writes nothing and reports what the real run
    would: ``would-migrate`` for ``migrated``.

    Child-session evidence (it completes the v4 ``subagent/catalog``) comes from
    ``evidence_root`` when given (``--store-root``), else from a store file's own store,
    whatever the destination; a loose file without ``evidence_root`` has none.
    ``lenient`` is :func:`dsh_store.migrate.migrate_file`'s, and so is ``encoding``: store
    files are published (or re-encoded) beside themselves in it; a loose file of the other
    encoding needs ``output``, named for it.

    :raises MigrationOptionsError: conflicting options, or a loose file with nowhere to go.
    :raises NoLogsError: a PATH holds no log.
    """
    if output is not None and in_place:
        raise MigrationOptionsError("use either --output or --in-place, not both")
    files = [Path(file) for file in collect_log_files(paths)]
    if output is not None and len(files) != 1:
        raise MigrationOptionsError(
            f"--output takes exactly one source file; {len(files)} logs were given"
        )
    if encoding is not None and encoding not in ("raw", "zstd"):
        raise MigrationOptionsError(f"--encoding is raw or zstd, got {encoding!r}")
    if encoding is not None and output is not None:
        named = layout.encoding_of(Path(output).name)
        if named != encoding:
            raise MigrationOptionsError(
                f"--output {output} names a {named} log, not {encoding}: a zstd log's name "
                f"ends in {layout.ZSTD_SUFFIX}, a raw one's does not"
            )
    requests: list[MigrationRequest] = []
    children = _ChildEvidence()
    explicit = None if evidence_root is None else Path(evidence_root)
    for file in files:
        location = store_location(file)
        loose = location is None
        # A dry run refuses what the real run refuses: it reports exactly that run.
        if loose and output is None and not in_place and _needs_upgrade(file):
            raise MigrationOptionsError(
                f"{file} is a loose file: pass --output OUT or --in-place", path=str(file)
            )
        if loose and output is None and _converts(file, encoding):
            raise MigrationOptionsError(
                f"{file} is a loose {layout.encoding_of(file.name)} file and --in-place keeps "
                f"its name: pass --output OUT (named for {encoding}) to convert it",
                path=str(file),
            )
        if explicit is not None:
            evidence = children.of(explicit, _header_of(file)) if _needs_upgrade(file) else None
        else:
            evidence = None if location is None else children.of(*location)
        requests.append(
            MigrationRequest(
                file,
                None if output is None else Path(output),
                in_place and loose,
                dry_run,
                evidence,
                loose=loose,
                lenient=lenient,
                encoding=encoding,
            )
        )
    # Each migration is one atomic publish: on Ctrl-C the one under way finishes and is
    # reported, so every file changed is in the results a progress hook saw.
    return map_files(migrate_one, requests, jobs=jobs, progress=progress, finish_current=True)


def _converts(file: Path, encoding: str | None) -> bool:
    """Whether ``encoding`` asks to change the encoding ``file``'s name says."""
    return encoding is not None and layout.encoding_of(file.name) != encoding


class _ChildEvidence:
    """Child-session headers of store files, one index per store root (headers only).

    Only roots established by :func:`~dsh_store.children.store_location`, or named by the
    caller, are walked, never a guess.
    """

    def __init__(self) -> None:
        self._indexes: dict[Path, dict[str, tuple[Mapping[str, Any], ...]]] = {}

    def of(self, root: Path, info: HeaderInfo | None) -> tuple[Mapping[str, Any], ...] | None:
        from .store import JsonlStore  # kept off `dsh-store migrate`'s start

        if info is None or info.version == layout.CURRENT_VERSION:
            return None  # a current log is not upgraded: no store walk for it
        store = JsonlStore(root)
        if root not in self._indexes:
            self._indexes[root] = store.children_index()
        return store.migration_children(info, self._indexes[root])


def _header_of(file: Path) -> HeaderInfo | None:
    try:
        return LogScanner(file).read_header()
    except (DshStoreError, OSError):
        return None  # the migration itself reports why the file cannot be read


def _needs_upgrade(file: Path) -> bool:
    return classify_header(file) == "migration-required"


def migrate_one(request: MigrationRequest) -> MigrationResult:
    """Migrate one file as requested; a refusal becomes a ``refused`` result."""
    source = request.source
    loose = request.loose if request.loose is not None else not is_store_file(source)
    if not loose:
        misfiled = _misfiled(source)
        if misfiled is not None:
            return MigrationResult(source, "refused", header_version(source), reason=misfiled)
    loose_dry_run = request.dry_run and request.output is None and not request.in_place and loose
    try:
        result = migrate_file(
            source,
            child_headers=request.child_headers,
            output=request.output,
            # A loose dry run with no destination still runs the whole chain.
            in_place=request.in_place or loose_dry_run,
            dry_run=request.dry_run,
            lenient=request.lenient,
            encoding=request.encoding,
        )
    except (DshStoreError, OSError) as error:
        reason = one_line(error, source=source)
        return MigrationResult(source, "refused", header_version(source), reason=reason)
    if loose_dry_run and result.status == "would-migrate":
        result = replace(result, target=None)
    return result


def _misfiled(source: Path) -> str | None:
    """Why a store file may not be migrated where it lies, or None when it is bound."""

    try:
        info = LogScanner(source).read_header()
    except (DshStoreError, OSError):
        return None  # the migration itself reports what is wrong with the header
    misfiled = check_binding(source, None if info is None else info.value)
    return None if misfiled is None else f"{BINDING_RULE}: {misfiled.message}"


def one_line(error: BaseException, *, source: Path | None = None) -> str:
    """A refusal reason on one line; an ``OSError`` says what failed on which path."""
    if isinstance(error, OSError) and not isinstance(error, DshStoreError):
        return _os_reason(error, source)
    return " ".join(command_message(error).split())


def command_message(error: BaseException) -> str:
    """The message of ``error`` as a ``dsh-store`` command reports it.

    The library's own messages speak to a program holding a session (a lock held
    elsewhere, a failed write it may flush again); a command's user can only rerun the
    command, so those two are worded for them, from the error's facts. Every other error
    keeps its message.
    """

    if isinstance(error, SessionLockedError):
        facts = vars(error)
        return (
            f"session {facts.get('session_id')!r} is open for writing elsewhere (lock "
            f"{facts.get('lock_path')} is held); nothing was changed: close the other writer, "
            "then rerun the command"
        )
    if isinstance(error, StorageError):
        reason = error.strerror or "error"
        return (
            f"{error.path}: {error.operation} failed: {reason} (errno {error.errno}); nothing "
            "acknowledged was lost and the file is back to its last durable state: fix the "
            "disk (free space, permissions), then rerun the command"
        )
    return str(error)


def _os_reason(error: OSError, source: Path | None) -> str:
    """``cannot write OUT: ...`` / ``cannot read SOURCE: ...`` / ``PATH: ...``.

    A publish temp (``<final>.<hex>.tmp``) is named by the file it was to become, since
    the temp itself never outlives the failure. The destination of a two-path call
    (link, rename: ``filename2``) is what could not be written. ``source`` is only ever
    read by a migration, so an error on it is a read error.
    """
    what = error.strerror or str(error)
    if error.filename2 is not None:
        return f"cannot write {_user_path(error.filename2)}: {what}"
    if error.filename is None:
        return what
    name = os.fsdecode(error.filename)
    shown = _user_path(name)
    if shown != name:
        return f"cannot write {shown}: {what}"
    if source is not None and os.path.normpath(name) == os.path.normpath(source):
        return f"cannot read {name}: {what}"
    return f"{name}: {what}"


def _user_path(name: str | bytes | int) -> str:
    """The path a user named: a publish temp stands for its final file."""
    text = os.fsdecode(name) if isinstance(name, str | bytes) else str(name)
    directory, base = os.path.split(text)
    final = layout.temp_final_name(base)
    return text if final is None else os.path.join(directory, final)


def repair_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    dry_run: bool = False,
    jobs: int = 1,
    progress: Progress[RepairOutcome] | None = None,
) -> list[RepairOutcome]:
    """Repair (or with ``dry_run`` plan the repair of) every log under ``paths``.

    One :class:`RepairOutcome` per file (``to_json()`` is the ``dsh-store repair --json``
    shape): its ``status`` (``repaired``, ``would-repair``, ``clean`` or ``refused``),
    classification, the cut, closers, ``deleted_temps`` (leftover publish temps deleted;
    in a dry run, those it would delete), ``kept_temps`` (temps too recent to delete) and
    ``reason``. Deleting stale temps alone makes a file ``repaired`` (``would-repair``); a
    file with only recent temps is ``clean``.

    Then one outcome per orphan publish temp found on the way (a temp that belongs to no
    log: :func:`dsh_store.verify.orphan_temps_in`), after the logs: its ``path`` is the
    temp, ``classification`` is None, and it is listed in ``deleted_temps`` (``repaired``,
    or ``would-repair`` in a dry run) or ``kept_temps`` (``clean``: too recent, or its
    session is open for writing) by :func:`dsh_store.repair.delete_orphan_temps`.
    """
    from .repair import delete_orphan_temps  # repair, store, salvage: off `migrate`'s start

    orphans: list[LeftoverTemp] = []
    files = [Path(file) for file in collect_log_files(paths, orphans=orphans)]
    # Each file is repaired under its own session lock, so files can go to processes.
    results = map_files(
        partial(_repair_one, dry_run=dry_run),
        files,
        jobs=jobs,
        progress=progress,
        finish_current=True,  # as for migrate: a repair under way finishes and is reported
    )
    for temp, action in delete_orphan_temps(orphans, dry_run=dry_run):
        if action == "kept":
            results.append(RepairOutcome(temp, "clean", kept_temps=(temp,)))
        else:
            status = "repaired" if action == "deleted" else "would-repair"
            results.append(RepairOutcome(temp, status, deleted_temps=(temp,)))
    return results


def _repair_one(file: Path, *, dry_run: bool) -> RepairOutcome:
    """Repair (or plan) one log; a refusal is a ``refused`` result, not an error."""
    from .store import repair_file  # off `dsh-store migrate`'s start

    misfiled = _misfiled(file)
    if misfiled is not None:  # verify calls it corrupt: never repaired where it lies
        return RepairOutcome(file, "refused", reason=misfiled)
    try:
        plan = repair_file(file, dry_run=dry_run)
    except (DshStoreError, OSError) as error:
        return RepairOutcome(file, "refused", reason=one_line(error))
    return RepairOutcome.of_plan(plan)


@dataclass(frozen=True)
class RepairOutcome:
    """One entry of :func:`repair_paths`: what a repair did (or would do) to one file.

    ``status`` is ``repaired``, ``would-repair``, ``clean`` or ``refused`` (with
    ``reason``). An orphan publish temp has no log of its own: its ``path`` is the temp,
    ``classification`` None, and it is listed in ``deleted_temps`` or ``kept_temps``. A
    session of a PostgreSQL store has no file: its ``path`` is the session's name
    (``URL#ID``, the password masked), a string. :meth:`to_json` gives the
    ``dsh-store repair --json`` shape.
    """

    path: Path | str
    status: str
    classification: str | None = None
    truncate_at: int | None = None
    torn_bytes: int = 0
    sidecar: Path | str | None = None
    closers: tuple[str, ...] = ()
    deleted_temps: tuple[Path, ...] = ()
    kept_temps: tuple[Path, ...] = ()
    reason: str | None = None

    @classmethod
    def of_plan(cls, plan: RepairPlan) -> RepairOutcome:
        """The outcome :func:`dsh_store.repair.repair_file`'s ``plan`` stands for."""
        status = "clean" if not plan.needed else ("repaired" if plan.applied else "would-repair")
        return cls(
            plan.path,
            status,
            classification=plan.classification,
            truncate_at=plan.truncate_at,
            torn_bytes=plan.torn_bytes,
            sidecar=plan.sidecar,
            closers=plan.closers,
            deleted_temps=plan.stale_temps,
            kept_temps=plan.fresh_temps,
        )

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape (docs/schemas/repair.schema.json)."""
        return {
            "path": str(self.path),
            "status": self.status,
            "classification": self.classification,
            "truncateAt": self.truncate_at,
            "tornBytes": self.torn_bytes,
            "sidecar": None if self.sidecar is None else str(self.sidecar),
            "closers": list(self.closers),
            "deletedTemps": [str(temp) for temp in self.deleted_temps],
            "keptTemps": [str(temp) for temp in self.kept_temps],
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SalvageOutcome:
    """The result of :func:`salvage_path`: a salvage's plan, or why it was refused.

    ``status`` is ``salvaged``, ``would-salvage``, ``already-salvaged`` or ``refused``
    (``plan`` None, ``reason`` and perhaps ``stop``: the defect that left nothing to
    keep). ``output`` is the output as the caller named it. :meth:`to_json` gives the
    ``dsh-store repair --salvage --json`` object.
    """

    path: str
    output: str
    status: str
    plan: SalvagePlan | None = None
    stop: Finding | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape (docs/schemas/salvage.schema.json)."""
        from .salvage import salvage_json  # off `dsh-store migrate`'s start

        plan = self.plan
        if plan is None:
            return salvage_json(
                self.path, self.output, self.status, stop=self.stop, reason=self.reason
            )
        return salvage_json(
            self.path,
            self.output,
            self.status,
            kept_events=plan.kept_events,
            kept_bytes=plan.kept_bytes,
            dropped_bytes=plan.dropped_bytes,
            stop=plan.stop,
            closers=plan.closers,
        )


def salvage_path(
    path: str | os.PathLike[str], output: str | os.PathLike[str], *, dry_run: bool = False
) -> SalvageOutcome:
    """Salvage one log into ``output`` (:func:`dsh_store.salvage.salvage_file`).

    A refusal is a result, not an error; its ``stop`` is the defect that left nothing to
    keep, when there is one. ``to_json()`` of the result is the ``dsh-store repair
    --salvage --json`` object (docs/schemas/salvage.schema.json).
    """
    from .salvage import salvage_file  # off `dsh-store migrate`'s start

    source, target = os.fspath(path), os.fspath(output)
    try:
        plan = salvage_file(path, output, dry_run=dry_run)
    except (DshStoreError, OSError) as error:
        stop = getattr(error, "stop", None)
        if isinstance(error, CorruptLogError):  # an invalid header line
            stop = Finding(error.rule, error.detail, error.line, error.offset, error.seq)
        return SalvageOutcome(source, target, "refused", stop=stop, reason=one_line(error))
    # Spelled as the plan spells them (its paths are pathlib.Path), as the JSON always was.
    return SalvageOutcome(os.fspath(plan.path), os.fspath(plan.output), plan.status, plan=plan)
