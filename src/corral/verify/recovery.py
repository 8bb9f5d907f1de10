"""The recovery ladder's decisions: what may follow a failure, decided by code.

After a step fails, in this order: retries (inside ``invoke_tool``, by the tool's policy);
then an equivalent tool, unless another call could do harm or cannot help; then, once the
plan has settled, a replan with the failure (model plans only, at most ``MAX_REPLANS``);
else a handoff (``runtime.conclusion``). A write whose outcome is unknown is settled by its
reconciler, never retried blindly. The scheduler carries each rung out; these functions
say whether it applies.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

from corral.contracts import Plan, StepStatus, ToolResult, ToolStatus
from corral.errors import ErrorCode

MAX_REPLANS = 2
"""Seed 000/001: replan with the failure at most twice, then hand off."""

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


def replan_failure(
    plan: Plan | None, steps: Iterable[SettledStep], *, has_model: bool, replans: int
) -> str | None:
    """The failure to replan with, or ``None`` when the ladder goes on to a handoff.

    Only a model plan is replanned, by a model, at most ``MAX_REPLANS`` times; never while
    a write's outcome is unknown (a new plan could run it again: a person settles it).
    """
    settled = list(steps)
    if any(s.status is StepStatus.UNKNOWN for s in settled):
        return None
    failed = [s for s in settled if s.status is StepStatus.FAILED]
    if plan is None or plan.source != "model" or not failed or not has_model:
        return None
    if replans >= MAX_REPLANS:
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
