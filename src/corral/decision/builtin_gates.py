"""corral's own gates, and the order they run in (``DEFAULT_GATES``).

Each is decided by code: the budget; argument binding (a missing value is an error,
never a guess); the declared rewrites; validation of every bound argument against the
tool's input model; a write the process died in entered again only as the same call; the
intent's allow-list; the business rules; the person's confirmation; the loop guard.
Arguments are validated before anyone is asked, so a person never approves a call that
cannot run, and the prompt can show them (``{args.x}``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from corral.decision.budget import handle_budget_low
from corral.decision.gates import (
    Answer,
    Gate,
    GateRun,
    Hold,
    Proposal,
    Refuse,
    Skip,
    Stop,
    may_have_acted,
    shown_call,
)
from corral.decision.policy import DecisionPolicy
from corral.errors import CorralError, ErrorCode, said
from corral.events import (
    BudgetExceeded,
    BudgetLowSignal,
    LoopDetected,
    StepStarted,
    ToolRewritten,
    Verified,
)
from corral.hashing import canonical_json
from corral.planning.binding import bind_arguments, reads_facts
from corral.planning.validate import CompiledStep
from corral.tools.invoke import validate_args
from corral.verify.rules import CompiledRule


def _unbound(proposal: Proposal, run: GateRun, exc: CorralError) -> Refuse:
    """Arguments that cannot be bound or do not fit: recorded as started, without them.

    The log has always told such a step as started without arguments, then failed.
    """
    run.emit("execute", StepStarted(proposal.step_id, proposal.step.step.tool, None))
    return Refuse(exc.code.value, exc.message)


@dataclass(frozen=True, slots=True)
class BudgetGate:
    """No step starts once the run's step, tool-call or wall-clock budget is spent.

    Before that, when the budget runs low, it raises ``budget_low`` (once) and, on the
    cheaper path its handler chose, an optional step is not started (``BUDGET_LOW``),
    unless a required step depends on it (``CompiledStep.needed``).
    """

    leaves_arguments: ClassVar[bool] = True

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """Stop the run when a limit is passed; refuse optional steps when it runs low."""
        budget = run.budget
        active_s = run.active_seconds()
        over = budget.exceeded(active_s, run.started(proposal.step_id))
        if over:
            run.emit("decide", BudgetExceeded(over, proposal.step_id))
            return Stop(over, ErrorCode.BUDGET_EXCEEDED)
        if not budget.signalled_low:
            low = budget.low(active_s)
            if low is None:
                return proposal
            run.emit("decide", BudgetLowSignal(low, handle_budget_low(low)))
            budget.signalled_low = True
        if proposal.step.step.on_failure == "continue" and not proposal.step.needed:
            reason = "the budget is running low: this optional step was not started"
            return Refuse(ErrorCode.BUDGET_LOW.value, reason)
        return proposal


@dataclass(frozen=True, slots=True)
class BindArguments:
    """Resolve the step's references to entities, facts and earlier results."""

    leaves_arguments: ClassVar[bool] = True

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """The bound arguments, or a refusal naming the value that is missing."""
        try:
            facts = run.facts() if reads_facts(proposal.step) else {}
            args = bind_arguments(proposal.step, run.entities, facts, run.results(), run.message)
        except CorralError as exc:
            return _unbound(proposal, run, exc)
        return Proposal(proposal.step, proposal.tool, args)


@dataclass(frozen=True, slots=True)
class RewriteArguments:
    """Parameter post-processing: the tool these arguments really call (seed 004)."""

    leaves_arguments: ClassVar[bool] = True

    def applies(
        self, step: CompiledStep, policy: DecisionPolicy, rules: Sequence[CompiledRule]
    ) -> bool:
        """Only when a rewrite is declared for the step's tool."""
        return policy.rewrites_tool(step.spec.name)

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """The rewritten tool and arguments when a declared rewrite applies."""
        spec, args = proposal.tool, proposal.args
        policy = run.policy
        if not policy.rewrites or not policy.rewrites_tool(spec.name):
            return proposal
        try:
            rewrite = run.policy.rewrite(spec.name, run.rule_names(args))
            if rewrite is None:
                return proposal
            target = run.tools.get(rewrite.rule.use_tool)
            new_args = rewrite.arguments(args, run.entities, run.facts())
        except CorralError as exc:
            return _unbound(proposal, run, exc)
        kept = {k: v for k, v in new_args.items() if k in target.input_model.model_fields}
        run.emit(
            "decide",
            ToolRewritten(proposal.step_id, rewrite.rule.name, spec.name, target.name, kept),
        )
        return Proposal(proposal.step, target, kept)


@dataclass(frozen=True, slots=True)
class ValidateArguments:
    """Every argument fits the tool's input model, before anyone is asked to approve it.

    It seals the step: a later gate may refuse, skip or hold it, but not change its tool
    or arguments (``decide`` refuses that with ``EXTENSION_FAILED``).
    """

    seals: ClassVar[bool] = True
    leaves_arguments: ClassVar[bool] = True

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """A refusal with the validation error, else the proposal."""
        try:
            validated = validate_args(proposal.tool, proposal.args)
        except CorralError as exc:
            return _unbound(proposal, run, exc)
        return Proposal(proposal.step, proposal.tool, proposal.args, validated)


@dataclass(frozen=True, slots=True)
class SameCallAgain:
    """A write the process died in is entered again only as the call it died in.

    An idempotent write whose outcome is unknown is entered again on its idempotency key:
    a business system that saw the first call answers the second with its effect. A deploy
    made meanwhile (an argument rewrite, another tool) may change the call, and no key
    covers another tool or other arguments: the first call may have acted, and the new one
    would act again. The step's outcome stays unknown, and the run goes to a person before
    anyone is asked about, or charged by, the new call.
    """

    leaves_arguments: ClassVar[bool] = True

    def applies(
        self, step: CompiledStep, policy: DecisionPolicy, rules: Sequence[CompiledRule]
    ) -> bool:
        """For a write, or a tool a rewrite may turn into one."""
        return step.spec.policy.kind == "write" or policy.rewrites_tool(step.spec.name)

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """The proposal when it is the interrupted call, or nothing was interrupted.

        The process may have died in an equivalent of the step's tool (ranked first, or
        after a failure): that one is the call, and the scheduler enters only it again
        (``Scheduler._execute``), with the step's arguments.
        """
        died_in = run.interrupted_call(proposal.step_id)
        if died_in is None:
            return proposal
        tool, args = died_in
        now = proposal.tool.name
        same_args = canonical_json(args) == canonical_json(proposal.args)
        if same_args and (
            tool == now or any(peer.name == tool for peer in run.tools.equivalents(now))
        ):
            return proposal
        instead = f"{now}" if now != tool else f"{tool} with other arguments"
        reason = may_have_acted(
            tool, f"the step now calls {instead}, which its idempotency key does not cover"
        )
        return Refuse(ErrorCode.OUTCOME_UNKNOWN.value, reason, stop=True)  # ``unknown``


@dataclass(frozen=True, slots=True)
class AllowList:
    """Only the tools the routed intent allows may run."""

    leaves_arguments: ClassVar[bool] = True

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """A refusal when the tool is not on the intent's list."""
        if proposal.tool.name not in run.allowed_tools:
            reason = f"{proposal.tool.name} is not allowed for this intent"
            return Refuse(ErrorCode.TOOL_NOT_ALLOWED.value, reason)
        return proposal


DECLINED = Skip(ErrorCode.REJECTED_BY_USER.value, "the user declined", "cancelled")
"""A step the person said no to: skipped, and the run replies ``cancelled``."""


@dataclass(frozen=True, slots=True)
class BusinessRules:
    """The business rules declared before the tool; a violated one skips the step.

    A rule reads the step's bound arguments (``args.amount``) besides ``facts`` and
    ``entities``: the values the tool is about to be called with, an optional argument
    the plan left out at its default.
    """

    leaves_arguments: ClassVar[bool] = True

    def applies(
        self, step: CompiledStep, policy: DecisionPolicy, rules: Sequence[CompiledRule]
    ) -> bool:
        """Only when a rule is declared before the step's tool."""
        return any(rule.rule.before_tool == step.spec.name for rule in rules)

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """Every verdict is recorded; the first violation skips with the rule's refusal.

        A step the person has declined is skipped as declined (``DECLINED``): it will never
        run, so no rule has to judge it. A rule deployed while the step waited, which
        cannot be judged, read the no as a refusal.
        """
        if run.confirmation(proposal.step_id) is False:
            return DECLINED
        tool = proposal.tool.name
        names: dict[str, object] | None = None
        for rule in run.rules:
            if rule.rule.before_tool != tool:
                continue
            names = run.rule_names(_with_defaults(proposal)) if names is None else names
            verdict = rule.check(names)
            run.emit("verify", Verified(proposal.step_id, verdict))
            if not verdict.passed:
                code = ErrorCode.BUSINESS_RULE_VIOLATED.value
                return Skip(code, verdict.reason, rule.rule.refusal)
        return proposal


def _with_defaults(proposal: Proposal, *, shown: bool = False) -> dict[str, object]:
    """The arguments as the tool gets them: each optional one left out at its default.

    ``shown``: as a person approves them, with only the fixed defaults. A deploy that
    changes one while the run waits (``method="card"`` to ``"voucher"``) changes the call,
    so the yes given for the old one does not stand. A default made by a factory (a
    clock, an id) is left out: it differs every time, and would ask again at every
    approval. So is a ``None`` default ("note: None" tells a person nothing; a deploy that
    gives it a value changes the call all the same).
    """
    fields = proposal.tool.input_model.model_fields
    optional = [
        (name, info)
        for name, info in fields.items()
        if not info.is_required() and name not in proposal.args
    ]
    if shown:
        defaults = {
            name: info.default
            for name, info in optional
            if info.default_factory is None and info.default is not None
        }
    else:
        defaults = {name: info.get_default(call_default_factory=True) for name, info in optional}
    return {**defaults, **proposal.args} if defaults else proposal.args


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A step or tool that needs the person's approval waits for it."""

    leaves_arguments: ClassVar[bool] = True

    def applies(
        self, step: CompiledStep, policy: DecisionPolicy, rules: Sequence[CompiledRule]
    ) -> bool:
        """When the step or its tool asks for the person's approval, or it is a write.

        A write's step may hold a no given before a deploy that dropped the approval: it
        is never carried out all the same (a review found it written).
        """
        spec = step.spec
        return (
            step.step.requires_confirmation
            or spec.policy.requires_confirmation
            or spec.policy.kind == "write"
        )

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """Pass when approved; ask (when nothing else runs); skip a declined step."""
        step_id = proposal.step_id
        decision = run.confirmation(step_id)
        if decision is False:  # the person's no stands, whatever the config says now
            return DECLINED
        tool = proposal.tool
        if not (proposal.step.step.requires_confirmation or tool.policy.requires_confirmation):
            return proposal
        called = _with_defaults(proposal, shown=True)  # a default is shown, and bound
        if decision and run.confirmation(step_id, shown_call(tool.name, called)):
            return proposal  # approved as shown; a yes to another call of the step asks again
        if run.idle:
            run.ask_confirmation(step_id, tool.name, called)
        return Hold()


@dataclass(frozen=True, slots=True)
class LoopGuardGate:
    """More than the limit of steps making one exact call stops the run."""

    leaves_arguments: ClassVar[bool] = True

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        """Record the call; a refusal that stops the run when it repeats too often."""
        step_id = proposal.step.step.id
        looping = run.guard.observe_call(step_id, proposal.tool.name, proposal.args)
        if looping:
            run.emit("verify", LoopDetected(looping, step_id))
            return Refuse(ErrorCode.LOOP_DETECTED.value, looping, stop=True)
        return proposal


DEFAULT_GATES: tuple[Gate, ...] = (
    BudgetGate(),
    BindArguments(),
    RewriteArguments(),
    ValidateArguments(),
    SameCallAgain(),
    AllowList(),
    BusinessRules(),
    Confirmation(),
    LoopGuardGate(),
)
"""corral's checks before a step, in order; ``(*DEFAULT_GATES, MyGate())`` adds one."""


_NOT_FOR_STAND_INS = (
    BudgetGate,
    BindArguments,
    RewriteArguments,
    ValidateArguments,
    SameCallAgain,
    Confirmation,
    LoopGuardGate,
)
"""Asked once per step, for the planned tool: the budget and the loop guard count the
step, a stand-in gets the step's arguments as they were bound, rewritten and validated,
and a stand-in's approval is ``candidates.stand_in_refusal``'s."""


def stand_in_answer(
    gates: Sequence[Gate], proposal: Proposal, run: GateRun
) -> Refuse | Skip | None:
    """What the agent's gates say of a stand-in for the step's tool (``None``: it may run).

    ``proposal`` carries the stand-in and the step's arguments, bound, rewritten and
    validated already for the planned tool. Every gate is asked but corral's own that
    bind, rewrite and validate and those of ``_NOT_FOR_STAND_INS``: the allow-list, the
    business rules, and the agent's own gates wherever they stand. Each is given a copy
    of the arguments, so none can change what the stand-in is called with.

    A gate before the sealing one (``ValidateArguments``; every gate, when none seals) is
    asked for its verdict on the arguments as they are: what it would make of them was
    made already, for the planned tool, and is not made twice (an amount turned into
    cents stays one conversion). A gate after it may not change them at all. A refusal or
    a skip keeps the stand-in out, and so does a gate that raises (arguments that cannot
    be copied too), holds or stops (a stand-in may not run on another tool's approval,
    nor wait for a person while its step is running), that would send it to another
    tool, or, after the sealing gate, that would change its arguments.
    """
    sealer = next((i for i, g in enumerate(gates) if getattr(g, "seals", False)), len(gates))
    for index, gate in enumerate(gates):
        if isinstance(gate, _NOT_FOR_STAND_INS):
            continue
        name = type(gate).__name__
        try:
            given = Proposal(proposal.step, proposal.tool, copy.deepcopy(proposal.args))
            answer: object = gate.check(given, run)
        except Exception as exc:  # a user's gate (or arguments that cannot be copied)
            return Refuse(ErrorCode.EXTENSION_FAILED.value, f"gate {name} raised: {said(exc)}")
        if isinstance(answer, Refuse | Skip):
            return answer
        if not isinstance(answer, Proposal):  # held or stopped
            kept_out = f"gate {name} did not pass a stand-in on"
            return Refuse(ErrorCode.EXTENSION_FAILED.value, kept_out)
        redirected = answer.tool is not proposal.tool
        changed = answer.step is not proposal.step or answer.args != proposal.args
        if redirected or (changed and index > sealer):
            return Refuse(ErrorCode.EXTENSION_FAILED.value, f"gate {name} changed a stand-in")
    return None
