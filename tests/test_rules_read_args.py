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
    def refund(amount: float, fee: float = 2.5) -> Paid:
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


async def test_a_rule_reads_an_optional_argument_the_plan_left_out_at_its_default() -> None:
    """The plan binds ``amount`` only: ``args.fee`` is the tool's default, 2.5 (review)."""
    outcomes = []
    for require in ("args.fee <= 5", "args.fee > 5"):
        calls: list[str] = []
        runtime = Runtime(_refund_agent(calls, require), MemoryStore(), effects=FixedEffects())
        summary = await runtime.run_plan("p", entities={"amount": 10})
        verdict = events_of(runtime, summary.run_id, EventType.VERIFIED)[0]["verdict"]
        outcomes.append((calls, verdict["reason"]))
    assert outcomes == [
        (["refund 10"], "limit: args.fee <= 5 is true"),
        ([], "limit: args.fee > 5 is false"),
    ]


def test_a_rule_that_reads_an_argument_by_its_alias_is_told_the_parameter_name() -> None:
    """A JSON field ``max-amount`` is the parameter ``max_amount``: arguments are keyed by
    parameter, so ``args["max-amount"]`` could never be judged (review)."""
    from corral import Agent, parse_config
    from tests.one_intent import one_intent

    http_tool = {
        "name": "refund_api",
        "method": "POST",
        "url": "http://127.0.0.1:9/refunds",
        "input": {
            "type": "object",
            "properties": {"max-amount": {"type": "number"}},
            "required": ["max-amount"],
        },
        "policy": {"kind": "write", "idempotent": True},
    }
    rule = {
        "name": "cap",
        "before_tool": "refund_api",
        "require": 'args["max-amount"] <= 100',
        "refusal": "done",
    }
    steps = [{"id": "s1", "tool": "refund_api", "args": {"max_amount": 5}}]
    config = parse_config(
        one_intent("go", steps=steps, http_tools=[http_tool], business_rules=[rule])
    )
    problem = (
        r"reads args\.max-amount, which refund_api does not take \(its parameter is max_amount"
    )
    with pytest.raises(ConfigInvalidError, match=problem):
        Agent.build(config, [])
    fixed = {**rule, "require": "args.max_amount <= 100"}
    Agent.build(
        parse_config(one_intent("go", steps=steps, http_tools=[http_tool], business_rules=[fixed])),
        [],
    )
