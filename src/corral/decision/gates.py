"""The checks before a step starts, as an ordered list of gates.

A gate is a small value with one method, ``check(proposal, run)``. It answers with the
proposal (unchanged, or with another tool or other arguments: the step may go on to the
next gate), or with why the step does not start now: ``Refuse`` (it fails before its tool
is entered), ``Skip`` (on purpose, with the reply that explains why), ``Hold`` (it awaits
a person) or ``Stop`` (the run stops scheduling; the step stays pending). The first gate
that does not pass the proposal on decides; the rest are not asked.

The order is data: ``Agent.gates`` (``DEFAULT_GATES`` unless ``Agent.build(gates=...)``
says otherwise), so a check of one's own is added without touching the scheduler. A gate
sees the run only through ``GateRun``: the decision layer never names the run loop.

Two optional declarations let ``decide`` ask less, and neither changes what it decides:
``applies(step, policy, rules)`` says whether the gate can do anything but pass a step on
(asked once per step of an agent's plan, not per run: corral's rewrite, business-rule and
confirmation gates are not asked for a step they cannot concern), and ``leaves_arguments``
says it never changes a proposal's arguments in place (so, when every gate after the
sealing one says so, ``decide`` need not compare them as text). A gate that declares
neither is asked for every step and watched for changes in place.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from corral.decision.budget import BudgetTracker
from corral.decision.policy import DecisionPolicy
from corral.errors import ErrorCode, said
from corral.events import Payload, StepFinished, StepSkipped
from corral.hashing import canonical_json, stable_hash
from corral.planning.validate import CompiledStep
from corral.records import fast_init
from corral.tools.invoke import failed_result
from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec
from corral.verify.loop_guard import LoopGuard
from corral.verify.rules import CompiledRule


@fast_init
@dataclass(frozen=True, slots=True)
class Proposal:
    """What a step would run: the tool and the arguments decided so far.

    ``args`` is empty until the ``BindArguments`` gate has bound the step's references;
    a gate placed after it sees the bound (and rewritten) arguments.
    """

    step: CompiledStep
    tool: ToolSpec
    args: dict[str, Any]
    validated: BaseModel | None = field(default=None, compare=False, repr=False)
    """``args`` as the tool's input model, once ``ValidateArguments`` has checked them: the
    call uses it instead of validating the same arguments again."""

    @property
    def step_id(self) -> str:
        """The step's id in the plan."""
        return self.step.step.id


@fast_init
@dataclass(frozen=True, slots=True)
class Refuse:
    """The step fails before its tool is entered, with this code and reason.

    ``stop``: the run also stops scheduling and is handed to a person (a loop), with
    ``code`` when it is an ``ErrorCode``, else ``POLICY_HANDOFF``.
    """

    code: str
    reason: str
    stop: bool = False


@fast_init
@dataclass(frozen=True, slots=True)
class Skip:
    """The step is skipped on purpose; ``template`` is the reply that explains why."""

    code: str
    reason: str
    template: str


@fast_init
@dataclass(frozen=True, slots=True)
class Hold:
    """The step does not start now: it awaits a person (the gate asked, or will)."""


@fast_init
@dataclass(frozen=True, slots=True)
class Stop:
    """The run stops scheduling before this step, which stays pending (budget spent)."""

    reason: str
    code: ErrorCode


Answer = Proposal | Refuse | Skip | Hold | Stop
"""What a gate answers."""


def shown_call(tool: str, args: Mapping[str, Any]) -> str:
    """The digest of a call as a person is asked to approve it: its tool and arguments.

    A yes is bound to it, so that a step whose call changed after the answer (a replan
    that reused the step's id with other arguments) is asked again instead of running on
    an approval given for something else.
    """
    return stable_hash([tool, args])


class GateRun(Protocol):
    """What a gate may see of the run it decides for, and where it records why."""

    @property
    def idle(self) -> bool:
        """No other step is running, so the run may pause to ask a person."""
        ...

    @property
    def tools(self) -> ToolRegistry:
        """The agent's tools."""
        ...

    @property
    def policy(self) -> DecisionPolicy:
        """The agent's tool constraints and argument rewrites."""
        ...

    @property
    def rules(self) -> Sequence[CompiledRule]:
        """The agent's business rules."""
        ...

    @property
    def budget(self) -> BudgetTracker:
        """The run's budget, with what it has used so far."""
        ...

    @property
    def guard(self) -> LoopGuard:
        """The run's loop guard (the verify layer feeds it too)."""
        ...

    @property
    def entities(self) -> Mapping[str, Any]:
        """The entities the user gave."""
        ...

    @property
    def message(self) -> str | None:
        """The text of the message that started the run (``$message``); None without one."""
        ...

    @property
    def allowed_tools(self) -> Collection[str]:
        """The intent's allow-list, as routed."""
        ...

    def active_seconds(self) -> float:
        """Running time of the run so far, excluding pauses."""
        ...

    def facts(self) -> dict[str, Any]:
        """Facts, falling back to the entities the user gave."""
        ...

    def results(self) -> Mapping[str, Any]:
        """Step id -> data of the steps that succeeded (``$sN.result`` references)."""
        ...

    def rule_names(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """What business rules, constraints and rewrites may read."""
        ...

    def confirmation(self, step_id: str, call: str | None = None) -> bool | None:
        """The person's answer for the step: approved, declined, or not asked yet.

        With ``call`` (``shown_call``), a yes given for another call of the step is no
        answer (``None``); a no stands for the step whatever its call.
        """
        ...

    def started(self, step_id: str) -> bool:
        """The step started before, so it counts in the budget already.

        A write entered again on resume after its process died is such a step.
        """
        ...

    def interrupted_call(self, step_id: str) -> tuple[str, dict[str, Any]] | None:
        """The call (tool, arguments) a process died in, entered again on its key.

        ``None`` for any other step. A write proven not to have acted (its reconciler found
        nothing) is no such step: any call may follow a call that did nothing.
        """
        ...

    def ask_confirmation(self, step_id: str, tool: str, args: dict[str, Any]) -> None:
        """Pause the run with the step's confirmation prompt."""
        ...

    def emit(self, stage: str, payload: Payload) -> None:
        """Record an event of the run."""
        ...


class Gate(Protocol):
    """One check before a step starts."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """Pass the proposal on (perhaps changed), or say why the step does not start."""
        ...


@dataclass(frozen=True, slots=True)
class GatePlan:
    """Which of an agent's gates one step asks, worked out once per step (``plan_gates``).

    A gate that declares ``applies(step, policy, rules)`` and answers ``False`` would only
    pass this step's proposal on unchanged, so it is not asked; a gate without ``applies``
    (every user's gate that does not declare one) is always asked. ``gates``, ``policy``
    and ``rules`` are what the plan was worked out for.
    """

    gates: Sequence[Gate]
    policy: DecisionPolicy
    rules: Sequence[CompiledRule]
    asked: tuple[int, ...]
    """The positions of the gates this step asks, in order."""
    seals: tuple[bool, ...]
    """Per gate: it seals the tool and arguments when it passes them on."""
    in_place: bool
    """A gate after the first sealing gate may change the arguments in place (it does not
    declare ``leaves_arguments``): ``decide`` then compares them as text at the end."""


def plan_gates(
    gates: Sequence[Gate], step: CompiledStep, policy: DecisionPolicy, rules: Sequence[CompiledRule]
) -> GatePlan:
    """The gates ``step`` asks under this agent's policy and rules.

    Kept on the step for tuples of gates and rules (``Agent``'s are): an agent's template
    graphs live as long as the agent, so this runs once per step, not once per run.
    """
    plan = step.derived.get("gates")
    if (
        isinstance(plan, GatePlan)
        and plan.gates is gates
        and plan.policy is policy
        and plan.rules is rules
    ):
        return plan
    asked: list[int] = []
    seals: list[bool] = []
    sealer = len(gates)
    in_place = False
    for index, gate in enumerate(gates):
        applies = getattr(gate, "applies", None)
        sealing = bool(getattr(gate, "seals", False))
        # a sealing gate is always asked: passing a step on is what seals it
        if applies is None or sealing or applies(step, policy, rules):
            asked.append(index)
        seals.append(sealing)
        if index > sealer and not getattr(gate, "leaves_arguments", False):
            in_place = True
        if sealing and sealer == len(gates):
            sealer = index
    plan = GatePlan(gates, policy, rules, tuple(asked), tuple(seals), in_place)
    if isinstance(gates, tuple) and isinstance(rules, tuple):  # a list could change under it
        step.derived["gates"] = plan
    return plan


def decide(gates: Sequence[Gate], proposal: Proposal, run: GateRun) -> Proposal | Stop | None:
    """Ask the gates in order; the proposal that passed them all, a stop, or ``None``.

    ``None``: the step failed, was skipped or awaits a person; what a refusal or a skip
    means is recorded here, once for every gate. A gate that raises, answers something
    that is not an ``Answer``, or changes the tool or arguments after a gate that seals
    them (``ValidateArguments``: what is validated, ruled on and approved is what runs),
    in a new proposal or in place, fails the step with ``EXTENSION_FAILED`` and hands the
    run off.

    Only the gates that may apply to the step are asked (``plan_gates``); once a gate
    hands on another tool than the step's, every later gate is asked, since what applies
    was worked out for the step's own tool.
    """
    plan = plan_gates(gates, proposal.step, run.policy, run.rules)
    asked, seals, in_place = plan.asked, plan.seals, plan.in_place
    planned_tool = proposal.tool
    sealed: Proposal | None = None
    sealed_args = ""  # the sealed arguments as text: a gate may change them in place
    position = 0
    while position < len(asked):
        index = asked[position]
        position += 1
        gate = gates[index]
        try:
            answer: object = gate.check(proposal, run)
        except Exception as exc:  # a user's gate: its bug must not crash the run
            answer = _broken(f"gate {type(gate).__name__} raised {type(exc).__name__}: {said(exc)}")
        else:  # the usual answer, the proposal passed on as it may be, costs one test
            if answer is not proposal and (sealed is not None or type(answer) is not Proposal):
                answer = _checked(gate, answer, sealed)
        if answer is proposal or isinstance(answer, Proposal):  # most: passed on as it is
            proposal = answer
            if answer.tool is not planned_tool and len(asked) < len(gates):
                asked, position = tuple(range(len(gates))), index + 1  # another tool: ask all
            if sealed is None and seals[index]:
                sealed = proposal
                if in_place:
                    sealed_args = _as_text(proposal.args)
            continue
        if isinstance(answer, (Refuse, Skip)):
            died_in = run.interrupted_call(proposal.step_id)
            if died_in is not None:
                return _unsettled(proposal.step_id, died_in[0], answer, run)
        if isinstance(answer, Refuse):
            failed = StepFinished(proposal.step_id, "failed", None, answer.code, answer.reason)
            run.emit("execute", failed)
            return Stop(answer.reason, as_error_code(answer.code)) if answer.stop else None
        if isinstance(answer, Skip):
            skipped = StepSkipped(proposal.step_id, answer.code, answer.reason, answer.template)
            run.emit("decide", skipped)
            return None
        if isinstance(answer, Stop):  # a user's own code stops as a handoff, as Refuse's
            return Stop(answer.reason, as_error_code(answer.code))
        return None  # Hold: the gate asked a person
    if in_place and sealed is not None and _as_text(proposal.args) != sealed_args:
        # changed in place: the tool would run with the validated arguments while the
        # log, the key and the rules read the changed ones
        reason = (
            "a gate changed the step's arguments in place after they were validated "
            "(change a copy, before ValidateArguments)"
        )
        run.emit("execute", StepFinished(proposal.step_id, "failed", None, _EXTENSION, reason))
        return Stop(reason, ErrorCode.EXTENSION_FAILED)
    return proposal


def may_have_acted(tool: str, then: str) -> str:
    """Why a write the process died in is handed to a person: ``then`` says what came next.

    One wording for the gate that refuses another call, the refusals and skips ``decide``
    turns into ``unknown``, and a re-entry that did not settle it (the scheduler's).
    """
    return f"the run stopped while {tool} was running, and it may have acted; {then}"


def _unsettled(step_id: str, tool: str, answer: Refuse | Skip, run: GateRun) -> Stop:
    """A write the process died in, kept from being entered again: its outcome is unknown.

    A refusal or a skip of the step says nothing of the call that may have acted (a rule
    a deploy added, arguments that no longer validate, a person's no to the call asked
    again, ``SameCallAgain``): the step is ``unknown``, not failed or skipped, and the run
    stops for a person before anything else is done.
    """
    if answer.code == ErrorCode.OUTCOME_UNKNOWN.value:
        reason = answer.reason
    else:
        reason = may_have_acted(tool, f"it was not entered again ({answer.code}: {answer.reason})")
    code = ErrorCode.OUTCOME_UNKNOWN
    result = failed_result(tool, code.value, reason, 1)
    run.emit("execute", StepFinished(step_id, "unknown", result, code.value, reason))
    return Stop(reason, code)


def _checked(gate: Gate, answer: object, sealed: Proposal | None) -> Answer:
    """An unusual answer as it is, or a refusal that hands the run off.

    That is when it is not an ``Answer``, or changes the tool or arguments a gate sealed.
    """
    name = type(gate).__name__
    if type(answer) is not Proposal and not isinstance(answer, _ANSWERS):
        if inspect.iscoroutine(answer):  # written ``async def`` like a verifier
            answer.close()
            return _broken(f"gate {name} is async; a gate's check is a plain function")
        return _broken(f"gate {name} answered {answer!r}, which is not an Answer")
    if (
        sealed is not None
        and answer is not sealed
        and isinstance(answer, Proposal)
        and (answer.tool, answer.args) != (sealed.tool, sealed.args)
    ):
        return _broken(
            f"gate {name} changed the step's tool or arguments after they were validated "
            "(place it before ValidateArguments)"
        )
    return answer


_ANSWERS = (Proposal, Refuse, Skip, Hold, Stop)


_EXTENSION = ErrorCode.EXTENSION_FAILED.value


def _as_text(args: Mapping[str, Any]) -> str:
    """``args`` as text that any change in place changes (canonical JSON; else ``repr``)."""
    try:
        return canonical_json(args)
    except (TypeError, ValueError, RecursionError):  # keys that do not sort, say
        return repr(args)


def _broken(reason: str) -> Refuse:
    return Refuse(_EXTENSION, reason, stop=True)


def as_error_code(code: str) -> ErrorCode:
    """A code as corral's own, when it is one; a code of a user's gate stops as a handoff."""
    return ErrorCode(code) if code in ErrorCode.__members__ else ErrorCode.POLICY_HANDOFF
