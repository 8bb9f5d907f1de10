"""The decision layer: the gates before a step, equivalent tools, health, the run's budget."""

from corral.decision.budget import BudgetTracker
from corral.decision.builtin_gates import DEFAULT_GATES
from corral.decision.gates import Answer, Gate, GateRun, Hold, Proposal, Refuse, Skip, Stop
from corral.decision.selector import ToolHealth, rank_tools

__all__ = [
    "DEFAULT_GATES",
    "Answer",
    "BudgetTracker",
    "Gate",
    "GateRun",
    "Hold",
    "Proposal",
    "Refuse",
    "Skip",
    "Stop",
    "ToolHealth",
    "rank_tools",
]
