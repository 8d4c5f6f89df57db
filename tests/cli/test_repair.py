"""``dsh-store repair``: the plan, --dry-run writes nothing, the loss-free repair."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.cli.conftest import copy_tree, record_session, snapshot_tree
from tests.cli.schema_check import errors, load_schema
from tests.store.test_leftover_temps import leave_temp

Invoke = Callable[..., Result]


def _torn(tmp_path: Path) -> tuple[Path, bytes]:
    log = record_session(tmp_path, "torn", turns=1, open_turn=True)
    fragment = b'{"type":"step/start","seq":'
    with open(log, "ab") as handle:
        handle.write(fragment)
    return log, fragment


def test_dry_run_prints_the_plan_and_writes_nothing(invoke: Invoke, tmp_path: Path) -> None:
    log, fragment = _torn(tmp_path)
    size = log.stat().st_size
    before = snapshot_tree(tmp_path)
    result = invoke("repair", log, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"{log}: would repair (torn-tail)\n"
        f"  cut {len(fragment)} torn byte(s) at offset {size - len(fragment)}, saved first to "
        f"{log}.torn-{size - len(fragment)}\n"
        "  append closers: step/end, turn/end\n"
    )
    assert snapshot_tree(tmp_path) == before


def test_repair_saves_the_torn_bytes_then_closes_the_turn(invoke: Invoke, tmp_path: Path) -> None:
    log, fragment = _torn(tmp_path)
    offset = log.stat().st_size - len(fragment)
    result = invoke("repair", log, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("repair")) == []
    assert document["files"] == [
        {
            "path": str(log),
            "status": "repaired",
            "classification": "torn-tail",
            "truncateAt": offset,
            "tornBytes": len(fragment),
            "sidecar": f"{log}.torn-{offset}",
            "closers": ["step/end", "turn/end"],
            "deletedTemps": [],
            "keptTemps": [],
            "reason": None,
        }
    ]
    assert Path(f"{log}.torn-{offset}").read_bytes() == fragment
    assert invoke("verify", log).exit_code == 0
    again = invoke("repair", log)
    assert again.exit_code == 0
    assert again.stdout == f"{log}: ok, nothing to repair\n"


def test_committed_corruption_and_old_formats_are_refused(
    invoke: Invoke, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    before = snapshot_tree(root)
    corrupt = root / "_no-cwd/corrupt-middle/session.v4.jsonl"
    result = invoke("repair", corrupt, root / "loose" / "newer.jsonl")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{corrupt}: refused: {corrupt}:3 (byte 185, seq 1): corrupt")
    assert lines[1].startswith(f"{root}/loose/newer.jsonl: refused: ")
    assert "version 5 is not supported" in lines[1]
    assert snapshot_tree(root) == before


def test_repair_walks_a_store_and_reports_each_file(invoke: Invoke, store_root: Path) -> None:
    result = invoke("repair", store_root)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("nothing to repair") == 1
    assert "repaired (open-turn)\n  append closers: step/end, turn/end" in result.stdout
    assert invoke("verify", store_root).exit_code == 0


def test_repair_deletes_stale_temps_and_lists_kept_ones(invoke: Invoke, tmp_path: Path) -> None:
    log = record_session(tmp_path, "temps", turns=1)
    stale = leave_temp(log, age_s=3600)
    fresh = leave_temp(log, age_s=10)
    before = snapshot_tree(tmp_path)

    dry = invoke("repair", tmp_path, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout == (
        f"{log}: would repair (ok)\n"
        f"  delete leftover temp {stale}\n"
        f"  kept recent temp {fresh} (a publish may still be writing it; deleted once 10 "
        "minutes old)\n"
    )
    dry_json = json.loads(invoke("repair", tmp_path, "--dry-run", "--json").stdout)
    assert errors(dry_json, load_schema("repair")) == []
    assert snapshot_tree(tmp_path) == before

    result = invoke("repair", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert errors(document, load_schema("repair")) == []
    (entry,) = document["files"]
    assert (entry["status"], entry["deletedTemps"], entry["keptTemps"]) == (
        "repaired",
        [str(stale)],
        [str(fresh)],
    )
    assert dry_json["files"][0] == {**entry, "status": "would-repair"}
    assert not stale.exists() and fresh.exists()

    again = invoke("repair", tmp_path, env={"NO_COLOR": "1"})
    assert again.stdout == (
        f"{log}: ok, nothing to repair\n"
        f"  kept recent temp {fresh} (a publish may still be writing it; deleted once 10 "
        "minutes old)\n"
    )


def test_the_schema_requires_the_temp_lists() -> None:
    result: dict[str, object] = {
        "path": "x",
        "status": "clean",
        "classification": "ok",
        "truncateAt": None,
        "tornBytes": 0,
        "sidecar": None,
        "closers": [],
        "reason": None,
    }

    def document(item: dict[str, object]) -> dict[str, object]:
        return {"schema": 1, "files": [item], "summary": {"clean": 1}}

    assert errors(document(result), load_schema("repair")) == [
        "$.files[0]: missing required key 'deletedTemps'",
        "$.files[0]: missing required key 'keptTemps'",
    ]
    bad = {**result, "deletedTemps": [1], "keptTemps": "y"}
    assert len(errors(document(bad), load_schema("repair"))) == 2


def test_jobs_repair_each_file_in_worker_processes_with_the_same_results(
    invoke: Invoke, tmp_path: Path
) -> None:
    for index in range(4):
        log = record_session(tmp_path / "a", f"torn-{index}", turns=1, open_turn=True)
        with open(log, "ab") as handle:
            handle.write(b'{"type":"step/start","seq":' + str(index).encode())
    copy_tree(tmp_path / "a", tmp_path / "b")
    serial = json.loads(invoke("repair", tmp_path / "a", "--json").stdout)["files"]
    parallel_run = invoke("repair", tmp_path / "b", "--json", "--jobs", "3")
    assert parallel_run.exit_code == 0, parallel_run.output
    parallel = json.loads(parallel_run.stdout)["files"]
    assert [r["status"] for r in parallel] == ["repaired"] * 4
    rebase = str(tmp_path / "a")
    assert [json.loads(json.dumps(r).replace(str(tmp_path / "b"), rebase)) for r in parallel] == (
        serial
    )
    # Byte for byte the same trees (mtimes differ; a watermark names its log's inode).
    contents_a = {
        name: facts[0]
        for name, facts in snapshot_tree(tmp_path / "a").items()
        if not name.endswith(".durable")
    }
    contents_b = {
        name: facts[0]
        for name, facts in snapshot_tree(tmp_path / "b").items()
        if not name.endswith(".durable")
    }
    assert contents_a == contents_b
