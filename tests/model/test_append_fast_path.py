"""``Session.append``'s fast paths refuse exactly what its precise paths refuse.

The append hot path takes shortcuts: per-type payload checks that only confirm the common
shape (``shapes._FAST``), payloads the check has fully typed skipping the type screen
(``PLAIN_PAYLOAD_SIZES``), and a type screen after orjson instead of the iterative walk.
Each shortcut either confirms or hands over to the precise code. Here the same append runs
twice, once as shipped and once with every shortcut switched off (the precise payload
checkers, every value walked by ``check_json`` and written by the plain strict encoder),
on near-valid events with hostile mutations: both must accept with the same line and
facts, or refuse with the same error class, rule and message.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import pickle
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_store import jsonvalue
from dsh_store.errors import DshStoreError
from dsh_store.model import Session, SessionEvent, SurfaceReplace, shapes
from dsh_store.model import events as events_module
from dsh_store.model import session as session_module
from dsh_store.payloads import (
    assistant_message,
    request_header,
    step_end,
    system_message,
    text_block,
    tool_call,
    tool_call_block,
    tool_result,
    tool_schema,
    turn_end,
    turn_start,
    user_message,
)

from .builders import MODEL, PROVIDER, ticking_clock

EVENT_FIELDS = ("type", "seq", "time", "ignorable", "surface_op", "source_event_seqs", "_facts")


class Level(enum.IntEnum):
    LOW = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class Color(enum.Enum):
    RED = "red"


class Text(str):
    pass


class Number(int):
    pass


# Hostile replacements by the kind of value they replace: each one differs from a valid
# value in exactly one way some check must notice (or, for the valid look-alikes, not).
HOSTILE_TEXT: list[Any] = ["", "\ud800", Text("c1"), Mode.FAST, 1, None, "c1", "append"]
HOSTILE_COUNT: list[Any] = [0, -1, True, 1.0, Level.LOW, Number(1), 2**53, 1, 2]
HOSTILE_VALUE: list[Any] = [
    Color.RED,
    uuid.UUID(int=7),
    orjson.Fragment(b"1"),
    float("nan"),
    float("inf"),
    -0.0,
    0.5,
    -(2**60),
    (1, "a"),
    [Level.LOW],
    {"k": -0.0},
    {},
    [],
    None,
    False,
]


def _fresh(value: Any) -> Any:
    # Containers are copied: a later edit may insert into one, and the lists are shared.
    return copy.deepcopy(value) if type(value) in (dict, list) else value


def _hostile_for(value: Any) -> list[Any]:
    if type(value) is str:
        return HOSTILE_TEXT + HOSTILE_VALUE
    if type(value) is int:
        return HOSTILE_COUNT + HOSTILE_VALUE
    return HOSTILE_VALUE + HOSTILE_TEXT[:4] + HOSTILE_COUNT[:4]


def _prefix() -> Session:
    """Turn 1 step 1 open: a header at seq 2, assistant call c1 requested, tool/call c1 logged."""
    session = Session.create("differential", clock=ticking_clock())
    session.append("turn/start", turn_start(1))
    session.append("step/start", {"turn": 1, "step": 1})
    bash = tool_schema("bash", "Run a shell command", {"type": "object"})
    session.append("request/header", request_header(PROVIDER, MODEL, tools=[bash]))
    session.append("user/message", user_message("q", id="u1"), surface_op="append")
    asks = [tool_call_block("c1", "bash", "{}")]
    answer = assistant_message(1, 1, asks, provider=PROVIDER, model=MODEL, id="a1")
    session.append("assistant/message", answer, surface_op="append")
    session.append("tool/call", tool_call(1, 1, "c1", "bash", "{}"))
    return session


def _bases() -> list[tuple[str, Any, Any]]:
    """(type, valid payload, surface op) for the event after :func:`_prefix`."""
    developer = {
        "turn": 1,
        "step": 1,
        "headerSeq": 2,
        "message": {
            "role": "developer",
            "content": [{"type": "tool-addition", "name": "bash"}],
            "id": "d1",
        },
    }
    return [
        ("tool/result", tool_result(1, 1, "c1", "42"), "append"),
        ("step/end", step_end(1, 1), None),
        ("step/start", {"turn": 1, "step": 2}, None),
        ("turn/start", turn_start(2), None),
        ("turn/end", turn_end(1), None),
        ("user/message", user_message("more", id="u2"), "append"),
        (
            "assistant/message",
            assistant_message(
                1,
                1,
                [text_block("hi"), tool_call_block("c2", "bash", "{}")],
                provider=PROVIDER,
                model=MODEL,
                id="a2",
            ),
            "append",
        ),
        ("system/message", system_message(1, 1, "be brief", id="s1"), "append"),
        ("developer/message", developer, "append"),
        ("request/header", request_header(PROVIDER, MODEL, reason="change"), None),
        ("request/context", {"provider": PROVIDER, "model": MODEL, "contextWindow": 8}, None),
        ("tool/call", tool_call(1, 1, "c2", "grep", ""), None),
        ("assistant/attempt", {"turn": 1, "step": 1, "stream": []}, None),
        ("session/end-seed", {}, None),
        ("future/kind", {"any": [1, "two"]}, None),
    ]


def _slots(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in ``value``, containers before their children."""
    if type(value) is dict:
        for key in list(value):
            out.append((value, key))
            _slots(value[key], out)
    elif type(value) is list:
        for index in range(len(value)):
            out.append((value, index))
            _slots(value[index], out)
    return out


@st.composite
def candidates(draw: st.DrawFn) -> tuple[str, Any, Any, Any, bool]:
    """A near-valid next event: a base, then mostly one hostile edit anywhere in it."""
    event_type, data, op = draw(st.sampled_from(_bases()))
    data = orjson.loads(orjson.dumps(data))  # a private copy to edit
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
        slots = _slots(data, [])
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "insert"]))
        if action == "delete":
            del container[key]
        elif action == "insert" and type(container) is dict:
            extra = draw(st.sampled_from(["extra", "error", "interrupted", "system", "tools"]))
            container[extra] = _fresh(draw(st.sampled_from(HOSTILE_VALUE + HOSTILE_TEXT)))
        else:
            container[key] = _fresh(draw(st.sampled_from(_hostile_for(container[key]))))
    if draw(st.integers(0, 19)) == 0:
        data = _fresh(draw(st.sampled_from(HOSTILE_VALUE)))
    if draw(st.integers(0, 4)) == 0:
        op = draw(
            st.sampled_from(
                [None, "append", Text("append"), "replace", SurfaceReplace(3, 4), {"op": "x"}]
            )
        )
    sources = draw(
        st.sampled_from(
            [None, None, None, [3], (5,), [], [99], [True], [3, 3], [1, 2, 3], [0, 2, 3, 4]]
        )
    )
    ignorable = draw(st.sampled_from([False, False, True]))
    return event_type, data, op, sources, ignorable


# Each shortcut and what switches it off: the precise payload checkers alone, the envelope
# check on every event, no prescreened payload, and the full lossless walk for every value.
_SHORTCUTS: list[tuple[Any, str, Any]] = [
    (shapes, "_FAST", {}),
    (shapes, "fast_payload_facts", None),
    (session_module, "PLAIN_PAYLOAD_SIZES", {}),
    (session_module, "_NON_SURFACE_KNOWN", frozenset()),
    (session_module, "_APPENDED_SURFACE", frozenset()),
    (session_module, "_CITING_SURFACE", frozenset()),
    (jsonvalue, "_screen_accepts", lambda value: False),
    (jsonvalue, "fast_row", None),
]
# What an install without a C compiler runs: the same shortcuts, in Python.
_WITHOUT_C: list[tuple[Any, str, Any]] = [
    (shapes, "fast_payload_facts", None),
    (session_module, "make_event", events_module.make_event_in_python),
    (jsonvalue, "_screen_accepts", jsonvalue._screen_accepts_in_python),
    (jsonvalue, "fast_row", None),
]


@contextlib.contextmanager
def _switched(switches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    saved = [getattr(module, name) for module, name, _ in switches]
    for module, name, off in switches:
        setattr(module, name, off)
    try:
        yield
    finally:
        for (module, name, _), value in zip(switches, saved, strict=True):
            setattr(module, name, value)


def _precise_only() -> contextlib.AbstractContextManager[None]:
    """Switch off every append shortcut (module globals, read at each call)."""
    return _switched(_SHORTCUTS)


def _without_c() -> contextlib.AbstractContextManager[None]:
    """The shortcuts an install without the C extension takes."""
    return _switched(_WITHOUT_C)


def _outcome(append: Callable[[], Any], session: Session) -> tuple[Any, ...]:
    try:
        event = append()
    except DshStoreError as error:
        return ("refused", type(error).__name__, getattr(error, "rule", None), str(error))
    return ("accepted", event.line, event._facts, session.surface, session.is_balanced)


def _append(candidate: tuple[str, Any, Any, Any, bool]) -> tuple[Any, ...]:
    event_type, data, op, sources, ignorable = candidate
    session = _prefix()
    return _outcome(
        lambda: session.append(
            event_type, data, surface_op=op, source_event_seqs=sources, ignorable=ignorable
        ),
        session,
    )


@settings(max_examples=600)
@given(candidates())
def test_append_fast_paths_agree_with_the_precise_paths(
    candidate: tuple[str, Any, Any, Any, bool],
) -> None:
    fast = _append(candidate)
    with _without_c():
        fast_in_python = _append(candidate)
    with _precise_only():
        precise = _append(candidate)
    assert fast == precise
    assert fast_in_python == precise


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value`` (its keys and indexes from the root)."""
    items = (
        value.items() if type(value) is dict else enumerate(value) if type(value) is list else ()
    )
    for key, child in items:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


def _edited(data: Any, path: tuple[Any, ...], action: str, new: Any) -> Any:
    copied = orjson.loads(orjson.dumps(data))
    container = copied
    for key in path[:-1]:
        container = container[key]
    if action == "delete":
        del container[path[-1]]
    elif action == "insert":
        container[path[-1]][new[0]] = _fresh(new[1])
    else:
        container[path[-1]] = _fresh(new)
    return copied


def _single_edits() -> Iterator[tuple[str, Any, Any, Any, bool]]:
    """Every base with each of its values replaced by each hostile of its kind, deleted,
    or (a dict) given an extra key; and each base with every surface op, seqs and flag."""
    for event_type, data, op in _bases():
        for path in _paths(data):
            target = data
            for key in path:
                target = target[key]
            for new in _hostile_for(target):
                yield event_type, _edited(data, path, "replace", new), op, None, False
            if type(path[-1]) is str:
                yield event_type, _edited(data, path, "delete", None), op, None, False
            if type(target) is dict:
                extras: list[tuple[str, Any]] = [("extra", 1), ("error", {}), ("interrupted", 0)]
                for extra in extras:
                    yield event_type, _edited(data, path, "insert", extra), op, None, False
        for other_op in (None, "append", Text("append"), SurfaceReplace(3, 4), {"op": "x"}):
            for sources in (None, [3], (5,), [], [99], [True], [3, 3], [1, 2, 3], [3, -1]):
                for ignorable in (False, True):
                    yield event_type, data, other_op, sources, ignorable


def test_every_single_edit_agrees_on_both_paths() -> None:
    # Exhaustive over one edit: Hypothesis above explores combinations of several.
    disagreements = []
    count = 0
    for candidate in _single_edits():
        count += 1
        fast = _append(candidate)
        with _without_c():
            fast_in_python = _append(candidate)
        with _precise_only():
            precise = _append(candidate)
        if not fast == fast_in_python == precise:
            disagreements.append((candidate, fast, fast_in_python, precise))
    assert count > 1000
    assert disagreements == []


@settings(max_examples=600)
@given(candidates())
def test_each_fast_payload_check_confirms_only_what_the_precise_check_accepts(
    candidate: tuple[str, Any, Any, Any, bool],
) -> None:
    event_type, data, _, _, _ = candidate
    fast = shapes._FAST.get(event_type)
    if fast is None or type(data) is not dict:
        return
    facts = fast(data)
    if facts is None:
        return  # handed to the precise checker, which decides alone
    payload = shapes._Payload(event_type, 6)
    assert shapes._CHECKERS[event_type](payload, data) == facts


@settings(max_examples=600)
@given(candidates())
def test_the_c_payload_check_confirms_only_what_the_precise_check_accepts(
    candidate: tuple[str, Any, Any, Any, bool],
) -> None:
    # The same facts as the precise checker whenever it confirms; and wherever the Python
    # fast check confirms an exact payload, the C one does too (or the C one is not there).
    compiled = _compiled_payload_facts()
    event_type, data, _, _, _ = candidate
    if type(data) is not dict:
        assert compiled(event_type, data) is None
        return
    facts = compiled(event_type, data)
    if facts is not None:
        assert type(facts) is shapes.EventFacts
        payload = shapes._Payload(event_type, 6)
        assert shapes._CHECKERS[event_type](payload, data) == facts
    fast = shapes._FAST.get(event_type)
    in_python = fast(data) if fast is not None else None
    if in_python is not None and _exact(data):
        assert facts == in_python


def _compiled_payload_facts() -> Callable[[Any, Any], Any]:
    compiled = shapes.fast_payload_facts
    if compiled is None:
        pytest.skip("dsh_store._jsonscreen is not built here (no C compiler at install)")
    return compiled


def _exact(value: Any) -> bool:
    """Only exact builtin containers, str, int, bool and None inside (no subclass, no enum):
    where the C check has no reason to be less sure than the Python one."""
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and _exact(item) for key, item in value.items())
    if kind is list:
        return all(_exact(item) for item in value)
    return kind in (str, int, bool, float, type(None))


def test_the_c_payload_check_confirms_every_event_of_the_realistic_mix() -> None:
    # Where the C check gives up on a well-formed payload, the hot path silently loses it:
    # every core payload of these shapes must be confirmed, with the precise facts.
    compiled = _compiled_payload_facts()
    session = _prefix()
    confirmed = set()
    for event_type, data, _ in _bases():
        facts = compiled(event_type, data)
        if event_type in shapes._FAST and event_type != "assistant/attempt":
            assert facts is not None, event_type
            confirmed.add(event_type)
            payload = shapes._Payload(event_type, 6)
            assert shapes._CHECKERS[event_type](payload, data) == facts
        else:
            assert facts is None, event_type
    for event in session.events:
        assert compiled(event.type, event.data) == event._facts
    assert confirmed == set(shapes._FAST) - {"assistant/attempt"}


def test_the_c_payload_check_is_not_sure_of_a_name_that_only_compares_equal() -> None:
    # A str subclass (or StrEnum) that equals "tool-call" or "assistant" may be read as
    # either by Python; the C check leaves it to the precise checker.
    compiled = _compiled_payload_facts()
    data: Any = assistant_message(1, 1, [], provider=PROVIDER, model=MODEL, id="a9")
    data["message"]["content"] = [{"type": Text("tool-call"), "id": "c9"}]
    assert compiled("assistant/message", data) is None
    data["message"]["content"] = [{"type": {"k": 1}, "id": "c9"}, {"type": 7}, "text"]
    assert compiled("assistant/message", data) == (1, 1, None, (), None, False, True)
    data = assistant_message(1, 1, [], provider=PROVIDER, model=MODEL, id="a9")
    data["message"]["role"] = Text("assistant")
    assert compiled("assistant/message", data) is None
    assert compiled("tool/result", {**tool_result(1, 1, "c1", "x"), "turn": Level.LOW}) is None
    assert compiled(Text("turn/start"), turn_start(1)) is None
    assert compiled("turn/start", {"turn": 2**53}) is None
    assert compiled("turn/start", {"turn": 2**53 - 1}) is not None
    assert compiled("turn/start", {"turn": 2**64}) is None


def test_the_precise_switch_really_switches_the_shortcuts_off() -> None:
    # A payload only the fast path types is still checked and encoded the same way, and the
    # switch restores the shortcuts afterwards.
    with _precise_only():
        assert shapes._FAST == {}
        assert jsonvalue._screen_accepts([1]) is False
        assert jsonvalue.fast_row is None
        assert shapes.fast_payload_facts is None
    assert shapes._FAST and jsonvalue._screen_accepts([1]) is True


def test_only_an_exact_append_string_is_the_append_op() -> None:
    # The hot path recognizes "append" itself; a str subclass equal to it is refused as
    # parse_surface_op refuses it.
    for op in (Text("append"), Mode.FAST, "Append", b"append"):
        outcome = _append(("user/message", user_message("q", id="u9"), op, None, False))
        assert outcome[:3] == ("refused", "EventValidationError", "surface-op-shape"), op
    assert _append(("user/message", user_message("q", id="u9"), "append", None, False))[0] == (
        "accepted"
    )


@pytest.mark.parametrize("builder", ["c", "python"])
def test_an_appended_event_is_a_guarded_session_event(builder: str) -> None:
    # append builds its event in C (the slots filled in place) or on an unguarded draft of
    # the same layout whose class it then sets: what comes out must be exactly what the
    # guarded constructor and a restore build.
    if builder == "c" and events_module.make_event is events_module.make_event_in_python:
        pytest.skip("dsh_store._jsonscreen is not built here (no C compiler at install)")
    switches = [] if builder == "c" else _WITHOUT_C
    with _switched(switches):
        session = _prefix()
    for event in session.events:
        assert type(event) is SessionEvent
        assert not hasattr(event, "__dict__")
        for name, value in (
            ("seq", 99),
            ("type", "x"),
            ("__class__", SessionEvent),
            ("_line", b""),
        ):
            with pytest.raises(AttributeError, match="immutable"):
                setattr(event, name, value)
        restored = SessionEvent.from_json(orjson.loads(event.line), line=event.line)
        built = SessionEvent(
            event.type,
            event.seq,
            event.time,
            event.data,
            ignorable=event.ignorable,
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
        )
        for twin in (restored, built, pickle.loads(pickle.dumps(event))):
            assert type(twin) is SessionEvent
            assert twin == event
            assert [getattr(twin, name) for name in EVENT_FIELDS] == [
                getattr(event, name) for name in EVENT_FIELDS
            ]


def test_both_event_builders_fill_the_same_slots() -> None:
    # make_event in C and in Python: the same class, slot values (by identity) and guard.
    if events_module.make_event is events_module.make_event_in_python:
        pytest.skip("dsh_store._jsonscreen is not built here (no C compiler at install)")
    facts = shapes.EventFacts(turn=1, step=2, call_id="c1")
    cases: list[tuple[Any, ...]] = [
        ("tool/result", 7, 11, b'{"x":1}\n', False, "append", (3, 5), facts),
        ("x/y", 0, 0, b"{}\n", True, None, None, shapes.NO_FACTS),
        ("user/message", 9, 2**53 - 1, b"[]\n", False, SurfaceReplace(1, 2), (1, 2), facts),
    ]
    slots = ("type", "seq", "time", "_line", "ignorable", "surface_op", "source_event_seqs")
    for parts in cases:
        built = events_module.make_event(*parts)
        drafted = events_module.make_event_in_python(*parts)
        for event in (built, drafted):
            assert type(event) is SessionEvent
            assert not hasattr(event, "__dict__")
            assert [getattr(event, name) for name in slots] == list(parts[:7])
            assert all(
                getattr(event, name) is part for name, part in zip(slots, parts, strict=False)
            )
            assert event._facts is parts[7]
            assert event._data is events_module._UNSET
            with pytest.raises(AttributeError, match="immutable"):
                event.seq = 1
        assert built == drafted and hash(built) == hash(drafted)
    with pytest.raises(TypeError):
        events_module.make_event(*cases[0][:7])


class _Colliding:
    """A key that hashes like ``name`` and, compared, drops ``target[name]`` (the value a
    lookup of ``name`` holds at that moment): a lookup that ran it would read freed memory."""

    def __init__(self, name: str, target: dict[Any, Any]) -> None:
        self.name = name
        self.target = target
        self.armed = False  # set once the key is in place (inserting it compares too)
        self.compared = False

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if self.armed:
            self.compared = True
            self.target.pop(self.name, None)
        return False

    @classmethod
    def planted(cls, name: str, target: dict[Any, Any]) -> _Colliding:
        key = cls(name, target)
        target[key] = 1
        key.armed = True
        return key


def test_the_c_payload_check_runs_no_code_of_a_key() -> None:
    # Only dicts whose keys are all exact str are looked into (a lookup then compares str
    # with str); a payload the check would read otherwise is left to the precise path,
    # which refuses it.
    compiled = _compiled_payload_facts()
    for event_type, data, op in _bases():
        if type(data) is not dict or event_type not in shapes._FAST:
            continue
        for container in [data, *(value for value in data.values() if type(value) is dict)]:
            copied = orjson.loads(orjson.dumps(data))
            inner = (
                copied
                if container is data
                else next(value for key, value in copied.items() if value == container)
            )
            names = [key for key in inner if type(key) is str]
            for name in names:
                key = _Colliding.planted(name, inner)
                facts = compiled(event_type, copied)
                assert not key.compared, (event_type, name)
                if container is data:  # one the check reads: left to the precise path
                    assert facts is None, (event_type, name)
                key.armed = False
                del inner[key]
        hostile = orjson.loads(orjson.dumps(data))
        _Colliding.planted("turn", hostile).armed = False
        outcome = _append((event_type, hostile, op, None, False))
        with _precise_only():
            assert _append((event_type, hostile, op, None, False)) == outcome
        assert outcome[0] == "refused"
