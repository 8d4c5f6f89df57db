"""Message projections: the registry and the first-party ``image/offload`` definition.

One test per rule of :mod:`dsh_store.model.projections` (the spec's "Plugin-owned message
projections" and DSH's image-offload definition), each through a live append, a restore,
a streaming check and a detached fold where the rule applies to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from dsh_store.errors import EventValidationError
from dsh_store.model import Session, SessionEvent, SessionHeader, fold_surface
from dsh_store.model.closers import build_fork_seed
from dsh_store.model.messages import derive_event_message
from dsh_store.model.projections import (
    FIRST_PARTY_PROJECTIONS,
    IMAGE_OFFLOAD,
    MESSAGE_PROJECTION_TYPES,
    ProjectionContext,
)
from dsh_store.model.stream_check import check_stream

from .builders import assistant, new_session, open_step, restore, tool_call, user


def image(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "image",
        "attachment": {"attachmentId": f"sha256:{name}", "mediaType": "image/png", "bytes": 4},
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def prompt(content: list[Any], message_id: str = "m-img") -> dict[str, Any]:
    return {"role": "user", "id": message_id, "content": content, "source": {"kind": "user"}}


def with_images() -> Session:
    """Seq 0-1 turn/step, 2 a user prompt with two images, 3 an assistant reply with a
    tool call, 4 tool/call, 5 a tool result holding a nested tool-result block with images."""
    session = new_session()
    open_step(session)
    session.append(
        "user/message", prompt([text("look"), image("a"), image("b")]), surface_op="append"
    )
    session.append("assistant/message", assistant(1, 1, None, ("c1",)), surface_op="append")
    session.append("tool/call", tool_call(1, 1, "c1"))
    result = {
        "turn": 1,
        "step": 1,
        "message": {
            "role": "tool",
            "source": {"kind": "tool", "callId": "c1"},
            "toolCallId": "c1",
            "content": [
                image("c"),
                "a plain string block",
                {"type": "tool-result", "content": [text("inner"), image("d"), image("e")]},
                image("f"),
            ],
            "isError": False,
            "id": "m-r-c1",
        },
    }
    session.append("tool/result", result, surface_op="append")
    return session


def offload(*targets: tuple[Any, list[Any]]) -> dict[str, Any]:
    return {"targets": [{"seq": seq, "imageIndexes": indexes} for seq, indexes in targets]}


def offloaded_flags(message: Any) -> list[bool]:
    """The ``offloaded`` flag of each image, depth-first."""
    flags: list[bool] = []

    def walk(blocks: list[Any]) -> None:
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "image":
                flags.append(block.get("offloaded") is True)
            elif isinstance(block, dict) and block.get("type") == "tool-result":
                walk(block["content"])

    walk(message["content"])
    return flags


def refused(session: Session, data: Any, rule: str) -> EventValidationError:
    before = (session.seq, session.derive_messages(), session.surface)
    with pytest.raises(EventValidationError) as caught:
        session.append("image/offload", data)
    assert caught.value.rule == rule, caught.value
    assert caught.value.seq == before[0] and caught.value.event_type == "image/offload"
    assert (session.seq, session.derive_messages(), session.surface) == before  # atomic
    return caught.value


def header() -> SessionHeader:
    return SessionHeader(id="s1", created_at=0)


def stored(session: Session, extra: list[SessionEvent] = ()) -> list[SessionEvent]:  # type: ignore[assignment]
    """The session's events, plus hand-made ones, as a stored log would hold them."""
    return [*session.events, *extra]


def raw_event(seq: int, data: Any, event_type: str = "image/offload") -> SessionEvent:
    row = {"type": event_type, "seq": seq, "time": 9, "data": data}
    return SessionEvent.from_json(row, line=orjson.dumps(row))


# -- the first-party definition: what it changes ----------------------------------------


def test_an_offload_marks_the_selected_images_and_nothing_else() -> None:
    session = with_images()
    logged = session.events[2].line
    before = session.derive_messages()
    view = session.surface
    session.append("image/offload", offload((2, [1])))
    after = session.derive_messages()
    assert offloaded_flags(after[0]) == [False, True]
    assert after[0]["content"][2] == {**image("b"), "offloaded": True}
    assert list(after[0]["content"][2]) == ["type", "attachment", "offloaded"]  # appended last
    assert after[0]["id"] == before[0]["id"] and after[1:] == before[1:]
    assert session.events[2].line == logged  # the logged event never changes
    assert session.surface.nodes == view.nodes
    assert session.surface.replace_generation == view.replace_generation
    assert session.surface.content_generation == view.content_generation + 1
    assert session.derive_event_message(session.events[2]) == after[0]
    assert derive_event_message(session.events[2]) == before[0]  # detached: no projections


def test_images_count_depth_first_through_nested_tool_results() -> None:
    session = with_images()
    session.append("image/offload", offload((5, [1, 3])))
    (tool_message,) = [m for m in session.derive_messages() if m["role"] == "tool"]
    # c, [d, e] inside the nested tool-result, f: indexes 1 and 3 are d and f.
    assert offloaded_flags(tool_message) == [False, True, False, True]
    assert tool_message["content"][1] == "a plain string block"  # kept, not counted
    assert tool_message["content"][2]["content"][0] == text("inner")


def test_successive_offloads_build_on_the_previous_projection() -> None:
    session = with_images()
    session.append("image/offload", offload((2, [0])))
    session.append("image/offload", offload((2, [1])))
    assert offloaded_flags(session.derive_messages()[0]) == [True, True]
    # An offloaded image still counts: index 1 is still "b".
    refused(session, offload((2, [1])), "image-offload-already-offloaded")


def test_one_decision_may_name_several_messages() -> None:
    session = with_images()
    session.append("image/offload", offload((5, [0]), (2, [0, 1])))
    messages = session.derive_messages()
    assert offloaded_flags(messages[0]) == [True, True]
    assert offloaded_flags(messages[2]) == [True, False, False, False]


def test_an_already_offloaded_image_in_the_logged_message_cannot_be_offloaded() -> None:
    session = new_session()
    open_step(session)
    session.append(
        "user/message", prompt([image("a", offloaded=True), image("b")]), surface_op="append"
    )
    refused(session, offload((2, [0])), "image-offload-already-offloaded")
    session.append("image/offload", offload((2, [1])))


# -- the first-party definition: what it refuses ----------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        "targets",
        {},
        {"targets": []},
        {"targets": {"seq": 2}},
        {"targets": [{"seq": 2, "imageIndexes": [0]}], "why": "extra"},
    ],
)
def test_data_must_be_exactly_a_non_empty_targets_list(data: Any) -> None:
    refused(with_images(), data, "image-offload-shape")


@pytest.mark.parametrize(
    "target",
    [
        "2",
        {"seq": 2},
        {"imageIndexes": [0]},
        {"seq": 2, "imageIndexes": []},
        {"seq": 2, "imageIndexes": 0},
        {"seq": 2, "imageIndexes": [0], "stub": "x"},
        {"seq": -1, "imageIndexes": [0]},
        {"seq": 2.5, "imageIndexes": [0]},
        {"seq": True, "imageIndexes": [0]},
        {"seq": "2", "imageIndexes": [0]},
    ],
)
def test_each_target_is_exactly_a_seq_and_non_empty_indexes(target: Any) -> None:
    refused(with_images(), {"targets": [target]}, "image-offload-target")


def test_a_decision_names_each_message_once_and_numbers_compare_as_json() -> None:
    session = with_images()
    refused(session, offload((2, [0]), (2, [1])), "image-offload-duplicate")
    refused(session, offload((2, [0]), (2.0, [1])), "image-offload-duplicate")  # 2.0 is 2
    session.append("image/offload", offload((2.0, [1.0])))
    assert offloaded_flags(session.derive_messages()[0]) == [False, True]


def test_a_target_must_be_a_current_surface_node() -> None:
    session = with_images()
    for seq in (0, 4, 6, 99):  # turn/start, tool/call, the offload's own seq, the future
        refused(session, offload((seq, [0])), "image-offload-not-on-surface")
    # A node a replacement shadowed is no longer a target.
    summary = prompt([text("summary")], "m-sum")
    session.append(
        "user/message",
        summary,
        surface_op={"op": "replace", "startSeq": 2, "endSeq": 2},
        source_event_seqs=[2],
    )
    refused(session, offload((2, [0])), "image-offload-not-on-surface")


def test_only_user_and_tool_result_messages_can_be_targets() -> None:
    session = with_images()
    error = refused(session, offload((3, [0])), "image-offload-target-type")
    assert "assistant/message" in error.detail


@pytest.mark.parametrize("indexes", [[1, 0], [0, 0], [-1], [0.5], ["0"], [None], [True]])
def test_indexes_are_strictly_increasing_safe_integers(indexes: list[Any]) -> None:
    refused(with_images(), offload((2, indexes)), "image-offload-indexes")


def test_an_index_past_the_last_image_names_the_first_missing_one() -> None:
    session = with_images()
    error = refused(session, offload((2, [1, 2, 3])), "image-offload-missing-image")
    assert "no image 2" in error.detail and "holds 2" in error.detail
    plain = new_session()
    open_step(plain)
    plain.append("user/message", user("no images"), surface_op="append")
    refused(plain, offload((2, [0])), "image-offload-missing-image")


@pytest.mark.parametrize(
    "content",
    [[image("a"), None], [{"type": "tool-result", "content": "not a list"}, image("a")]],
)
def test_a_content_tree_that_cannot_be_walked_refuses_the_decision(content: list[Any]) -> None:
    session = new_session()
    open_step(session)
    session.append("user/message", prompt(content), surface_op="append")
    refused(session, offload((2, [0])), "image-offload-walk")


def test_targets_are_read_in_order_so_an_earlier_projection_error_wins() -> None:
    session = with_images()
    refused(
        session,
        {"targets": [{"seq": 2, "imageIndexes": [7]}, "bad"]},
        "image-offload-missing-image",
    )
    refused(session, {"targets": ["bad", {"seq": 2, "imageIndexes": [7]}]}, "image-offload-target")


def test_nothing_commits_unless_every_target_succeeds() -> None:
    session = with_images()
    refused(session, offload((2, [0]), (5, [9])), "image-offload-missing-image")
    assert offloaded_flags(session.derive_messages()[0]) == [False, False]


def test_an_offload_carries_no_surface_fields() -> None:
    session = with_images()
    with pytest.raises(EventValidationError) as caught:
        session.append("image/offload", offload((2, [0])), surface_op="append")
    assert caught.value.rule == "surface-op-forbidden"


# -- restore, streaming check, detached fold, batches, forks ----------------------------


def test_restore_derives_what_the_live_session_derived() -> None:
    session = with_images()
    session.append("image/offload", offload((2, [1]), (5, [0, 2])))
    session.append("user/message", user("next", "m-next"), surface_op="append")
    restored = restore(list(session.events))
    assert restored.derive_messages() == session.derive_messages()
    assert restored.surface == session.surface
    assert check_stream(header(), session.events) == session.seq
    fold = fold_surface(session.events)
    assert fold.nodes == session.surface.nodes
    assert [
        derive_event_message(session.events[n], fold.projected_messages) for n in fold.nodes
    ] == (session.derive_messages())


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (offload((2, [5])), "image-offload-missing-image"),
        (offload((3, [0])), "image-offload-target-type"),
        ({"targets": []}, "image-offload-shape"),
    ],
)
def test_restore_and_the_streaming_check_refuse_a_bad_stored_decision(data: Any, rule: str) -> None:
    events = stored(with_images(), [raw_event(6, data)])
    for check in (
        lambda: restore(events),
        lambda: check_stream(header(), events),
        lambda: fold_surface(events),
    ):
        with pytest.raises(EventValidationError) as caught:
            check()
        assert (caught.value.rule, caught.value.seq, caught.value.event_type) == (
            rule,
            6,
            "image/offload",
        )


def test_the_streaming_check_refuses_an_imageless_target_as_restore_does() -> None:
    session = new_session()
    open_step(session)
    session.append("user/message", user("no images"), surface_op="append")
    events = stored(session, [raw_event(3, offload((2, [0])))])
    with pytest.raises(EventValidationError) as by_restore:
        restore(events)
    with pytest.raises(EventValidationError) as by_stream:
        check_stream(header(), events)
    assert by_stream.value.rule == by_restore.value.rule == "image-offload-missing-image"
    assert by_stream.value.detail == by_restore.value.detail


def test_a_batch_may_offload_an_image_it_appends() -> None:
    session = new_session()
    open_step(session)
    session.append_many(
        [
            ("user/message", prompt([image("a")]), {"surface_op": "append"}),
            ("image/offload", offload((2, [0]))),
        ]
    )
    assert offloaded_flags(session.derive_messages()[0]) == [True]
    with pytest.raises(EventValidationError):
        session.append_many(
            [
                ("user/message", prompt([image("b")], "m-2"), {"surface_op": "append"}),
                ("image/offload", offload((5, [1]))),
            ]
        )
    assert session.seq == 4 and offloaded_flags(session.derive_messages()[0]) == [True]


def test_projections_survive_the_inherited_cut_of_a_fork() -> None:
    session = with_images()
    session.append("image/offload", offload((2, [0])))
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    seed = build_fork_seed(session.events, None)
    child = Session.create(
        "child",
        seed=seed,
        header=SessionHeader(id="child", created_at=0, is_seeded=True),
        inherited_event_count=len(session.events),
    )
    assert child.derive_messages() == session.derive_messages()
    child.append("turn/start", {"turn": 2})
    child.append("step/start", {"turn": 2, "step": 1})
    child.append("image/offload", offload((2, [1])))  # keyed by the original seq
    assert offloaded_flags(child.derive_messages()[0]) == [True, True]


# -- the registry ------------------------------------------------------------------------


def test_the_first_party_catalog_is_built_in() -> None:
    assert FIRST_PARTY_PROJECTIONS == (IMAGE_OFFLOAD,)
    assert {"image/offload"} == MESSAGE_PROJECTION_TYPES
    assert IMAGE_OFFLOAD.type == "image/offload"


def test_a_projection_without_an_interpreter_is_refused_everywhere() -> None:
    session = with_images()
    session.append("image/offload", offload((2, [0])))
    events = list(session.events)
    for check in (
        lambda: Session.from_restore(header(), events, projections=()),
        lambda: Session.create("s1", seed=events, projections=()),
        lambda: check_stream_without(events),
        lambda: fold_surface(events, projections=()),
    ):
        with pytest.raises(EventValidationError) as caught:
            check()
        assert caught.value.rule == "projection-missing"
        assert (caught.value.seq, caught.value.event_type) == (6, "image/offload")
    bare = Session.from_restore(header(), events[:6], projections=())
    with pytest.raises(EventValidationError) as on_append:
        bare.append("image/offload", offload((2, [1])))
    assert on_append.value.rule == "projection-missing" and bare.seq == 6


def check_stream_without(events: list[SessionEvent]) -> int:
    from dsh_store.model.stream_check import StreamCheck

    return StreamCheck.from_restore(header(), events, projections=()).seq


class _Redact:
    """A plugin definition: replaces the text of one user message."""

    type = "demo/redact"

    def project(self, event: SessionEvent, context: ProjectionContext) -> Mapping[int, Any]:
        target = event.data["seq"]
        if context.node_types.get(target) != "user/message":
            raise EventValidationError("not a user node", rule="demo-redact", seq=event.seq)
        message = context.messages.get(target) or context.events[target].data
        return {target: {**message, "content": [text("[redacted]")]}}


def test_a_registered_plugin_definition_interprets_its_own_type() -> None:
    projections = (*FIRST_PARTY_PROJECTIONS, _Redact())
    session = Session.create("s1", projections=projections)
    open_step(session)
    session.append("user/message", user("secret", "m-s"), surface_op="append")
    session.append("demo/redact", {"seq": 2})
    assert session.derive_messages()[0]["content"] == [text("[redacted]")]
    events = list(session.events)
    restored = Session.from_restore(header(), events, projections=projections)
    assert restored.derive_messages() == session.derive_messages()
    # Without its definition the type is unknown and required: refused, not ignored.
    with pytest.raises(EventValidationError) as caught:
        Session.from_restore(header(), events)
    assert caught.value.rule == "unknown-type" and caught.value.seq == 3


def test_a_type_may_have_one_definition() -> None:
    for projections in ((IMAGE_OFFLOAD, IMAGE_OFFLOAD), (object(),)):
        with pytest.raises(EventValidationError) as caught:
            Session.create("s1", projections=projections)  # type: ignore[arg-type]
        assert caught.value.rule in ("projection-duplicate", "projection-invalid")
