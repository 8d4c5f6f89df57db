"""The commands on zstd-encoded logs, session directories and roots: read, repair and
migrate them; salvage of a zstd log is refused before a byte changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from dsh_store.errors import ZstdWriteUnsupportedError
from dsh_store.jsonl.zstd_codec import decode_log
from dsh_store.restore import read_log
from dsh_store.salvage import salvage_file
from dsh_store.store import JsonlStore
from tests.cli.conftest import record_session
from tests.conftest import REPO
from tests.jsonl.zstd_logs import to_zstd

pytest.importorskip("zstandard", reason="the zstd extra (zstandard) is not installed")

Invoke = Callable[..., Result]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def zstd_root(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A root with one completed session, stored as session.v4.jsonl.zstd."""
    log = record_session(tmp_path / "root", "s", turns=2, cwd="/work/p")
    raw = log.read_bytes()
    return tmp_path / "root", to_zstd(log), raw


def test_verify_walks_zstd_logs_in_roots_directories_and_files(
    invoke: Invoke, zstd_root: tuple[Path, Path, bytes]
) -> None:
    root, log, _ = zstd_root
    for target in (root, log.parent, log):
        result = invoke("verify", target, "--json")
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert [entry["path"] for entry in document["files"]] == [str(log)]
        assert document["summary"] == {"ok": 1}


def test_cat_decodes_to_the_plain_jsonl_of_the_raw_twin(
    invoke: Invoke, tmp_path: Path, zstd_root: tuple[Path, Path, bytes]
) -> None:
    _, log, raw = zstd_root
    twin = tmp_path / "twin" / "session.v4.jsonl"
    twin.parent.mkdir()
    twin.write_bytes(raw)
    zstd_out = invoke("cat", log)
    raw_out = invoke("cat", twin)
    assert zstd_out.exit_code == raw_out.exit_code == 0, zstd_out.output
    assert zstd_out.stdout == raw_out.stdout and zstd_out.stdout


def test_inspect_and_list_read_zstd_sessions(
    invoke: Invoke, zstd_root: tuple[Path, Path, bytes]
) -> None:
    root, log, _ = zstd_root
    result = invoke("inspect", log, "--json")
    assert result.exit_code == 0, result.output
    (summary,) = json.loads(result.stdout)["files"]
    assert (summary["classification"], summary["events"], summary["turns"]) == ("ok", 11, 2)
    listed = invoke("list", root, "--json")
    assert listed.exit_code == 0, listed.output
    assert "s" in listed.stdout


def test_a_torn_zstd_log_reads_with_its_closers_and_repair_keeps_its_records(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = to_zstd(record_session(tmp_path / "root", "t", turns=1, open_turn=True), 1)
    data = log.read_bytes()
    log.write_bytes(data[:-3])  # the last frame loses its checksum trailer
    report = read_log(log)
    assert report.classification == "torn-tail" and report.torn is not None
    assert report.torn.rule == "torn-frame"
    assert [event.type for event in report.closers][-1] == "turn/end"
    assert "torn-tail" in invoke("inspect", log).output
    result = invoke("repair", log)
    assert result.exit_code == 0, result.output
    repaired = read_log(log)
    assert repaired.classification == "ok"
    assert [e.line for e in repaired.events] == [e.line for e in report.balanced]
    sidecar = log.with_name(f"{log.name}.torn-{report.torn.offset}")
    assert sidecar.read_bytes() == data[report.torn.offset : -3]


V0_BASIC = REPO / "fixtures" / "valid" / "v0-basic"


def _v0_zstd_store(root: Path) -> Path:
    """A root holding the format-0 fixture session as ``session.jsonl.zstd``."""
    directory = root / "--work-project--" / "fixture-session"
    directory.mkdir(parents=True)
    (directory / "session.jsonl").write_bytes((V0_BASIC / "session.jsonl").read_bytes())
    return to_zstd(directory / "session.jsonl")


def test_migrating_a_zstd_store_publishes_the_v4_zstd_generation_beside(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = _v0_zstd_store(tmp_path / "root")
    before = _digest(log)
    assert "needs-migration" in invoke("verify", log).output
    result = invoke("migrate", tmp_path / "root")
    assert result.exit_code == 0, result.output
    published = log.with_name("session.v4.jsonl.zstd")
    assert published.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    assert decode_log(published).raw == (V0_BASIC / "expected.v4.jsonl").read_bytes()
    assert _digest(log) == before  # the source generation stays as the backup
    assert invoke("verify", tmp_path / "root").exit_code == 0


def test_migrate_output_converts_between_encodings(invoke: Invoke, tmp_path: Path) -> None:
    log = _v0_zstd_store(tmp_path / "root")
    raw = tmp_path / "out.v4.jsonl"
    zstd = tmp_path / "again.v4.jsonl.zstd"
    assert invoke("migrate", log, "--output", raw).exit_code == 0
    assert raw.read_bytes() == (V0_BASIC / "expected.v4.jsonl").read_bytes()
    plain = tmp_path / "session.jsonl"
    plain.write_bytes((V0_BASIC / "session.jsonl").read_bytes())
    assert invoke("migrate", plain, "--output", zstd).exit_code == 0
    assert decode_log(zstd).raw == raw.read_bytes()


def test_opening_an_old_zstd_session_upgrades_it_in_zstd(tmp_path: Path) -> None:
    log = _v0_zstd_store(tmp_path / "root")
    store = JsonlStore(tmp_path / "root")
    assert store.encoding == "zstd"
    with store.open("fixture-session") as live:
        live.append("turn/start", {"turn": 3})
    published = log.with_name("session.v4.jsonl.zstd")
    assert read_log(published).events[-1].type == "turn/start"
    assert sorted(p.name for p in log.parent.iterdir() if "session." in p.name) == [
        "session.jsonl.zstd",
        "session.lock",
        "session.v4.jsonl.zstd",
        "session.v4.jsonl.zstd.durable",
    ]


def test_salvaging_a_zstd_log_is_refused_untouched(
    invoke: Invoke, tmp_path: Path, zstd_root: tuple[Path, Path, bytes]
) -> None:
    _, log, _ = zstd_root
    before = _digest(log)
    with pytest.raises(ZstdWriteUnsupportedError):
        salvage_file(log, tmp_path / "out.jsonl")
    assert _digest(log) == before and not (tmp_path / "out.jsonl").exists()
