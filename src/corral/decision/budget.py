"""The run's hard budget, checked by code before each step."""

from __future__ import annotations

from dataclasses import dataclass

from corral.config import Budget


@dataclass
class BudgetTracker:
    """Counts what a run has used; ``exceeded`` names the first limit passed, if any."""

    budget: Budget
    steps: int = 0
    tool_calls: int = 0

    def exceeded(self, active_s: float) -> str | None:
        """A reason when the run may not start another step, else ``None``.

        ``active_s``: the run's running time so far, across processes and without its
        pauses (a run waiting for a person spends none of its budget).
        """
        if self.steps >= self.budget.max_steps:
            return f"step budget of {self.budget.max_steps} used up"
        if self.tool_calls >= self.budget.max_tool_calls:
            return f"tool-call budget of {self.budget.max_tool_calls} used up"
        if active_s > self.budget.max_wall_clock_s:
            return f"wall-clock budget of {self.budget.max_wall_clock_s:g} s used up"
        return None
