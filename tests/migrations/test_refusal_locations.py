"""Restoring an older log names a model refusal's source event, as ``migrate`` does; and
``publish_upgrade`` accepts an existing ``session.v4.jsonl`` only as this log's upgrade
followed by a clean continuation."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_store.errors import MigrationRefusedError
from dsh_store.jsonl import layout
from dsh_store.migrate import MODEL_EDGE, migrate_file, publish_upgrade
from dsh_store.restore import classify, read_log
from dsh_store.store import JsonlStore
from tests.store.helpers import complete_turn, make_store

from .store_logs import PARENT_ID, fixture_copy, parent_log

# -- 1: restore names the source seq, line and type of a model refusal -------------------

_SOURCE_ROW = b'"seq":20,"time":1780000000210,"data":{"turn":1,"step":2}'


def _wrong_step_end(path: Path) -> Path:
    """Write v0-chunk-attempts to ``path`` with its source seq 20 (a step/end on line 20)
    naming step 3, not 2; its upgraded seq is 13 (an assistant/chunk in the source)."""
    data = _fixture_log("v0-chunk-attempts").read_bytes()
    assert data.count(_SOURCE_ROW) == 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.replace(_SOURCE_ROW, _SOURCE_ROW.replace(b'"step":2', b'"step":3')))
    return path


def _fixture_log(name: str) -> Path:
    return Path(__file__).resolve().parents[2] / "fixtures" / "valid" / name / "session.jsonl"


def _assert_names_the_source(error: MigrationRefusedError, log: Path) -> None:
    assert (error.rule, error.seq, error.line, error.event_type, error.edge) == (
        "step-mismatch",
        20,
        20,
        "step/end",
        MODEL_EDGE,
    )
    assert error.path == str(log)
    assert "upgraded seq 13, from source seq 20" in error.detail
    assert f"{log}:20 (seq 20, type 'step/end'): migration refused at edge model" in str(error)


def test_read_log_names_the_source_event_of_a_model_refusal(tmp_path: Path) -> None:
    log = _wrong_step_end(tmp_path / "loose.jsonl")
    with pytest.raises(MigrationRefusedError) as caught:
        read_log(log)
    _assert_names_the_source(caught.value, log)
    assert classify(log) == "refused"


def test_read_log_and_migrate_refuse_alike(tmp_path: Path) -> None:
    log = _wrong_step_end(tmp_path / "sess" / "session.jsonl")
    with pytest.raises(MigrationRefusedError) as restored:
        read_log(log)
    with pytest.raises(MigrationRefusedError) as migrated:
        migrate_file(log, dry_run=True)
    assert str(restored.value) == str(migrated.value)


def test_store_inspect_names_the_source_event_of_a_model_refusal(tmp_path: Path) -> None:
    root = tmp_path / "root"
    log = _wrong_step_end(
        layout.session_dir(root, "fixture-session", "/work/project") / "session.jsonl"
    )
    store = JsonlStore(root)
    with pytest.raises(MigrationRefusedError) as caught:
        store.inspect("fixture-session")
    _assert_names_the_source(caught.value, log)


# -- 2: publish_upgrade checks an existing target ---------------------------------------


def _upgrade_bytes(tmp_path: Path, source: Path) -> bytes:
    output = tmp_path / "expected.jsonl"
    migrate_file(source, output=output)
    return output.read_bytes()


@pytest.mark.parametrize(
    "existing",
    ["foreign", "empty", "garbage-after", "torn-after", "model-rule-after"],
)
def test_publish_upgrade_refuses_a_target_that_is_not_a_clean_continuation(
    tmp_path: Path, existing: str
) -> None:
    source = parent_log(tmp_path / "root")
    upgrade = _upgrade_bytes(tmp_path, source)
    content = {
        "foreign": b"someone else's log\n",
        "empty": b"",
        "garbage-after": upgrade + b"garbage\n",
        "torn-after": upgrade + b'{"type":"turn/st',
        # a step of a turn that is not open, with the next seq
        "model-rule-after": upgrade
        + b'{"type":"step/start","seq":%d,"time":1780000009999,"data":{"turn":99,"step":1}}\n'
        % (upgrade.count(b"\n") - 1),
    }[existing]
    target = source.with_name("session.v4.jsonl")
    target.write_bytes(content)
    inspection = read_log(source)
    with pytest.raises(MigrationRefusedError) as caught:
        publish_upgrade(inspection)
    assert caught.value.rule == "target-exists"
    assert caught.value.path == str(target)
    assert target.read_bytes() == content
    assert sorted(p.name for p in source.parent.iterdir()) == [source.name, target.name]


def test_publish_upgrade_accepts_an_earlier_publish_appended_to_since(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = parent_log(root)
    inspection = read_log(source)  # read before the target was published (a racing open)
    store = make_store(root)
    with store.open(PARENT_ID) as live:
        assert live.path == source.with_name("session.v4.jsonl")
        complete_turn(live, 2)
    target = source.with_name("session.v4.jsonl")
    appended = target.read_bytes()
    assert appended.startswith(_upgrade_bytes(tmp_path, source))
    published = read_log(publish_upgrade(inspection))
    assert published.path == target
    assert published.source_version == 4 and published.classification == "ok"
    assert len(published.events) > len(inspection.events)
    assert target.read_bytes() == appended
    # And the store keeps opening and appending to it.
    with store.open(PARENT_ID) as live:
        complete_turn(live, 3)
    assert store.inspect(PARENT_ID).classification == "ok"


def test_publish_upgrade_accepts_its_own_earlier_publish(tmp_path: Path) -> None:
    source = fixture_copy(tmp_path)
    first = read_log(publish_upgrade(read_log(source)))
    published = first.path.read_bytes()
    again = read_log(publish_upgrade(read_log(source)))
    assert again.path == first.path and again.events == first.events
    assert again.path.read_bytes() == published


def test_cat_streams_up_to_the_refused_event_and_names_its_source(tmp_path: Path) -> None:
    from dsh_store.summary import stream_v4_lines

    log = _wrong_step_end(tmp_path / "loose.jsonl")
    emitted: list[int] = []
    with pytest.raises(MigrationRefusedError) as caught:
        stream_v4_lines(log, lambda kind, seq, line: emitted.append(seq))
    _assert_names_the_source(caught.value, log)
    assert emitted == list(range(13))  # every upgraded event before the refused one
