"""Store files versus loose files in ``dsh-store migrate`` (dsh_store.bulk).

A generation file name alone does not make a store file: its directory must sit in a
project directory of a root, ``<root>/<project dir>/<session dir>/``. A store file whose
header's id and cwd derive another directory is misfiled: refused, never redirected.
Child evidence comes only from a store root.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh_store.bulk import MigrationOptionsError, is_store_file, migrate_paths, store_root
from dsh_store.jsonl import layout
from dsh_store.migrate import migrate_file, migrate_store
from dsh_store.store import JsonlStore

from .store_logs import header_log, store_with_child


def _recording_children_index(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    roots: list[Path] = []
    real = JsonlStore.children_index

    def record(self: JsonlStore) -> dict[str, tuple[Any, ...]]:
        roots.append(self.root)
        return real(self)

    monkeypatch.setattr(JsonlStore, "children_index", record)
    return roots


def test_a_generation_name_outside_a_session_directory_is_loose(tmp_path: Path) -> None:
    # The directory is even named after the header id, but it sits in no project dir.
    loose = header_log(tmp_path / "loose" / "session.v2.jsonl", 2, "loose")
    assert store_root(loose) is None
    assert not is_store_file(loose)


@pytest.mark.parametrize(
    ("project", "session", "header_id"),
    [
        ("p", "s", "s"),  # not a project directory name
        ("---p--", "s", "s"),  # a slug never starts with "-"
        ("----", "s", "s"),  # an empty slug is spelled "root"
        ("--a~00--", "s", "s"),  # a cut escape only at the 251-character cut
        ("--a b--", "s", "s"),  # a character project_key always escapes
    ],
)
def test_a_misplaced_generation_file_is_loose(
    tmp_path: Path, project: str, session: str, header_id: str
) -> None:
    log = header_log(tmp_path / "root" / project / session / "session.v3.jsonl", 3, header_id)
    assert store_root(log) is None


@pytest.mark.parametrize(
    ("session_id", "cwd"),
    [
        ("s", "/home/me/project"),
        ("s", None),  # _no-cwd
        ("a/b ~ é", "C:\\Users\\é\\x"),  # escaped names
        ("x" * 300, "/" + "é" * 120),  # a hashed session dir, a project slug cut mid-escape
    ],
)
def test_a_generation_in_its_session_directory_is_a_store_file(
    tmp_path: Path, session_id: str, cwd: str | None
) -> None:
    root = tmp_path / "root"
    log = header_log(layout.session_dir(root, session_id, cwd) / "session.v2.jsonl", 2, session_id)
    assert store_root(log) == root.resolve()
    assert is_store_file(log)
    assert store_root(log.with_name("other.jsonl")) is None


def test_shallow_and_relative_paths_never_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for shallow in ("/session.v2.jsonl", "/x/session.v2.jsonl", "session.v2.jsonl"):
        if Path(shallow).exists():  # pragma: no cover - a machine with such a file
            pytest.skip(f"{shallow} exists on this machine")
        assert store_root(shallow) is None
    # Before the fix: IndexError from Path.resolve().parents[2].
    (result,) = migrate_paths(["/session.v2.jsonl"], dry_run=True)
    assert result.status == "refused" and result.reason is not None
    assert "cannot read" in result.reason

    root = tmp_path / "root"
    log = header_log(layout.session_dir(root, "s", None) / "session.v2.jsonl", 2, "s")
    monkeypatch.chdir(log.parent)
    assert store_root("session.v2.jsonl") == root.resolve()
    assert store_root(Path("..") / "s" / "session.v2.jsonl") == root.resolve()
    monkeypatch.chdir(root)
    assert store_root(Path("_no-cwd") / "s" / "session.v2.jsonl") == root.resolve()


def test_a_loose_generation_file_is_never_published_beside_itself(tmp_path: Path) -> None:
    loose = header_log(tmp_path / "loose" / "session.v2.jsonl", 2, "loose")
    for dry_run in (False, True):  # a dry run refuses what the real run refuses
        with pytest.raises(MigrationOptionsError, match="is a loose file"):
            migrate_paths([loose], dry_run=dry_run)
    (checked,) = migrate_paths([loose], in_place=True, dry_run=True)
    assert (checked.status, checked.target) == ("would-migrate", loose)
    assert sorted(p.name for p in loose.parent.iterdir()) == ["session.v2.jsonl"]
    (in_place,) = migrate_paths([loose], in_place=True)
    assert (in_place.status, in_place.target) == ("migrated", loose)
    assert sorted(p.name for p in loose.parent.iterdir()) == [
        "session.v2.jsonl",
        "session.v2.jsonl.v2.bak",
    ]


def test_child_evidence_comes_only_from_a_real_store_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loose file two levels below a directory full of sessions: nothing is gathered there.
    guessed = tmp_path / "guessed"
    store_with_child(guessed)
    loose = header_log(guessed / "loose" / "session.v2.jsonl", 2, "loose")
    roots = _recording_children_index(monkeypatch)
    migrate_paths([loose], in_place=True, dry_run=True)
    migrate_paths([loose.parent], in_place=True)
    assert roots == []

    root = tmp_path / "root"
    store_with_child(root)
    migrate_paths([root], dry_run=True)
    assert roots == [root.resolve()]


def test_a_store_migration_carries_the_children_of_its_own_store(tmp_path: Path) -> None:
    by_paths = tmp_path / "by-paths"
    log = store_with_child(by_paths)
    by_store = tmp_path / "by-store"
    shutil.copytree(by_paths, by_store)
    results = {r.source.name: r.status for r in migrate_paths([by_paths])}
    assert results == {"session.v3.jsonl": "migrated", "session.v4.jsonl": "current"}
    assert {r.status for r in migrate_store(by_store)} == {"migrated", "current"}
    published = log.with_name("session.v4.jsonl").read_bytes()
    assert b'"childId":"kid"' in published
    twin = by_store / log.relative_to(by_paths).with_name("session.v4.jsonl")
    assert published == twin.read_bytes()


def test_a_symlinked_store_root_is_the_store(tmp_path: Path) -> None:
    root = tmp_path / "real"
    log = store_with_child(root)
    link = tmp_path / "link"
    os.symlink(root, link)
    assert store_root(link / log.relative_to(root)) == root.resolve()


def test_the_same_source_gives_the_same_bytes_however_it_is_migrated(tmp_path: Path) -> None:
    """A fork parent's v4 bytes depend only on its source and the evidence named.

    A store file takes its own store's children whether it is published beside itself,
    sent to an output, or migrated by the library; a loose copy takes them when the store
    root is named, and has none otherwise (its catalog stays as written).
    """
    roots = [tmp_path / f"root{index}" for index in range(3)]
    logs = [store_with_child(root) for root in roots]
    assert {r.status for r in migrate_paths([roots[0]])} == {"migrated", "current"}
    by_store = logs[0].with_name("session.v4.jsonl").read_bytes()
    assert b'"childId":"kid"' in by_store

    by_output = tmp_path / "by-output.v4.jsonl"
    (result,) = migrate_paths([logs[1]], output=by_output)
    assert result.status == "migrated"
    by_library = tmp_path / "by-library.v4.jsonl"
    assert migrate_file(logs[2], output=by_library).status == "migrated"
    assert migrate_file(logs[2]).status == "migrated"  # beside itself, as the store does

    loose = tmp_path / "loose" / "parent.jsonl"
    loose.parent.mkdir()
    shutil.copyfile(logs[0], loose)
    loose_named = tmp_path / "loose-named.v4.jsonl"
    (result,) = migrate_paths([loose], output=loose_named, evidence_root=roots[0])
    assert result.status == "migrated"
    loose_library = tmp_path / "loose-library.v4.jsonl"
    migrate_file(loose, output=loose_library, store_root=roots[0])
    for published in (
        by_output,
        by_library,
        logs[2].with_name("session.v4.jsonl"),
        loose_named,
        loose_library,
    ):
        assert published.read_bytes() == by_store, published

    unnamed = tmp_path / "loose-unnamed.v4.jsonl"
    migrate_file(loose, output=unnamed)
    assert b'"childId":"kid"' not in unnamed.read_bytes()


def test_child_headers_and_store_root_together_are_refused(tmp_path: Path) -> None:
    log = store_with_child(tmp_path / "root")
    with pytest.raises(ValueError, match="either child_headers or store_root"):
        migrate_file(log, dry_run=True, child_headers=(), store_root=tmp_path / "root")


@pytest.mark.parametrize(
    ("filed_as", "header_id", "cwd"),
    [
        ("other", "s", "/p"),  # the directory of another session
        ("s", "s", "/elsewhere"),  # the right name under another project
        ("s", "", "/p"),  # no usable id
        ("x" * 300, "s", "/p"),  # a hashed directory name, another session's
        ("s", "x" * 300, "/p"),  # a hashed id filed under a plain name
    ],
)
def test_a_misfiled_store_file_is_refused_and_the_others_go_on(
    tmp_path: Path, filed_as: str, header_id: str, cwd: str
) -> None:
    root = tmp_path / "root"
    misfiled = header_log(
        layout.session_dir(root, filed_as, "/p") / "session.v3.jsonl", 3, header_id, cwd=cwd
    )
    bound = header_log(layout.session_dir(root, "t", None) / "session.v3.jsonl", 3, "t")
    assert store_root(misfiled) == root.resolve()  # in the store, by its place
    for dry_run in (True, False):
        by_path = {r.source: r for r in migrate_paths([root], dry_run=dry_run)}
        assert by_path[misfiled].status == "refused"
        reason = by_path[misfiled].reason
        assert reason is not None and reason.startswith("identity-binding: the header names")
        assert by_path[bound].status == ("would-migrate" if dry_run else "migrated")
    # Named on its own it is still a store file: refused, not a usage error.
    (alone,) = migrate_paths([misfiled])
    assert alone.status == "refused"
    (walked,) = [r for r in migrate_store(root) if r.source == misfiled]
    assert walked.status == "refused" and walked.reason == by_path[misfiled].reason
    assert sorted(p.name for p in misfiled.parent.iterdir()) == ["session.v3.jsonl"]
