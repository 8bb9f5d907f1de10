"""The decision layer: equivalent tools, health, and the run's budget."""

from corral.decision.budget import BudgetTracker
from corral.decision.selector import ToolHealth, rank_tools

__all__ = ["BudgetTracker", "ToolHealth", "rank_tools"]
