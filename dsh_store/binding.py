"""Identity binding: a store log is filed where its header's id and cwd say it lives.

DSH derives a log's place from its header: ``<root>/<projectKey(cwd)>/<encodedId>/``
(:mod:`dsh_store.jsonl.layout`). A log whose header names another session (or another
cwd) than its directory does was copied or moved into the wrong place; trusting it would
let a repair or an append meant for one session land in another session's file. Every
store-level path therefore checks the binding before it uses such a log: ``JsonlStore``
lookups refuse it, ``dsh-store verify`` reports it ``corrupt`` (rule ``identity-binding``),
``dsh-store list`` marks it ``misfiled``, and ``dsh-store migrate`` and ``repair`` refuse it
and go on.

A path is *in a store* when its shape says so (:func:`store_root_of`): a generation file
(``session.jsonl`` or ``session.vN.jsonl``) in a directory whose parent is named as a
project directory (``_no-cwd`` or ``--<slug>--``), with a root above that. Only such a path
is bound; any other file is a loose file, named by its path alone, and no binding applies.

Strings and :mod:`os.path` only (no :mod:`pathlib`): ``dsh-store verify`` imports this and
its start-up is measured. Nothing here writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .jsonl import layout

__all__ = [
    "BINDING_RULE",
    "Misfiled",
    "binding_in",
    "check_binding",
    "is_project_dir_name",
    "row_binding",
    "store_root_of",
]

BINDING_RULE: Final = "identity-binding"
"""The rule name of a misfiled log in errors and findings."""

# A project directory is "_no-cwd" or "--<slug>--" (layout.project_key): the slug is made
# of safe characters and ~XXXX escapes, does not start with "-", and is cut at 251
# characters, which can cut its last escape short.
_SLUG: Final = re.compile(r"(?:[A-Za-z0-9._-]|~[0-9A-F]{4})*(~[0-9A-F]{0,3})?")
_SLUG_MAX: Final = layout.NAME_MAX - 4


def is_project_dir_name(name: str) -> bool:
    """Whether ``name`` is spelled as :func:`~dsh_store.jsonl.layout.project_key` spells a
    project directory (``_no-cwd`` or ``--<slug>--``)."""
    if name == layout.NO_CWD_DIR:
        return True
    if len(name) < 5 or not (name.startswith("--") and name.endswith("--")):
        return False
    slug = name[2:-2]
    if len(slug) > _SLUG_MAX or slug.startswith("-"):
        return False
    match = _SLUG.fullmatch(slug)
    return match is not None and (match.group(1) is None or len(slug) == _SLUG_MAX)


def store_root_of(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``(store root, session directory)`` of a log in a store, or None for a loose file.

    The shape rule of the module docstring, on the log's directory with symlinks resolved
    (where the store would publish beside it). Only names are looked at; the header is not
    read, so a log filed under the wrong session still counts as in the store.
    """
    text = os.fspath(path)
    if layout.generation_version(os.path.basename(text)) is None:
        return None
    session_dir = os.path.realpath(os.path.dirname(os.path.abspath(text)))
    project = os.path.dirname(session_dir)
    root = os.path.dirname(project)
    if session_dir == project or project == root:  # too shallow: no root above
        return None
    if not is_project_dir_name(os.path.basename(project)):
        return None
    return root, session_dir


class Misfiled(NamedTuple):
    """A store log whose header does not derive the directory it is filed in.

    ``header_id`` and ``header_cwd`` are the header's values as read (``None`` when
    absent, any JSON value otherwise; ``has_cwd`` tells an absent cwd from a null one);
    ``expected`` is the session directory they derive,
    or None when they cannot name one (an id that is not a non-empty string, a cwd that is
    neither absent nor a string).
    """

    path: str
    directory: str
    header_id: object
    header_cwd: object
    expected: str | None
    has_cwd: bool = True

    @property
    def message(self) -> str:
        """One sentence naming the path, the header's id and cwd and where it belongs."""
        cwd = f"cwd {self.header_cwd!r}" if self.has_cwd else "no cwd"
        where = (
            "which cannot name a session directory"
            if self.expected is None
            else f"whose session directory is {self.expected}"
        )
        return (
            f"the header names session {self.header_id!r} ({cwd}), {where}, but the log is "
            f"filed in {self.directory}; move it to its own session directory"
        )


def binding_in(
    root: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    header_id: object,
    header_cwd: object,
    *,
    path: str | os.PathLike[str],
) -> Misfiled | None:
    """Check that ``header_id`` and ``header_cwd`` derive ``directory`` under ``root``.

    The directories match when spelled alike, or when both exist and are the same
    directory (a case-insensitive file system, a symlinked root). A ``header_cwd`` of None
    means the header has no cwd (``_no-cwd``). ``path`` is the log, as reported. Returns
    None when bound.
    """
    where = os.fspath(directory)
    log = os.fspath(path)
    expected: str | None = None
    if (
        isinstance(header_id, str)
        and header_id
        and (header_cwd is None or isinstance(header_cwd, str))
    ):
        expected = os.path.join(
            os.fspath(root), layout.project_key(header_cwd), layout.encode_session_id(header_id)
        )
        if expected == where or _same_directory(expected, where):
            return None
    return Misfiled(log, where, header_id, header_cwd, expected, header_cwd is not None)


def check_binding(
    path: str | os.PathLike[str], header: Mapping[str, Any] | None
) -> Misfiled | None:
    """The binding of a log given its header row; None when bound or not in a store.

    ``header`` is the decoded first line (any format version); None (no header) makes
    no claim, so there is nothing to check.
    """
    if header is None:
        return None
    location = store_root_of(path)
    if location is None:
        return None
    root, directory = location
    return row_binding(root, directory, header, path=path)


def row_binding(
    root: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    header: Mapping[str, Any],
    *,
    path: str | os.PathLike[str],
) -> Misfiled | None:
    """:func:`binding_in` for a header row as read: an absent ``cwd`` is no cwd, while a
    ``cwd`` that is present but not a string (null included) names no place."""
    cwd = header.get("cwd")
    if "cwd" in header and not isinstance(cwd, str):
        return Misfiled(os.fspath(path), os.fspath(directory), header.get("id"), cwd, None)
    return binding_in(root, directory, header.get("id"), cwd, path=path)


def _same_directory(left: str, right: str) -> bool:
    try:
        return os.path.samefile(left, right)
    except (OSError, ValueError):  # absent, or a name the OS cannot take
        return False
