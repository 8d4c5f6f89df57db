"""Finding the publish temps a killed publish left beside the logs (never writes).

Every durable publish (:func:`dsh_store.jsonl.files.staged`) writes under a temp name
(``<final>.<random>.tmp``, :func:`~dsh_store.jsonl.layout.temp_path`) or a repair's
``.partial`` scratch name first. A publish killed before its link leaves that name behind;
this module finds them, the temps of a log and the orphans that belong to no log. What to
do with them is the caller's: verify reports them, repair deletes the stale ones.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from typing import NamedTuple

from .layout import clean_path, temp_final_name, temp_owner

__all__ = [
    "TEMP_GRACE_S",
    "LeftoverTemp",
    "by_directory",
    "leftover_temps",
    "orphan_temps_in",
]


TEMP_GRACE_S = 600.0
"""Age (by mtime) from which ``dsh-store repair`` deletes a leftover publish temp.

A younger temp may belong to a publish still running: a migration streams into its temp
without the session lock, so only the age tells an abandoned temp from a live one.
"""


class LeftoverTemp(NamedTuple):
    """A publish temp found beside a log: its path, size in bytes and mtime (epoch s).

    ``path`` is a string: the log's directory, as the log's path spells it, joined with the
    temp's name. ``linked`` is True when the temp is a second name of the log itself (the
    publish was killed after its link): its publish is over, and its mtime is the live
    log's.
    """

    path: str
    size: int
    mtime: float
    linked: bool = False

    def is_stale(self, now: float, grace_s: float = TEMP_GRACE_S) -> bool:
        """Whether no running publish can need it: linked, or ``grace_s`` old by mtime."""
        return self.linked or now - self.mtime >= grace_s


def by_directory(logs: Iterable[str]) -> dict[str, list[str]]:
    """``logs`` grouped by parent directory, in first-seen order (each directory once).

    Keys and members are strings: the key is ``os.path.dirname(log)``, or ``"."`` for a
    bare file name (the directory :func:`os.scandir` is to list).
    """
    groups: dict[str, list[str]] = {}
    for log in logs:
        groups.setdefault(os.path.dirname(log) or os.curdir, []).append(log)
    return groups


def leftover_temps(logs: Iterable[str]) -> dict[str, tuple[LeftoverTemp, ...]]:
    """The publish temps that belong to each of ``logs``, sorted by name; never writes.

    Each directory is listed once, however many logs it holds. Ownership follows
    :func:`dsh_store.jsonl.temp_owner`; a temp owned by no log in ``logs`` is
    not returned. Only regular files count (a symlink is never a publish temp), and an
    unlistable directory yields nothing (its logs are reported on their own).

    The keys are the strings of ``logs``, as given; a temp's path is its log's directory
    (as that log spells it) joined with the temp's name.
    """
    found: dict[str, tuple[LeftoverTemp, ...]] = {}
    for directory, members in by_directory(logs).items():
        # File name -> the logs of that name here (one, unless spelled two ways).
        wanted: dict[str, list[str]] = {}
        for log in dict.fromkeys(members):
            wanted.setdefault(os.path.basename(log), []).append(log)
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue
        present = {entry.name: entry for entry in entries}
        owned: dict[str, list[LeftoverTemp]] = {}
        for entry in sorted(entries, key=lambda item: item.name):
            owner = temp_owner(entry.name, present)
            if owner not in wanted:
                continue
            with contextlib.suppress(OSError):  # vanished meanwhile: nothing left over
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    linked = _same_file(info, present[owner])
                    for log in wanted[owner]:
                        # Spelled like its log: a bare log name has bare temp names.
                        where = os.path.join(os.path.dirname(log), entry.name)
                        temp = LeftoverTemp(where, info.st_size, info.st_mtime, linked)
                        owned.setdefault(log, []).append(temp)
        found.update((log, tuple(temps)) for log, temps in owned.items())
    return found


def orphan_temps_in(directory: str, names: Iterable[str]) -> list[LeftoverTemp]:
    """The publish temps among ``names`` (the files of ``directory``) that belong to no log.

    Such a temp is what a publish killed before its link leaves when the log it was
    creating does not exist: a new session's first write, a fork, a salvage or a
    migration to ``--output``. Nothing in it was ever acknowledged. Only regular files
    count; one that vanishes meanwhile is skipped. Sorted by name.
    """
    present = set(names)
    orphans: list[LeftoverTemp] = []
    for name in sorted(present):
        if temp_final_name(name) is None or temp_owner(name, present) is not None:
            continue
        where = clean_path(os.path.join(directory, name))
        with contextlib.suppress(OSError):  # vanished meanwhile: nothing left over
            info = os.lstat(where)
            if stat.S_ISREG(info.st_mode):
                orphans.append(LeftoverTemp(where, info.st_size, info.st_mtime))
    return orphans


def _same_file(info: os.stat_result, log: os.DirEntry[str]) -> bool:
    try:
        return os.path.samestat(info, log.stat(follow_symlinks=False))
    except OSError:
        return False
