"""Misfiled logs in ``verify``, ``list`` and ``migrate``: a store log's header id and cwd
must derive its directory (DSH's identity binding); a loose file is named by its path alone.

Each case copies a real log into the directory of another session (or another project)
of the same store, next to a correctly filed session that must go on being handled.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from dsh_store.jsonl import layout
from tests.cli.conftest import record_session, write_header
from tests.cli.schema_check import errors, load_schema

Invoke = Callable[..., Result]

LONG_ID = "x" * 300  # a hashed session directory name
CWD = "/home/user/project"


def _misfile(root: Path, source: Path, session_id: str, cwd: str | None) -> Path:
    target = layout.session_dir(root, session_id, cwd) / source.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    return target


CASES = [
    # (header id, header cwd, filed as id, filed under cwd)
    pytest.param(("a", CWD, "b", CWD), id="other-id"),
    pytest.param(("a", CWD, "a", "/elsewhere"), id="other-project"),
    pytest.param(("a", None, "a", CWD), id="no-cwd-in-a-project"),
    pytest.param(("a", CWD, "a", None), id="project-log-in-no-cwd"),
    pytest.param((LONG_ID, CWD, "b", CWD), id="hashed-moved-out"),
    pytest.param(("a", None, LONG_ID, None), id="into-a-hashed-dir"),
]


@pytest.fixture
def misfiled_store(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, Path]:
    """(root, misfiled log, bound log) of a store holding one of CASES."""
    header_id, header_cwd, filed_as, filed_cwd = request.param
    root = tmp_path / "store"
    source = record_session(tmp_path / "elsewhere", header_id, cwd=header_cwd)
    misfiled = _misfile(root, source, filed_as, filed_cwd)
    bound = record_session(root, "bound", cwd=CWD)
    return root, misfiled, bound


@pytest.mark.parametrize("misfiled_store", CASES, indirect=True)
def test_verify_reports_a_misfiled_log_corrupt(
    invoke: Invoke, misfiled_store: tuple[Path, Path, Path]
) -> None:
    root, misfiled, bound = misfiled_store
    result = invoke("verify", root, "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("verify")) == []
    files = {entry["path"]: entry for entry in document["files"]}
    assert files[str(bound)]["classification"] == "ok"
    report = files[str(misfiled)]
    assert report["classification"] == "corrupt"
    (finding,) = [f for f in report["findings"] if f["rule"] == "identity-binding"]
    assert (finding["line"], finding["offset"]) == (1, 0)
    header = json.loads(misfiled.read_bytes().partition(b"\n")[0])
    assert f"the header names session {header['id']!r}" in finding["message"]
    assert (f"cwd {header['cwd']!r}" if "cwd" in header else "no cwd") in finding["message"]
    expected = layout.session_dir(root.resolve(), header["id"], header.get("cwd"))
    assert f"whose session directory is {expected}," in finding["message"]
    assert f"filed in {misfiled.parent.resolve()};" in finding["message"]
    text = invoke("verify", root)
    assert text.exit_code == 1
    assert f"{misfiled}: corrupt" in text.stdout and f"{bound}: ok" in text.stdout


@pytest.mark.parametrize("misfiled_store", CASES, indirect=True)
def test_list_marks_a_misfiled_log(invoke: Invoke, misfiled_store: tuple[Path, Path, Path]) -> None:
    root, misfiled, bound = misfiled_store
    result = invoke("list", root, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("list")) == []
    rows = document["sessions"]
    flags = {row["path"]: row["misfiled"] for row in rows}
    assert flags == {str(misfiled): True, str(bound): False}
    (row,) = [row for row in rows if row["misfiled"]]
    assert row["status"] == "current"  # the header's facts are still shown
    table = invoke("list", root).stdout.splitlines()
    assert sum(" misfiled " in line for line in table) == 1
    assert any(line.startswith("bound ") and " current " in line for line in table)


@pytest.mark.parametrize("misfiled_store", CASES, indirect=True)
def test_migrate_refuses_a_misfiled_log_and_goes_on(
    invoke: Invoke, misfiled_store: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    root, misfiled, _ = misfiled_store
    # Make both logs older-format (v3 headers over header-only logs) so both need work.
    old = tmp_path / "old-store"
    shutil.copytree(root, old)
    for log in old.rglob("session.v4.jsonl"):
        row = json.loads(log.read_bytes().partition(b"\n")[0])
        target = log.with_name("session.v3.jsonl")
        write_header(target, 3, session_id=row["id"])
        _with_cwd(target, row.get("cwd"))
        log.unlink()
    result = invoke("migrate", old, "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("migrate")) == []
    by_status = {entry["status"]: entry for entry in document["files"]}
    assert set(by_status) == {"migrated", "refused"}
    assert by_status["refused"]["reason"].startswith("identity-binding: the header names")
    refused = Path(by_status["refused"]["source"])
    assert refused.parent.name == misfiled.parent.name
    assert sorted(p.name for p in refused.parent.iterdir()) == ["session.v3.jsonl"]


def _with_cwd(log: Path, cwd: str | None) -> None:
    header, _, body = log.read_bytes().partition(b"\n")
    row = json.loads(header)
    if cwd is not None:
        row["cwd"] = cwd
    log.write_bytes(json.dumps(row, separators=(",", ":")).encode() + b"\n" + body)


def test_a_loose_copy_is_not_bound(invoke: Invoke, tmp_path: Path) -> None:
    source = record_session(tmp_path / "store", "a", cwd=CWD)
    loose = tmp_path / "copies" / "b" / "session.v4.jsonl"  # no project directory above
    loose.parent.mkdir(parents=True)
    shutil.copyfile(source, loose)
    result = invoke("verify", loose)
    assert result.exit_code == 0, result.output
    assert f"{loose}: ok" in result.stdout
    assert invoke("migrate", loose, "--check").exit_code == 0


def test_repair_refuses_a_misfiled_log_and_repairs_the_others(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    source = record_session(tmp_path / "elsewhere", "a", open_turn=True, cwd=CWD)
    misfiled = _misfile(root, source, "b", CWD)
    bound = record_session(root, "bound", open_turn=True, cwd=CWD)
    before = misfiled.read_bytes()
    result = invoke("repair", root, "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("repair")) == []
    rows = {row["path"]: row for row in document["files"]}
    assert rows[str(bound)]["status"] == "repaired"
    assert rows[str(misfiled)]["status"] == "refused"
    assert rows[str(misfiled)]["reason"].startswith("identity-binding: the header names")
    assert misfiled.read_bytes() == before
    assert sorted(p.name for p in misfiled.parent.iterdir()) == ["session.v4.jsonl"]
