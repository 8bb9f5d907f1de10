"""The one write path of a run: every change is an event, applied and buffered here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from corral.contracts import RunStatus
from corral.effects import Effects
from corral.events import (
    Event,
    FactRejected,
    FactWritten,
    Payload,
    StatusChanged,
    ToolAttempt,
    stamped,
)
from corral.memory.task import Fact, FactSource
from corral.runtime.machine import check_transition
from corral.runtime.state import RunState, apply

_TICK = timedelta(microseconds=1)
"""How far after the latest event an event is stamped whose clock read no later."""


@dataclass(slots=True)
class Journal:
    """Emits events: stamps them, applies them to the state, buffers them for the store.

    Writes are batched: the runtime drains the buffer at durability points (before a
    write tool runs, when the run pauses, when it ends).

    A step's first attempt that succeeded is held back (``hold``): when the step ends
    with its result, its ``step_finished`` stands for it (``sole_attempt``) and the
    attempt has no event of its own. A held attempt is emitted as it is before any later
    event of its step and before any durability point (``drain``): what is stored is
    never less than before, and a step's events keep their order.
    """

    state: RunState
    effects: Effects
    watch: Callable[[Event], None] | None = None
    """Told of each event once it is applied (``Runtime.stream``); ``None``: nobody."""
    pending: list[Event] = field(default_factory=list)
    held: dict[str, tuple[str, Callable[[], ToolAttempt]]] = field(default_factory=dict)
    """Step id -> the tool of its first attempt, which succeeded, and how to make that
    attempt's event when it is emitted after all (``hold``)."""

    def emit(self, stage: str, payload: Payload) -> Event:
        """Record one event (its type is the payload's) and apply it.

        Stamped after the run's latest event even when the clock reads earlier: a drive
        continued by another host (a resume, a takeover) whose clock is behind the first
        one's must not put the run's later events before its earlier ones.
        """
        if self.held:  # a held attempt comes before any later event of its step
            step_id = getattr(payload, "step_id", None)
            if isinstance(step_id, str) and step_id in self.held:
                self._release(step_id)
        state = self.state
        now, last = self.effects.now(), state.last_ts
        if last is not None and now <= last:
            now = last + _TICK
        event = stamped(state.run_id, state.last_seq + 1, now, payload.kind, stage, payload)
        apply(state, event)
        self.pending.append(event)
        if self.watch is not None:
            self.watch(event)
        return event

    def transition(self, target: RunStatus, reason: str = "", active_s: float = 0.0) -> None:
        """Move the run to ``target``; raises ``IllegalTransitionError`` if not allowed."""
        current = self.state.status
        if current is target:
            return
        check_transition(current, target)
        # ``str()`` of a ``StrEnum`` is its plain value (``.value`` costs two calls)
        self.emit("run", StatusChanged(str(current), str(target), reason, round(active_s, 6)))

    def write_fact(self, name: str, value: Any, source: FactSource, origin: str) -> bool:
        """The only way a fact enters memory. A lower-priority value is refused, and recorded."""
        fact = Fact(name, value, source, origin)
        if self.state.memory.accepts(fact):
            self.emit("memory", FactWritten(name, value, source.value, origin))
            return True
        current = self.state.memory.facts[name]
        reason = f"{current.source.value} value has priority"
        self.emit("memory", FactRejected(name, value, source.value, origin, reason))
        return False

    def hold(self, step_id: str, tool: str, attempt: Callable[[], ToolAttempt]) -> None:
        """Hold back a step's first attempt of ``tool``, which succeeded (see the class).

        ``attempt`` makes its record, only if it is emitted after all: the usual step
        never builds it. It counts as a tool call at once, as its event would have: the
        budget gate of a step decided before this one ends reads the same count.
        """
        self.held[step_id] = (tool, attempt)
        self.state.tool_calls += 1

    def fold(self, step_id: str, tool: str) -> bool:
        """Whether the step's ``step_finished`` (its result from ``tool``) stands for it.

        ``True`` takes the step's held attempt; a held attempt of another tool (a
        reconciler's) is emitted as its own event.
        """
        held = self.held.get(step_id)
        if held is None:
            return False
        if held[0] != tool:
            self._release(step_id)
            return False
        del self.held[step_id]
        self.state.tool_calls -= 1  # the step_finished counts it
        return True

    def _release(self, step_id: str) -> None:
        """Emit a held attempt as the event of its own it would have been."""
        _, attempt = self.held.pop(step_id)
        self.state.tool_calls -= 1  # its event counts it
        self.emit("execute", attempt())

    def release_held(self, step_id: str | None = None) -> None:
        """Emit held attempts (``step_id``'s, or every one) as events of their own, now.

        Before a wait that is not a tool's (a model call) and before a step end in
        another stage than the attempt's: the time up to the next event belongs to that
        event's stage (``store.facts``), so the tool's time must end with an event of its
        own there, as it did before attempts were held.
        """
        for held in [step_id] if step_id is not None else list(self.held):
            if held in self.held:
                self._release(held)

    def drain(self) -> list[Event]:
        """Hand over the buffered events (for the store) and start a new batch.

        Held attempts are emitted first: a durability point stores every attempt made.
        """
        self.release_held()
        batch, self.pending = self.pending, []
        return batch

    def restore(self, batch: list[Event]) -> None:
        """Put back a drained batch whose save did not return: the next save stores it first.

        Its save failed, or was given up (a stop), or may yet commit in its thread; a
        store that is given events it holds already stores only what is new, so saving
        them again loses nothing and repeats nothing.
        """
        self.pending[:0] = batch
