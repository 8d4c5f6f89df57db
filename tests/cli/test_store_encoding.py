"""One encoding per store root, on read too: a log of the other encoding is refused by the
store (explicit or detected encoding), reported by verify (rule ``store-encoding``) and
list (``other-encoding``), in both directions; the CLI converts a root with
``migrate --encoding``; a half-converted session directory is refused until finished."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from dsh_store.errors import EncodingConversionPendingError, StoreEncodingError
from dsh_store.jsonl.zstd_frames import MAGIC
from dsh_store.migrate import migrate_file
from dsh_store.store import JsonlStore
from dsh_store.verify import counts_as_failure, verify_paths

pytest.importorskip("zstandard", reason="the zstd extra (zstandard) is not installed")

Invoke = Callable[..., Result]
CLOCK_MS = 1_700_000_000_000
OTHER = {"raw": "zstd", "zstd": "raw"}


def _session(root: Path, session_id: str, encoding: str) -> Path:
    store = JsonlStore(root, encoding=encoding, window_s=0, clock=lambda: CLOCK_MS)
    with store.new(session_id, cwd="/w") as live:
        live.append("turn/start", {"turn": 1})
        live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        return live.path


def _mixed(root: Path, encoding: str) -> tuple[Path, Path]:
    """A root of ``encoding`` (its first session ``a``) with an artifact ``b`` of the other."""
    return _session(root, "a", encoding), _session(root, "b", OTHER[encoding])


@pytest.mark.parametrize("encoding", ["raw", "zstd"])
def test_the_store_refuses_to_read_a_log_of_the_other_encoding(
    tmp_path: Path, encoding: str
) -> None:
    own, artifact = _mixed(tmp_path, encoding)
    for store in (JsonlStore(tmp_path), JsonlStore(tmp_path, encoding=encoding)):
        assert store.inspect("a").path == own
        for read in (store.inspect, store.load, store.locate, store.open):
            with pytest.raises(StoreEncodingError) as caught:
                read("b")
            message = str(caught.value)
            assert str(artifact) in message and f"encoding={OTHER[encoding]!r}" in message
            assert f"migrate --encoding {encoding}" in message
        with pytest.raises(StoreEncodingError):
            store.list()
    # The artifact's own encoding reads it and refuses the rest.
    other = JsonlStore(tmp_path, encoding=OTHER[encoding])
    assert other.inspect("b").classification == "ok"
    with pytest.raises(StoreEncodingError) as caught:
        other.inspect("a")
    assert str(own) in str(caught.value)


@pytest.mark.parametrize("encoding", ["raw", "zstd"])
def test_verify_reports_the_artifact_with_a_rule(tmp_path: Path, encoding: str) -> None:
    own, artifact = _mixed(tmp_path, encoding)
    reports = {report.path: report for report in verify_paths([tmp_path])}
    assert [finding.rule for finding in reports[str(own)].findings] == []
    (finding,) = reports[str(artifact)].findings
    assert finding.rule == "store-encoding" and str(tmp_path) in finding.message
    assert f"--encoding {encoding} {artifact}" in finding.message
    assert counts_as_failure(reports[str(artifact)])
    # A session directory or the file alone is judged against its root just the same.
    (alone,) = verify_paths([artifact])
    assert [finding.rule for finding in alone.findings] == ["store-encoding"]


@pytest.mark.parametrize("encoding", ["raw", "zstd"])
def test_the_cli_reports_the_artifact_in_verify_and_list(
    invoke: Invoke, tmp_path: Path, encoding: str
) -> None:
    _, artifact = _mixed(tmp_path, encoding)
    result = invoke("verify", tmp_path, "--json")
    assert result.exit_code == 1, result.output
    files = {entry["path"]: entry for entry in json.loads(result.stdout)["files"]}
    assert [f["rule"] for f in files[str(artifact)]["findings"]] == ["store-encoding"]
    text = invoke("verify", tmp_path)
    assert "store-encoding" in text.output and str(artifact) in text.output
    listed = invoke("list", tmp_path, "--json")
    assert listed.exit_code == 0, listed.output
    rows = {row["id"]: row for row in json.loads(listed.stdout)["sessions"]}
    assert (rows["a"]["status"], rows["b"]["status"]) == ("current", "other-encoding")
    assert rows["a"]["events"] == rows["b"]["events"] == 2
    # Converting the artifact makes the root whole again.
    converted = invoke("migrate", artifact.parent, "--encoding", encoding)
    assert converted.exit_code == 0, converted.output
    assert invoke("verify", tmp_path).exit_code == 0


def test_list_counts_the_events_of_a_zstd_log(invoke: Invoke, tmp_path: Path) -> None:
    _session(tmp_path, "a", "zstd")
    listed = invoke("list", tmp_path, "--json")
    (row,) = json.loads(listed.stdout)["sessions"]
    assert (row["status"], row["events"]) == ("current", 2)


def test_a_half_converted_session_is_refused_and_reported(invoke: Invoke, tmp_path: Path) -> None:
    raw = _session(tmp_path, "a", "raw")
    zstd = raw.with_name("session.v4.jsonl.zstd")
    migrate_file(raw, output=zstd)  # what a conversion killed before its retire leaves
    with pytest.raises(EncodingConversionPendingError) as caught:
        JsonlStore(tmp_path).inspect("a")
    assert str(zstd) in str(caught.value) and "migrate --encoding" in str(caught.value)
    result = invoke("verify", tmp_path)
    assert result.exit_code == 1 and "encoding-conversion" in result.output
    rows = json.loads(invoke("list", tmp_path, "--json").stdout)["sessions"]
    assert [row["status"] for row in rows] == ["encoding-conversion"]
    finished = invoke("migrate", tmp_path, "--encoding", "zstd")
    assert finished.exit_code == 0, finished.output
    assert not raw.exists() and JsonlStore(tmp_path).inspect("a").path == zstd


def test_migrate_encoding_options_on_the_cli(invoke: Invoke, tmp_path: Path) -> None:
    raw = _session(tmp_path / "root", "a", "raw")
    wrong = invoke("migrate", raw, "--encoding", "zstd", "--output", tmp_path / "out.jsonl")
    assert wrong.exit_code == 2 and "names a raw log" in wrong.output
    loose = tmp_path / "loose.v4.jsonl"
    loose.write_bytes(raw.read_bytes())
    refused = invoke("migrate", loose, "--encoding", "zstd")
    assert refused.exit_code == 2 and "--output" in refused.output
    piped = invoke("migrate", raw, "--encoding", "zstd", "--output", "-")
    assert piped.exit_code == 0, piped.output
    assert piped.stdout_bytes[:4] == MAGIC
    assert raw.exists()  # --output leaves the source as it is
