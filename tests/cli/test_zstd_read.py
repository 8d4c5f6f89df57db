"""The commands on zstd-encoded logs, session directories and roots; migration and
salvage of a zstd log are refused before a byte changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from dsh_store.errors import ZstdWriteUnsupportedError
from dsh_store.restore import read_log
from dsh_store.salvage import salvage_file
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


def test_migrating_a_zstd_log_is_refused_untouched(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "session.jsonl"
    source.write_bytes((REPO / "fixtures" / "valid" / "v0-basic" / "session.jsonl").read_bytes())
    log = to_zstd(source)
    before = _digest(log)
    assert "needs-migration" in invoke("verify", log).output
    result = invoke("migrate", log)
    assert result.exit_code != 0 and "zstd" in result.output, result.output
    assert "Traceback" not in result.output
    assert _digest(log) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["session.jsonl.zstd"]


def test_salvaging_a_zstd_log_is_refused_untouched(
    invoke: Invoke, tmp_path: Path, zstd_root: tuple[Path, Path, bytes]
) -> None:
    _, log, _ = zstd_root
    before = _digest(log)
    with pytest.raises(ZstdWriteUnsupportedError):
        salvage_file(log, tmp_path / "out.jsonl")
    assert _digest(log) == before and not (tmp_path / "out.jsonl").exists()
