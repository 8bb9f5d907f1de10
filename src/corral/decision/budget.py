"""The run's hard budget, checked by code before each step."""

from __future__ import annotations

from dataclasses import dataclass

from corral.config import Budget


@dataclass
class BudgetTracker:
    """Counts what a run has used; ``exceeded`` names the first limit passed, if any."""

    budget: Budget
    started_at: float
    steps: int = 0
    tool_calls: int = 0

    def exceeded(self, now: float) -> str | None:
        """A reason when the run may not start another step, else ``None``."""
        if self.steps >= self.budget.max_steps:
            return f"step budget of {self.budget.max_steps} used up"
        if self.tool_calls >= self.budget.max_tool_calls:
            return f"tool-call budget of {self.budget.max_tool_calls} used up"
        if now - self.started_at > self.budget.max_wall_clock_s:
            return f"wall-clock budget of {self.budget.max_wall_clock_s:g} s used up"
        return None
