"""Where a log's store is, and the child evidence the migration chain needs from it.

The 3->4 edge completes a ``subagent/catalog`` from the header rows of the sessions that
name a log's session as their parent. Both the store (opening an older session) and the
migration use case (``migrate_file(store_root=)``, ``migrate_store``) gather them here,
through a backend, reading first lines only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .backend import StorageBackend
from .binding import store_root_of
from .errors import DshStoreError
from .jsonl.backend import JsonlBackend
from .jsonl.rows import HeaderInfo
from .jsonl.scan import LogScanner
from .model import SESSION_FORMAT_VERSION

__all__ = [
    "ChildIndex",
    "children_index",
    "jsonl_backend",
    "migration_children",
    "store_location",
    "store_root",
]

ChildIndex = Mapping[str, tuple[Mapping[str, Any], ...]]
"""Parent session id -> the header rows of its child sessions."""


def jsonl_backend(root: str | os.PathLike[str]) -> JsonlBackend:
    """The raw JSONL backend of the store root ``root`` (``~`` expanded, made absolute).

    :raises NotADirectoryError: ``root`` exists and is not a directory.
    """
    path = Path(root).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"store root {path} is not a directory")
    return JsonlBackend(path)


def children_index(backend: StorageBackend) -> dict[str, tuple[Mapping[str, Any], ...]]:
    """Parent id -> header rows of its child sessions, for the whole store (one pass)."""
    index: dict[str, list[Mapping[str, Any]]] = {}
    for log in backend.locations():
        try:
            info = backend.read(log).read_header()
        except (DshStoreError, OSError):
            continue
        parent = None if info is None else info.value.get("parentSession")
        if isinstance(parent, str) and info is not None:
            index.setdefault(parent, []).append(info.value)
    return {parent: tuple(children) for parent, children in index.items()}


def migration_children(
    info: HeaderInfo | None, backend: StorageBackend, index: ChildIndex | None = None
) -> tuple[Mapping[str, Any], ...] | None:
    """The child evidence the migration chain needs for a log whose header is ``info``.

    None for a current (v4) log or no header; otherwise the child headers of its id
    (empty when the header has no string id). Pass a :func:`children_index` built once
    to avoid one store walk per session when migrating many.
    """
    if info is None or info.version == SESSION_FORMAT_VERSION:
        return None
    session_id = info.value.get("id")
    if not isinstance(session_id, str):
        return ()
    if index is None:
        index = children_index(backend)
    return index.get(session_id, ())


def store_root(path: str | os.PathLike[str]) -> Path | None:
    """The root of the store that ``path`` belongs to, or None when it is a loose file.

    A store file is a generation file (``session.jsonl`` / ``session.vN.jsonl``) with a
    readable header whose directory sits in a project directory of a root,
    ``<root>/<project dir>/<session dir>/`` (:func:`dsh_store.binding.store_root_of`: the
    project directory is named ``_no-cwd`` or ``--<slug>--`` as
    :func:`~dsh_store.jsonl.layout.project_key` spells it). Anything else is loose: another
    name, a path too shallow for the layout, an empty file. The directory is taken with
    symlinks resolved (where ``session.v4.jsonl`` would be published); only the header line
    is read. A store file filed under another session (its header's id and cwd derive
    another directory) is still a store file: migrating it is refused
    (:func:`dsh_store.binding.check_binding`), never redirected to a loose-file path.
    """
    location = store_location(Path(path))
    return None if location is None else location[0]


def store_location(path: Path) -> tuple[Path, HeaderInfo] | None:
    """(store root, header) of a store file; None for a loose file (see :func:`store_root`)."""
    location = store_root_of(path)
    if location is None:
        return None
    try:
        info = LogScanner(path).read_header()
    except (DshStoreError, OSError):
        return None
    if info is None:
        return None
    return Path(location[0]), info
