"""The error hierarchy: one base class, precise messages, facts as attributes, pickling."""

from __future__ import annotations

import errno
import pickle

import pytest

from dsh_store import errors
from dsh_store.errors import (
    ConcurrentModificationError,
    CorruptLogError,
    DshStoreError,
    EventValidationError,
    InvalidSessionIdError,
    LosslessJsonError,
    MigrationRefusedError,
    NotASessionError,
    SalvageRefusedError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StorageError,
    UnsupportedVersionError,
    WriterBrokenError,
)

SAMPLES: list[DshStoreError] = [
    LosslessJsonError("NaN is not JSON", json_path="data.x", event_type="user/message"),
    EventValidationError(
        "turn 2 is not open", rule="turn-not-open", seq=7, event_type="step/start"
    ),
    NotASessionError("/s/a.jsonl", "no version"),
    CorruptLogError("/s/a.jsonl", "seq gap", line=9, offset=812, seq=7, rule="seq-gap"),
    UnsupportedVersionError("/s/a.jsonl", 5, 4),
    MigrationRefusedError(
        "user/message before the first step/start",
        rule="surface before first step",
        path="/s/a.jsonl",
        seq=3,
        event_type="user/message",
        edge="2->3",
    ),
    SessionNotFoundError("abc", "/root"),
    SessionExistsError("abc", "/root/p/abc/session.v4.jsonl"),
    SessionLockedError("abc", "/root/p/abc/session.lock"),
    ConcurrentModificationError("/s/a.jsonl", "size is 10 bytes, expected 12"),
    WriterBrokenError("/s/a.jsonl", "ftruncate failed: EIO"),
    SalvageRefusedError("/s/a.jsonl", "the first event is already bad", rule="nothing-to-salvage"),
    InvalidSessionIdError("", "a session id must not be empty", rule="empty"),
    StorageError("append of seqs 3..4", "/s/a.jsonl", OSError(errno.ENOSPC, "No space left")),
]


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_every_error_pickles_with_its_facts(error: DshStoreError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_every_error_is_a_dsh_store_error_listed_in_all(error: DshStoreError) -> None:
    assert isinstance(error, DshStoreError)
    assert type(error).__name__ in errors.__all__


def test_messages_name_where_and_what_to_do() -> None:
    corrupt = SAMPLES[3]
    assert str(corrupt).startswith("/s/a.jsonl:9 (byte 812, seq 7): corrupt session log: seq gap")
    assert "the file was not modified" in str(corrupt)
    newer = SAMPLES[4]
    assert "written by a newer writer; upgrade dsh-store" in str(newer)
    older = UnsupportedVersionError("/s/a.jsonl", -1, 4)
    assert "no upgrade path exists" in str(older)
    refused = SAMPLES[5]
    assert str(refused).startswith(
        "/s/a.jsonl (seq 3, type 'user/message'): migration refused at edge 2->3"
    )
    assert "[rule: surface before first step]" in str(refused)
    invalid = SAMPLES[1]
    assert str(invalid) == "seq 7, type 'step/start': turn 2 is not open [rule: turn-not-open]"


def test_storage_error_is_still_an_os_error_with_the_cause_errno() -> None:
    error = SAMPLES[-1]
    assert isinstance(error, OSError)
    assert error.errno == errno.ENOSPC
    assert error.filename == "/s/a.jsonl"
    assert "append of seqs 3..4 failed: No space left (errno 28)" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert copy.errno == errno.ENOSPC
