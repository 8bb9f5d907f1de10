"""The run's hard budget, checked by code before each step, and its early warning.

``exceeded`` stops the run. Before that, ``low`` raises the ``budget_low`` signal once,
when less than ``budget.low_fraction`` of the steps, tool calls, tokens or wall clock is
left; ``handle_budget_low`` is its one handler: the run takes its cheaper path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from corral.config import Budget
from corral.contracts import BudgetLow, BudgetResource

BudgetLowOutcome = Literal["skip_optional"]


@dataclass
class BudgetTracker:
    """Counts what a run has used; ``exceeded`` names the first limit passed, if any."""

    budget: Budget
    steps: int = 0
    tool_calls: int = 0
    tokens: int = 0
    signalled_low: bool = False
    """``budget_low`` was raised already in this run (it is raised once)."""
    calm: tuple[float, float, float, float] = field(init=False, repr=False, compare=False)
    """Steps, tool calls, tokens and seconds at or under which no budget is low: ``low``
    answers from these alone until one is passed (the seconds a millisecond early, as
    ``low`` rounds them)."""

    def __post_init__(self) -> None:
        # written out, not a generator over the limits: every run's scheduler makes one
        budget, never = self.budget, float("inf")
        warns = budget.low_fraction > 0
        share = 1.0 - budget.low_fraction
        steps, calls = budget.max_steps, budget.max_tool_calls
        tokens, clock = budget.max_tokens, budget.max_wall_clock_s
        self.calm = (
            share * steps if warns and steps > 0 else never,
            share * calls if warns and calls > 0 else never,
            share * tokens if warns and tokens > 0 else never,
            share * clock - 0.001 if warns and clock > 0 else never,
        )

    def exceeded(self, active_s: float, started: bool = False) -> str | None:
        """A reason when the run may not start another step, else ``None``.

        ``active_s``: the run's running time so far, across processes and without its
        pauses (a run waiting for a person spends none of its budget). ``started``: the
        step asked about was counted already (a write entered again after its process
        died is the same step, not one more: a plan of exactly ``max_steps`` resumes).
        """
        if self.steps - started >= self.budget.max_steps:
            return f"step budget of {self.budget.max_steps} used up"
        if self.tool_calls >= self.budget.max_tool_calls:
            return f"tool-call budget of {self.budget.max_tool_calls} used up"
        if active_s > self.budget.max_wall_clock_s:
            return f"wall-clock budget of {self.budget.max_wall_clock_s:g} s used up"
        return None

    def low(self, active_s: float) -> BudgetLow | None:
        """The first budget with less than ``low_fraction`` of it left, else ``None``."""
        steps, calls, tokens, seconds = self.calm
        if (
            self.steps <= steps
            and self.tool_calls <= calls
            and self.tokens <= tokens
            and active_s <= seconds
        ):
            return None
        budget = self.budget
        if budget.low_fraction <= 0:
            return None
        share = 1.0 - budget.low_fraction
        # Asked before every step: each limit is tested in turn, nothing built until one is low.
        resource: BudgetResource
        spent: float
        limit: float
        if budget.max_steps > 0 and self.steps > share * budget.max_steps:
            resource, spent, limit = "steps", self.steps, budget.max_steps
        elif budget.max_tool_calls > 0 and self.tool_calls > share * budget.max_tool_calls:
            resource, spent, limit = "tool_calls", self.tool_calls, budget.max_tool_calls
        elif budget.max_tokens > 0 and self.tokens > share * budget.max_tokens:
            resource, spent, limit = "tokens", self.tokens, budget.max_tokens
        elif budget.max_wall_clock_s > 0 and round(active_s, 3) > share * budget.max_wall_clock_s:
            resource, spent, limit = "wall_clock", round(active_s, 3), budget.max_wall_clock_s
        else:
            return None
        return BudgetLow(resource=resource, used=spent, limit=limit)


def handle_budget_low(signal: BudgetLow) -> BudgetLowOutcome:
    """The one handler of ``budget_low``: the cheaper path, the same for every resource.

    Optional steps (``on_failure: continue``) that have not started are not started: what
    is left goes to the steps the answer needs, so the run ends as a partial completion
    that says what was not done rather than running out mid-plan and going to a person.
    Running steps and required steps are never touched, and nothing is retried less: a
    cut to retries would turn a transient failure into a handoff.
    """
    del signal  # one outcome for every resource today; the signal says which ran low
    return "skip_optional"
