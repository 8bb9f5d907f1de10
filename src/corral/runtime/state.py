"""A run's state, rebuilt by folding its event log.

``apply`` is the only way state changes, and every change is an event, so the state of
any run at any point is ``fold(events[:n])``. Resuming after a pause or a crash is a fold
followed by more of the same loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from corral.clipping import clip
from corral.contracts import (
    HandoffPacket,
    IntentResult,
    Language,
    PendingAction,
    Plan,
    RouteDecision,
    RunStatus,
    SignalBrief,
    StepStatus,
    ToolResult,
)
from corral.decision.priority import Priority, stored_priority
from corral.events import (
    SIGNAL_PAYLOADS,
    BudgetLowSignal,
    ConfirmationGiven,
    ConfirmationRequested,
    EntitiesMerged,
    Event,
    FactWritten,
    HandedOff,
    IntentClassified,
    ModelCall,
    Payload,
    PlanCreated,
    QuestionAsked,
    Reply,
    Routed,
    RunFinished,
    RunStarted,
    StatusChanged,
    StepBlocked,
    StepFinished,
    StepSkipped,
    StepStarted,
    ToolAttempt,
    ToolSelected,
    UserAnswered,
    UserMessage,
    signal_brief,
)
from corral.memory.task import Fact, FactSource, TaskMemory

NO_MEMORY = TaskMemory()
"""A new run's memory: nothing known yet (frozen, so every new state shares it)."""

StepPayload = StepStarted | ToolSelected | ToolAttempt | StepFinished | StepSkipped | StepBlocked
_STEP_PAYLOADS = frozenset(
    {StepStarted, ToolSelected, ToolAttempt, StepFinished, StepSkipped, StepBlocked}
)
"""The payload types about one step: most of a run's events, so ``apply`` tests them first."""
_STEP_STATUSES = MappingProxyType({status.value: status for status in StepStatus})
"""A stored status as its enum, by lookup (calling the enum costs two calls per event)."""
_RUN_STATUSES = MappingProxyType({status.value: status for status in RunStatus})
"""The same for a run's status (four ``status_changed`` events a run)."""


@dataclass(slots=True)
class StepState:
    """One step's progress inside a run."""

    id: str
    tool: str
    status: StepStatus = StepStatus.PENDING
    tool_used: str | None = None
    """The tool selected for the step: a write's, as soon as it is entered (its
    ``tool_selected`` is stored first); any step's, once it ends with a result."""
    called: str | None = None
    """The tool the gate admitted with ``args`` (a rewrite may change the plan's); the loop
    guard keys the call by it, so a resumed run rebuilds the guard the same way."""
    args: dict[str, Any] | None = None
    attempts: int = 0
    result: ToolResult | None = None
    """The step's result envelope, as the tool call ended (typed, never re-validated)."""
    error_code: str | None = None
    reason: str = ""
    refusal: str | None = None
    """Template of the reply when a business rule skipped this step."""
    duration_ms: float = 0.0
    started_seq: int | None = None
    """The ``seq`` of the step's first ``step_started``: a write is entered only once that
    event is stored, so one whose first start was never stored was not entered."""
    call_open: bool = False
    """A call of ``tool_used`` may be under way with no ``tool_attempt`` for it: its
    ``tool_selected`` is stored (a write is entered once it is). A process that died then
    left that attempt unrecorded: the resume records it, which closes the call (see
    ``Scheduler._settle_interrupted_writes``). A retry after a stored attempt opens none:
    nothing stored tells a death in its call from one in the wait before it (a review
    found a retry never made counted), so such a call goes uncounted."""
    interrupted_calls: int = 0
    """Calls of the step's write that the process died in (recorded on resume): a write
    that kills its process on every call is entered again only within its
    ``policy.max_interrupted_calls``."""

    @property
    def data(self) -> dict[str, Any] | None:
        """The result's data."""
        return self.result.data if self.result is not None else None

    @property
    def result_json(self) -> dict[str, Any] | None:
        """The result as JSON values (the older, untyped view of ``result``)."""
        return self.result.model_dump(mode="json") if self.result is not None else None


@dataclass(slots=True)
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
    request: str | None = None
    """The message the run's intent was classified from (``$message``): the first, or the
    answer to a question asking what the user meant, which is classified again."""
    intent: IntentResult | None = None
    entities: dict[str, Any] = field(default_factory=dict)
    route: RouteDecision | None = None
    plan: Plan | None = None
    steps: dict[str, StepState] = field(default_factory=dict)
    memory: TaskMemory = field(default_factory=lambda: NO_MEMORY)
    pending: PendingAction | None = None
    confirmations: dict[str, bool] = field(default_factory=dict)
    """Step id (or ``PLAN_CONFIRMATION``) -> the person's answer to its latest request."""
    confirmation_calls: dict[str, str] | None = None
    """Step id -> the call its latest request showed (``ConfirmationRequested.call``); made
    by the first request that shows one (most runs ask nothing: no dict each)."""
    pending_since: int = 0
    """The ``seq`` of the latest ``confirmation_requested``: an approval given by a caller
    who looked before it was asked is no answer to it (``Runtime.resume``)."""
    questions_asked: dict[str, int] = field(default_factory=dict)
    answered_slot: str | None = None
    answered_via: str | None = None
    """The run whose turn answered this run's question (``UserAnswered.via_run``)."""
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
    last_ts: datetime | None = None
    """The time of the latest event: the next one is stamped later (``Journal.emit``)."""
    priority: Priority = "normal"
    """How equivalent tools are ranked (``decision.priority``), from ``run_started``."""
    observed_latency: dict[str, dict[str, float]] = field(default_factory=dict)
    """Tool -> its observed ``p95_ms`` and ``calls``, read once when the run started."""
    follows: str | None = None
    """The session's last request, for a follow-up line (``RunStarted.follows``)."""
    at_confirmation: bool = False
    """A confirmation of the session waited when the message came
    (``RunStarted.at_confirmation``)."""
    repeats_request: bool = False
    """The message asks again for what that confirmation waits for
    (``RunStarted.repeats_request``)."""
    signals: list[SignalBrief] = field(default_factory=list)
    """The signals raised so far, with their handlers' outcomes (``RunSummary.signals``)."""
    budget_low: bool = False
    """``budget_low`` was raised: the run is on its cheaper path (optional steps skipped)."""
    retired_step_ids: frozenset[str] = frozenset()
    """Ids of steps earlier plans had and a replan dropped: a later plan may not reuse one
    (an id names one call: its events, its key, a person's answer)."""
    replaced_steps: int = 0
    """Steps that started under a plan a replan replaced and were not kept (they failed):
    they count against ``budget.max_steps`` as much as the current plan's do."""


def _step_status(stored: str) -> StepStatus:
    """A stored status as its enum (an unknown one raises ``ValueError``, as the enum does)."""
    return _STEP_STATUSES.get(stored) or StepStatus(stored)


def _run_status(stored: str) -> RunStatus:
    """A stored run status as its enum (an unknown one raises ``ValueError``, as the enum does)."""
    return _RUN_STATUSES.get(stored) or RunStatus(stored)


def _apply_step(state: RunState, payload: StepPayload, seq: int) -> None:
    """Apply a step's event; the usual two first.

    Most steps have no other event than ``step_started`` and ``step_finished``.
    """
    step = state.steps.get(payload.step_id)
    if step is None:
        return
    if isinstance(payload, StepStarted):
        step.status, step.args, step.called = StepStatus.RUNNING, payload.args, payload.tool
        if step.started_seq is None:
            step.started_seq = seq
    elif isinstance(payload, StepFinished):
        step.status, step.result = _step_status(payload.status), payload.result
        step.error_code, step.reason = payload.error_code, payload.reason
        step.duration_ms, step.call_open = payload.duration_ms, False
        if payload.sole_attempt:  # it stands for the step's one attempt (no event of its own)
            step.attempts += 1
            state.tool_calls += 1
        if payload.result is not None:
            step.tool_used = payload.result.tool
        summary = payload.result.summary if payload.result else step.reason
        state.memory = state.memory.with_completed(f"{step.id} {payload.status}: {summary}")
    elif isinstance(payload, ToolAttempt):
        step.attempts += 1
        step.call_open = False
        if payload.interrupted:  # spends none of the run's tool-call budget
            step.interrupted_calls += 1
        else:
            state.tool_calls += 1
    elif isinstance(payload, ToolSelected):
        step.tool_used = payload.tool
        step.call_open = True
    elif isinstance(payload, StepSkipped):
        step.status, step.error_code = StepStatus.SKIPPED, payload.code
        step.refusal, step.reason = payload.template, payload.reason
    else:
        step.status, step.reason = StepStatus.BLOCKED, payload.reason
        step.error_code = payload.code


def apply(state: RunState, event: Event) -> RunState:
    """Apply one event to the state (in place) and return it; reads the typed payload."""
    payload = event.payload
    state.last_seq = event.seq
    state.last_ts = event.ts
    if type(payload) in _STEP_PAYLOADS:
        _apply_step(state, payload, event.seq)  # type: ignore[arg-type]  # (no cast() call)
    elif isinstance(payload, StatusChanged):
        state.status = _run_status(payload.to)
        state.active_s += payload.active_s
    elif isinstance(payload, FactWritten):
        fact = Fact(payload.name, payload.value, FactSource(payload.source), payload.origin)
        state.memory = state.memory.with_fact(fact)
    elif isinstance(payload, RunStarted):
        state.trace_id, state.agent = payload.trace_id, payload.agent
        state.session_id = payload.session_id
        state.language = payload.language
        state.received_at = datetime.fromisoformat(payload.received_at)
        state.priority = stored_priority(payload.priority)
        state.observed_latency = payload.observed_latency
        state.follows = payload.follows
        state.at_confirmation = payload.at_confirmation
        state.repeats_request = payload.repeats_request
    elif isinstance(payload, UserMessage):
        state.messages.append(payload.text)
        if not state.memory.goal and state.plan is None:
            # the request a plan is made for; a run given its plan (``run_plan``) has
            # none, and a message it gets later (a session's "yes") keeps what it knows
            memory = state.memory
            state.memory = TaskMemory(clip(payload.text, 200), memory.completed_steps, memory.facts)
    elif isinstance(payload, IntentClassified):
        state.intent = payload.result
        state.request = state.messages[-1] if state.messages else None
    elif isinstance(payload, EntitiesMerged):
        state.entities.update(payload.entities)
    elif isinstance(payload, Routed):
        state.route = payload.decision
    elif isinstance(payload, PlanCreated):
        state.plan = payload.plan
        if state.steps:  # a replan: steps kept, and those replaced, carry over
            _replace_steps(state, payload.plan, payload.kept)
        else:
            state.steps = {s.id: StepState(s.id, s.tool) for s in state.plan.steps}
        if payload.replan:
            state.replans += 1
    else:
        _apply_run(state, payload)
    return state


def _replace_steps(state: RunState, plan: Plan, kept_ids: list[str]) -> None:
    """A replan's steps over the earlier plan's.

    The steps in ``kept_ids`` keep their progress; those replaced that had started count
    against the step budget (``replaced_steps``).
    """
    kept = {sid: state.steps[sid] for sid in kept_ids if sid in state.steps}
    state.retired_step_ids |= state.steps.keys() - {s.id for s in plan.steps}
    state.replaced_steps += sum(
        1 for sid, step in state.steps.items() if sid not in kept and step.args is not None
    )
    state.steps = {s.id: kept.get(s.id) or StepState(s.id, s.tool) for s in plan.steps}


def _apply_run(state: RunState, payload: Payload) -> None:
    """The events of pauses, model calls and endings."""
    if isinstance(payload, ConfirmationRequested):
        step_id = payload.step_id
        state.pending = PendingAction(
            kind="confirm", prompt=payload.prompt, step_id=step_id, call=payload.call
        )
        state.pending_since = state.last_seq
        state.confirmations.pop(step_id, None)  # asked anew: an earlier answer was for another call
        calls = state.confirmation_calls
        if payload.call is not None:
            calls = state.confirmation_calls = calls if calls is not None else {}
            calls[step_id] = payload.call
        elif calls is not None:
            calls.pop(step_id, None)
    elif isinstance(payload, ConfirmationGiven):
        if payload.step_id is not None:
            state.confirmations[payload.step_id] = payload.approved
        state.pending = None
    elif isinstance(payload, QuestionAsked):
        state.pending = PendingAction(kind="answer", prompt=payload.prompt, slot=payload.slot)
        if payload.counted:
            key = payload.slot or "__clarify__"
            state.questions_asked[key] = state.questions_asked.get(key, 0) + 1
    elif isinstance(payload, UserAnswered):
        state.messages.append(payload.text)
        state.answered_slot = payload.slot
        state.pending = None
        if payload.via_run is not None:
            state.answered_via = payload.via_run
        if payload.language is not None:
            state.language = payload.language
    elif isinstance(payload, ModelCall):
        state.model_calls += 0 if payload.refused else 1  # a refusal asked nothing
        usage = payload.usage
        state.tokens += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        state.cost += payload.cost
    elif isinstance(payload, Reply):
        state.reply = payload.text
    elif isinstance(payload, HandedOff):
        state.handoff = payload.packet
    elif isinstance(payload, RunFinished):
        state.outcome, state.error_code = payload.outcome, payload.error_code
    elif isinstance(payload, SIGNAL_PAYLOADS):
        state.signals.append(signal_brief(payload))
        state.budget_low = state.budget_low or isinstance(payload, BudgetLowSignal)


def fold(run_id: str, events: Iterable[Event]) -> RunState:
    """The state after all ``events``."""
    state = RunState(run_id=run_id)
    for event in events:
        apply(state, event)
    return state
