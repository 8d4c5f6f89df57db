"""``dsh-store migrate``: store trees, loose files, --check, --dry-run, --output, --in-place."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.cli.conftest import V2_LOG, V3_LOG, snapshot_tree, write_header
from tests.cli.schema_check import errors, load_schema

Invoke = Callable[..., Result]


def _file_as(log: Path, session_id: str) -> None:
    """Give the log at ``log`` the header id ``session_id`` (its session directory's name)
    and the cwd ``/p`` (its project directory ``--p--``), so that it is filed in its place."""
    header, _, body = log.read_bytes().partition(b"\n")
    row = json.loads(header)
    row["id"] = session_id
    row["cwd"] = "/p"
    log.write_bytes(
        json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" + body
    )


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """A store tree with a v2 and a v3 session (the project's fixtures) and a current one.

    Each log lies in the session directory of its header id, as in a real store.
    """
    root = tmp_path / "store"
    for source, version in ((V2_LOG, 2), (V3_LOG, 3)):
        log = root / "--p--" / f"s{version}" / f"session.v{version}.jsonl"
        log.parent.mkdir(parents=True)
        shutil.copyfile(source, log)
        _file_as(log, f"s{version}")
    write_header(root / "--p--" / "now" / "session.v4.jsonl", 4, session_id="now")
    _file_as(root / "--p--" / "now" / "session.v4.jsonl", "now")
    return root


def test_store_tree_publishes_beside_untouched_sources(invoke: Invoke, old_store: Path) -> None:
    sources = {p: p.read_bytes() for p in old_store.rglob("session.v[23].jsonl")}
    result = invoke("migrate", old_store)
    assert result.exit_code == 0, result.output
    for source, data in sources.items():
        assert source.read_bytes() == data
        assert (source.parent / "session.v4.jsonl").is_file()
    lines = result.stdout.splitlines()
    assert lines[-1] == "2 migrated; 1 current"
    s2 = old_store / "--p--" / "s2"
    assert any(
        re.fullmatch(
            rf"migrated +v2 +{re.escape(str(s2))}/session\.v2\.jsonl -> "
            rf"{re.escape(str(s2))}/session\.v4\.jsonl \(\d+ events\)",
            line,
        )
        for line in lines
    ), lines
    assert invoke("verify", old_store, "--require-current").exit_code == 0
    again = invoke("migrate", old_store, "--check")
    assert again.exit_code == 0
    assert again.stdout.splitlines()[-1] == "3 current"


def test_check_and_dry_run_write_nothing(invoke: Invoke, old_store: Path) -> None:
    before = snapshot_tree(old_store)
    check = invoke("migrate", old_store, "--check")
    assert check.exit_code == 1
    assert check.stdout.splitlines()[-1] == "2 would-migrate; 1 current"
    dry = invoke("migrate", old_store, "--dry-run", "--json")
    assert dry.exit_code == 0
    document = json.loads(dry.stdout)
    assert errors(document, load_schema("migrate")) == []
    assert document["summary"] == {"would-migrate": 2, "current": 1}
    assert snapshot_tree(old_store) == before


def test_loose_file_needs_a_destination(invoke: Invoke, tmp_path: Path) -> None:
    loose = tmp_path / "fixture.jsonl"
    write_header(loose, 3)
    result = invoke("migrate", loose)
    assert result.exit_code == 2
    assert f"{loose} is a loose file: pass --output OUT or --in-place" in result.stderr
    for flag in ("--check", "--dry-run"):  # they report what the real run does
        predicted = invoke("migrate", loose, flag)
        assert predicted.exit_code == 2, (flag, predicted.output)
        assert predicted.stderr == result.stderr.replace("migrate", "migrate", 1)


def test_output_publishes_and_never_overwrites(invoke: Invoke, tmp_path: Path) -> None:
    loose = tmp_path / "fixture.jsonl"
    write_header(loose, 3)
    out = tmp_path / "out.jsonl"
    result = invoke("migrate", loose, "--output", out)
    assert result.exit_code == 0, result.output
    published = out.read_bytes()
    assert json.loads(published.splitlines()[0])["version"] == 4
    rerun = invoke("migrate", loose, "-o", out)  # same content already there: converged
    assert rerun.exit_code == 0
    assert rerun.stdout.splitlines()[-1] == "1 current"
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"precious\n")
    clash = invoke("migrate", loose, "-o", other)
    assert clash.exit_code == 1
    assert "  reason: " in clash.stdout and str(other) in clash.stdout
    assert clash.stdout.splitlines()[-1] == "1 refused"
    assert other.read_bytes() == b"precious\n"
    assert out.read_bytes() == published


def test_in_place_keeps_a_backup(invoke: Invoke, tmp_path: Path) -> None:
    loose = tmp_path / "fixture.jsonl"
    write_header(loose, 2)
    original = loose.read_bytes()
    result = invoke("migrate", loose, "--in-place", "--json")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["files"]
    assert entry["status"] == "migrated" and entry["backup"] == f"{loose}.v2.bak"
    assert Path(entry["backup"]).read_bytes() == original
    assert json.loads(loose.read_bytes().splitlines()[0])["version"] == 4


def test_option_conflicts_are_usage_errors(invoke: Invoke, old_store: Path) -> None:
    both = invoke("migrate", old_store, "--in-place", "--output", old_store / "x.jsonl")
    assert both.exit_code == 2
    assert "use either --output or --in-place, not both" in both.stderr
    many = invoke("migrate", old_store, "--output", old_store / "x.jsonl")
    assert many.exit_code == 2
    assert "--output takes exactly one source file; 3 logs were given" in many.stderr


def test_refusals_are_reported_and_do_not_stop_others(
    invoke: Invoke, old_store: Path, damaged: tuple[Path, dict[str, str]]
) -> None:
    root, _ = damaged
    result = invoke("migrate", old_store, root / "loose" / "newer.jsonl", "--jobs", "2")
    assert result.exit_code == 1
    assert "  reason: " in result.stdout and "version 5 is not supported" in result.stdout
    assert result.stdout.splitlines()[-1] == "2 migrated; 1 current; 1 refused"


def test_a_generation_named_loose_file_needs_a_destination(invoke: Invoke, tmp_path: Path) -> None:
    # Named like a store generation, but not in a store's session directory: loose.
    loose = tmp_path / "loose" / "session.v2.jsonl"
    write_header(loose, 2)
    before = snapshot_tree(tmp_path)
    result = invoke("migrate", loose)
    assert result.exit_code == 2
    assert f"{loose} is a loose file: pass --output OUT or --in-place" in result.stderr
    check = invoke("migrate", loose, "--check", "--json")
    assert check.exit_code == 2, check.output
    error = json.loads(check.stdout)["error"]
    assert error["kind"] == "usage" and "is a loose file" in error["message"]
    check = invoke("migrate", loose, "--in-place", "--check", "--json")
    assert check.exit_code == 1, check.output
    (entry,) = json.loads(check.stdout)["files"]
    assert (entry["status"], entry["target"]) == ("would-migrate", str(loose))
    assert snapshot_tree(tmp_path) == before
    in_place = invoke("migrate", loose, "--in-place")
    assert in_place.exit_code == 0, in_place.output
    assert sorted(p.name for p in loose.parent.iterdir()) == [
        "session.v2.jsonl",
        "session.v2.jsonl.v2.bak",
    ]


def test_check_of_a_shallow_generation_file_is_no_crash(invoke: Invoke) -> None:
    # A generation name one level below "/" (like /tmp/session.v2.jsonl): no store root.
    try:
        top = Path(tempfile.mkdtemp(prefix="dsh-store-shallow-", dir="/"))
    except OSError:  # pragma: no cover - not allowed to write there
        pytest.skip("cannot create a directory in /")
    try:
        shallow = top / "session.v2.jsonl"
        write_header(shallow, 2)
        result = invoke("migrate", shallow, "--check")
        assert result.exit_code == 2, result.output  # loose: nowhere to publish
        assert "unexpected" not in result.output
        assert "is a loose file" in result.stderr
        assert invoke("migrate", shallow).exit_code == 2
        result = invoke("migrate", shallow, "--check", "--in-place")
        assert result.exit_code == 1, result.output
        assert result.stdout.splitlines()[-1] == "1 would-migrate"
        assert sorted(p.name for p in top.iterdir()) == ["session.v2.jsonl"]
    finally:
        shutil.rmtree(top)


_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "valid"


def test_check_predicts_the_real_run_for_an_output(invoke: Invoke, tmp_path: Path) -> None:
    loose = tmp_path / "a.jsonl"
    shutil.copyfile(_FIXTURES / "v0-basic" / "session.jsonl", loose)
    done = tmp_path / "done.jsonl"
    assert invoke("migrate", loose, "-o", done).exit_code == 0
    check = invoke("migrate", loose, "-o", done, "--check")
    assert check.exit_code == 0, check.output
    assert check.stdout.splitlines()[-1] == "1 current"
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"hello\n")
    for flags in (("--check",), ("--dry-run",), ()):
        result = invoke("migrate", loose, "-o", other, *flags)
        assert result.exit_code == 1, (flags, result.output)
        assert result.stdout.splitlines()[-1] == "1 refused"
        assert "[rule: target-exists]" in result.stdout
    assert other.read_bytes() == b"hello\n"


def test_check_sees_an_already_published_store_generation(invoke: Invoke, old_store: Path) -> None:
    source = old_store / "--p--" / "s2" / "session.v2.jsonl"
    assert invoke("migrate", source).exit_code == 0
    check = invoke("migrate", source, "--check")
    assert check.exit_code == 0, check.output
    assert check.stdout.splitlines()[-1] == "1 current"


def test_a_target_with_garbage_after_the_upgrade_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    loose = tmp_path / "a.jsonl"
    shutil.copyfile(_FIXTURES / "v0-basic" / "session.jsonl", loose)
    target = tmp_path / "g.jsonl"
    target.write_bytes((_FIXTURES / "v0-basic" / "expected.v4.jsonl").read_bytes() + b"garbage\n")
    for flags in (("--check",), ()):
        result = invoke("migrate", loose, "-o", target, *flags)
        assert result.exit_code == 1, (flags, result.output)
        assert "not a clean continuation" in result.stdout
        assert "[rule: target-exists]" in result.stdout


def test_a_v4_source_with_an_output_is_copied(invoke: Invoke, tmp_path: Path) -> None:
    source = _FIXTURES / "v4-current" / "session.v4.jsonl"
    out = tmp_path / "new.jsonl"
    check = invoke("migrate", source, "-o", out, "--check")
    assert check.exit_code == 1
    assert check.stdout.splitlines()[-1] == "1 would-migrate"
    assert not out.exists()
    result = invoke("migrate", source, "-o", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "1 migrated"
    assert out.read_bytes() == source.read_bytes()
    assert invoke("migrate", source, "-o", out, "--check").exit_code == 0


def test_store_root_gives_a_loose_copy_the_store_migration_bytes(
    invoke: Invoke, tmp_path: Path
) -> None:
    from tests.migrations.store_logs import store_with_child

    root = tmp_path / "store"
    log = store_with_child(root)
    loose = tmp_path / "parent.jsonl"
    shutil.copyfile(log, loose)
    stored = invoke("migrate", root)
    assert stored.exit_code == 0, stored.output
    by_store = log.with_name("session.v4.jsonl").read_bytes()
    out = tmp_path / "out.jsonl"
    named = invoke("migrate", loose, "--output", out, "--store-root", root)
    assert named.exit_code == 0, named.output
    assert out.read_bytes() == by_store
    direct = tmp_path / "direct.jsonl"
    assert invoke("migrate", log, "--output", direct).exit_code == 0
    assert direct.read_bytes() == by_store
    missing = invoke(
        "migrate", loose, "--output", tmp_path / "x.jsonl", "--store-root", tmp_path / "no"
    )
    assert missing.exit_code == 2
