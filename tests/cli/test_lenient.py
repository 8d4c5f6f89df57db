"""``--lenient`` on ``dsh-store migrate`` and ``verify``, and verify's hint without it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.cli.schema_check import errors, load_schema
from tests.migrations.early_logs import ev, header, user
from tests.migrations.test_lenient import user_first_log

Invoke = Callable[..., Result]


def _log(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_bytes(b"".join(json.dumps(row).encode() + b"\n" for row in [header(), *rows]))
    return path


def test_verify_hints_which_refused_files_lenient_would_migrate(
    invoke: Invoke, tmp_path: Path
) -> None:
    yes = _log(tmp_path / "yes.jsonl", user_first_log())
    # The message precedes its own turn/start: no framing can hold both.
    no = _log(tmp_path / "no.jsonl", [user(0), ev("turn/start", 1, {"turn": 1})])
    result = invoke("verify", tmp_path, "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert errors(document, load_schema("verify")) == []
    by_path = {Path(file["path"]).name: file for file in document["files"]}
    assert by_path[yes.name]["classification"] == "refused"
    assert by_path[yes.name]["lenientWouldMigrate"] is True
    assert by_path[no.name]["lenientWouldMigrate"] is False
    text = invoke("verify", yes).stdout
    assert "`--lenient` would migrate it" in text
    lenient = invoke("verify", yes, "--lenient", "--json")
    assert lenient.exit_code == 0, lenient.output
    (file,) = json.loads(lenient.stdout)["files"]
    assert file["classification"] == "needs-migration"
    assert "lenientWouldMigrate" not in file
    assert file["findings"][-1]["rule"] == "lenient-migration"
    assert invoke("verify", yes, "--lenient", "--strict").exit_code == 1


def test_migrate_lenient_publishes_and_the_default_refuses(invoke: Invoke, tmp_path: Path) -> None:
    source = _log(tmp_path / "old.jsonl", user_first_log())
    out = tmp_path / "new.jsonl"
    refused = invoke("migrate", source, "--output", out)
    assert refused.exit_code == 1
    assert "surface before first step" in refused.stdout
    assert not out.exists()
    migrated = invoke("migrate", source, "--output", out, "--lenient")
    assert migrated.exit_code == 0, migrated.output
    last = json.loads(out.read_bytes().splitlines()[-1])
    assert (last["type"], last["ignorable"]) == ("migration/note", True)
    assert invoke("verify", out).exit_code == 0  # plain v4 for every reader
    rerun = invoke("migrate", source, "--output", out, "--lenient")
    assert rerun.stdout.splitlines()[-1] == "1 current"  # the same bytes again
