"""The figures of runs, taken from their events once, so that stats need no fold.

``corral stats`` answers from a small projection (``corral.store.projection``) that the
SQL store writes in the same transaction as the events. This module decides what goes
into it, from a run's row and the events of one save, and is shared by every store: the
SQL store writes what it returns, the memory store aggregates it in Python. Both give the
same numbers because both take them from here.

What a save contributes:

- one ``ToolFact`` per attempt (tool, status, error code, duration): per ``tool_attempt``,
  and per ``step_finished`` that stands for its step's one attempt (``sole_attempt``); the
  attempt a process died in has no duration to count (``ToolFact.timed``);
- the time spent per stage (``stage_ms``): the gap from one event to the next belongs to
  the stage of the later event (the layer that produced it was working), except a gap
  after the run paused (``awaiting_confirm``/``awaiting_user``): a person's wait is no
  layer's time;
- model calls (a refusal asked nothing, as in the fold), tokens and cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from corral.contracts import PAUSED_STATUSES
from corral.events import (
    Event,
    ModelCall,
    StatusChanged,
    StepFinished,
    ToolAttempt,
)
from corral.store.base import RunRecord, Store

_MS = timedelta(milliseconds=1)
"""Dividing a ``timedelta`` by it gives milliseconds from whole microseconds (exact)."""


def aware(value: datetime) -> datetime:
    """SQLite returns naive datetimes; everything corral stores is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Before:
    """What the event before a save said: when it happened, and whether the run paused."""

    ts: datetime
    paused: bool


def before(event: Event) -> Before:
    """The ``Before`` of the last event stored ahead of a save."""
    return Before(event.ts, _pauses(event.payload))


def _pauses(payload: Any) -> bool:
    """Whether the run paused at an event of ``payload``: after a pause the clock is a person's."""
    return isinstance(payload, StatusChanged) and payload.to in PAUSED_STATUSES


@dataclass(frozen=True)
class ToolFact:
    """One tool attempt, as stats count it."""

    seq: int
    tool: str
    status: str
    error_code: str | None
    duration_ms: float
    timed: bool = True
    """``False``: the call the process died in (``ToolAttempt.interrupted``). Its 0 ms is
    no measure of the tool: it is a call and a failure, not a latency sample."""


@dataclass
class EventFacts:
    """What a batch of a run's events adds to its figures."""

    tools: list[ToolFact] = field(default_factory=list)
    stage_ms: dict[str, float] = field(default_factory=dict)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


def event_facts(events: Iterable[Event], prior: Before | None = None) -> EventFacts:
    """The facts of ``events`` (one run's, by ``seq``), after the event ``prior`` describes."""
    facts = EventFacts()
    stage_ms = facts.stage_ms
    # what ``before`` says of the previous event, kept in locals: this runs on every save
    # (no ``prior``: the first event has no gap before it, as after a pause)
    last_ts, paused = (prior.ts, prior.paused) if prior is not None else (datetime.min, True)
    for event in events:
        stage = event.stage
        ts = event.ts
        if not paused:
            gap = (ts - last_ts) / _MS
            stage_ms[stage] = stage_ms.get(stage, 0.0) + (gap if gap > 0.0 else 0.0)
        elif stage not in stage_ms:
            stage_ms[stage] = 0.0
        payload = event.payload
        last_ts, paused = ts, _pauses(payload)
        if isinstance(payload, ToolAttempt):
            facts.tools.append(
                ToolFact(
                    event.seq,
                    payload.tool,
                    payload.status,
                    payload.error_code,
                    payload.duration_ms,
                    not payload.interrupted,
                )
            )
        elif isinstance(payload, StepFinished) and payload.sole_attempt:
            result = payload.result  # what ``implied_attempt`` says, without the attempt
            if result is not None:  # the step's one attempt, which succeeded
                tool = ToolFact(event.seq, result.tool, "success", None, payload.duration_ms)
                facts.tools.append(tool)
        elif isinstance(payload, ModelCall) and not payload.refused:
            facts.model_calls += 1
            facts.input_tokens += _tokens(payload.usage, "prompt_tokens")
            facts.output_tokens += _tokens(payload.usage, "completion_tokens")
            facts.cost += payload.cost
    return facts


def _tokens(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class RunFacts:
    """A run's own columns in the projection, from its row (replaced on every save)."""

    run_id: str
    agent: str
    status: str
    intent: str | None
    outcome: str | None
    error_code: str | None
    steps: int
    created_at: datetime
    updated_at: datetime

    def columns(self) -> dict[str, Any]:
        """The values of the projection's run columns."""
        return {
            "agent": self.agent,
            "status": self.status,
            "intent": self.intent,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "steps": self.steps,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def run_facts(run: RunRecord) -> RunFacts:
    """The run columns of ``run``, read from its summary (any dict: a store takes any)."""
    summary = run.summary if isinstance(run.summary, dict) else {}
    intent = summary.get("intent")
    label = intent.get("label") if isinstance(intent, dict) else None
    steps = summary.get("steps")
    return RunFacts(
        run_id=run.run_id,
        agent=run.agent,
        status=run.status,
        intent=label if isinstance(label, str) else None,
        outcome=_text(summary.get("outcome")),
        error_code=_text(summary.get("error_code")),
        steps=len(steps) if isinstance(steps, list) else 0,
        created_at=run.created_at,
        updated_at=run.updated_at,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def folded(
    store: Store, since: datetime | None, agent: str | None
) -> Iterator[tuple[RunFacts, EventFacts]]:
    """Each matching run's facts, folded from all its events.

    For a store without SQL, and a read-only SQL store not migrated (older facts' shape).
    """
    for run in store.list_runs(limit=2**62):
        if (since is None or run.created_at >= since) and (agent is None or run.agent == agent):
            events = store.load_events(run.run_id)
            if events:  # as in SQL: a run counts from its first event
                yield run_facts(run), event_facts(events)
