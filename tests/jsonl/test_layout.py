"""Directory and file names of the store layout."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_store.jsonl import layout
from dsh_store.jsonl.files import make_dirs
from dsh_store.jsonl.layout import (
    LOCK_NAME,
    LOG_NAME,
    NAME_MAX,
    decode_session_id,
    encode_session_id,
    generation_name,
    generation_version,
    is_temp_name,
    is_temp_of,
    log_path,
    project_key,
    session_dir,
    temp_final_name,
    temp_path,
)

# Every UTF-16 code unit class: ASCII safe, ASCII unsafe, NUL, BMP, lone surrogates, astral.
ids = st.text(
    alphabet=st.one_of(
        st.sampled_from("abcXYZ019._-~/\\:\x00 %"),
        st.characters(codec=None, categories=None),
        st.sampled_from(["\ud800", "\udfff", "\U0001f600", "é"]),
    ),
    min_size=1,
    max_size=80,
)
long_ids = st.text(alphabet=st.sampled_from("a~é\U0001f600"), min_size=40, max_size=400)

HOSTILE_IDS = [
    "../x",
    "../../etc/pwn",
    "a/b",
    "a\\b",
    "\x00",
    "a\x00b",
    ".",
    "..",
    "...",
    "/",
    "~",
    "~002E",
    "\ud800",
    "\udc00\ud800",
    "x" * 10_000,
    "/" * 10_000,
    "\U0001f600" * 3_000,
]


def _is_contained(root: Path, path: Path) -> bool:
    parts = path.relative_to(root).parts
    return all(
        part not in ("", ".", "..") and "/" not in part and "\x00" not in part for part in parts
    )


# -- project_key ------------------------------------------------------------------------------


def test_project_key_without_cwd_is_no_cwd_dir() -> None:
    assert project_key(None) == "_no-cwd"


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/home/me/project", "--home-me-project--"),
        ("C:\\Users\\me", "--C-Users-me--"),
        ("//a///b::c", "--a-b-c--"),
        ("/a/b-c", "--a-b-c--"),
        ("/a-b/c", "--a-b-c--"),
        ("/", "--root--"),
        ("", "--root--"),
        ("-/-x", "--x--"),
        ("/a b/ü", "--a~0020b-~00FC--"),
        ("/tmp/~me", "--tmp-~007Eme--"),
        ("/x/\U0001f600", "--x-~D83D~DE00--"),
    ],
)
def test_project_key_follows_dsh_rules(cwd: str, key: str) -> None:
    assert project_key(cwd) == key


def test_project_key_cuts_slug_at_251_characters() -> None:
    key = project_key("/" + "a" * 600)
    assert key == "--" + "a" * 251 + "--"
    assert len(key.encode()) == NAME_MAX


@given(st.text(max_size=300))
def test_project_key_is_always_a_single_safe_name(cwd: str) -> None:
    key = project_key(cwd)
    assert key.startswith("--") and key.endswith("--")
    assert len(key.encode()) <= NAME_MAX
    assert "/" not in key and "\x00" not in key and key not in (".", "..")


# -- encode_session_id ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session_id", "name"),
    [
        ("abc-123_X.y", "abc-123_X.y"),
        ("a/b", "a~002Fb"),
        ("../x", "..~002Fx"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("~", "~007E"),
        ("\x00", "~0000"),
        ("\ud800", "~D800"),
        ("\U0001f600", "~D83D~DE00"),
    ],
)
def test_encode_session_id_escapes_every_unsafe_code_unit(session_id: str, name: str) -> None:
    assert encode_session_id(session_id) == name
    assert decode_session_id(name) == session_id


def test_encode_session_id_refuses_an_empty_id() -> None:
    with pytest.raises(ValueError, match="a session id must not be empty"):
        encode_session_id("")


def test_over_long_id_gets_a_hashed_name_within_name_max() -> None:
    name = encode_session_id("x" * 10_000)
    assert len(name.encode()) <= NAME_MAX
    assert "~~" in name and name.startswith("x" * 100)
    assert decode_session_id(name) is None


def test_hashed_name_prefix_never_ends_inside_an_escape() -> None:
    name = encode_session_id("é" * 200)
    prefix = name.split("~~")[0]
    assert len(prefix) % 5 == 0 and prefix == "~00E9" * (len(prefix) // 5)


def test_id_of_exactly_name_max_bytes_stays_unhashed() -> None:
    session_id = "y" * NAME_MAX
    assert encode_session_id(session_id) == session_id
    assert "~~" in encode_session_id("y" * (NAME_MAX + 1))


@given(ids)
def test_encoding_round_trips(session_id: str) -> None:
    name = encode_session_id(session_id)
    if "~~" not in name:
        assert decode_session_id(name) == session_id


@given(ids, ids)
def test_distinct_ids_get_distinct_names(first: str, second: str) -> None:
    if first != second:
        assert encode_session_id(first) != encode_session_id(second)


@given(long_ids, long_ids)
def test_distinct_long_ids_get_distinct_names(first: str, second: str) -> None:
    if first != second:
        assert encode_session_id(first) != encode_session_id(second)


@given(st.one_of(ids, long_ids, st.sampled_from(HOSTILE_IDS)))
def test_no_id_makes_a_path_outside_the_root(session_id: str) -> None:
    root = Path("/store")
    for cwd in (None, "/w", "../../..", "/.."):
        path = log_path(root, session_id, cwd)
        assert _is_contained(root, path)
        assert len(path.parent.name.encode()) <= NAME_MAX
        assert os.path.normpath(path).startswith("/store/")


def test_decode_refuses_names_encode_never_makes() -> None:
    for name in ["", "a/b", "~12", "~00e9", "a b", ".", "..", "~~x", "~0041"]:
        assert decode_session_id(name) is None, name


@pytest.mark.parametrize("session_id", HOSTILE_IDS)
def test_hostile_ids_create_directories_only_under_the_root(
    tmp_path: Path, session_id: str
) -> None:
    root = tmp_path / "root"
    target = session_dir(root, session_id, "/w")
    make_dirs(target)
    created = [Path(dirpath) for dirpath, _, _ in os.walk(tmp_path)]
    assert target in created
    assert all(path == tmp_path or path.is_relative_to(root) for path in created)
    assert sorted(p.name for p in (root / "--w--").iterdir()) == [target.name]


# -- names ------------------------------------------------------------------------------------


def test_session_paths_compose_root_project_and_encoded_id(tmp_path: Path) -> None:
    assert session_dir(tmp_path, "a/b", "/p") == tmp_path / "--p--" / "a~002Fb"
    assert session_dir(tmp_path, "s", None) == tmp_path / "_no-cwd" / "s"
    assert log_path(tmp_path, "s", None) == tmp_path / "_no-cwd" / "s" / "session.v4.jsonl"
    assert LOG_NAME == "session.v4.jsonl"
    assert LOCK_NAME == "session.lock"


@pytest.mark.parametrize(
    ("version", "name"), [(0, "session.jsonl"), (1, "session.v1.jsonl"), (4, "session.v4.jsonl")]
)
def test_generation_names_round_trip(version: int, name: str) -> None:
    assert generation_name(version) == name
    assert generation_version(name) == version


def test_generation_version_rejects_other_names() -> None:
    for name in [
        "session.v0.jsonl",
        "session.v.jsonl",
        "session.jsonl.tmp",
        "x.jsonl",
        "session.v04.jsonl",
    ]:
        assert generation_version(name) is None, name
    with pytest.raises(ValueError, match="a format version is non-negative, got -1"):
        generation_name(-1)


def test_temp_names_sit_beside_the_final_name() -> None:
    temp = temp_path("/d/session.v4.jsonl", "0a1b2c")
    assert temp == Path("/d/session.v4.jsonl.0a1b2c.tmp")
    assert is_temp_name(temp.name)
    assert not is_temp_name("session.v4.jsonl")
    assert not is_temp_name(LOCK_NAME)


def test_modes_are_private() -> None:
    assert layout.DIR_MODE == 0o700
    assert layout.FILE_MODE == 0o600


def test_is_temp_of_accepts_exactly_the_names_publishers_make() -> None:
    made = temp_path("/d/session.v4.jsonl", secrets.token_hex(6)).name
    assert is_temp_of(LOG_NAME, made) and temp_final_name(made) == LOG_NAME
    assert is_temp_of("odd.name.jsonl", "odd.name.jsonl.0a1b2c3d4e5f.tmp")
    for name in (
        "session.v3.jsonl.0a1b2c3d4e5f.tmp",  # another log's temp
        "session.v4.jsonl.0A1B2C3D4E5F.tmp",  # token_hex is lowercase
        "session.v4.jsonl.0a1b2c3d4e5.tmp",  # eleven digits
        "session.v4.jsonl.0a1b2c3d4e5f0.tmp",
        "session.v4.jsonl.tmp",
        "session.v4.jsonl.0a1b2c3d4e5f.tmp.bak",
        "session.v4.jsonl.torn-12",
        "xsession.v4.jsonl.0a1b2c3d4e5f.tmp",
    ):
        assert not is_temp_of(LOG_NAME, name), name
    assert temp_final_name(".0a1b2c3d4e5f.tmp") is None
    assert is_temp_name("session.v4.jsonl.tmp")  # the reader's rule stays permissive
