"""What ``migrate_file`` names and predicts: the source of a model refusal, dry runs that
look at the target, existing targets that must continue the upgrade cleanly, and a v4
source with an ``output``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsh_store.errors import MigrationRefusedError
from dsh_store.migrate import MODEL_EDGE, migrate_file
from dsh_store.migrations._seq_references import SeqShift
from dsh_store.migrations.seqmap import CONSUMED, SeqMap
from tests.migrations.store_logs import fixture_copy

VALID = Path(__file__).resolve().parents[2] / "fixtures" / "valid"


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- 1: a model refusal names the source event -------------------------------------------


def _wrong_step_end(tmp_path: Path) -> Path:
    """v0-chunk-attempts with its source seq 20 (a step/end) naming step 3, not 2.

    The chain folds chunks, so that event's upgraded seq is 13, which in the source is an
    assistant/chunk: a refusal naming seq 13 would point at the wrong line.
    """
    source = fixture_copy(tmp_path, "v0-chunk-attempts")
    data = source.read_bytes()
    row = b'"seq":20,"time":1780000000210,"data":{"turn":1,"step":2}'
    assert data.count(row) == 1
    source.write_bytes(data.replace(row, row.replace(b'"step":2', b'"step":3')))
    return source


def _line_of_seq(source: Path, seq: int) -> int:
    for number, line in enumerate(source.read_bytes().split(b"\n"), start=1):
        if f'"seq":{seq},'.encode() in line:
            return number
    raise AssertionError(f"no seq {seq}")


@pytest.mark.parametrize("mode", ["beside", "output", "in-place", "dry-run"])
def test_a_model_refusal_names_the_source_seq_line_and_edge(tmp_path: Path, mode: str) -> None:
    source = _wrong_step_end(tmp_path)
    before = _listing(source.parent)
    with pytest.raises(MigrationRefusedError) as caught:
        if mode == "beside":
            migrate_file(source)
        elif mode == "output":
            migrate_file(source, output=source.parent / "out.jsonl")
        elif mode == "in-place":
            migrate_file(source, in_place=True)
        else:
            migrate_file(source, dry_run=True)
    error = caught.value
    assert (error.rule, error.seq, error.event_type, error.edge) == (
        "step-mismatch",
        20,
        "step/end",
        MODEL_EDGE,
    )
    assert error.line == _line_of_seq(source, 20)
    assert error.path == str(source)
    assert "upgraded seq 13, from source seq 20" in str(error)
    assert f"at edge {MODEL_EDGE}" in str(error)
    assert _listing(source.parent) == before


def test_seq_maps_invert_to_the_source() -> None:
    shift = SeqShift()
    shift.insert_before(2)  # one event made before source 2
    shift.insert_before(2)  # and another
    targets = {source: shift.target(source) for source in range(5)}
    assert targets == {0: 0, 1: 1, 2: 4, 3: 5, 4: 6}
    assert [shift.source_of(t, seen=5) for t in range(8)] == [0, 1, None, None, 2, 3, 4, None]

    seqs = SeqMap()
    for source, target in ((0, 0), (1, CONSUMED), (2, CONSUMED), (3, 2), (4, 3)):
        seqs.record(source, target)
    # target 1 was made by the edge (e.g. a settled attempt)
    assert [seqs.source_of(t) for t in range(5)] == [0, None, 3, 4, None]


# -- 2: a dry run predicts exactly what the real run reports ----------------------------


def test_dry_run_after_a_completed_run_is_current(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path)
    output = tmp_path / "done.jsonl"
    assert migrate_file(source, output=output).status == "migrated"
    published = output.read_bytes()
    assert migrate_file(source, output=output, dry_run=True).status == "current"
    assert migrate_file(source, output=output).status == "current"
    assert output.read_bytes() == published


def test_dry_run_sees_the_store_generation_already_published(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path)
    assert migrate_file(source).status == "migrated"
    before = _listing(source.parent)
    assert migrate_file(source, dry_run=True).status == "current"
    assert _listing(source.parent) == before


@pytest.mark.parametrize(
    "existing",
    [b"hello\n", b""],
    ids=["other-bytes", "empty"],
)
def test_dry_run_refuses_a_foreign_target_as_the_real_run(tmp_path: Path, existing: bytes) -> None:
    source = fixture_copy(tmp_path)
    output = tmp_path / "other.jsonl"
    output.write_bytes(existing)
    outcomes = []
    for dry_run in (True, False):
        with pytest.raises(MigrationRefusedError) as caught:
            migrate_file(source, output=output, dry_run=dry_run)
        outcomes.append(caught.value.rule)
    assert outcomes == ["target-exists", "target-exists"]
    assert output.read_bytes() == existing


def test_dry_run_in_place_refuses_a_foreign_backup_as_the_real_run(tmp_path: Path) -> None:
    loose = tmp_path / "old.jsonl"
    shutil.copyfile(VALID / "v0-basic" / "session.jsonl", loose)
    (tmp_path / "old.jsonl.v0.bak").write_bytes(b"precious\n")
    for dry_run in (True, False):
        with pytest.raises(MigrationRefusedError) as caught:
            migrate_file(loose, in_place=True, dry_run=dry_run)
        assert caught.value.rule == "backup-exists"
    assert (tmp_path / "old.jsonl.v0.bak").read_bytes() == b"precious\n"


def test_dry_run_in_place_accepts_its_own_backup(tmp_path: Path) -> None:
    loose = tmp_path / "old.jsonl"
    shutil.copyfile(VALID / "v0-basic" / "session.jsonl", loose)
    shutil.copyfile(loose, tmp_path / "old.jsonl.v0.bak")
    assert migrate_file(loose, in_place=True, dry_run=True).status == "would-migrate"
    assert migrate_file(loose, in_place=True).status == "migrated"


# -- 3: an existing target must continue the upgrade cleanly ----------------------------


_GOLDEN = (VALID / "v0-basic" / "expected.v4.jsonl").read_bytes()


@pytest.mark.parametrize(
    "tail",
    [
        b"garbage\n",
        b"garbage",
        b'{"type":"session/end-seed","seq":99,"time":1780000000290,"data":{}}\n',
        b'{"type":"step/start","seq":16,"time":1780000000290,"data":{"turn":3,"step":1}}\n',
    ],
    ids=["not-json", "torn", "seq-gap", "model-rule"],
)
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_target_with_a_bad_continuation_is_refused(
    tmp_path: Path, tail: bytes, dry_run: bool
) -> None:
    source = fixture_copy(tmp_path)
    output = tmp_path / "g.jsonl"
    output.write_bytes(_GOLDEN + tail)
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source, output=output, dry_run=dry_run)
    assert caught.value.rule == "target-exists"
    assert "not a clean continuation" in str(caught.value)
    assert output.read_bytes() == _GOLDEN + tail


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_target_with_a_clean_continuation_is_current(tmp_path: Path, dry_run: bool) -> None:
    source = fixture_copy(tmp_path)
    output = tmp_path / "g.jsonl"
    tail = b'{"type":"session/end-seed","seq":16,"time":1780000000290,"data":{}}\n'
    output.write_bytes(_GOLDEN + tail)
    assert migrate_file(source, output=output, dry_run=dry_run).status == "current"
    assert output.read_bytes() == _GOLDEN + tail


# -- 4: a v4 source with an output is copied there ---------------------------------------


def test_a_v4_source_is_copied_to_its_output(tmp_path: Path) -> None:
    source = VALID / "v4-current" / "session.v4.jsonl"
    output = tmp_path / "new.jsonl"
    planned = migrate_file(source, output=output, dry_run=True)
    assert (planned.status, planned.target) == ("would-migrate", output)
    assert not output.exists()
    result = migrate_file(source, output=output)
    assert (result.status, result.source_version, result.target) == ("migrated", 4, output)
    assert output.read_bytes() == source.read_bytes()
    assert result.events == source.read_bytes().count(b"\n") - 1
    assert migrate_file(source, output=output, dry_run=True).status == "current"
    assert migrate_file(source, output=output).status == "current"
    assert _listing(tmp_path) == ["new.jsonl"]


def test_a_v4_source_copy_never_overwrites(tmp_path: Path) -> None:
    source = VALID / "v4-current" / "session.v4.jsonl"
    output = tmp_path / "new.jsonl"
    output.write_bytes(b"someone else's\n")
    with pytest.raises(MigrationRefusedError) as caught:
        migrate_file(source, output=output)
    assert caught.value.rule == "target-exists"
    assert output.read_bytes() == b"someone else's\n"


def test_a_v4_source_without_output_stays_current(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path, "v4-current")
    assert migrate_file(source).status == "current"
    assert migrate_file(source, in_place=True).status == "current"
    assert _listing(source.parent) == [source.name]
