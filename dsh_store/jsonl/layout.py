"""Where session logs live on disk: directory and file names (see ``docs/format.md``).

Layout of a store root::

    <root>/--<projectKey>--/<encodedId>/session.v4.jsonl   (sessions with a cwd)
    <root>/_no-cwd/<encodedId>/session.v4.jsonl            (sessions without one)

Older generations share the session directory: ``session.jsonl`` (format 0) and
``session.vN.jsonl``; a zstd-encoded generation adds ``.zstd`` (``session.jsonl.zstd``).
The single-writer lock is ``session.lock`` beside them.
This module only computes names; it never touches the disk. The functions returning a
:class:`~pathlib.Path` import :mod:`pathlib` when called: ``dsh-store verify`` uses this
module for names only, and pathlib (with what it imports) is a noticeable part of its
start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from ..errors import InvalidSessionIdError

if TYPE_CHECKING:
    # pathlib off `dsh-store verify`'s cold start (tests/cli/test_import_cost.py)
    from pathlib import Path

__all__ = [
    "CURRENT_VERSION",
    "DIR_MODE",
    "DURABLE_SUFFIX",
    "FILE_MODE",
    "LOCK_NAME",
    "LOG_NAME",
    "NAME_MAX",
    "NO_CWD_DIR",
    "ZSTD_SUFFIX",
    "check_session_id",
    "clean_path",
    "decode_session_id",
    "encode_session_id",
    "encoding_of",
    "encoding_twin",
    "generation_name",
    "generation_version",
    "is_durable_name",
    "is_repair_partial",
    "is_temp_name",
    "is_temp_of",
    "log_path",
    "project_dir",
    "project_key",
    "root_encoding",
    "session_dir",
    "temp_final_name",
    "temp_owner",
    "temp_path",
]

CURRENT_VERSION = 4
"""The session format version this library writes."""

NAME_MAX = 255
"""Longest file name (in bytes) the common POSIX file systems accept."""

DIR_MODE = 0o700
"""Mode of every directory the store creates."""

FILE_MODE = 0o600
"""Mode of every file the store creates."""

LOCK_NAME = "session.lock"
"""Name of the single-writer lock file inside a session directory (never deleted)."""

DURABLE_SUFFIX = ".durable"
"""Suffix of a log's durable watermark, ``session.v4.jsonl.durable`` (never a log: not
``.jsonl``, never read as one, never reported as a leftover)."""

ZSTD_SUFFIX = ".zstd"
"""Suffix of a zstd-encoded log generation, ``session.v4.jsonl.zstd`` (docs/format.md §7)."""

NO_CWD_DIR = "_no-cwd"
"""Project directory of sessions that have no working directory."""

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS = frozenset(b"/\\:")
_PROJECT_SLUG_MAX = 251  # 251 + the four wrapping dashes = NAME_MAX
# Hashed session-directory names: readable prefix + "~~" + sha256 hex. "~~" never
# occurs in a plain encoding (every "~" there starts a four-digit escape).
_HASH_MARK = "~~"
_HASH_PREFIX_MAX = NAME_MAX - len(_HASH_MARK) - 64
_ESCAPE = re.compile(r"~([0-9A-F]{4})")
_GENERATION = re.compile(r"session(?:\.v([1-9][0-9]*))?\.jsonl(?:\.zstd)?")
# The token publishers pass to temp_path (files.materialize, migrate._write_temp) is
# secrets.token_hex(6): twelve lowercase hex digits.
_TEMP = re.compile(r"(.+)\.[0-9a-f]{12}\.tmp", re.DOTALL)
# The scratch name jsonl.repair copies a torn tail to before publishing its sidecar.
_PARTIAL = re.compile(r"(.+)\.torn-[0-9]+\.partial", re.DOTALL)


def _code_units(text: str) -> list[int]:
    """UTF-16 code units of ``text``; lone surrogates pass through as themselves."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i] | (raw[i + 1] << 8) for i in range(0, len(raw), 2)]


def _escape_units(text: str) -> str:
    parts: list[str] = []
    for unit in _code_units(text):
        parts.append(chr(unit) if unit in _SAFE else f"~{unit:04X}")
    return "".join(parts)


def project_key(cwd: str | None) -> str:
    """Name of the project directory for ``cwd`` (DSH's definition; deliberately lossy).

    Each run of ``/``, ``\\`` and ``:`` becomes one ``-``; ``[A-Za-z0-9._-]`` stays;
    every other UTF-16 code unit becomes ``~XXXX``; leading dashes are stripped, an
    empty slug becomes ``root``, the slug is cut at 251 characters and returned as
    ``--slug--``. Without a cwd the answer is ``_no-cwd``.
    """
    if cwd is None:
        return NO_CWD_DIR
    parts: list[str] = []
    in_separator_run = False
    for unit in _code_units(cwd):
        if unit in _SEPARATORS:
            if not in_separator_run:
                parts.append("-")
            in_separator_run = True
            continue
        in_separator_run = False
        parts.append(chr(unit) if unit in _SAFE else f"~{unit:04X}")
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:_PROJECT_SLUG_MAX]}--"


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it can name a session: a non-empty ``str``.

    Every function here that maps an id to a name calls this first, so each entry point
    of the store (``new``, ``open``, ``inspect``, ``locate``, ``read_from``, ...) refuses a
    bad id with one typed error before it touches the disk.

    :raises InvalidSessionIdError: ``session_id`` is not a ``str`` (rule ``not-a-str``)
        or is empty (rule ``empty``); it is a :class:`ValueError`.
    """
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(
            session_id,
            f"a session id must be a str, not {type(session_id).__name__}",
            rule="not-a-str",
        )
    if not session_id:
        raise InvalidSessionIdError(session_id, "a session id must not be empty", rule="empty")
    return session_id


def encode_session_id(session_id: str) -> str:
    """Name of the session directory for ``session_id``: injective and traversal-proof.

    Code units in ``[A-Za-z0-9._-]`` stay literal; every other UTF-16 code unit
    (including ``~``, ``/``, NUL and lone surrogates) becomes ``~XXXX``. The ids
    ``.`` and ``..`` are written fully escaped. When the result would exceed
    :data:`NAME_MAX` bytes, the name becomes a readable prefix (cut at an escape
    boundary) followed by ``~~`` and the SHA-256 hex digest of the full encoding;
    such names cannot collide with unhashed ones, and two of them collide only if
    SHA-256 does.

    :raises InvalidSessionIdError: ``session_id`` is not a ``str`` or is empty (see
        :func:`check_session_id`); it is a :class:`ValueError`.
    """
    check_session_id(session_id)
    if session_id in (".", ".."):
        return "~002E" * len(session_id)
    encoded = _escape_units(session_id)
    if len(encoded) <= NAME_MAX:
        return encoded
    cut = _HASH_PREFIX_MAX
    tilde = encoded.rfind("~", max(0, cut - 4), cut)
    if tilde != -1:
        cut = tilde  # keep the prefix free of half an escape
    import hashlib  # only for ids too long to spell out (keeps start-up lean)

    digest = hashlib.sha256(encoded.encode("ascii")).hexdigest()
    return f"{encoded[:cut]}{_HASH_MARK}{digest}"


def decode_session_id(name: str) -> str | None:
    """Invert :func:`encode_session_id` for unhashed names; ``None`` for any other name.

    A hashed (over-long) name cannot be inverted; its id is read from the log header.
    """
    if not name or _HASH_MARK in name:
        return None
    units: list[int] = []
    index = 0
    while index < len(name):
        char = name[index]
        if char == "~":
            match = _ESCAPE.match(name, index)
            if match is None:
                return None
            units.append(int(match.group(1), 16))
            index = match.end()
        elif ord(char) in _SAFE:
            units.append(ord(char))
            index += 1
        else:
            return None
    raw = b"".join(unit.to_bytes(2, "little") for unit in units)
    session_id = raw.decode("utf-16-le", "surrogatepass")
    return session_id if encode_session_id(session_id) == name else None


def project_dir(root: str | os.PathLike[str], cwd: str | None) -> Path:
    """Directory holding every session of the project ``cwd`` under ``root``."""
    # pathlib off `dsh-store verify`'s cold start (tests/cli/test_import_cost.py)
    from pathlib import Path

    return Path(root) / project_key(cwd)


def session_dir(root: str | os.PathLike[str], session_id: str, cwd: str | None) -> Path:
    """Directory of one session: ``<root>/<projectKey>/<encodedId>``."""
    return project_dir(root, cwd) / encode_session_id(session_id)


def generation_name(version: int, encoding: str = "raw") -> str:
    """File name of the log generation written in format ``version``.

    Version 0 is ``session.jsonl``; every later version ``N`` is ``session.vN.jsonl``.
    The ``zstd`` encoding appends :data:`ZSTD_SUFFIX`: ``session.jsonl.zstd``,
    ``session.vN.jsonl.zstd``.
    """
    if version < 0:
        raise ValueError(f"a format version is non-negative, got {version}")
    if encoding not in ("raw", "zstd"):
        raise ValueError(f"an encoding is 'raw' or 'zstd', got {encoding!r}")
    name = "session.jsonl" if version == 0 else f"session.v{version}.jsonl"
    return name + ZSTD_SUFFIX if encoding == "zstd" else name


def encoding_of(name: str) -> str:
    """``zstd`` for a log name ending in :data:`ZSTD_SUFFIX`, else ``raw``."""
    return "zstd" if name.endswith(ZSTD_SUFFIX) else "raw"


def encoding_twin(log: str) -> str | None:
    """The path of ``log``'s generation in the other encoding, when it lies beside it.

    A session directory holds one encoding; both (``session.v4.jsonl`` and
    ``session.v4.jsonl.zstd``) is what an interrupted ``migrate --encoding`` leaves.
    """
    name = os.path.basename(log)
    version = generation_version(name)
    if version is None:
        return None
    other = "raw" if encoding_of(name) == "zstd" else "zstd"
    twin = os.path.join(os.path.dirname(log), generation_name(version, other))
    return twin if os.path.lexists(twin) else None


def root_encoding(root: str) -> str | None:
    """The encoding of a store root: that of its first session log in walk order.

    The walk of the JSONL backend: project and session directories sorted by name,
    symlinked or unlistable ones skipped, each session's newest generation (raw first when
    a generation is there in both encodings). None for a root without a log. Only names
    are looked at; no log is read.
    """
    for project in _real_subdirs(root):
        for directory in _real_subdirs(project):
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            logs = [
                (version, name)
                for name in names
                if (version := generation_version(name)) is not None
                and os.path.isfile(os.path.join(directory, name))
            ]
            if logs:
                newest = max(version for version, _ in logs)
                return encoding_of(min(name for version, name in logs if version == newest))
    return None


def _real_subdirs(directory: str) -> list[str]:
    """The directories (not symlinks) in ``directory``, sorted by name; none if unlistable."""
    try:
        with os.scandir(directory) as entries:
            found = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [os.path.join(directory, name) for name in sorted(found)]


def generation_version(name: str) -> int | None:
    """Format version encoded in a log file name, or ``None`` if ``name`` is not a log."""
    match = _GENERATION.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 0


LOG_NAME = generation_name(CURRENT_VERSION)
"""File name of the current-format log: ``session.v4.jsonl``."""


def log_path(root: str | os.PathLike[str], session_id: str, cwd: str | None) -> Path:
    """Path of the current-format log of a session."""
    return session_dir(root, session_id, cwd) / LOG_NAME


def temp_path(final: str | os.PathLike[str], token: str) -> Path:
    """Temporary sibling of ``final`` used while publishing it: ``<final>.<token>.tmp``."""
    # pathlib off `dsh-store verify`'s cold start (tests/cli/test_import_cost.py)
    from pathlib import Path

    final_path = Path(final)
    return final_path.with_name(f"{final_path.name}.{token}.tmp")


def is_durable_name(name: str) -> bool:
    """Tell whether ``name`` is the durable watermark of a log (``<log>.durable``)."""
    return name.endswith(DURABLE_SUFFIX) and len(name) > len(DURABLE_SUFFIX)


def is_temp_name(name: str) -> bool:
    """Tell whether ``name`` is a leftover publishing temp file (readers ignore these)."""
    return name.endswith(".tmp") and name.count(".") >= 2


def temp_final_name(name: str) -> str | None:
    """The final name a publish temp is named after, or ``None`` if ``name`` is no such temp.

    Precise where :func:`is_temp_name` is permissive: only ``<final>.<12 hex>.tmp`` (the
    token publishers pass to :func:`temp_path` is ``secrets.token_hex(6)``) qualifies, and
    a repair's ``<final>.torn-<N>.partial`` (:func:`is_repair_partial`), which is cleaned up
    like a publish temp.
    """
    match = _TEMP.fullmatch(name) or _PARTIAL.fullmatch(name)
    return None if match is None else match.group(1)


def is_repair_partial(name: str) -> bool:
    """Tell whether ``name`` is a repair's scratch copy of a torn tail, ``<log>.torn-<N>.partial``.

    :func:`temp_final_name` treats it as a leftover of ``<log>``: a repair killed (or
    failed) before it published the sidecar leaves it, and its bytes are still in the log
    or already in the sidecar.
    """
    return _PARTIAL.fullmatch(name) is not None


def is_temp_of(final_name: str, name: str) -> bool:
    """Tell whether ``name`` is a publish temp of the file named ``final_name``."""
    return temp_final_name(name) == final_name


def temp_owner(name: str, present: Collection[str]) -> str | None:
    """The log a leftover publish temp ``name`` belongs to, among the names ``present``.

    ``present`` holds the other names in the temp's directory. A temp belongs to its
    final name when that exists. A temp of a generation name that does not exist (a
    migration or first publish killed before its link) belongs to the newest generation
    present, the log whose upgrade it was. Otherwise it belongs to no log: ``None``.
    """
    final = temp_final_name(name)
    if final is None:
        return None
    if final in present:
        return final
    if generation_version(final) is None:
        return None
    generations = [other for other in present if generation_version(other) is not None]
    return max(generations, key=lambda other: generation_version(other) or 0, default=None)


def clean_path(path: str | os.PathLike[str]) -> str:
    """``path`` spelled as ``str(pathlib.PurePosixPath(path))`` would, without pathlib.

    ``./store//a/`` becomes ``store/a``; ``..`` parts are kept (collapsing them would be
    wrong across symlinks). Verify reports paths in this spelling, so that ``x`` and
    ``./x`` name the same file once.
    """
    text = os.fspath(path)
    absolute = text.startswith(os.sep)
    parts = [part for part in text.split(os.sep) if part not in ("", ".")]
    joined = os.sep.join(parts)
    if absolute:
        return os.sep + joined
    return joined or "."
