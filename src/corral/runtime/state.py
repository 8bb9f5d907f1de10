"""A run's state, rebuilt by folding its event log.

``apply`` is the only way state changes, and every change is an event, so the state of
any run at any point is ``fold(events[:n])``. Resuming after a pause or a crash is a fold
followed by more of the same loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from corral.contracts import (
    Event,
    EventType,
    HandoffPacket,
    IntentResult,
    Language,
    PendingAction,
    Plan,
    RouteDecision,
    RunStatus,
    StepStatus,
    ToolResult,
)
from corral.memory.task import Fact, FactSource, TaskMemory


@dataclass
class StepState:
    """One step's progress inside a run."""

    id: str
    tool: str
    status: StepStatus = StepStatus.PENDING
    tool_used: str | None = None
    called: str | None = None
    """The tool the gate admitted with ``args`` (a rewrite may change the plan's); the loop
    guard keys the call by it, so a resumed run rebuilds the guard the same way."""
    args: dict[str, Any] | None = None
    attempts: int = 0
    result_json: dict[str, Any] | None = None
    """The step's ``ToolResult`` as stored in the log; ``result`` parses it on demand."""
    error_code: str | None = None
    reason: str = ""
    refusal: str | None = None
    """Template of the reply when a business rule skipped this step."""
    duration_ms: float = 0.0

    @property
    def result(self) -> ToolResult | None:
        """The typed result envelope (parsed when asked for, off the hot path)."""
        return ToolResult.model_validate(self.result_json) if self.result_json else None

    @property
    def data(self) -> dict[str, Any] | None:
        """The result's data, without parsing the envelope."""
        return self.result_json.get("data") if self.result_json else None


@dataclass
class RunState:
    """Everything the loop needs to continue a run; derived from events only."""

    run_id: str
    trace_id: str = ""
    agent: str = ""
    session_id: str | None = None
    status: RunStatus = RunStatus.PARSING
    received_at: datetime | None = None
    language: Language = "zh"
    messages: list[str] = field(default_factory=list)
    intent: IntentResult | None = None
    entities: dict[str, Any] = field(default_factory=dict)
    route: RouteDecision | None = None
    plan: Plan | None = None
    steps: dict[str, StepState] = field(default_factory=dict)
    memory: TaskMemory = field(default_factory=TaskMemory)
    pending: PendingAction | None = None
    confirmations: dict[str, bool] = field(default_factory=dict)
    questions_asked: dict[str, int] = field(default_factory=dict)
    answered_slot: str | None = None
    reply: str | None = None
    handoff: HandoffPacket | None = None
    outcome: str | None = None
    error_code: str | None = None
    tool_calls: int = 0
    replans: int = 0
    model_calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    active_s: float = 0.0
    """Seconds spent running (not paused) in earlier processes, for the wall-clock budget."""
    last_seq: int = 0


def _apply_step(state: RunState, kind: EventType, data: dict[str, Any]) -> None:
    step = state.steps.get(data.get("step_id", ""))
    if step is None:
        return
    if kind is EventType.STEP_STARTED:
        step.status, step.args = StepStatus.RUNNING, data.get("args")
        step.called = data.get("tool")
    elif kind is EventType.TOOL_SELECTED:
        step.tool_used = data["tool"]
    elif kind is EventType.TOOL_ATTEMPT:
        step.attempts += 1
        state.tool_calls += 1
    elif kind is EventType.STEP_FINISHED:
        step.status = StepStatus(data["status"])
        step.result_json = data.get("result")
        step.error_code, step.reason = data.get("error_code"), data.get("reason", "")
        step.duration_ms = data.get("duration_ms", 0.0)
        summary = step.result_json["summary"] if step.result_json else step.reason
        state.memory = state.memory.with_completed(f"{step.id} {step.status.value}: {summary}")
    elif kind is EventType.STEP_SKIPPED:
        step.status, step.error_code = StepStatus.SKIPPED, data.get("code")
        step.refusal = data.get("template")
        step.reason = data.get("reason", "")
    elif kind is EventType.STEP_BLOCKED:
        step.status, step.reason = StepStatus.BLOCKED, data.get("reason", "")
        step.error_code = data.get("code")


def apply(state: RunState, event: Event) -> RunState:
    """Apply one event to the state (in place) and return it."""
    data, kind = event.data, event.type
    state.last_seq = event.seq
    if kind is EventType.RUN_STARTED:
        state.trace_id, state.agent = data["trace_id"], data["agent"]
        state.session_id, state.language = data.get("session_id"), data["language"]
        state.received_at = datetime.fromisoformat(data["received_at"])
    elif kind is EventType.USER_MESSAGE:
        state.messages.append(data["text"])
        if not state.memory.goal:
            state.memory = TaskMemory(goal=data["text"][:200])
    elif kind is EventType.STATUS_CHANGED:
        state.status = RunStatus(data["to"])
        state.active_s += data.get("active_s", 0.0)
    elif kind is EventType.INTENT_CLASSIFIED:
        state.intent = IntentResult.model_validate(data["result"])
    elif kind is EventType.ENTITIES_MERGED:
        state.entities.update(data["entities"])
    elif kind is EventType.ROUTED:
        state.route = RouteDecision.model_validate(data["decision"])
    elif kind is EventType.PLAN_CREATED:
        state.plan = Plan.model_validate(data["plan"])
        kept = {sid: state.steps[sid] for sid in data.get("kept", []) if sid in state.steps}
        state.steps = {s.id: kept.get(s.id) or StepState(s.id, s.tool) for s in state.plan.steps}
        if data.get("replan"):
            state.replans += 1
    elif kind in (
        EventType.STEP_STARTED,
        EventType.TOOL_SELECTED,
        EventType.TOOL_ATTEMPT,
        EventType.STEP_FINISHED,
        EventType.STEP_SKIPPED,
        EventType.STEP_BLOCKED,
    ):
        _apply_step(state, kind, data)
    elif kind is EventType.FACT_WRITTEN:
        fact = Fact(data["name"], data["value"], FactSource(data["source"]), data["origin"])
        state.memory = state.memory.with_fact(fact)
    elif kind is EventType.CONFIRMATION_REQUESTED:
        state.pending = PendingAction(
            kind="confirm", prompt=data["prompt"], step_id=data["step_id"]
        )
    elif kind is EventType.CONFIRMATION_GIVEN:
        state.confirmations[data["step_id"]] = bool(data["approved"])
        state.pending = None
    elif kind is EventType.QUESTION_ASKED:
        slot = data.get("slot")
        state.pending = PendingAction(kind="answer", prompt=data["prompt"], slot=slot)
        key = slot or "__clarify__"
        state.questions_asked[key] = state.questions_asked.get(key, 0) + 1
    elif kind is EventType.USER_ANSWERED:
        state.messages.append(data["text"])
        state.answered_slot = data.get("slot")
        state.pending = None
    elif kind is EventType.MODEL_CALL:
        state.model_calls += 0 if data.get("refused") else 1  # a refusal asked nothing
        usage = data.get("usage", {})
        state.tokens += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        state.cost += data.get("cost", 0.0)
    elif kind is EventType.REPLY:
        state.reply = data["text"]
    elif kind is EventType.HANDED_OFF:
        state.handoff = HandoffPacket.model_validate(data["packet"])
    elif kind is EventType.RUN_FINISHED:
        state.outcome, state.error_code = data.get("outcome"), data.get("error_code")
    return state


def fold(run_id: str, events: Iterable[Event]) -> RunState:
    """The state after all ``events``."""
    state = RunState(run_id=run_id)
    for event in events:
        apply(state, event)
    return state
