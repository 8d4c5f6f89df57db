"""The comparisons of ``test_written`` on the same sessions written by the upstream backend
in its default zstd encoding (``session.jsonl.zstd``, packed chunk rows on and off).

The test functions are those of ``test_written``, unchanged; only the ``written`` fixture
is replaced by the zstd roots.
"""

from __future__ import annotations

import pytest

from tests.interop.conftest import Written
from tests.interop.test_written import (
    test_conversation_agrees_where_no_tool_call_is_closed,
    test_default_verdicts_agree_except_the_documented_refusals,
    test_lenient_reading_agrees_with_upstream_on_every_session,
    test_list_agrees,
    test_logs_repaired_by_upstream_load_read_back_balanced,
    test_tool_closers_read_exactly_as_upstream_writes_them,
)

pytestmark = pytest.mark.requires("upstream")

__all__ = [
    "test_conversation_agrees_where_no_tool_call_is_closed",
    "test_default_verdicts_agree_except_the_documented_refusals",
    "test_lenient_reading_agrees_with_upstream_on_every_session",
    "test_list_agrees",
    "test_logs_repaired_by_upstream_load_read_back_balanced",
    "test_tool_closers_read_exactly_as_upstream_writes_them",
]


@pytest.fixture
def written(written_zstd: dict[bool, Written]) -> dict[bool, Written]:
    """The zstd-encoded roots in place of the raw ones."""
    assert all(
        store.log(store.sessions[0]).name == "session.jsonl.zstd" for store in written_zstd.values()
    )
    return written_zstd
