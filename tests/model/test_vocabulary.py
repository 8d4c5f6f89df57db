"""The v4 vocabulary constants."""

from __future__ import annotations

from dsh_store.model import (
    CORE_TYPES,
    KNOWN_TYPES,
    LOG_ONLY_TYPES,
    SESSION_FORMAT_VERSION,
    SURFACE_TYPES,
    is_plugin_type,
)


def test_vocabulary_sizes_and_relations() -> None:
    assert SESSION_FORMAT_VERSION == 4
    assert len(SURFACE_TYPES) == 5 and SURFACE_TYPES < CORE_TYPES
    assert len(CORE_TYPES) == 14 and not CORE_TYPES & LOG_ONLY_TYPES
    assert len(KNOWN_TYPES) == 59 == len(CORE_TYPES) + len(LOG_ONLY_TYPES)
    assert {"developer/message", "workspace/changes", "tool/ptc-dispatch"} <= KNOWN_TYPES
    assert not {"assistant/chunk", "tool/code-dispatch", "steering/message"} & KNOWN_TYPES
    assert all(isinstance(s, frozenset) for s in (CORE_TYPES, SURFACE_TYPES, LOG_ONLY_TYPES))


def test_plugin_namespace() -> None:
    assert is_plugin_type("plugin:notes/added")
    assert not is_plugin_type("compaction/start")
    assert not any(is_plugin_type(name) for name in KNOWN_TYPES)
