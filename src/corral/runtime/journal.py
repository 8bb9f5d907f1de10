"""The one write path of a run: every change is an event, applied and buffered here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from corral.contracts import RunStatus
from corral.effects import Effects
from corral.events import Event, FactRejected, FactWritten, Payload, StatusChanged
from corral.memory.task import Fact, FactSource
from corral.runtime.machine import check_transition
from corral.runtime.state import RunState, apply

_TICK = timedelta(microseconds=1)
"""How far after the latest event an event is stamped whose clock read no later."""


@dataclass
class Journal:
    """Emits events: stamps them, applies them to the state, buffers them for the store.

    Writes are batched: the runtime drains the buffer at durability points (before a
    write tool runs, when the run pauses, when it ends).
    """

    state: RunState
    effects: Effects
    watch: Callable[[Event], None] | None = None
    """Told of each event once it is applied (``Runtime.stream``); ``None``: nobody."""
    pending: list[Event] = field(default_factory=list)

    def emit(self, stage: str, payload: Payload) -> Event:
        """Record one event (its type is the payload's) and apply it.

        Stamped after the run's latest event even when the clock reads earlier: a drive
        continued by another host (a resume, a takeover) whose clock is behind the first
        one's must not put the run's later events before its earlier ones.
        """
        now, last = self.effects.now(), self.state.last_ts
        if last is not None and now <= last:
            now = last + _TICK
        event = Event(
            self.state.run_id,
            self.state.last_seq + 1,
            now,
            payload.kind,
            stage,
            payload=payload,
        )
        apply(self.state, event)
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
        self.emit("run", StatusChanged(current.value, target.value, reason, round(active_s, 6)))

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

    def drain(self) -> list[Event]:
        """Hand over the buffered events (for the store) and start a new batch."""
        batch, self.pending = self.pending, []
        return batch
