"""The output contract every command shares: terminal safety, one versioned JSON envelope,
JSON usage errors, ``--jobs`` bounds, and the smaller promises of docs/cli.md.

Each test pins a defect found by using the commands as a new user would: control
characters from file names reaching the terminal raw, JSON documents of five shapes,
``--check`` disagreeing with the real run, ``cat`` passing an empty file, ``list`` and
``verify`` counting differently, library wording in command messages, ``None`` printed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from dsh_store.errors import SessionLockedError, StorageError
from dsh_store.jsonl.lock import SessionLock
from tests.cli.conftest import record_session, run_script, snapshot_tree, write_header
from tests.cli.schema_check import errors, load_schema

Invoke = Callable[..., Result]

HOSTILE = "evil\x1b[2J\nname"
"""A file-name part that clears the screen and would split a record in two."""
ESCAPED = "evil\\x1b[2J\\x0aname"
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


def _file_demo_logs(root: Path) -> None:
    """Each older-format demo log in ``root``, filed under ``_no-cwd`` by its fixture name."""
    for fixture in sorted(DEMO.iterdir()):
        (source,) = fixture.glob("*.jsonl")
        header, rest = source.read_bytes().split(b"\n", 1)
        value = json.loads(header)
        value["id"] = fixture.name
        value.pop("cwd", None)  # filed under _no-cwd, where such a header belongs
        target = root / "_no-cwd" / fixture.name / source.name
        target.parent.mkdir(parents=True)
        target.write_bytes(json.dumps(value).encode() + b"\n" + rest)


def _assert_safe(text: str, *, records: int) -> None:
    """No control character but newline, and exactly ``records`` lines."""
    assert "\x1b" not in text and "\r" not in text
    assert len(text.splitlines()) == records, text
    assert ESCAPED in text, text


def _torn_loose(directory: Path) -> Path:
    """A loose v4 log with a hostile name and a torn tail."""
    log = record_session(directory / "store", "s", turns=1)
    target = directory / f"{HOSTILE}.jsonl"
    shutil.copyfile(log, target)
    with open(target, "ab") as handle:
        handle.write(b'{"type":')
    return target


# -- terminal safety -------------------------------------------------------------------------


def test_verify_text_and_annotations_escape_control_characters_in_names(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = _torn_loose(tmp_path)
    text = invoke("verify", log, env={"NO_COLOR": "1"})
    assert text.exit_code == 1
    _assert_safe(text.stdout, records=3)  # the file, its finding, the summary
    github = invoke("verify", log, "--format", "github")
    _assert_safe(github.stdout, records=2)
    assert github.stdout.startswith(f"::error file={tmp_path}/{ESCAPED}.jsonl,line=")
    document = json.loads(invoke("verify", log, "--json").stdout)
    assert document["files"][0]["path"] == str(log)  # JSON keeps the name exact


def test_repair_and_migrate_text_escape_control_characters_in_names(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = _torn_loose(tmp_path)
    repaired = invoke("repair", log, env={"NO_COLOR": "1"})
    assert repaired.exit_code == 0, repaired.output
    _assert_safe(repaired.stdout, records=2)  # verdict, the cut (the last turn had ended)
    old = tmp_path / f"{HOSTILE}.v2.jsonl"
    write_header(old, 2)
    migrated = invoke("migrate", old, "--in-place", env={"NO_COLOR": "1"})
    assert migrated.exit_code == 0, migrated.output
    _assert_safe(migrated.stdout, records=2)  # the file, the counts
    assert invoke("migrate", old).exit_code == 0  # now format 4: current
    bad = tmp_path / f"{HOSTILE}.v3.jsonl"
    bad.write_bytes(b"not json\n")
    failed = invoke("migrate", bad, "--in-place", env={"NO_COLOR": "1"})
    assert failed.exit_code == 1
    _assert_safe(failed.stdout, records=3)  # the file, its reason, the counts


def test_salvage_text_escapes_control_characters_in_names(invoke: Invoke, tmp_path: Path) -> None:
    log = _torn_loose(tmp_path)
    out = tmp_path / f"out-{HOSTILE}.jsonl"
    result = invoke("repair", log, "--salvage", "--output", out, env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and ESCAPED in result.stdout
    assert all(line.startswith(("  ", str(tmp_path))) for line in result.stdout.splitlines())


def test_list_inspect_and_cat_escape_control_characters_in_names(
    invoke: Invoke, tmp_path: Path
) -> None:
    root = tmp_path / HOSTILE
    log = record_session(root, "s", turns=1, cwd=f"/w/{HOSTILE}")
    listed = invoke("list", root)
    assert listed.exit_code == 0
    _assert_safe(listed.stdout, records=2)  # the column heads, one row
    inspected = invoke("inspect", log)
    assert inspected.exit_code == 0
    assert "\x1b" not in inspected.stdout and inspected.stdout.startswith(f"{tmp_path}/{ESCAPED}/")
    empty = tmp_path / f"{HOSTILE}.jsonl"
    empty.write_bytes(b"")
    cat = invoke("cat", empty)
    assert cat.exit_code == 1
    _assert_safe(cat.stderr, records=1)


def test_usage_errors_quoting_a_path_escape_it(invoke: Invoke, tmp_path: Path) -> None:
    directory = tmp_path / HOSTILE
    directory.mkdir()
    old = tmp_path / "old.jsonl"
    write_header(old, 2)
    for args in (("migrate", old, "--output", directory), ("verify", tmp_path / f"x{HOSTILE}")):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert "\x1b" not in result.stderr, result.stderr
        (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert "evil\\x1b[2J\\" in error and "name" in error  # one line, escaped


def test_demo_escapes_control_characters_in_its_root(tmp_path: Path) -> None:
    done = run_script("demo", "--root", tmp_path / HOSTILE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b" not in done.stdout
    assert done.stdout.startswith(f"dsh-store demo, working in {tmp_path}/{ESCAPED}\n")
    assert done.stdout.rstrip().endswith(f"Files left in {tmp_path}/{ESCAPED}")


def test_json_output_escapes_del_and_c1_controls_as_the_same_value(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = record_session(tmp_path, "s", turns=1, cwd="/w")
    lines = log.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b"question 1", "question \x9b2J\x7f 1".encode(), 1)
    log.write_bytes(b"".join(lines))
    shown = invoke("inspect", log, "--json", "--messages")
    assert "\x9b" not in shown.stdout and "\x7f" not in shown.stdout
    assert "\\u009b2J\\u007f" in shown.stdout
    (summary,) = json.loads(shown.stdout)["files"]
    assert summary["messages"][1]["text"] == "question \x9b2J\x7f 1"
    cat = invoke("cat", log)
    assert cat.exit_code == 0
    assert b"\xc2\x9b" not in cat.stdout_bytes and b"\x7f" not in cat.stdout_bytes
    events = [json.loads(line) for line in cat.stdout_bytes.splitlines()]
    assert events == [json.loads(line) for line in lines[1:]]  # the same JSON values


# -- one versioned JSON envelope -------------------------------------------------------------


def _envelope_ok(result: Result, name: str, key: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(result.stdout)
    assert errors(document, load_schema(name)) == []
    assert document["schema"] == 1 and isinstance(document[key], list)
    assert next(iter(document)) == "schema" and list(document)[-1] == "summary"
    return document


def test_every_command_prints_one_envelope_shape(invoke: Invoke, tmp_path: Path) -> None:
    root = tmp_path / "store"
    log = record_session(root, "s", turns=1, open_turn=True)
    verified = _envelope_ok(invoke("verify", root, "--json"), "verify", "files")
    assert verified["summary"] == {"open-turn": 1}
    inspected = _envelope_ok(invoke("inspect", log, "--json"), "inspect", "files")
    assert inspected["summary"] == {"open-turn": 1}
    listed = _envelope_ok(invoke("list", root, "--json"), "list", "sessions")
    assert listed["summary"] == {"current": 1}
    planned = _envelope_ok(invoke("repair", root, "--json", "--dry-run"), "repair", "files")
    assert planned["summary"] == {"would-repair": 1}
    migrated = _envelope_ok(invoke("migrate", root, "--json", "--check"), "migrate", "files")
    assert migrated["summary"] == {"current": 1}
    out = tmp_path / "salvaged.jsonl"
    salvaged = _envelope_ok(
        invoke("repair", log, "--salvage", "-o", out, "--json", "--dry-run"), "salvage", "files"
    )
    assert salvaged["summary"] == {"would-salvage": 1}


def test_schemas_forbid_unknown_keys_and_pin_the_version() -> None:
    for name in ("verify", "migrate", "repair", "salvage", "inspect", "list", "error"):
        schema = load_schema(name)
        assert schema["additionalProperties"] is False, name
        assert schema["properties"]["schema"]["enum"] == [1], name
        assert schema["required"][0] == "schema", name
        problems = errors({"schema": 2, "extra": True}, schema)
        assert "$.schema: 2 is not one of [1]" in problems, name
        assert "$: unexpected key 'extra'" in problems, name


def test_findings_give_the_physical_line_and_dsh_event_line(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1, open_turn=True)
    old = tmp_path / "old.jsonl"
    write_header(old, 2)
    document = json.loads(invoke("verify", log, old, "--json").stdout)
    (open_turn,) = document["files"][0]["findings"]
    events = len(log.read_bytes().splitlines()) - 1
    # The closers go on the line after the last one: physical line events + 2.
    assert (open_turn["line"], open_turn["eventLine"], open_turn["seq"]) == (
        events + 2,
        events + 1,
        events,
    )
    assert open_turn["offset"] == log.stat().st_size
    (header,) = document["files"][1]["findings"]
    assert (header["line"], header["eventLine"]) == (1, None)


# -- usage errors under --json ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "kind", "says"),
    [
        (("verify", "--json", "--bogus", "x"), 2, "usage", "No such option '--bogus'"),
        (("verify", "{root}", "--json", "--format", "github"), 2, "usage", "two formats"),
        (("verify", "{root}", "--json", "--jobs", "0"), 2, "usage", "not in the range 1 to 64"),
        (("migrate", "{loose}", "--json", "--check"), 2, "usage", "is a loose file"),
        (("repair", "{root}", "--json", "--salvage"), 2, "usage", "--salvage needs --output"),
        (("inspect", "{root}", "--json"), 2, "usage", "not a session directory"),
        (("list", "{root}/missing", "--json"), 1, "error", "no such store root"),
        (("verify", "{root}/missing", "--format", "json"), 2, "usage", "does not exist"),
    ],
)
def test_errors_under_json_are_a_json_document_on_stdout(
    invoke: Invoke, tmp_path: Path, args: tuple[str, ...], code: int, kind: str, says: str
) -> None:
    root = tmp_path / "store"
    record_session(root, "s", turns=1)
    loose = tmp_path / "loose.jsonl"
    write_header(loose, 2)
    result = invoke(*(arg.format(root=root, loose=loose) for arg in args))
    assert result.exit_code == code, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("error")) == []
    assert (document["error"]["kind"], document["error"]["exitCode"]) == (kind, code)
    assert says in document["error"]["message"]
    assert result.stderr  # the human line stays on stderr


def test_json_and_format_json_together_are_fine(invoke: Invoke, tmp_path: Path) -> None:
    record_session(tmp_path, "s", turns=1)
    result = invoke("verify", tmp_path, "--json", "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["summary"] == {"ok": 1}


# -- --jobs ----------------------------------------------------------------------------------


def test_jobs_has_an_upper_bound_and_accepts_auto(invoke: Invoke, tmp_path: Path) -> None:
    for index in range(3):
        record_session(tmp_path, f"s{index}", turns=1)
    for bad in ("0", "65", "-1", "many"):
        refused = invoke("verify", tmp_path, "--jobs", bad)
        assert refused.exit_code == 2, (bad, refused.output)
        assert "'auto'" in refused.stderr
    for good in ("auto", "AUTO", "64", "2"):
        accepted = invoke("verify", tmp_path, "-j", good)
        assert accepted.exit_code == 0, (good, accepted.output)
        assert accepted.stdout.endswith("3 file(s): 3 ok; all pass\n")


# -- the smaller promises --------------------------------------------------------------------


def test_cat_of_an_empty_file_fails_like_verify(invoke: Invoke, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert invoke("verify", empty).exit_code == 1
    cat = invoke("cat", empty)
    assert cat.exit_code == 1 and cat.stdout == ""
    assert cat.stderr == f"error: {empty}: not a session log: the file is empty (0 bytes)\n"


def test_list_counts_events_as_verify_does_for_every_format(invoke: Invoke, tmp_path: Path) -> None:
    root = tmp_path / "store"
    _file_demo_logs(root)
    record_session(root, "v4", turns=2, open_turn=True)
    listed = json.loads(invoke("list", root, "--json").stdout)["sessions"]
    verified = json.loads(invoke("verify", root, "--json").stdout)["files"]
    counts = {row["path"]: row["events"] for row in listed}
    assert counts == {str(Path(report["path"]).absolute()): report["events"] for report in verified}
    assert len(counts) == 5 and None not in counts.values()


def test_lock_and_storage_errors_are_worded_for_a_command_user(
    invoke: Invoke, tmp_path: Path
) -> None:
    log = record_session(tmp_path, "s", turns=1, open_turn=True)
    with SessionLock(log.parent, "s"):
        result = invoke("repair", log)
    assert result.exit_code == 1
    assert "need no lock" not in result.stdout and "needs no lock" not in result.stdout
    assert "close the other writer, then rerun the command" in result.stdout
    from dsh_store.bulk import command_message

    locked = SessionLockedError("s", "/x/session.lock")
    assert command_message(locked).endswith("close the other writer, then rerun the command")
    full = StorageError("fsync", "/x/session.v4.jsonl", OSError(28, "No space left on device"))
    assert "flush again" in str(full)  # the library's wording, for a program holding it
    message = command_message(full)
    assert "flush again" not in message and message.endswith("then rerun the command")
    assert message.startswith("/x/session.v4.jsonl: fsync failed: No space left on device")


def test_no_python_none_in_text_output(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path / "store", "s", turns=1)
    header, rest = log.read_bytes().split(b"\n", 1)
    value = json.loads(header)
    value["createdAt"] = "yesterday"
    log.write_bytes(json.dumps(value).encode() + b"\n" + rest)
    listed = invoke("list", tmp_path / "store")
    assert listed.exit_code == 0 and "None" not in listed.stdout
    assert listed.stdout.splitlines()[1].split()[4] == "-"
    value.update(createdAt=1, version=-1)
    log.write_bytes(json.dumps(value).encode() + b"\n" + rest)
    inspected = invoke("inspect", log)
    assert inspected.exit_code == 1 and "None" not in inspected.stdout
    assert "  format version: unknown\n" in inspected.stdout


def test_inspect_text_lists_the_closers_a_load_appends(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1, open_turn=True)
    result = invoke("inspect", log)
    assert result.exit_code == 0
    assert "  closers a load appends: step/end, turn/end\n" in result.stdout
    (summary,) = json.loads(invoke("inspect", log, "--json").stdout)["files"]
    assert summary["closers"] == ["step/end", "turn/end"]
    clean = invoke("inspect", record_session(tmp_path, "c", turns=1))
    assert "closers" not in clean.stdout


def test_annotation_titles_name_the_rule_once(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "s", turns=1, open_turn=True)
    (line,) = invoke("verify", log, "--format", "github").stdout.splitlines()[:1]
    events = len(log.read_bytes().splitlines()) - 1
    assert line.startswith(f"::error file={log},line={events + 2},title=open-turn::")


@pytest.mark.parametrize(
    ("fixture", "line", "seq"),
    [
        ("0to1-unknown-event-type/session.jsonl", 26, 28),  # packed rows: line < seq + 2
        ("1to2-turn-already-open/session.jsonl", 6, 4),  # 0->1 keeps the source's seqs
        ("2to3-unknown-event-type/session.v2.jsonl", 16, 14),
        ("3to4-nested-tool-result/session.v3.jsonl", 10, 8),
    ],
)
def test_a_refusal_that_knows_its_source_seq_carries_its_line(
    invoke: Invoke, fixture: str, line: int, seq: int
) -> None:
    log = DEMO.parent / "refused" / fixture
    (finding,) = json.loads(invoke("verify", log, "--json").stdout)["files"][0]["findings"]
    assert (finding["line"], finding["eventLine"], finding["seq"]) == (line, line - 1, seq)
    row = json.loads(log.read_bytes().splitlines()[line - 1])
    assert row.get("seq", row.get("seq0")) <= seq
    (annotation,) = invoke("verify", log, "--format", "github").stdout.splitlines()[:1]
    assert f",line={line},title=refused%3A " in annotation
    assert "refused%3A refused" not in annotation  # the title names the rule once


# -- migrate --check / --dry-run predict the real run ----------------------------------------


def _migration_inputs(base: Path) -> list[tuple[str, ...]]:
    """A tree of every kind of input, and the argument lists to try on it."""
    root = base / "store"
    _file_demo_logs(root)
    record_session(root, "current", turns=1)
    bad = root / "_no-cwd" / "bad" / "session.v2.jsonl"
    bad.parent.mkdir()
    bad.write_bytes(b'{"type":"session","version":2}\nnot json\n{"type":"turn/end"}\n')
    loose = base / "loose"
    write_header(loose / "old.jsonl", 1)
    write_header(loose / "other.v3.jsonl", 3)
    (loose / "newer.jsonl").write_bytes(b'{"type":"session","version":9}\n')
    (base / "taken.jsonl").write_bytes(b"precious\n")
    write_header(base / "one.jsonl", 0)
    return [
        (str(root),),
        (str(root), str(loose)),  # loose files without a destination: a usage error
        (str(root), str(loose), "--in-place"),
        (str(base / "one.jsonl"), "--output", str(base / "new.jsonl")),
        (str(base / "one.jsonl"), "--output", str(base / "taken.jsonl")),
        (str(base / "one.jsonl"), "--in-place"),
        (str(loose), "--output", str(base / "x.jsonl")),  # three sources, one output
        (str(root / "_no-cwd" / "current"), "--output", str(base / "copy.jsonl")),
    ]


def _outcome(result: Result) -> tuple[int, Any]:
    """Exit code and per-file (source, status, target, backup, reason) or the usage error."""
    document = json.loads(result.stdout)
    if "error" in document:
        return result.exit_code, document["error"]["message"]
    rows = [
        (
            row["source"],
            {"migrated": "would-migrate"}.get(row["status"], row["status"]),
            row["target"],
            row["backup"],
            row["reason"],
        )
        for row in document["files"]
    ]
    return result.exit_code, rows


def test_check_and_dry_run_report_exactly_what_the_real_run_does(
    invoke: Invoke, tmp_path: Path
) -> None:
    base = tmp_path / "tree"
    base.mkdir()
    for args in _migration_inputs(base):
        pristine = tmp_path / "pristine"
        shutil.copytree(base, pristine, symlinks=True)
        before = snapshot_tree(base)
        check = invoke("migrate", *args, "--check", "--json")
        dry = invoke("migrate", *args, "--dry-run", "--json")
        assert snapshot_tree(base) == before, args
        real = invoke("migrate", *args, "--json")
        code, rows = _outcome(real)
        assert _outcome(dry) == (code, rows), (args, _outcome(dry), (code, rows))
        changes = isinstance(rows, list) and any(row[1] == "would-migrate" for row in rows)
        assert _outcome(check) == (1 if changes and code == 0 else code, rows), args
        shutil.rmtree(base)
        os.rename(pristine, base)


# -- the pre-commit hook, run as pre-commit runs it ------------------------------------------


def _hooks() -> dict[str, dict[str, str]]:
    """``.pre-commit-hooks.yaml`` as {id: {key: value}} (its flat subset of YAML)."""
    hooks: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    text = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.lstrip("- ").partition(":")
        if line.startswith("- "):
            current = {}
            hooks[value.strip()] = current
        current[key.strip()] = value.strip()
    return hooks


@pytest.mark.parametrize("hook", ["dsh-store-verify", "dsh-store-verify-current"])
def test_the_hook_passes_a_store_migrated_the_documented_way(tmp_path: Path, hook: str) -> None:
    root = tmp_path / "repo" / "sessions"
    _file_demo_logs(root)
    record_session(root, "new", turns=1)
    entry = _hooks()[hook]
    command, *options = entry["entry"].split()
    assert command == "dsh-store" and entry["files"] == r"\.jsonl$"
    # pre-commit passes every matching file, relative to the repository, as arguments.
    files = sorted(str(p.relative_to(tmp_path / "repo")) for p in root.rglob("*.jsonl"))
    before = run_script(*options, *files, cwd=tmp_path / "repo")
    assert before.returncode == (1 if hook.endswith("current") else 0), before.stdout
    assert run_script("migrate", "sessions", cwd=tmp_path / "repo").returncode == 0
    files = sorted(str(p.relative_to(tmp_path / "repo")) for p in root.rglob("*.jsonl"))
    assert len(files) == 9  # four older generations kept beside their upgrades, five v4 logs
    after = run_script(*options, *files, cwd=tmp_path / "repo")
    assert after.returncode == 0, after.stdout
    assert after.stdout.count("kept beside session.v4.jsonl") == 4
    # An older generation alone in its directory still fails the current-format hook.
    (root / "_no-cwd" / "format-2" / "session.v4.jsonl").unlink()
    alone = run_script(*options, "sessions/_no-cwd/format-2/session.v2.jsonl", cwd=root.parent)
    assert alone.returncode == (1 if hook.endswith("current") else 0), alone.stdout


def test_the_documented_hook_snippet_names_a_real_hook_and_the_release_tag() -> None:
    repo = Path(__file__).resolve().parents[2]
    cli = (repo / "docs" / "cli.md").read_text()
    version = next(
        line.split('"')[1]
        for line in (repo / "pyproject.toml").read_text().splitlines()
        if line.startswith("version = ")
    )
    snippet = cli[cli.index("pre-commit (hooks defined in") :]
    assert f"rev: v{version}" in snippet
    ids = {line.split("id:")[1].split()[0] for line in snippet.splitlines() if "- id:" in line}
    assert ids and ids <= set(_hooks())
