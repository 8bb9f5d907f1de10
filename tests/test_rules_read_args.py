"""A business rule reads the arguments its tool is about to be called with.

``args`` was an allowed name in a rule's expression but was never given to it, so a rule
such as ``args.amount <= 100`` could never be judged and refused every call. A rule that
reads an argument its tool does not take, or a ``result`` (there is none yet), is refused
when the agent is built.
"""

from __future__ import annotations

from typing import Any

import pytest

from corral import EventType, MemoryStore, Runtime, StepStatus, tool
from corral.errors import ConfigInvalidError
from corral.testing import FixedEffects
from corral.tools.policy import ToolPolicy
from tests.helpers import build_agent
from tests.test_stand_in_tools import Paid, events_of


def _refund_agent(calls: list[str], require: str) -> Any:
    @tool(name="refund", policy=ToolPolicy(kind="write", idempotent=True))
    def refund(amount: float) -> Paid:
        calls.append(f"refund {amount:g}")
        return Paid(amount=amount)

    rule = {"name": "limit", "before_tool": "refund", "require": require, "refusal": "no"}
    return build_agent(
        [refund],
        [{"id": "s1", "tool": "refund", "args": {"amount": "$entities.amount"}}],
        entities={"amount": {"kind": "amount"}},
        business_rules=[rule],
        templates={"no": {"zh": "超出限额", "en": "over the limit"}},
    )


async def test_a_business_rule_reads_the_arguments_the_tool_is_about_to_get() -> None:
    """``args.amount`` compiled but was never given: every call was refused as unjudgeable."""
    calls: list[str] = []
    agent = _refund_agent(calls, "args.amount <= 100")
    outcomes = []
    for amount in (50, 500):
        runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
        summary = await runtime.run_plan("p", entities={"amount": amount})
        verdict = events_of(runtime, summary.run_id, EventType.VERIFIED)[0]["verdict"]
        outcomes.append((summary.steps[0].status, verdict["reason"]))
    assert calls == ["refund 50"]
    assert outcomes == [
        (StepStatus.SUCCEEDED, "limit: args.amount <= 100 is true"),
        (StepStatus.SKIPPED, "limit: args.amount <= 100 is false"),
    ]


def test_a_rule_that_reads_an_argument_its_tool_does_not_take_is_refused_at_load() -> None:
    problem = r"reads args\.amout, which refund does not take"
    with pytest.raises(ConfigInvalidError, match=problem):
        _refund_agent([], "args.amout <= 100")
    with pytest.raises(ConfigInvalidError, match="reads result, but runs before the tool"):
        _refund_agent([], "result.amount <= 100")
