"""The recovery ladder's decisions: what may follow a failure, decided by code.

After a step fails, in this order: retries (inside ``invoke_tool``, by the tool's policy);
then an equivalent tool, unless another call could do harm or cannot help; then, once the
plan has settled, a replan with the failure (model plans only, at most
``limits.max_replans``); else a handoff (``runtime.conclusion``). A write whose outcome
is unknown is settled by its reconciler, never retried blindly. The scheduler carries
each rung out; these functions say whether it applies.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

from corral.contracts import NeedReplan, Plan, StepStatus, ToolResult, ToolStatus
from corral.errors import ErrorCode

MAX_REPLANS = 2
"""Seed 000/001: replan with the failure at most twice, then hand off (the default of
``limits.max_replans``)."""

ReplanOutcome = Literal["replan", "continue", "reply", "handoff"]

_NOT_RECOVERABLE_BY_ANOTHER_TOOL = frozenset(
    {ErrorCode.MISSING_ARGUMENT.value, ErrorCode.INVALID_ARGUMENT.value}
)


class SettledStep(Protocol):
    """What the ladder reads of a step once the plan has settled."""

    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def status(self) -> StepStatus: ...
    @property
    def error_code(self) -> str | None: ...
    @property
    def reason(self) -> str: ...


def another_tool_may_follow(result: ToolResult) -> bool:
    """Whether an equivalent tool may be tried after this failed call.

    Not after an unknown write outcome (another write tool would be a blind retry), nor
    after arguments that are missing or invalid (any equivalent tool takes the same).
    """
    if result.error_code == ErrorCode.OUTCOME_UNKNOWN.value:
        return False
    return result.error_code not in _NOT_RECOVERABLE_BY_ANOTHER_TOOL


def blames_the_tool(result: ToolResult) -> bool:
    """Whether a failed call counts against the tool's health (bad arguments do not)."""
    return result.error_code not in _NOT_RECOVERABLE_BY_ANOTHER_TOOL


def may_replan(plan: Plan | None, *, has_model: bool, replans: int, max_replans: int) -> bool:
    """Whether the plan may be replanned now: a model plan, a model, replans left."""
    return plan is not None and plan.source == "model" and has_model and replans < max_replans


def handle_need_replan(
    signal: NeedReplan,
    plan: Plan | None,
    *,
    has_model: bool,
    replans: int,
    max_replans: int = MAX_REPLANS,
    answer_declared: bool = False,
) -> ReplanOutcome:
    """The one handler of ``need_replan``: what follows a step whose result failed its check.

    A model plan is replanned with the failure as a new fact, while replans are left. A
    template is a fixed, reviewed path: it is never rewritten by a model; an optional step
    (``on_failure: continue``) lets the rest go on; else the plan's declared answer for
    the step (``on_failure`` template: "this order is not eligible") is the reply; else a
    person takes over. The scheduler carries the outcome out once the plan has settled.
    """
    if may_replan(plan, has_model=has_model, replans=replans, max_replans=max_replans):
        return "replan"
    step = next((s for s in plan.steps if s.id == signal.step_id), None) if plan else None
    if step is not None and step.on_failure == "continue":
        return "continue"
    return "reply" if answer_declared else "handoff"


def replan_failure(
    plan: Plan | None,
    steps: Iterable[SettledStep],
    *,
    has_model: bool,
    replans: int,
    max_replans: int = MAX_REPLANS,
) -> str | None:
    """The failure to replan with, or ``None`` when the ladder goes on to a handoff.

    Only a model plan is replanned, by a model, at most ``max_replans`` times; never while
    a write's outcome is unknown (a new plan could run it again: a person settles it).
    """
    settled = list(steps)
    statuses = {s.status for s in settled}  # one pass, not a generator resumed per step
    if StepStatus.UNKNOWN in statuses or StepStatus.FAILED not in statuses:
        return None
    failed = [s for s in settled if s.status is StepStatus.FAILED]
    if not may_replan(plan, has_model=has_model, replans=replans, max_replans=max_replans):
        return None
    first = failed[0]
    return f"step {first.id} ({first.tool}) failed with {first.error_code}: {first.reason}"


def reconciled_outcome(settled: ToolResult) -> Literal["applied", "unknown", "not_applied"]:
    """What a reconciler found of a write whose outcome was unknown."""
    if settled.status is ToolStatus.SUCCESS:
        return "applied"
    if settled.error_code == ErrorCode.OUTCOME_UNKNOWN.value:
        return "unknown"
    return "not_applied"
