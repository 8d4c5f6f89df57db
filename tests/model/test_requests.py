"""Request header and context folds, live and pure."""

from __future__ import annotations

from dsh_store.model import fold_request_context, fold_request_header

from .builders import MODEL, PROVIDER, new_session, open_step, request_header


def test_latest_snapshot_wins_live_and_pure() -> None:
    session = new_session()
    assert session.request_header() is None and session.request_context() is None
    assert fold_request_header([]) is None and fold_request_context([]) is None
    open_step(session)
    session.append("request/header", request_header())
    session.append(
        "request/context", {"provider": PROVIDER, "model": MODEL, "contextWindow": 128000}
    )
    tools = [{"name": "bash", "description": "", "parameters": {}}]
    session.append(
        "request/header", request_header("change", tools=tools, adapterDefaults={"maxTokens": True})
    )
    expected = {
        "config": {"provider": PROVIDER, "model": MODEL},
        "adapterDefaults": {"maxTokens": True},
        "tools": tools,
    }
    assert session.request_header() == expected
    assert fold_request_header(session.events) == expected
    assert list(session.request_header() or {}) == ["config", "tools", "adapterDefaults"]
    session.append("request/context", {"provider": PROVIDER, "model": "other"})
    # A newer record without contextWindow clears the older route's capacity.
    assert session.request_context() == {"provider": PROVIDER, "model": "other"}
    assert fold_request_context(session.events) == session.request_context()


def test_folds_return_fresh_copies() -> None:
    session = new_session()
    open_step(session)
    session.append("request/header", request_header())
    header = session.request_header()
    assert header is not None
    header["config"]["model"] = "changed"
    assert session.request_header() == request_header()["header"]
    context_free = fold_request_header(session.events)
    assert context_free is not None and context_free["config"]["model"] == MODEL
