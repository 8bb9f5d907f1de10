"""A long plan waits for a person before its first step (seed 001: over 10 steps).

Whether the plan came from a template, a model or ``run_plan``, a plan with more steps
than ``limits.max_plan_steps_without_confirmation`` pauses in ``awaiting_confirm`` before
any step starts, with a prompt that lists the steps. It reuses the confirmation of a step
(``confirmation_requested`` / ``confirmation_given``), keyed by ``PLAN_CONFIRMATION``
instead of a step id: approving runs the plan, rejecting ends the run as ``cancelled``
without running anything (after a replan: nothing more).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.contracts import StepStatus
from corral.runtime.conclusion import cancel

if TYPE_CHECKING:
    from corral.runtime.view import RunControl

PLAN_CONFIRMATION = "#plan"
"""The key of the plan's confirmation where a step's id would be (no step id has ``#``)."""


def plan_held(loop: RunControl, replanned: bool = False) -> bool:
    """Ask for (or apply) the person's decision on a long plan; ``True``: do not run it now.

    Before the first step, and after a replan (``replanned``) that made the plan long: a
    person never approved it, and a replan must not grow a short plan past the limit
    unseen. A plan that has started otherwise (short enough) is not held, and a replan
    extends a plan that was approved.
    """
    state = loop.state
    plan = state.plan
    limit = loop.agent.config.limits.max_plan_steps_without_confirmation
    if plan is None or len(plan.steps) <= limit:
        return False
    decision = state.confirmations.get(PLAN_CONFIRMATION)
    if decision is False:
        cancel(loop)  # after a replan, what the first plan wrote is said, not denied
        return True
    if decision is True:
        return False
    if not replanned and any(
        step.status is not StepStatus.PENDING for step in state.steps.values()
    ):
        return False
    steps = [f"{n}. {step.description or step.tool}" for n, step in enumerate(plan.steps, start=1)]
    extra = {"steps": steps, "count": len(steps)}
    loop.request_confirmation(PLAN_CONFIRMATION, "confirm_plan", "", {}, extra)
    return True
