"""``dsh-store repair --salvage --output``: options, output, exit codes, the JSON shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.cli.conftest import record_session, run_script, snapshot_tree
from tests.cli.schema_check import errors, load_schema

Invoke = Callable[..., Result]


def corrupt_log(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """A two-turn log whose line 4 (seq 2) is garbage, before turn 1's turn/end."""
    log = record_session(tmp_path / "store", "corrupt", turns=2)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = b"not json\n"
    log.write_bytes(b"".join(lines))
    # As DSH leaves a log, with no durable watermark: the later turn/end is the evidence.
    Path(f"{log}.durable").unlink()
    return log, lines


COMMITTED = (
    "line 5 is a complete, valid row continuing the seqs (seq 3) and a crash leaves no valid "
    "line after damage that holds no NUL byte, so this region was committed"
)


def test_salvage_prints_what_was_kept_dropped_and_appended(invoke: Invoke, tmp_path: Path) -> None:
    log, lines = corrupt_log(tmp_path)
    out = tmp_path / "out.jsonl"
    kept = sum(map(len, lines[:3]))
    dropped = sum(map(len, lines)) - kept
    result = invoke("repair", log, "--salvage", "--output", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"{log}: salvaged to {out}\n"
        f"  kept 2 event(s), seqs 0..1: bytes 0..{kept} of the log, copied unchanged\n"
        f"  stopped at line 4 (byte {kept}, seq 2): line is not valid JSON [unparsable-line]; "
        f"{COMMITTED}\n"
        f"  dropped {dropped} byte(s): from line 4, offset {kept} to the end\n"
        "  closers appended: step/end, turn/end\n"
        f"  the original {log} is left untouched\n"
    )
    assert invoke("verify", out).exit_code == 0
    again = invoke("repair", log, "--salvage", "--output", out)
    assert again.exit_code == 0
    assert again.stdout.startswith(f"{log}: already salvaged to {out}\n")


def test_salvage_json_matches_its_schema(invoke: Invoke, tmp_path: Path) -> None:
    log, lines = corrupt_log(tmp_path)
    out = tmp_path / "out.jsonl"
    kept = sum(map(len, lines[:3]))
    result = invoke("repair", log, "--salvage", "--output", out, "--json")
    assert result.exit_code == 0, result.output
    envelope = json.loads(result.stdout)
    assert errors(envelope, load_schema("salvage")) == []
    assert envelope["summary"] == {"salvaged": 1}
    (document,) = envelope["files"]
    assert document == {
        "path": str(log),
        "output": str(out),
        "status": "salvaged",
        "keptEvents": 2,
        "keptBytes": kept,
        "droppedBytes": sum(map(len, lines)) - kept,
        "stop": {
            "rule": "unparsable-line",
            "message": f"line is not valid JSON [unparsable-line]; {COMMITTED}",
            "line": 4,
            "eventLine": 3,
            "offset": kept,
            "seq": 2,
        },
        "closers": ["step/end", "turn/end"],
        "reason": None,
    }


def test_dry_run_writes_nothing(invoke: Invoke, tmp_path: Path) -> None:
    log, _ = corrupt_log(tmp_path)
    before = snapshot_tree(tmp_path)
    result = invoke("repair", log, "--salvage", "-o", tmp_path / "out.jsonl", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{log}: would salvage to {tmp_path / 'out.jsonl'}\n")
    assert snapshot_tree(tmp_path) == before


def test_refusals_exit_1_with_the_reason(invoke: Invoke, tmp_path: Path) -> None:
    log, lines = corrupt_log(tmp_path)
    first_bad = tmp_path / "first-bad.jsonl"
    first_bad.write_bytes(lines[0] + b"garbage\n" + b"".join(lines[2:]))
    before = snapshot_tree(tmp_path)

    existing = invoke("repair", log, "--salvage", "--output", log)
    assert existing.exit_code == 1
    assert existing.stdout.startswith(f"{log}: refused: {log}: cannot salvage: the output ")

    nothing = invoke("repair", first_bad, "--salvage", "--output", tmp_path / "o.jsonl", "--json")
    assert nothing.exit_code == 1
    envelope = json.loads(nothing.stdout)
    assert errors(envelope, load_schema("salvage")) == []
    (document,) = envelope["files"]
    assert document["status"] == "refused"
    assert document["keptEvents"] is None
    assert "nothing to salvage: the first event is already bad" in document["reason"]
    assert document["stop"]["rule"] == "unparsable-line"
    assert (document["stop"]["line"], document["stop"]["seq"]) == (2, 0)
    assert document["stop"]["offset"] == len(lines[0])
    assert snapshot_tree(tmp_path) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--output", "{out}"], "--output is only for --salvage"),
        (["--salvage"], "--salvage needs --output OUT"),
        (["{log}", "--salvage", "--output", "{out}"], "exactly one log file; 2 were given"),
        (["--salvage", "--output", "{out}", "--dry-run"], None),
    ],
)
def test_usage_errors_exit_2(
    invoke: Invoke, tmp_path: Path, args: list[str], message: str | None
) -> None:
    log, _ = corrupt_log(tmp_path)
    out = tmp_path / "out.jsonl"
    filled = [arg.format(log=log, out=out) for arg in args]
    result = invoke("repair", log, *filled)
    if message is None:  # the well-formed call, for contrast
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2
    assert message in result.stderr
    assert not out.exists()


def test_a_directory_is_a_usage_error(invoke: Invoke, tmp_path: Path) -> None:
    log, _ = corrupt_log(tmp_path)
    result = invoke("repair", log.parent, "--salvage", "--output", tmp_path / "out.jsonl")
    assert result.exit_code == 2
    assert "is a directory" in result.stderr


def test_the_console_script_salvages(tmp_path: Path) -> None:
    log, _ = corrupt_log(tmp_path)
    out = tmp_path / "out.jsonl"
    before = (log.read_bytes(), log.stat().st_mtime_ns)
    done = run_script("repair", log, "--salvage", "--output", out, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["status"] == "salvaged"
    verified = run_script("verify", out)
    assert verified.returncode == 0, verified.stdout
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before


def test_the_schema_uses_only_supported_keywords() -> None:
    schema = load_schema("salvage")
    assert any("missing required key" in problem for problem in errors({}, schema))
    assert errors({"stop": {"rule": 1}}, schema)  # the stop object is checked too
