"""``dsh-store verify`` in process: classifications, findings, options, exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from dsh_store.verify import counts_as_failure, iter_log_files, verify_paths
from tests.cli.conftest import record_session, snapshot_tree, write_header
from tests.cli.schema_check import VerifyFile, errors, load_schema
from tests.store.test_leftover_temps import leave_temp

Invoke = Callable[..., Result]


def _by_path(output: str, root: Path) -> dict[str, VerifyFile]:
    document = json.loads(output)
    return {str(Path(f["path"]).relative_to(root)): f for f in document["files"]}


def test_every_damage_gets_its_classification_and_json_matches_schema(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, expected = damaged
    result = invoke("verify", root, "--json")
    assert result.exit_code == 1, result.output
    assert errors(json.loads(result.stdout), load_schema("verify")) == []
    files = _by_path(result.stdout, root)
    assert {path: f["classification"] for path, f in files.items()} == expected
    summary = json.loads(result.stdout)["summary"]
    assert summary["not-a-session"] == 3 and summary["ok"] == 1 and sum(summary.values()) == 10


def test_findings_carry_rule_line_offset_and_seq(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    files = _by_path(invoke("verify", root, "--format", "json").stdout, root)
    torn = files["_no-cwd/torn/session.v4.jsonl"]["findings"]
    assert torn == [
        {
            "rule": "torn-tail",
            "message": "crash tail of 27 byte(s) from line 13: the last line has no newline "
            "(27 byte(s) cut off) [torn-line]",
            "line": 13,
            "eventLine": 12,
            "offset": (root / "_no-cwd/torn/session.v4.jsonl").stat().st_size - 27,
            "seq": 11,
        }
    ]
    (corrupt,) = files["_no-cwd/corrupt-middle/session.v4.jsonl"]["findings"]
    assert (corrupt["rule"], corrupt["line"], corrupt["seq"]) == ("unparsable-line", 3, 1)
    lines = (root / "_no-cwd/corrupt-middle/session.v4.jsonl").read_bytes().split(b"\n")
    assert corrupt["offset"] == len(lines[0]) + len(lines[1]) + 2
    # The store's writer recorded the log's durable size: the damage lies below it.
    assert "which its writer saw fsynced" in corrupt["message"]
    (unreadable,) = files["loose/loop.jsonl"]["findings"]
    assert unreadable["rule"] == "unreadable"
    assert unreadable["message"].endswith("cannot read: Too many levels of symbolic links")
    (newer,) = files["loose/newer.jsonl"]["findings"]
    assert "version 5 is not supported" in newer["message"]
    assert files["loose/newer.jsonl"]["version"] == 5


def test_verify_never_writes_bytes_or_mtimes(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    before = snapshot_tree(root)
    for args in (["--json"], ["--strict"], ["--format", "github"], ["--jobs", "2"]):
        assert invoke("verify", root, *args).exit_code == 1
    assert snapshot_tree(root) == before


def test_text_output_names_every_file_and_a_summary(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    result = invoke("verify", root)
    assert result.exit_code == 1
    assert f"{root}/_no-cwd/clean/session.v4.jsonl: ok (format 4, 11 events)\n" in result.stdout
    assert f"{root}/loose/old.jsonl: needs-migration (format 3, 0 events)\n" in result.stdout
    assert "  torn-tail [line 13, byte 1337, seq 11]: crash tail of 27 byte(s)" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "10 file(s): 3 not-a-session, 1 empty, 1 unsupported-version, 1 corrupt, "
        "1 torn-tail, 1 open-turn, 1 needs-migration, 1 ok; 8 failing"
    )
    assert "\x1b[" not in result.stdout  # not a terminal: plain


def test_github_annotations_for_failures_and_warnings(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    result = invoke("verify", root, "--format", "github")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    torn = str(root / "_no-cwd/torn/session.v4.jsonl").replace(":", "%3A").replace(",", "%2C")
    assert (
        f"::error file={torn},line=13,title=torn-tail::crash tail of 27 byte(s) "
        "from line 13: the last line has no newline (27 byte(s) cut off) [torn-line]"
    ) in lines
    assert sum(line.startswith("::error ") for line in lines) == 8
    assert [line for line in lines if line.startswith("::warning ")] == [
        f"::warning file={root}/loose/old.jsonl,line=1,title=needs-migration"
        "::format version 3; `dsh-store migrate` upgrades it to 4"
    ]


def test_exit_codes_follow_the_options(invoke: Invoke, tmp_path: Path) -> None:
    clean = record_session(tmp_path / "s", "clean", turns=1)
    opened = record_session(tmp_path / "s", "open", turns=1, open_turn=True)
    old = tmp_path / "old" / "session.v3.jsonl"
    write_header(old, 3)
    assert invoke("verify", clean).exit_code == 0
    assert invoke("verify", clean, "--strict").exit_code == 0
    assert invoke("verify", old).exit_code == 0
    assert invoke("verify", old, "--require-current").exit_code == 1
    assert invoke("verify", opened).exit_code == 1
    assert invoke("verify", opened, "--allow-repairable").exit_code == 0
    assert invoke("verify", opened, "--allow-repairable", "--strict").exit_code == 1
    assert invoke("verify", clean, old, "-j", "2").exit_code == 0


def test_strict_fails_an_ok_file_that_has_a_finding(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "crlf", turns=1)
    log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    report = json.loads(invoke("verify", log, "--json").stdout)["files"][0]
    assert report["classification"] == "ok"
    assert {f["rule"] for f in report["findings"]} == {"crlf"}
    assert invoke("verify", log).exit_code == 0
    assert invoke("verify", log, "--strict").exit_code == 1


def test_usage_errors_exit_2_with_one_line(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "empty-dir").mkdir()
    result = invoke("verify", tmp_path / "empty-dir")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path}/empty-dir: no .jsonl session logs found (pass a store root, a "
        "session directory or a .jsonl file)\n"
    )
    missing = invoke("verify", tmp_path / "missing.jsonl")
    assert missing.exit_code == 2
    assert f"{tmp_path}/missing.jsonl does not exist" in missing.stderr
    assert invoke("verify").exit_code == 2
    assert invoke("verify", tmp_path, "--format", "xml").exit_code == 2
    assert invoke("verify", tmp_path, "--jobs", "0").exit_code == 2


def test_walk_keeps_newest_generation_and_skips_sidecars(tmp_path: Path) -> None:
    session = tmp_path / "--p--" / "s"
    write_header(session / "session.jsonl", 0)
    write_header(session / "session.v2.jsonl", 2)
    (session / "session.v4.jsonl.torn-10").write_bytes(b"x")
    (session / "old.jsonl.v3.bak").write_bytes(b"x")
    (session / "session.v2.jsonl.abc.tmp").write_bytes(b"x")
    assert list(iter_log_files(tmp_path)) == [str(session / "session.v2.jsonl")]


def test_symlinks_are_not_followed_out_of_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_header(outside / "secret.jsonl", 4)
    tree = tmp_path / "tree"
    write_header(tree / "inside.jsonl", 4)
    (tree / "link-out.jsonl").symlink_to(outside / "secret.jsonl")
    (tree / "link-in.jsonl").symlink_to(tree / "inside.jsonl")
    (tree / "dir-out").symlink_to(outside, target_is_directory=True)
    assert list(iter_log_files(tree)) == [str(tree / "inside.jsonl"), str(tree / "link-in.jsonl")]


def test_counts_as_failure_matrix(tmp_path: Path) -> None:
    log = record_session(tmp_path, "x", turns=1, open_turn=True)
    (report,) = verify_paths([log])
    assert report.classification == "open-turn"
    assert counts_as_failure(report)
    assert not counts_as_failure(report, allow_repairable=True)
    assert counts_as_failure(report, allow_repairable=True, strict=True)


def test_a_leftover_temp_is_a_finding_that_fails_only_strict(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = record_session(tmp_path, "temps", turns=1)
    temp = leave_temp(log, age_s=3 * 3600)
    before = snapshot_tree(tmp_path)
    result = invoke("verify", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("verify")) == []
    (report,) = document["files"]
    message = (
        f"{temp.name}: {temp.stat().st_size} bytes left by an interrupted publish 3 h ago; "
        "dsh-store repair deletes it"
    )
    assert report["classification"] == "ok"
    assert report["findings"] == [
        {
            "rule": "leftover-temp",
            "message": message,
            "line": None,
            "eventLine": None,
            "offset": None,
            "seq": None,
        }
    ]
    text = invoke("verify", tmp_path, env={"NO_COLOR": "1"})
    assert text.exit_code == 0
    assert text.stdout == (
        f"{log}: ok (format 4, 6 events)\n  leftover-temp: {message}\n1 file(s): 1 ok; all pass\n"
    )
    strict = invoke("verify", tmp_path, "--strict")
    assert strict.exit_code == 1 and f"{log}: ok (format 4, 6 events) FAIL" in strict.stdout
    github = invoke("verify", tmp_path, "--format", "github").stdout.splitlines()
    assert github[0] == f"::warning file={log},title=ok%3A leftover-temp::{message}"
    assert snapshot_tree(tmp_path) == before


def test_one_file_under_two_spellings_is_reported_once_as_pathlib_spells_it(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = record_session(tmp_path / "store", "s1")
    monkeypatch.chdir(tmp_path)
    relative = log.relative_to(tmp_path)
    result = invoke("verify", "--json", str(relative), f"./{relative}", "./store//")
    assert result.exit_code == 0, result.output
    assert [entry["path"] for entry in json.loads(result.stdout)["files"]] == [str(relative)]
