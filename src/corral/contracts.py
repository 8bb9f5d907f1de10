"""The typed values that pass between layers.

Every arrow of ``intent -> route -> plan -> decide -> execute -> verify -> reply`` is one of
these. They are pydantic models because they cross boundaries: they are stored in the
event log, printed as JSON by the CLI and, later, served over HTTP. State that lives only
inside one layer uses plain dataclasses instead.
"""

from __future__ import annotations

import importlib
import warnings
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field

Language = Literal["zh", "en"]
IntentSource = Literal["rule", "classifier", "model", "session", "none"]
"""``session``: a follow-up line read as the session's last request (``RunStarted.follows``)."""
RunOutcome = Literal[
    "success",
    "partial",
    "refused",
    "not_found",
    "unmet",
    "cancelled",
    "unknown",
    "handoff",
    "failed",
    "reply",
    "unclear",
    "repeated",
    "deferred",
]
"""How a run ended (``RunSummary.outcome``): each is said by one path of the run loop
(``corral.runtime.conclusion`` names them), and the loop is typed to say no other, so an
eval suite that expects another has a typo (``sucess``), not a failing agent."""
JsonDict = dict[str, Any]
_Model = TypeVar("_Model", bound=BaseModel)


class SharedFieldsSet(set[str]):
    """A fields set that instances share: read-only; a copy of it is a plain ``set``.

    A pydantic model has a set of the fields given to it, and a set of five names or
    more takes 728 bytes, more than the instance and its ``__dict__`` together. A run
    keeps its contracts for as long as it runs (a ``MemoryStore`` for as long as it keeps
    the run), so the ones corral makes itself share one (``Contract.whole``,
    ``Contract.replaced``, ``ToolResult.made``). Nothing in pydantic changes it in place:
    contracts are frozen, and ``model_copy``, ``copy``, ``deepcopy`` and ``pickle`` make
    a plain set of it first (``tests/test_call_envelope.py``). Changing it through
    ``model_fields_set`` raises instead of changing every instance that shares it. Not a
    ``frozenset``: ``model_copy`` calls ``update`` on its copy, and a frozenset's copy is
    itself.
    """

    __slots__ = ()

    def _read_only(self, *_: Any) -> Any:
        raise TypeError("this fields set is shared by many instances and read-only; copy it first")

    add = discard = remove = pop = clear = update = _read_only
    difference_update = intersection_update = symmetric_difference_update = _read_only
    __ior__ = __iand__ = __isub__ = __ixor__ = _read_only

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, _memo: Any) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (set, (list(self),))


class Contract(BaseModel):
    """Base for contracts: immutable and strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    __corral_fields_set__: ClassVar[set[str]] = set()
    """Every field's name: the fields set every instance made ``whole`` shares."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__corral_fields_set__ = SharedFieldsSet(cls.model_fields)

    @classmethod
    def whole(cls, **values: Any) -> Self:
        """An instance from every field's value, all made by corral itself: not validated.

        For the contracts each run makes on its live path from values its own layers
        typed (the rule intent's result, the route), where validating them again proves
        nothing. The instance is what the constructor would give with every field passed
        (equal, dumped and shown alike; ``tests/test_contract_fast_paths.py``), and shares
        one fields set with the others of its class (a set of six names takes 728 bytes).
        The caller hands its containers over: validation would have copied them. Not for
        values from outside corral: use the constructor.
        """
        every = cls.__corral_fields_set__
        if len(values) != len(every) or not every.issuperset(values):
            raise TypeError(f"{cls.__name__}.whole takes every field: {sorted(every)}")
        ordered = {name: values[name] for name in cls.model_fields}  # as validation orders
        return _assemble(cls, ordered, every)

    def replaced(self, **changes: Any) -> Self:
        """``model_copy(update=changes)``, sharing this one's fields set when it can.

        When every changed field was set already the copy's fields set is this one's, as
        it is: pydantic would copy the set, to add nothing to it (a plan per run, from
        its template's).
        """
        fields_set = self.__pydantic_fields_set__
        if not fields_set.issuperset(changes):
            return self.model_copy(update=changes)
        if type(fields_set) is not SharedFieldsSet:  # shared from now on: read-only
            fields_set = SharedFieldsSet(fields_set)
            _set(self, "__pydantic_fields_set__", fields_set)
        return _assemble(type(self), {**self.__dict__, **changes}, fields_set)


# --------------------------------------------------------------------------- intent


class IntentResult(Contract):
    """What the intent layer understood: one declared label, how sure, and the entities."""

    label: str | None
    confidence: float = Field(ge=0.0, le=1.0)
    entities: JsonDict = Field(default_factory=dict)
    source: IntentSource = "none"
    need_clarification: bool = False
    evidence: str | None = None
    """The rule or example that decided the label, for the trace."""


# --------------------------------------------------------------------------- route


class RouteAction(StrEnum):
    """What the router does with an understood message."""

    PLAN = "plan"
    REPLY = "reply"
    CLARIFY = "clarify"
    HANDOFF = "handoff"


class RouteDecision(Contract):
    """The router's choice for one message, with the reason in words for the trace."""

    action: RouteAction
    intent: str | None
    template: str | None = None
    reason: str = ""
    missing_entities: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- plan


class Step(Contract):
    """One task descriptor: a tool, where its arguments come from, and how to judge it.

    ``args`` values may be literals or references: ``$entities.x``, ``$facts.x`` or
    ``$s1.result.a.b``. ``facts`` publishes fields of the result as named facts
    (``{"in_warranty": "result.in_warranty"}``); steps that publish the same fact run
    one after another.
    """

    id: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
    tool: str
    args: JsonDict = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    success: str | None = None
    judge: str | None = None
    """A success criterion in words, checked by the model judge after ``success`` passed."""
    requires_confirmation: bool = False
    facts: dict[str, str] = Field(default_factory=dict)
    description: str = ""
    """Plain words for what the step does; a partial reply lists steps by it."""
    on_failure: Literal["continue", "handoff"] = "handoff"
    """What a failure of this step does to the run. ``handoff`` (the default): the run goes
    to a person. ``continue``: the step is optional; its dependents are blocked, the rest
    goes on, and the run ends as a partial completion that says what was not done. (Not
    the plan template's ``on_failure``, which maps step ids to reply templates.)"""


class Plan(Contract):
    """A DAG of steps for one intent. An empty plan means "cannot do" and is never run."""

    plan_id: str
    intent: str | None = None
    steps: list[Step]
    source: Literal["template", "model"] = "template"
    template: str | None = None


# --------------------------------------------------------------------------- execute


class ToolStatus(StrEnum):
    """The three outcomes of a tool call."""

    SUCCESS = "success"
    ERROR = "error"
    NO_RESULT = "no_result"


class ToolResult(Contract):
    """The envelope every tool call ends in, whatever happened inside."""

    tool: str
    status: ToolStatus
    data: JsonDict | None = None
    summary: str = ""
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False
    attempts: int = 1
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the call succeeded with data."""
        return self.status is ToolStatus.SUCCESS

    @classmethod
    def made(
        cls,
        tool: str,
        status: ToolStatus,
        data: JsonDict | None,
        summary: str,
        error_code: str | None,
        error_message: str | None,
        retryable: bool,
        attempts: int,
        duration_ms: float,
    ) -> ToolResult:
        """The envelope of a call, from values corral made itself: not validated again.

        ``invoke_tool`` builds one per call from typed values it holds (the tool's output
        was validated against its model already), so validating them again proved nothing
        and was the largest object of a step. The instance is what validation would give
        (every field set, ``data`` a copy of the dict, as validation makes one): equal,
        dumped and shown alike. Not for values from outside corral: use the constructor.
        """
        values = {
            "tool": tool,
            "status": status,
            "data": None if data is None else dict(data),
            "summary": summary,
            "error_code": error_code,
            "error_message": error_message,
            "retryable": retryable,
            "attempts": attempts,
            "duration_ms": duration_ms,
        }
        return _assemble(cls, values, cls.__corral_fields_set__)


_new = object.__new__
_set = object.__setattr__


def _assemble(cls: type[_Model], values: dict[str, Any], fields_set: set[str]) -> _Model:
    """A contract from its ``__dict__`` and fields set, as ``model_construct`` sets them.

    No extras (contracts forbid them), no private values. ``fields_set`` is shared with
    other instances (``SharedFieldsSet``).
    """
    model: _Model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


# --------------------------------------------------------------------------- verify


class Verdict(Contract):
    """The verdict of one check on a step or on the whole run."""

    passed: bool
    check: Literal["schema", "success", "business_rule", "loop", "reply"]
    reason: str = ""
    code: str | None = None


# --------------------------------------------------------------------------- states


class RunStatus(StrEnum):
    """The run's state machine (SPEC §1). Transitions are guarded in ``runtime``."""

    PARSING = "parsing"
    PLANNING = "planning"
    DECIDING = "deciding"
    EXECUTING = "executing"
    AWAITING_CONFIRM = "awaiting_confirm"
    AWAITING_USER = "awaiting_user"
    FINISHED = "finished"
    FAILED = "failed"
    HANDED_OFF = "handed_off"

    @property
    def terminal(self) -> bool:
        """True for the states a run never leaves."""
        return self in TERMINAL_RUN_STATUSES

    @property
    def paused(self) -> bool:
        """True while the run waits for a person."""
        return self in PAUSED_STATUSES


PAUSED_STATUSES = frozenset({RunStatus.AWAITING_CONFIRM.value, RunStatus.AWAITING_USER.value})
"""The statuses of a run that waits for a person (``RunStatus.paused``), as stored."""
TERMINAL_RUN_STATUSES = frozenset(
    {RunStatus.FINISHED.value, RunStatus.FAILED.value, RunStatus.HANDED_OFF.value}
)
"""The statuses a run never leaves (``RunStatus.terminal``): built once, not per check."""


STAGES = (
    "run",
    "intent",
    "route",
    "plan",
    "decide",
    "execute",
    "verify",
    "reply",
    "memory",
    "handoff",
    "extract",
    "judge",
)
"""Every stage an event names: the run around the layers, the layers, the session memory,
the handoff, and the two model purposes that work for a layer (``extract`` for intent,
``judge`` for verify). One list, so a filter by stage (``corral traces --stage``) can
refuse a name no event carries instead of showing nothing."""


class StepStatus(StrEnum):
    """A step's life cycle."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"
    """A write whose outcome is unknown (timed out, or failed ambiguously)."""


# --------------------------------------------------------------------------- events


class EventType(StrEnum):
    """Every kind of event in a run's append-only log."""

    RUN_STARTED = "run_started"
    USER_MESSAGE = "user_message"
    # Deprecated: nothing emits these two any more. They stay so that logs written by
    # older versions still parse; new code must not emit them.
    STAGE_STARTED = "stage_started"
    STAGE_FINISHED = "stage_finished"
    STATUS_CHANGED = "status_changed"
    INTENT_CLASSIFIED = "intent_classified"
    ENTITIES_MERGED = "entities_merged"
    ROUTED = "routed"
    PLAN_CREATED = "plan_created"
    PLAN_REJECTED = "plan_rejected"
    STEP_STARTED = "step_started"
    TOOL_REWRITTEN = "tool_rewritten"
    TOOL_SELECTED = "tool_selected"
    TOOL_ATTEMPT = "tool_attempt"
    STEP_FINISHED = "step_finished"
    STEP_SKIPPED = "step_skipped"
    STEP_BLOCKED = "step_blocked"
    OUTCOME_RECONCILED = "outcome_reconciled"
    VERIFIED = "verified"
    FACT_WRITTEN = "fact_written"
    FACT_REJECTED = "fact_rejected"
    CONFIRMATION_REQUESTED = "confirmation_requested"
    CONFIRMATION_GIVEN = "confirmation_given"
    QUESTION_ASKED = "question_asked"
    USER_ANSWERED = "user_answered"
    LOOP_DETECTED = "loop_detected"
    BUDGET_EXCEEDED = "budget_exceeded"
    MODEL_CALL = "model_call"
    ENTITY_REJECTED = "entity_rejected"
    REPLY = "reply"
    HANDED_OFF = "handed_off"
    RUN_FINISHED = "run_finished"
    NEED_REPLAN = "need_replan"
    NEED_CLARIFICATION = "need_clarification"
    TOOL_TIMEOUT = "tool_timeout"
    BUDGET_LOW = "budget_low"


# --------------------------------------------------------------------------- signals


class NeedReplan(Contract):
    """Raised by verify when a step's result fails its check: what the plan assumed is false.

    Only code raises a signal (``verify`` here), never a model's output: a model's text that
    reads ``need_replan`` stays text.
    """

    step_id: str
    tool: str
    code: str
    reason: str


class NeedClarification(Contract):
    """Raised by planning when an entity the plan needs is missing or has several values."""

    entity: str
    problem: Literal["missing", "ambiguous"]
    candidates: list[str] = Field(default_factory=list)
    """The values found for an ambiguous entity (two cities, two order ids)."""


class ToolTimeout(Contract):
    """Raised by the executor when one attempt of a tool does not answer in time."""

    step_id: str
    tool: str
    attempt: int
    timeout_s: float


BudgetResource = Literal["steps", "tool_calls", "tokens", "wall_clock"]


class BudgetLow(Contract):
    """Raised by the decision layer when a budget's remaining share falls below the limit."""

    resource: BudgetResource
    used: float
    limit: float


Signal = NeedReplan | NeedClarification | ToolTimeout | BudgetLow
"""Every signal code raises; each is an event of its own type with its handler's outcome."""


class SignalBrief(Contract):
    """A signal as run summaries show it: what was raised and what its handler did."""

    kind: str
    outcome: str
    reason: str = ""
    step_id: str | None = None


# --------------------------------------------------------------------------- outputs


class StepRecord(Contract):
    """One step as a person reads it: what went in, what came out."""

    id: str
    tool: str
    status: StepStatus
    input: JsonDict = Field(default_factory=dict)
    output: JsonDict | None = None
    summary: str = ""
    error_code: str | None = None
    attempts: int = 0
    duration_ms: float = 0.0
    idempotency_key: str | None = None
    """For a write that was entered: the key it was given, to look its effect up by."""


class HandoffPacket(Contract):
    """Everything a human agent needs to take over without asking the user again."""

    run_id: str
    trace_id: str
    reason: str
    reason_code: str
    user_messages: list[str]
    intent: IntentResult | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    facts: JsonDict = Field(default_factory=dict)
    created_at: datetime


class PendingAction(Contract):
    """What a paused run waits for, and the words shown to the user."""

    kind: Literal["confirm", "answer"]
    prompt: str
    step_id: str | None = None
    slot: str | None = None
    call: str | None = None
    """A confirmation's digest of the call it asks about: its tool and arguments as shown.

    Give it back with the person's answer (``Runtime.resume(call=...)``, the HTTP API's
    ``call``): the answer is then applied only while the run asks about that very call,
    never to another one asked in its place (a deploy that changed the step's tool or
    arguments while the person read the prompt). ``None`` for a question, for a long
    plan's ``#plan`` confirmation, and for a confirmation asked before calls had digests."""


class IntentBrief(Contract):
    """The part of an intent result shown in run summaries."""

    label: str | None
    confidence: float
    source: IntentSource


class StepBrief(Contract):
    """The part of a step shown in run summaries."""

    id: str
    tool: str
    status: StepStatus
    attempts: int
    duration_ms: float
    error_code: str | None


class RunSummary(Contract):
    """The outcome of ``start`` or ``resume``; ``corral run --json`` prints exactly this."""

    run_id: str
    trace_id: str
    status: RunStatus
    intent: IntentBrief | None
    steps: list[StepBrief]
    reply: str | None
    handoff: HandoffPacket | None
    pending: PendingAction | None = None
    outcome: str | None = None
    """How the run ended: ``success``, ``partial``, ``refused``, ``unknown``, ``handoff``..."""
    error_code: str | None = None
    """The run's error code when it was handed off or failed (``OUTCOME_UNKNOWN``...)."""
    signals: list[SignalBrief] = Field(default_factory=list)
    """The signals code raised in the run (``need_replan``...), with their handlers' outcomes."""


def __getattr__(name: str) -> Any:
    """``corral.contracts.Event``: deprecated since 0.1 (the envelope is ``corral.events.Event``).

    Resolved by name, on first use only: ``corral.events`` builds on this module, so an
    import of it here would be a cycle.
    """
    if name == "Event":
        warnings.warn(
            "corral.contracts.Event moved to corral.events.Event (or use corral.Event)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module("corral.events").Event
    raise AttributeError(f"module 'corral.contracts' has no attribute {name!r}")
