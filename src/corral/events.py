"""The typed payload of every event: one small frozen record per ``EventType``.

An ``Event`` (``contracts``) is the envelope: run, ``seq``, time, type and stage. What the
event says is its ``payload``, one of the records below. They are plain dataclasses, not
pydantic models: corral makes them itself on the hot path, and a payload carries the typed
values of its layer as they are (an ``IntentResult``, a ``Plan``, a ``ToolResult``), so
folding a live run never dumps or re-validates anything.

Validation happens where a payload comes from outside: ``decode`` turns stored JSON back
into a record through pydantic, and a row that does not fit is ``STORE_CORRUPT``.
``as_json`` renders a payload as the JSON values older code read from ``Event.data``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, ClassVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from corral.contracts import (
    BudgetLow,
    EventType,
    HandoffPacket,
    IntentResult,
    Language,
    NeedClarification,
    NeedReplan,
    Plan,
    RouteDecision,
    SignalBrief,
    ToolResult,
    ToolTimeout,
    Verdict,
)
from corral.errors import StoreCorruptError
from corral.records import fast_init
from corral.validation import validation_problems

JsonDict = dict[str, Any]


@fast_init
@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began: who runs it, for which session, when the message arrived."""

    kind: ClassVar[EventType] = EventType.RUN_STARTED
    trace_id: str
    agent: str
    received_at: str
    """ISO time; the run's clock (replays start from it)."""
    language: Language
    session_id: str | None = None
    agent_root: str | None = None
    model: str | None = None
    redact: JsonDict = field(default_factory=dict)
    entry: str = "message"
    """What started the run: ``message`` (``Runtime.start``) or ``plan`` (``run_plan``)."""
    priority: str = "normal"
    """``urgent``, ``normal`` or ``budget``: how equivalent tools are ranked (seed 001)."""
    priority_source: str = ""
    """``caller``, ``message: <the word>`` or ``default``."""
    observed_latency: dict[str, dict[str, float]] = field(default_factory=dict)
    """Tool -> ``p95_ms`` and ``calls`` of its latest timed calls, read from the store
    once at the start: the run (and its replay, and a resume) ranks by these figures."""
    degraded: list[str] = field(default_factory=list)
    """Tools degraded (failed twice in a row, in earlier runs of this process) when the
    run started: its replay starts from the same health, so it picks the same tools."""
    follows: str | None = None
    """The intent of the session's last request, when the run started from a message of
    a session whose last turn was understood: a follow-up line ("那 OD… 呢？", "what about
    my other order?") that no rule or classifier understands is read as it again."""
    at_confirmation: bool = False
    """The message came while the session's open run waited for a confirmation: a line
    nobody understands is then answered "didn't understand" and the prompt again, and
    asks nothing of its own (a clarification would bury the confirmation under it)."""
    repeats_request: bool = False
    """The message asks again for what the session's open run waits to confirm (a rule
    reads the same intent, and the run it would start holds the same values: see
    ``Runtime._repeats_request``), or puts it off at once ("not yet", "我再想想":
    ``confirmation.defers``, outcome ``deferred``): it is answered with that
    confirmation, and runs nothing of its own."""


@fast_init
@dataclass(frozen=True, slots=True)
class UserMessage:
    """The message that started the run."""

    kind: ClassVar[EventType] = EventType.USER_MESSAGE
    text: str
    message_id: str | None = None
    """The caller's id of the message (``Runtime.start(message_id=...)``): a store keeps it
    once per session, so a retried request is answered, not handled again."""


@fast_init
@dataclass(frozen=True, slots=True)
class StatusChanged:
    """A move of the run's state machine; ``active_s``: time run before a pause."""

    kind: ClassVar[EventType] = EventType.STATUS_CHANGED
    from_: str
    to: str
    reason: str = ""
    active_s: float = 0.0


@fast_init
@dataclass(frozen=True, slots=True)
class IntentClassified:
    """What the intent layer understood of a message."""

    kind: ClassVar[EventType] = EventType.INTENT_CLASSIFIED
    text: str
    result: IntentResult
    duration_ms: float = 0.0


@fast_init
@dataclass(frozen=True, slots=True)
class EntitiesMerged:
    """Entities that entered the run (``replaced``: the values they overrode)."""

    kind: ClassVar[EventType] = EventType.ENTITIES_MERGED
    entities: JsonDict
    origin: str
    replaced: JsonDict = field(default_factory=dict)


@fast_init
@dataclass(frozen=True, slots=True)
class Routed:
    """The router's decision."""

    kind: ClassVar[EventType] = EventType.ROUTED
    decision: RouteDecision


@fast_init
@dataclass(frozen=True, slots=True)
class PlanCreated:
    """The plan the run follows; a replan keeps the steps in ``kept``."""

    kind: ClassVar[EventType] = EventType.PLAN_CREATED
    plan: Plan
    replan: int | None = None
    kept: list[str] = field(default_factory=list)
    failure: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class PlanRejected:
    """A plan that did not validate."""

    kind: ClassVar[EventType] = EventType.PLAN_REJECTED
    problems: list[str]
    plan: JsonDict | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class StepStarted:
    """A step was admitted with these arguments (``None``: they could not be bound)."""

    kind: ClassVar[EventType] = EventType.STEP_STARTED
    step_id: str
    tool: str
    args: JsonDict | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class ToolRewritten:
    """A declared rewrite sent the call to another tool."""

    kind: ClassVar[EventType] = EventType.TOOL_REWRITTEN
    step_id: str
    rule: str
    tool: str
    to: str
    args: JsonDict = field(default_factory=dict)


@fast_init
@dataclass(frozen=True, slots=True)
class ToolSelected:
    """A tool chosen for a step, recorded when the choice says something.

    That is a fallback, a tool excluded or degraded, or a write (stored before the write
    is entered, so a resumed run knows it may have acted), or a pick that the run's
    priority or a model breaking a tie decided (then with ``priority`` and ``scores``, and
    the rule in ``reason``: docs/decision.md). The plain pick of the planned read tool in
    a normal run is not recorded: its ``step_finished`` names the tool.
    """

    kind: ClassVar[EventType] = EventType.TOOL_SELECTED
    step_id: str
    tool: str
    reason: str = ""
    degraded: bool = False
    candidates: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    priority: str | None = None
    """Set when the run's priority or a tie decided the pick (``decision.choice``)."""
    scores: dict[str, dict[str, float]] | None = None
    """Candidate -> what it was ranked by: ``latency_ms`` (the observed p95 when
    ``observed_calls`` is above zero, else the declared latency) and ``cost``."""


@fast_init
@dataclass(frozen=True, slots=True)
class ToolAttempt:
    """One call of a tool: its outcome, and its output (stored here, and only here)."""

    kind: ClassVar[EventType] = EventType.TOOL_ATTEMPT
    step_id: str
    tool: str
    attempt: int
    status: str
    duration_ms: float = 0.0
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False
    backoff_s: float | None = None
    data: JsonDict | None = None
    applied: bool | None = None
    in_flight: bool = False
    interrupted: bool | None = None
    """``True``: the call the process died in, recorded when the run resumed: one of the step's
    attempts and the tool's calls, not spent again from the run's budget (a write's
    settling after it, which the budget stopped, left the step running)."""


@fast_init
@dataclass(frozen=True, slots=True)
class StepFinished:
    """A step's end: its status, its result, and the verdict on it when that says something.

    ``output_attempt`` names the ``tool_attempt`` whose data is the result's: the stored
    form leaves the data out and the store puts it back from that attempt. A step whose
    only attempt succeeded has no ``tool_attempt``: ``sole_attempt`` says so, and the
    output is stored here, once.
    """

    kind: ClassVar[EventType] = EventType.STEP_FINISHED
    step_id: str
    status: str
    result: ToolResult | None = None
    error_code: str | None = None
    reason: str = ""
    duration_ms: float = 0.0
    verdict: Verdict | None = None
    """The success check's verdict when a criterion or judge was declared, or it failed
    (before format 2 this was a ``verified`` event of its own; "no criterion declared"
    is not recorded)."""
    output_attempt: int | None = None
    sole_attempt: bool = False
    """The step's tool succeeded at its first and only attempt, which has no
    ``tool_attempt`` of its own: this event stands for it (attempt 1, ``success``, this
    event's ``duration_ms``, the result's tool and data; ``implied_attempt``). Logs
    written before it have a ``tool_attempt`` for every attempt."""


@fast_init
@dataclass(frozen=True, slots=True)
class StepSkipped:
    """A business rule (or a declined confirmation) skipped the step."""

    kind: ClassVar[EventType] = EventType.STEP_SKIPPED
    step_id: str
    code: str | None = None
    reason: str = ""
    template: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class StepBlocked:
    """A step that cannot run because a dependency did not succeed."""

    kind: ClassVar[EventType] = EventType.STEP_BLOCKED
    step_id: str
    reason: str = ""
    code: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class OutcomeReconciled:
    """A write of unknown outcome, settled by its reconciler."""

    kind: ClassVar[EventType] = EventType.OUTCOME_RECONCILED
    step_id: str
    tool: str
    write: str
    status: str
    reason: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class Verified:
    """A business rule's verdict before a step, or one judged on a step that never ran.

    A step's own success check is part of its ``step_finished`` (``check``, ``reason``,
    ``error_code``); logs written before format 2 also have it here.
    """

    kind: ClassVar[EventType] = EventType.VERIFIED
    step_id: str
    verdict: Verdict


@fast_init
@dataclass(frozen=True, slots=True)
class FactWritten:
    """A fact entered memory."""

    kind: ClassVar[EventType] = EventType.FACT_WRITTEN
    name: str
    value: Any
    source: str
    origin: str


@fast_init
@dataclass(frozen=True, slots=True)
class FactRejected:
    """A fact refused: a value of higher priority is already known."""

    kind: ClassVar[EventType] = EventType.FACT_REJECTED
    name: str
    value: Any
    source: str
    origin: str
    reason: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class ConfirmationRequested:
    """The run paused for a person's approval of a step."""

    kind: ClassVar[EventType] = EventType.CONFIRMATION_REQUESTED
    step_id: str
    prompt: str
    template_problem: str | None = None
    """Why the plan's confirmation template could not be rendered, so the generic
    ``confirm`` prompt was asked instead (a value missing at run time); ``None``: it was."""
    call: str | None = None
    """The digest of the call shown (``decision.gates.shown_call``: tool, arguments, fixed
    defaults); a yes approves that call only. ``None``: the plan's confirmation, or a log
    written before approvals were bound to their call (a yes there stands for the step)."""


@fast_init
@dataclass(frozen=True, slots=True)
class ConfirmationGiven:
    """The person's answer to a confirmation."""

    kind: ClassVar[EventType] = EventType.CONFIRMATION_GIVEN
    step_id: str | None
    approved: bool


@fast_init
@dataclass(frozen=True, slots=True)
class QuestionAsked:
    """The run paused for an answer (``slot``: the entity asked for; none: clarify)."""

    kind: ClassVar[EventType] = EventType.QUESTION_ASKED
    prompt: str
    slot: str | None = None
    counted: bool = True
    """False: asked again after an answer that asked for time ("稍等"), which is no failed
    answer: it does not count towards ``limits.max_questions``."""


@fast_init
@dataclass(frozen=True, slots=True)
class UserAnswered:
    """The user's answer to a question."""

    kind: ClassVar[EventType] = EventType.USER_ANSWERED
    text: str
    slot: str | None = None
    language: Language | None = None
    """The language the run speaks from this answer on, when the answer changed it
    (``answer_language``); recorded, so a fold never re-reads the text."""
    message_id: str | None = None
    """As ``UserMessage.message_id``: the session message that gave the answer."""
    via_run: str | None = None
    """The run of the same session that learned the answer, when no one typed it here: a
    question that waited under it is answered with the value it was given (the turn's
    reply, and a retry of its message, end with this run's)."""


@fast_init
@dataclass(frozen=True, slots=True)
class LoopDetected:
    """The loop guard stopped the run."""

    kind: ClassVar[EventType] = EventType.LOOP_DETECTED
    reason: str
    step_id: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class BudgetExceeded:
    """A budget ran out."""

    kind: ClassVar[EventType] = EventType.BUDGET_EXCEEDED
    reason: str
    step_id: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class ModelCall:
    """One attempt at a model: enough to replay it, its cost, and how it ended."""

    kind: ClassVar[EventType] = EventType.MODEL_CALL
    purpose: str
    model: str
    fingerprint: str
    attempt: int
    status: str
    text: str = ""
    usage: JsonDict = field(default_factory=dict)
    latency_ms: float = 0.0
    accepted: bool = False
    repaired: bool = False
    reason: str = ""
    cost: float = 0.0
    try_: int = 1
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    http_status: int | None = None
    backoff_s: float | None = None
    refused: bool | None = None
    structured_mode: str | None = None
    negotiation: Any = None


@fast_init
@dataclass(frozen=True, slots=True)
class EntityRejected:
    """An entity the model extracted that did not hold up."""

    kind: ClassVar[EventType] = EventType.ENTITY_REJECTED
    name: str
    reason: str
    value: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class Reply:
    """What the user was told, and the template it came from."""

    kind: ClassVar[EventType] = EventType.REPLY
    text: str
    template: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class HandedOff:
    """The run went to a person, with everything they need."""

    kind: ClassVar[EventType] = EventType.HANDED_OFF
    packet: HandoffPacket


@fast_init
@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended."""

    kind: ClassVar[EventType] = EventType.RUN_FINISHED
    status: str
    outcome: str | None = None
    error_code: str | None = None
    active_s: float = 0.0


@fast_init
@dataclass(frozen=True, slots=True)
class NeedReplanSignal:
    """Verify raised ``need_replan``: a step's result failed its check.

    ``outcome``: what its handler chose: ``replan``, ``continue`` (an optional step),
    ``reply`` (the plan's declared answer) or ``handoff``.
    """

    kind: ClassVar[EventType] = EventType.NEED_REPLAN
    signal: NeedReplan
    outcome: str


@fast_init
@dataclass(frozen=True, slots=True)
class NeedClarificationSignal:
    """Planning raised ``need_clarification``; ``outcome``: ``ask`` or ``handoff``."""

    kind: ClassVar[EventType] = EventType.NEED_CLARIFICATION
    signal: NeedClarification
    outcome: str


@fast_init
@dataclass(frozen=True, slots=True)
class ToolTimeoutSignal:
    """The executor raised ``tool_timeout``: an attempt did not answer in time.

    ``outcome``: ``retry``, ``switch`` (to the equivalent tool ``next_tool``),
    ``reconcile`` (a write: its outcome is settled, never retried blindly) or ``fail``.
    """

    kind: ClassVar[EventType] = EventType.TOOL_TIMEOUT
    signal: ToolTimeout
    outcome: str
    next_tool: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class BudgetLowSignal:
    """The decision layer raised ``budget_low``: little of a budget is left.

    ``outcome``: ``skip_optional`` (steps marked ``on_failure: continue`` that have not
    started are not run).
    """

    kind: ClassVar[EventType] = EventType.BUDGET_LOW
    signal: BudgetLow
    outcome: str


def implied_attempt(finished: StepFinished) -> ToolAttempt | None:
    """The attempt a ``step_finished`` stands for (``sole_attempt``).

    ``None``: it stands for none (the step's attempts, if any, have events of their own).
    """
    result = finished.result
    if not finished.sole_attempt or result is None:
        return None
    return ToolAttempt(
        finished.step_id, result.tool, 1, "success", finished.duration_ms, data=result.data
    )


def tool_attempts(payloads: Iterable[Payload]) -> Iterator[ToolAttempt]:
    """Every attempt of a log, in order, whether it has an event of its own or not.

    That is its ``tool_attempt`` events and the attempts its ``step_finished`` events stand
    for (``sole_attempt``): readers of attempts read them through this, or ``unfolded``.
    """
    for payload in payloads:
        if isinstance(payload, ToolAttempt):
            yield payload
        elif isinstance(payload, StepFinished) and payload.sole_attempt:
            implied = implied_attempt(payload)
            if implied is not None:
                yield implied


SignalPayload = NeedReplanSignal | NeedClarificationSignal | ToolTimeoutSignal | BudgetLowSignal
SIGNAL_PAYLOADS = (NeedReplanSignal, NeedClarificationSignal, ToolTimeoutSignal, BudgetLowSignal)


def signal_brief(payload: SignalPayload) -> SignalBrief:
    """What a run summary shows of a signal event."""
    signal = payload.signal
    if isinstance(signal, NeedReplan):
        reason, step_id = f"{signal.tool}: {signal.reason}", signal.step_id
    elif isinstance(signal, NeedClarification):
        listed = f": {', '.join(signal.candidates)}" if signal.candidates else ""
        reason, step_id = f"{signal.entity} is {signal.problem}{listed}", None
    elif isinstance(signal, ToolTimeout):
        reason = f"{signal.tool} attempt {signal.attempt} timed out after {signal.timeout_s:g} s"
        step_id = signal.step_id
    else:
        reason = f"{signal.resource}: {signal.used:g} of {signal.limit:g} used"
        step_id = None
    outcome = payload.outcome
    if isinstance(payload, ToolTimeoutSignal) and payload.next_tool:
        outcome = f"{outcome}:{payload.next_tool}"
    return SignalBrief(kind=payload.kind.value, outcome=outcome, reason=reason, step_id=step_id)


@fast_init
@dataclass(frozen=True, slots=True)
class Opaque:
    """The payload of a kind no longer written (``stage_started``...): kept as it was."""

    kind: ClassVar[EventType] = EventType.STAGE_STARTED
    fields: JsonDict = field(default_factory=dict)


Payload = (
    RunStarted
    | UserMessage
    | StatusChanged
    | IntentClassified
    | EntitiesMerged
    | Routed
    | PlanCreated
    | PlanRejected
    | StepStarted
    | ToolRewritten
    | ToolSelected
    | ToolAttempt
    | StepFinished
    | StepSkipped
    | StepBlocked
    | OutcomeReconciled
    | Verified
    | FactWritten
    | FactRejected
    | ConfirmationRequested
    | ConfirmationGiven
    | QuestionAsked
    | UserAnswered
    | LoopDetected
    | BudgetExceeded
    | ModelCall
    | EntityRejected
    | Reply
    | HandedOff
    | RunFinished
    | NeedReplanSignal
    | NeedClarificationSignal
    | ToolTimeoutSignal
    | BudgetLowSignal
    | Opaque
)
"""Every payload; the event's ``type`` says which (the union's discriminator)."""

PAYLOADS: dict[EventType, type[Payload]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        UserMessage,
        StatusChanged,
        IntentClassified,
        EntitiesMerged,
        Routed,
        PlanCreated,
        PlanRejected,
        StepStarted,
        ToolRewritten,
        ToolSelected,
        ToolAttempt,
        StepFinished,
        StepSkipped,
        StepBlocked,
        OutcomeReconciled,
        Verified,
        FactWritten,
        FactRejected,
        ConfirmationRequested,
        ConfirmationGiven,
        QuestionAsked,
        UserAnswered,
        LoopDetected,
        BudgetExceeded,
        ModelCall,
        EntityRejected,
        Reply,
        HandedOff,
        RunFinished,
        NeedReplanSignal,
        NeedClarificationSignal,
        ToolTimeoutSignal,
        BudgetLowSignal,
    )
}
"""Event type -> its payload record. Types missing here (deprecated) decode as ``Opaque``."""

_SOMETIMES = frozenset(
    {
        "refused",
        "structured_mode",
        "negotiation",
        "priority",
        "scores",
        "template_problem",
        "language",
        "interrupted",
        "message_id",
    }
)
"""``model_call`` keys older logs wrote only when set, ``tool_selected``'s priority
fields (absent from a plain pick's event, as before them), and a confirmation's template
problem, an answer's change of language, an attempt recorded on resume and a message's
id; rendered the same way."""


def _key(name: str) -> str:
    """The JSON key of a field: ``from_`` is ``from``, ``try_`` is ``try``."""
    return name[:-1] if name.endswith("_") else name


def _json(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def as_json(payload: Payload) -> JsonDict:
    """The payload as the JSON values of ``Event.data``, every field present."""
    if isinstance(payload, Opaque):
        return dict(payload.fields)
    out: JsonDict = {}
    for item in dataclasses.fields(payload):
        value = getattr(payload, item.name)
        if value is None and item.name in _SOMETIMES:
            continue
        out[_key(item.name)] = _json(value)
    return out


def compact_json(payload: Payload) -> JsonDict:
    """The stored form: fields at their default are left out (``decode`` restores them)."""
    layout = _LAYOUTS.get(type(payload))
    if layout is None:  # an ``Opaque``, or a subclass of a payload record
        if isinstance(payload, Opaque):
            return dict(payload.fields)
        layout = _layout(payload.kind)
    out: JsonDict = {}
    for name, key, default in layout:
        value = getattr(payload, name)
        if default is not _REQUIRED and value == default:
            continue
        if type(value) not in _PLAIN and isinstance(value, BaseModel):
            value = value.model_dump(mode="json", exclude_defaults=True)
        out[key] = value
    return out


_REQUIRED = object()
"""Marks a field without a default in ``_layout``."""


@cache
def _layout(kind: EventType) -> tuple[tuple[str, str, Any], ...]:
    """Each field of a payload record: name, JSON key, default (made once, compared only)."""
    layout = []
    for item in dataclasses.fields(PAYLOADS[kind]):
        default: Any = _REQUIRED
        if item.default is not dataclasses.MISSING:
            default = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        layout.append((item.name, _key(item.name), default))
    return tuple(layout)


_LAYOUTS = {record: _layout(kind) for kind, record in PAYLOADS.items()}
"""Payload record -> its ``_layout``, made at import: every stored event looks one up, and
a type is hashed in C where ``_layout``'s cache hashes the ``EventType`` in Python."""
_PLAIN = frozenset({str, int, float, bool, type(None), list, dict})
"""Types of field values that are never a pydantic model: looked up before ``isinstance``,
which runs pydantic's ``__instancecheck__`` (a ``hasattr`` that fails) for each value."""


@cache
def _adapter(kind: EventType) -> TypeAdapter[Any]:
    """One validator per payload type, built the first time a stored row needs it."""
    return TypeAdapter(PAYLOADS[kind])


def decode(kind: EventType, data: JsonDict) -> Payload:
    """A payload from JSON that came from outside (a store): validated, or ``STORE_CORRUPT``."""
    try:
        return make(kind, data)
    except ValidationError as exc:
        problem = validation_problems(exc, 1, root=kind.value)
        raise StoreCorruptError(
            f"a stored {kind.value} event does not fit its record: {problem}"
        ) from None


def make(kind: EventType, data: JsonDict) -> Payload:
    """The payload of ``kind`` from JSON values (``Event(..., data={...})``), validated.

    Data that does not fit raises pydantic's ``ValidationError`` (a ``ValueError``), as
    building any contract wrongly does. A kind no longer written keeps its data as it is.
    """
    if kind not in PAYLOADS:
        return Opaque(dict(data))
    renamed = {key: name for name, key, _ in _layout(kind) if key != name}
    given = {renamed.get(key, key): value for key, value in data.items()} if renamed else data
    payload: Payload = _adapter(kind).validate_python(given)
    return payload


@dataclass(frozen=True, slots=True, init=False)
class Event:
    """One entry of a run's log. ``seq`` orders it; ``ts`` comes from the effects clock.

    The envelope of a typed ``payload`` (``corral.events``): a plain dataclass, not a
    pydantic model, because dozens are made per run on the hot path and every field is
    produced by corral itself. ``data`` renders the payload as JSON values for readers of
    the older, untyped shape; ``Event(..., data={...})`` still builds one (the dict is
    decoded into its payload record).
    """

    run_id: str
    seq: int
    ts: datetime
    type: EventType
    stage: str
    payload: Payload

    def __init__(
        self,
        run_id: str,
        seq: int,
        ts: datetime,
        type: EventType,
        stage: str = "",
        data: JsonDict | None = None,
        *,
        payload: Payload | None = None,
    ) -> None:
        if data is not None or payload is None:  # data wins: ``replace(event, data=...)``
            payload = make(type, data or {})
        setter = object.__setattr__
        setter(self, "run_id", run_id)
        setter(self, "seq", seq)
        setter(self, "ts", ts)
        setter(self, "type", type)
        setter(self, "stage", stage)
        setter(self, "payload", payload)

    @property
    def data(self) -> JsonDict:
        """The payload as JSON values (rendered when asked for, off the hot path)."""
        return as_json(self.payload)

    def as_json(self) -> JsonDict:
        """The event as JSON values (for exports and the HTTP API)."""
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "ts": self.ts.isoformat(),
            "type": self.type.value,
            "stage": self.stage,
            "data": self.data,
        }


_SET_RUN_ID, _SET_SEQ, _SET_TS, _SET_TYPE, _SET_STAGE, _SET_PAYLOAD = (
    Event.__dict__[name].__set__ for name in ("run_id", "seq", "ts", "type", "stage", "payload")
)
"""``Event``'s slots, each set through its own descriptor (``stamped``)."""


def stamped(
    run_id: str, seq: int, ts: datetime, type: EventType, stage: str, payload: Payload
) -> Event:
    """``Event(run_id, seq, ts, type, stage, payload=payload)``: what ``Journal.emit`` makes.

    Every event of a run is made here, dozens per run. The constructor parses keywords,
    checks for ``data`` to decode, and sets each field through ``object.__setattr__`` (the
    class is frozen); this sets each slot through its descriptor, for less than half the
    cost. The event is the same, field for field, and as frozen
    (``tests/test_stored_format.py``).
    """
    event: Event = object.__new__(Event)
    _SET_RUN_ID(event, run_id)
    _SET_SEQ(event, seq)
    _SET_TS(event, ts)
    _SET_TYPE(event, type)
    _SET_STAGE(event, stage)
    _SET_PAYLOAD(event, payload)
    return event


def message_ids(events: Iterable[Event]) -> Iterator[tuple[str, int]]:
    """Each message id recorded in ``events``, with the ``seq`` of the event recording it.

    What a store keeps once per session (``MessageRepeatedError``): the id of a message
    that started a run (``UserMessage``) or answered one (``UserAnswered``; a session's
    "yes" is a ``UserMessage`` before its ``ConfirmationGiven``).
    """
    for event in events:
        payload = event.payload
        if isinstance(payload, UserMessage | UserAnswered) and payload.message_id is not None:
            yield payload.message_id, event.seq


def unfolded(events: Iterable[Event]) -> Iterator[Event]:
    """The log with every attempt as an event of its own, as logs before ``sole_attempt``.

    A ``step_finished`` that stands for its step's attempt comes after a ``tool_attempt``
    (with its ``seq`` and time): old and new logs read the same through it.
    """
    for event in events:
        payload = event.payload
        if isinstance(payload, StepFinished) and payload.sole_attempt:
            implied = implied_attempt(payload)
            if implied is not None:
                yield Event(
                    event.run_id, event.seq, event.ts, implied.kind, "execute", payload=implied
                )
        yield event
