"""The decision before a step starts: may it run, with which tool and which arguments?

In this order, each check decided by code: the budget; argument binding (a missing value
is an error, never a guess) and the declared rewrites; validation of every bound argument
against the tool's input model; the intent's allow-list; the business rules; the person's
confirmation; the loop guard. Arguments are validated before anyone is asked, so a person
never approves a call that cannot run, and the prompt can show them (``{args.x}``).
Whether a step may be considered at all (its dependencies, and the producers of the facts
read before it, have settled) is ``ready``'s answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral.contracts import StepStatus, Verdict
from corral.decision.budget import BudgetTracker
from corral.errors import CorralError, ErrorCode
from corral.events import (
    BudgetExceeded,
    LoopDetected,
    StepFinished,
    StepSkipped,
    StepStarted,
    ToolRewritten,
    Verified,
)
from corral.planning.binding import bind_arguments
from corral.planning.validate import CompiledStep
from corral.runtime.journal import Journal
from corral.tools.invoke import validate_args
from corral.tools.spec import ToolSpec
from corral.verify.loop_guard import LoopGuard

if TYPE_CHECKING:
    from corral.runtime.view import RunControl

_UNSETTLED = (StepStatus.PENDING, StepStatus.RUNNING)


@dataclass(frozen=True)
class Admitted:
    """The step may start: this tool, with these bound and validated arguments."""

    spec: ToolSpec
    args: dict[str, Any]


@dataclass(frozen=True)
class Stopped:
    """The run must stop scheduling (budget spent, a loop)."""

    reason: str
    code: ErrorCode


def waiting(compiled: CompiledStep, statuses: Mapping[str, StepStatus]) -> bool:
    """Whether a producer of a fact read before this step has not settled yet.

    A rule is never judged while a step that publishes what it reads is pending or
    running: it would see no value, or one about to change, and refuse wrongly.
    """
    return any(statuses.get(other) in _UNSETTLED for other in compiled.waits_for)


def fail_step(journal: Journal, step_id: str, code: ErrorCode, reason: str) -> None:
    """A step that fails before its tool is entered."""
    journal.emit("execute", StepFinished(step_id, "failed", None, code.value, reason))


def record_verdict(journal: Journal, step_id: str, verdict: Verdict) -> None:
    """The verify layer's verdict on a step, as an event."""
    journal.emit("verify", Verified(step_id, verdict))


class StepGate:
    """Runs the pre-step checks of one run; owned by its ``Scheduler``."""

    def __init__(self, loop: RunControl, budget: BudgetTracker, guard: LoopGuard) -> None:
        self.loop = loop
        self.state = loop.state
        self.journal = loop.journal
        self.agent = loop.agent
        self.budget = budget
        self.guard = guard

    def admit(self, compiled: CompiledStep, idle: bool) -> Admitted | Stopped | None:
        """Decide one ready step; ``None`` means it failed, was skipped or awaits a person.

        ``idle``: no other step is running, so the run may pause to ask for confirmation.
        """
        step, journal, state = compiled.step, self.journal, self.state
        step_id = step.id
        self.budget.steps = sum(1 for s in state.steps.values() if s.args is not None)
        self.budget.tool_calls = state.tool_calls
        over = self.budget.exceeded(self.loop.active_seconds())
        if over:
            journal.emit("decide", BudgetExceeded(over, step_id))
            return Stopped(over, ErrorCode.BUDGET_EXCEEDED)
        try:
            args = bind_arguments(
                compiled, state.entities, self.loop.facts_with_entities(), self.results()
            )
            spec, args = self.rewrite(step_id, compiled.spec, args)
            validate_args(spec, args)  # before anyone is asked to approve the call
        except CorralError as exc:
            journal.emit("execute", StepStarted(step_id, step.tool, None))
            fail_step(journal, step_id, exc.code, exc.message)
            return None
        if spec.name not in self.allowed():
            reason = f"{spec.name} is not allowed for this intent"
            fail_step(journal, step_id, ErrorCode.TOOL_NOT_ALLOWED, reason)
            return None
        if self.refused_by_rule(step_id, spec.name):
            return None
        needs_confirmation = step.requires_confirmation or spec.policy.requires_confirmation
        if needs_confirmation and not self.confirmed(step_id, spec.name, args, idle):
            return None
        looping = self.guard.observe_call(step_id, spec.name, args)
        if looping:
            journal.emit("verify", LoopDetected(looping, step_id))
            fail_step(journal, step_id, ErrorCode.LOOP_DETECTED, looping)
            return Stopped(looping, ErrorCode.LOOP_DETECTED)
        return Admitted(spec, args)

    def allowed(self) -> set[str]:
        """The intent's allow-list, as routed."""
        return set(self.state.route.allowed_tools) if self.state.route else set()

    def rewrite(
        self, step_id: str, spec: ToolSpec, args: dict[str, Any]
    ) -> tuple[ToolSpec, dict[str, Any]]:
        """Parameter post-processing: the tool these arguments really call (seed 004)."""
        rewrite = self.agent.policy.rewrite(spec.name, self.loop.rule_names(args))
        if rewrite is None:
            return spec, args
        target = self.agent.tools.get(rewrite.rule.use_tool)
        new_args = rewrite.arguments(args, self.state.entities, self.loop.facts_with_entities())
        kept = {k: v for k, v in new_args.items() if k in target.input_model.model_fields}
        self.journal.emit(
            "decide", ToolRewritten(step_id, rewrite.rule.name, spec.name, target.name, kept)
        )
        return target, kept

    def refused_by_rule(self, step_id: str, tool: str) -> bool:
        """Judge the business rules before ``tool``; a violated one skips the step."""
        names = self.loop.rule_names()
        for rule in self.agent.rules:
            if rule.rule.before_tool != tool:
                continue
            verdict = rule.check(names)
            record_verdict(self.journal, step_id, verdict)
            if not verdict.passed:
                self.skip(
                    step_id, ErrorCode.BUSINESS_RULE_VIOLATED, verdict.reason, rule.rule.refusal
                )
                return True
        return False

    def skip(self, step_id: str, code: ErrorCode, reason: str, template: str) -> None:
        """Skip a step on purpose; ``template`` is the reply that explains why."""
        self.journal.emit("decide", StepSkipped(step_id, code.value, reason, template))

    def confirmed(self, step_id: str, tool: str, args: dict[str, Any], idle: bool) -> bool:
        """True when the person approved; otherwise pause (or skip a declined step)."""
        decision = self.state.confirmations.get(step_id)
        if decision is None:
            if idle:
                template = self.confirm_template(step_id)
                self.loop.request_confirmation(step_id, template, tool, args)
            return False
        if decision is False:
            self.skip(step_id, ErrorCode.REJECTED_BY_USER, "the user declined", "cancelled")
        return decision

    def confirm_template(self, step_id: str) -> str:
        """The plan's confirmation template for the step, or the default ``confirm``."""
        declared = self.loop.declared_plan()
        return declared.confirm.get(step_id, "confirm") if declared else "confirm"

    def results(self) -> dict[str, Any]:
        """Step id -> data of the steps that succeeded, for ``$sN.result`` references."""
        return {
            sid: s.data
            for sid, s in self.state.steps.items()
            if s.status is StepStatus.SUCCEEDED and s.data is not None
        }
