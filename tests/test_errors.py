"""The error hierarchy: one base class, precise messages, facts as attributes, pickling."""

from __future__ import annotations

import errno
import importlib
import inspect
import pickle
import pkgutil
from typing import Any

import pytest

import dsh_store
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
    ZstdWriteUnsupportedError,
)
from dsh_store.jsonl.rows import Finding

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
    ZstdWriteUnsupportedError("/s/session.v4.jsonl.zstd", "repair"),
    StorageError("append of seqs 3..4", "/s/a.jsonl", OSError(errno.ENOSPC, "No space left")),
]


# A value for each constructor parameter, by name, to build any error class from its
# signature; a new class whose parameters are all named here is covered automatically.
FACT_VALUES: dict[str, object] = {
    "message": "something went wrong",
    "detail": "the detail",
    "reason": "the reason",
    "rule": "some-rule",
    "path": "/s/a.jsonl",
    "root": "/root",
    "session_id": "abc",
    "lock_path": "/root/p/abc/session.lock",
    "line": 9,
    "offset": 812,
    "seq": 7,
    "event_type": "user/message",
    "json_path": "data.x",
    "code_unit": "U+D800",
    "remedy": "salvage it",
    "edge": "2->3",
    "version": 2,
    "supported": 4,
    "action": "repair",
    "cause": OSError(errno.EACCES, "Permission denied"),
    "operation": "open",
    "then": "open it again",
    "instead": "pass a session directory",
    "owner_pid": 4100,
    "empty": True,
    "pid": 4101,
    "logs": ["/root/a/abc/session.v4.jsonl", "/root/b/abc/session.v4.jsonl"],
    "stop": Finding("unparsable-line", "not JSON", 2, 120),
    "url": "postgresql://dsh@127.0.0.1:5432/agents",
    "sqlstate": "57P01",
    "frame": 3,
    "key": "seq",
    "found": "zstd",
    "expected": "raw",
}
# Where one class takes a parameter of the same name in another shape.
CLASS_FACT_VALUES: dict[str, dict[str, object]] = {
    "WriterBrokenError": {"cause": "ftruncate failed: EIO"},
    "SchemaVersionError": {"found": 2},
    "EncodingConversionPendingError": {"twin": "/root/p/s/session.v4.jsonl.zstd"},
}
# Parameters whose fact a class keeps as another attribute (or in another shape).
RENAMED_FACTS: dict[str, dict[str, str]] = {
    "AmbiguousSessionError": {"logs": "paths"},
    "StorageError": {"cause": "errno"},
}


def _error_classes() -> list[type[DshStoreError]]:
    """Every error class ``dsh_store.errors`` defines (the base class included)."""
    return [
        value
        for _, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, DshStoreError) and value.__module__ == errors.__name__
    ]


def _build(cls: type[DshStoreError]) -> DshStoreError:
    """An instance of ``cls`` with every constructor parameter given a value."""
    values = {**FACT_VALUES, **CLASS_FACT_VALUES.get(cls.__name__, {})}
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        if parameter.kind is parameter.VAR_KEYWORD:
            keywords["path"] = values["path"]
            continue
        assert name in values, f"{cls.__name__}({name}=...): add a value to FACT_VALUES"
        if parameter.kind is parameter.KEYWORD_ONLY:
            keywords[name] = values[name]
        else:
            positional.append(values[name])
    return cls(*positional, **keywords)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_pickles_with_its_facts(cls: type[DshStoreError]) -> None:
    error = _build(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error) != ""
    assert copy.__dict__ == error.__dict__
    for name in inspect.signature(cls).parameters:
        if name in ("message", "facts"):
            continue
        fact = RENAMED_FACTS.get(cls.__name__, {}).get(name, name)
        assert hasattr(copy, fact), f"{cls.__name__} loses its {name!r} fact"
        assert getattr(copy, fact) == getattr(error, fact)
    assert cls.__name__ in errors.__all__
    assert cls.__doc__


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_every_error_pickles_with_its_facts(error: DshStoreError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def _public_modules() -> list[str]:
    """The package's modules a caller imports (private ones, ``_x``, raise only internal
    signals that their public caller turns into an error of ``errors.py``)."""
    names = [dsh_store.__name__]
    for module in pkgutil.walk_packages(dsh_store.__path__, f"{dsh_store.__name__}."):
        private = any(part.startswith("_") for part in module.name.split("."))
        if not private:  # (__main__ is private too: importing it runs the CLI)
            names.append(module.name)
    return names


def test_every_exception_class_of_the_package_is_defined_in_errors() -> None:
    """A user meets only ``DshStoreError`` subclasses of ``errors.py`` (others re-export them)."""
    elsewhere = []
    for name in _public_modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            defined_here = value.__module__ == name != errors.__name__
            # A private exception is control flow caught inside its own module.
            private = value.__qualname__.startswith("_")
            if issubclass(value, BaseException) and defined_here and not private:
                elsewhere.append(f"{name}.{value.__qualname__}")
    assert elsewhere == []


def test_moved_error_classes_are_still_importable_where_they_were() -> None:
    from dsh_store import bulk, demo, summary, verify

    assert verify.NoLogsError is errors.NoLogsError
    assert summary.NotASessionDirectoryError is errors.NotASessionDirectoryError
    assert demo.DemoRootError is errors.DemoRootError
    assert bulk.MigrationOptionsError is errors.MigrationOptionsError
    assert issubclass(errors.MigrationOptionsError, ValueError)


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
