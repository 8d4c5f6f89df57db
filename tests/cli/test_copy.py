"""``dsh-store copy SRC DST``: byte-identical copies between JSONL roots and PostgreSQL
stores, never overwriting, refusing what needs a repair or a migration, and finished by a
rerun after a SIGKILL of the copying process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import Result

from dsh_store.jsonl.layout import session_dir
from dsh_store.postgres.store import PostgresStore
from dsh_store.postgres.url import redact
from tests.cli.conftest import CONSOLE_SCRIPT, V3_LOG, record_session
from tests.cli.schema_check import errors, load_schema
from tests.postgres.server import empty_store_url

Invoke = Callable[..., Result]


def _logs(root: Path) -> dict[str, bytes]:
    """Every session log under ``root`` by relative path (zstd decoded), nothing else."""
    from dsh_store.jsonl.zstd_codec import decode_log

    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("session*.jsonl*")):
        if path.name.endswith(".jsonl"):
            found[str(path.relative_to(root))] = path.read_bytes()
        elif path.name.endswith(".jsonl.zstd"):
            relative = str(path.relative_to(root)).removesuffix(".zstd")
            found[relative] = decode_log(path).raw
    return found


def _source(root: Path, count: int = 3) -> Path:
    """A JSONL store of ``count`` clean sessions, in two project directories."""
    for index in range(count):
        cwd = "/home/me/project" if index % 2 else None
        record_session(root, f"s{index:03d}", turns=1 + index % 3, cwd=cwd)
    return root


def _json(result: Result) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(result.stdout)
    assert errors(document, load_schema("copy")) == []
    return document


def _statuses(result: Result) -> dict[str, str]:
    return {item["session"]: item["status"] for item in _json(result)["sessions"]}


@pytest.fixture
def second_pg_url() -> Iterator[str]:
    """A second empty store on the test server (its own schema)."""
    yield from empty_store_url()


@pytest.mark.requires("postgres")
def test_jsonl_to_postgres_and_back_gives_identical_files(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    source = _source(tmp_path / "src", 5)
    there = invoke("copy", source, pg_url, "--json")
    assert there.exit_code == 0, there.output
    assert set(_statuses(there).values()) == {"copied"}
    secret = urlsplit(pg_url).password
    assert secret and secret not in there.stdout + there.stderr
    store = PostgresStore(pg_url)
    for name, data in _logs(source).items():
        session_id = Path(name).parent.name
        assert b"".join(store.iter_records(session_id)) == data  # the records, byte for byte
    store.close()

    back = invoke("copy", pg_url, tmp_path / "back")
    assert back.exit_code == 0, back.output
    assert _logs(tmp_path / "back") == _logs(source)
    assert invoke("verify", tmp_path / "back").exit_code == 0

    # Run again: everything is there already, identical, and nothing is written.
    again = invoke("copy", source, pg_url, "--json")
    assert again.exit_code == 0
    assert set(_statuses(again).values()) == {"present"}
    text = invoke("copy", pg_url, tmp_path / "back")
    assert text.exit_code == 0
    assert text.stdout.splitlines()[-1] == "5 session(s): 5 present"


@pytest.mark.requires("postgres")
def test_postgres_to_postgres(
    pg_url: str, second_pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    source = _source(tmp_path / "src")
    assert invoke("copy", source, pg_url).exit_code == 0
    result = invoke("copy", pg_url, second_pg_url, "--session", "s001", "--session", "s002")
    assert result.exit_code == 0, result.output
    first, second = PostgresStore(pg_url), PostgresStore(second_pg_url)
    assert [header.id for header in second.list()] == ["s001", "s002"]
    for session_id in ("s001", "s002"):
        assert list(first.iter_records(session_id)) == list(second.iter_records(session_id))
    first.close()
    second.close()
    assert f"to {redact(second_pg_url)}#s001" in result.stdout


def test_raw_to_zstd_and_back(tmp_path: Path, invoke: Invoke) -> None:
    pytest.importorskip("zstandard")
    source = _source(tmp_path / "src")
    result = invoke("copy", source, tmp_path / "packed", "--encoding", "zstd")
    assert result.exit_code == 0, result.output
    packed = sorted((tmp_path / "packed").rglob("session.v4.jsonl.zstd"))
    assert len(packed) == 3
    assert all(path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd" for path in packed)  # zstd frames
    assert _logs(tmp_path / "packed") == _logs(source)
    # A zstd root keeps its encoding; the raw copy of it is the source again.
    assert invoke("copy", tmp_path / "packed", tmp_path / "plain").exit_code == 0
    for relative, data in _logs(source).items():
        assert (tmp_path / "plain" / relative).read_bytes() == data
    assert invoke("verify", tmp_path / "packed", tmp_path / "plain").exit_code == 0
    mixed = invoke("copy", source, tmp_path / "packed", "--encoding", "raw")
    assert mixed.exit_code == 2  # a root keeps one encoding
    assert "DST holds zstd logs" in mixed.stderr


def test_a_crlf_line_is_copied_as_dsh_store_frames_it(tmp_path: Path, invoke: Invoke) -> None:
    log = record_session(tmp_path / "src", "s1")
    canonical = log.read_bytes()
    lines = canonical.splitlines(keepends=True)
    lines[2] = lines[2].replace(b"\n", b"\r\n")
    log.write_bytes(b"".join(lines))
    assert invoke("copy", tmp_path / "src", tmp_path / "dst").exit_code == 0
    copied = tmp_path / "dst" / log.relative_to(tmp_path / "src")
    assert copied.read_bytes() == canonical  # the event's line, without the CR
    findings = json.loads(invoke("verify", copied, "--json").stdout)["files"][0]["findings"]
    assert findings == []


def test_an_existing_session_is_never_overwritten(tmp_path: Path, invoke: Invoke) -> None:
    source = _source(tmp_path / "src")
    target = tmp_path / "dst"
    record_session(target, "s001", turns=3, cwd="/home/me/project")  # other content, same id
    taken = target / "--home-me-project--" / "s001" / "session.v4.jsonl"
    before = taken.read_bytes()
    result = invoke("copy", source, target, "--json")
    assert result.exit_code == 1
    items = {item["session"]: item for item in _json(result)["sessions"]}
    assert {key: item["status"] for key, item in items.items()} == {
        "s000": "copied",
        "s001": "conflict",
        "s002": "copied",
    }
    assert items["s001"]["target"] == str(taken)
    assert "never overwritten" in items["s001"]["reason"]
    assert taken.read_bytes() == before
    text = invoke("copy", source, target)
    assert text.exit_code == 1
    assert "s001: conflict: DST already holds session 's001' with other content" in text.stdout


def test_sessions_that_need_a_repair_or_a_migration_are_refused(
    tmp_path: Path, invoke: Invoke
) -> None:
    source = _source(tmp_path / "src", 1)
    record_session(source, "open", open_turn=True)
    torn = record_session(source, "torn")
    with open(torn, "ab") as log:
        log.write(b'{"type":"turn/sta')
    header = json.loads(V3_LOG.read_bytes().splitlines()[0])
    older = session_dir(source, header["id"], header.get("cwd")) / "session.v3.jsonl"
    older.parent.mkdir(parents=True)
    shutil.copyfile(V3_LOG, older)
    result = invoke("copy", source, tmp_path / "dst", "--json")
    assert result.exit_code == 1
    items = {item["session"]: item for item in _json(result)["sessions"]}
    statuses = {key: item["status"] for key, item in items.items()}
    assert statuses["s000"] == "copied"
    assert [statuses[key] for key in ("open", "torn")] == ["refused", "refused"]
    assert "`dsh-store repair`" in items["open"]["reason"]
    assert "torn tail" in items["torn"]["reason"]
    refused_old = [item for key, item in items.items() if key not in ("s000", "open", "torn")]
    assert [item["status"] for item in refused_old] == ["refused"]
    assert "`dsh-store migrate`" in refused_old[0]["reason"]
    assert sorted(_logs(tmp_path / "dst")) == ["_no-cwd/s000/session.v4.jsonl"]


def test_selected_sessions_and_dry_run(tmp_path: Path, invoke: Invoke) -> None:
    source = _source(tmp_path / "src")
    target = tmp_path / "dst"
    planned = invoke("copy", source, target, "--session", "s002", "--dry-run", "--json")
    assert planned.exit_code == 0
    assert _statuses(planned) == {"s002": "would-copy"}
    assert not target.exists()  # a dry run writes nothing, not even the root
    result = invoke("copy", source, target, "--session", "s002", "--session", "nope")
    assert result.exit_code == 1
    assert "nope: refused: SRC holds no session 'nope'" in result.stdout
    assert sorted(_logs(target)) == ["_no-cwd/s002/session.v4.jsonl"]


def test_usage_errors(tmp_path: Path, invoke: Invoke) -> None:
    assert invoke("copy", tmp_path / "missing", tmp_path / "dst").exit_code == 2
    log = record_session(tmp_path / "src", "s1")
    assert invoke("copy", log, tmp_path / "dst").exit_code == 2  # a file is no store root
    url = "postgresql://agent:hunter2-secret@127.0.0.1:1/sessions"
    result = invoke("copy", tmp_path / "src", url, "--encoding", "zstd")
    assert result.exit_code == 2
    assert "hunter2" not in result.output


# -- kills: every session in DST complete or absent, a rerun completes the copy ------------


def _copy_process(source: Path | str, target: Path | str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(CONSOLE_SCRIPT), "copy", str(source), str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def _rerun_completes(source: Path, target: Path | str, invoke: Invoke, done: int) -> None:
    """A rerun reports the ``done`` sessions present and copies the rest."""
    result = invoke("copy", source, target, "--json")
    assert result.exit_code == 0, result.output
    statuses = list(_statuses(result).values())
    assert statuses.count("present") == done
    assert statuses.count("copied") == len(statuses) - done


@pytest.mark.parametrize(
    "failpoint",
    ["materialize.after-temp-write", "materialize.before-link", "materialize.after-link"],
)
def test_a_copy_killed_while_publishing_a_jsonl_log_is_finished_by_a_rerun(
    failpoint: str, tmp_path: Path, invoke: Invoke
) -> None:
    source = _source(tmp_path / "src", 5)
    target = tmp_path / "dst"
    child = _copy_process(
        source, target, DSH_STORE_FAILPOINT=failpoint, DSH_STORE_FAILPOINT_SKIP="2"
    )
    out, _ = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL
    assert len(out.splitlines()) == 2  # two sessions were reported copied before the kill
    linked = 3 if failpoint == "materialize.after-link" else 2  # the third one's link held
    assert len(_logs(target)) == linked
    _rerun_completes(source, target, invoke, linked)
    assert _logs(target) == _logs(source)


@pytest.mark.requires("postgres")
def test_a_copy_killed_inside_a_transaction_is_finished_by_a_rerun(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    source = _source(tmp_path / "src", 5)
    child = _copy_process(
        source, pg_url, DSH_STORE_FAILPOINT="pg.publish.before-commit", DSH_STORE_FAILPOINT_SKIP="3"
    )
    child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL
    store = PostgresStore(pg_url)
    assert [header.id for header in store.list()] == ["s000", "s001", "s002"]
    _rerun_completes(source, pg_url, invoke, 3)
    _assert_copied_once(pg_url, source, store)


def _assert_copied_once(url: str, source: Path, store: PostgresStore) -> None:
    """Every source session is in the store exactly once, byte-identical, seqs unique."""
    import psycopg

    logs = _logs(source)
    assert [header.id for header in store.list()] == sorted(Path(n).parent.name for n in logs)
    for name, data in logs.items():
        assert b"".join(store.iter_records(Path(name).parent.name)) == data
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT s.session_id, s.next_seq, count(e.seq), max(e.seq) FROM dsh_sessions s"
            " JOIN dsh_events e USING (session_id) GROUP BY 1, 2"
        ).fetchall()
    assert all(stored == count == top + 1 for _, stored, count, top in rows)
    store.close()


@pytest.mark.requires("postgres")
def test_a_copy_killed_from_outside_midway_is_finished_by_a_rerun(
    pg_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    source = _source(tmp_path / "src", 60)
    child = _copy_process(source, pg_url)
    assert child.stdout is not None
    for _ in range(3):  # let three sessions be reported copied, then kill it mid-way
        assert ": copied" in child.stdout.readline()
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    store = PostgresStore(pg_url)
    done = len(store.list())
    assert 3 <= done < 60  # mid-way: some copied, not all
    _rerun_completes(source, pg_url, invoke, done)
    _assert_copied_once(pg_url, source, store)
