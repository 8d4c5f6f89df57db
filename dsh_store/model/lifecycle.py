"""Turn and step enclosure, numbering, and tool call/result pairing."""

from __future__ import annotations

from ._checks import fail
from .shapes import EventFacts
from .vocabulary import TURN_STEP_TYPES

__all__ = ["LifecycleState"]


class LifecycleState:
    """The open turn/step and the tool calls of the open step, folded event by event.

    :meth:`check` never mutates; :meth:`apply` folds an event that passed :meth:`check`.
    Types outside the core vocabulary (plugin log-only records) stand anywhere, including
    between turns.
    """

    __slots__ = (
        "called",
        "header_seqs",
        "last_step",
        "last_turn",
        "open_step",
        "open_turn",
        "requested",
        "resolved",
    )

    def __init__(self) -> None:
        self.open_turn: int | None = None
        self.last_turn = 0
        self.open_step: int | None = None
        self.last_step = 0
        self.requested: set[str] = set()
        self.called: set[str] = set()
        self.resolved: set[str] = set()
        self.header_seqs: set[int] = set()

    def copy(self) -> LifecycleState:
        """An independent copy (used to stage a batch)."""
        twin = LifecycleState()
        twin.open_turn = self.open_turn
        twin.last_turn = self.last_turn
        twin.open_step = self.open_step
        twin.last_step = self.last_step
        twin.requested = set(self.requested)
        twin.called = set(self.called)
        twin.resolved = set(self.resolved)
        twin.header_seqs = set(self.header_seqs)
        return twin

    @property
    def balanced(self) -> bool:
        """No turn is open."""
        return self.open_turn is None

    def check(self, event_type: str, seq: int, facts: EventFacts) -> None:
        """Raise :class:`EventValidationError` if the event breaks a lifecycle rule here."""
        if event_type in TURN_STEP_TYPES:
            if event_type == "assistant/attempt" and self.open_turn is None:
                # A settled attempt logged with no turn open (a loop resumed mid-attempt,
                # as real V0 logs show) stands alone: it projects nothing and opens nothing.
                return
            if (
                self.open_step is None
                or self.open_turn is None
                or facts.turn != self.open_turn
                or facts.step != self.open_step
            ) and not self._system_before_step(event_type, facts):
                self._check_in_step(event_type, seq, facts)  # raises the precise error
            if event_type == "tool/call":
                if facts.call_id in self.called:
                    self._fail(
                        "tool-call-duplicate",
                        f"tool call {facts.call_id!r} was already logged in this step",
                        seq,
                        event_type,
                    )
            elif event_type == "tool/result":
                call_id = facts.call_id
                if call_id in self.resolved:
                    self._fail(
                        "tool-result-duplicate",
                        f"tool call {call_id!r} already has a result in this step",
                        seq,
                        event_type,
                    )
                if call_id not in self.requested:
                    self._fail(
                        "tool-result-unpaired",
                        f"no tool call {call_id!r} was requested in step {self.open_step} "
                        f"of turn {self.open_turn}",
                        seq,
                        event_type,
                    )
            elif (
                event_type == "developer/message"
                and facts.header_seq is not None
                and facts.header_seq not in self.header_seqs
            ):
                self._fail(
                    "developer-header-seq",
                    f"headerSeq {facts.header_seq} is not an earlier request/header event",
                    seq,
                    event_type,
                )
            return
        if event_type == "turn/start":
            if self.open_turn is not None:
                self._fail(
                    "turn-already-open",
                    f"turn {self.open_turn} is still open; end it before starting another",
                    seq,
                    event_type,
                )
            if facts.turn != self.last_turn + 1:
                self._fail(
                    "turn-number",
                    f"expected turn {self.last_turn + 1}, got turn {facts.turn}",
                    seq,
                    event_type,
                )
        elif event_type == "turn/end":
            self._check_turn(event_type, seq, facts)
            if self.open_step is not None:
                self._fail(
                    "turn-end-step-open",
                    f"step {self.open_step} is still open; end it before the turn",
                    seq,
                    event_type,
                )
        elif event_type == "step/start":
            self._check_turn(event_type, seq, facts)
            if self.open_step is not None:
                self._fail(
                    "step-already-open",
                    f"step {self.open_step} is still open; end it before starting another",
                    seq,
                    event_type,
                )
            if facts.step != self.last_step + 1:
                self._fail(
                    "step-number",
                    f"expected step {self.last_step + 1} of turn {self.open_turn}, "
                    f"got step {facts.step}",
                    seq,
                    event_type,
                )
        elif event_type == "step/end":
            self._check_in_step(event_type, seq, facts)
        elif event_type == "user/message" and self.open_turn is None:
            self._fail(
                "outside-turn",
                "a user/message must be logged inside an open turn",
                seq,
                event_type,
            )

    def apply(self, event_type: str, seq: int, facts: EventFacts) -> None:
        """Fold a checked event."""
        if event_type == "assistant/message":
            self.requested.update(facts.requested_calls)
        elif event_type == "tool/call":
            assert facts.call_id is not None
            self.called.add(facts.call_id)
            self.requested.add(facts.call_id)
        elif event_type == "tool/result":
            assert facts.call_id is not None
            self.resolved.add(facts.call_id)
        elif event_type == "request/header":
            self.header_seqs.add(seq)
        elif event_type == "turn/start":
            self.open_turn = facts.turn
            assert facts.turn is not None
            self.last_turn = facts.turn
            self.last_step = 0
            self._clear_calls()
        elif event_type == "turn/end":
            self.open_turn = None
            self._clear_calls()
        elif event_type == "step/start":
            self.open_step = facts.step
            assert facts.step is not None
            self.last_step = facts.step
            self._clear_calls()
        elif event_type == "step/end":
            self.open_step = None
            self._clear_calls()

    def _system_before_step(self, event_type: str, facts: EventFacts) -> bool:
        """A system/message rendered for the step about to open: in the open turn, with
        no step open, naming that turn and the next step number (DSH's loop renders the
        prompt before the step's first user/message)."""
        return (
            event_type == "system/message"
            and self.open_turn is not None
            and self.open_step is None
            and facts.turn == self.open_turn
            and facts.step == self.last_step + 1
        )

    def _clear_calls(self) -> None:
        if self.requested or self.called or self.resolved:
            self.requested = set()
            self.called = set()
            self.resolved = set()

    def _check_turn(self, event_type: str, seq: int, facts: EventFacts) -> None:
        if self.open_turn is None:
            self._fail("outside-turn", "no turn is open", seq, event_type)
        if facts.turn != self.open_turn:
            self._fail(
                "turn-mismatch",
                f"names turn {facts.turn}, but the open turn is {self.open_turn}",
                seq,
                event_type,
            )

    def _check_in_step(self, event_type: str, seq: int, facts: EventFacts) -> None:
        self._check_turn(event_type, seq, facts)
        if self.open_step is None:
            self._fail("outside-step", f"no step of turn {self.open_turn} is open", seq, event_type)
        if facts.step != self.open_step:
            self._fail(
                "step-mismatch",
                f"names step {facts.step}, but the open step is {self.open_step}",
                seq,
                event_type,
            )

    @staticmethod
    def _fail(rule: str, message: str, seq: int, event_type: str) -> None:
        fail(rule, message, seq=seq, event_type=event_type)
