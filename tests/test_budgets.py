"""The token and cost budgets, enforced on whole runs before each model call.

A run whose model use passes ``budget.max_tokens`` or ``budget.max_cost`` is handed off
with ``BUDGET_EXCEEDED``; the refused call is never made, and no tool runs after it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.models import ScriptedModel
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[str] = []


class Order(BaseModel):
    order_id: str
    city: str


@tool
def lookup(order_id: str) -> Order:
    """Find an order and the city it ships to."""
    CALLS.append(order_id)
    return Order(order_id=order_id, city="Shanghai")


# a plan the validator rejects (a cycle), so the planner is re-asked
CYCLIC = json.dumps(
    {
        "steps": [
            {"id": "s1", "tool": "lookup", "args": {"order_id": "A1"}, "depends_on": ["s2"]},
            {"id": "s2", "tool": "lookup", "args": {"order_id": "A1"}, "depends_on": ["s1"]},
        ]
    }
)
GOOD = json.dumps(
    {"steps": [{"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}}]}
)


def agent(model: ScriptedModel, budget: dict[str, Any], prices: dict[str, Any]) -> Agent:
    config = one_intent("weather", tools=["lookup"], budget=budget, model={"prices": prices})
    return Agent.build(parse_config(config), [lookup], model=model)


async def run(chosen: Agent) -> tuple[Any, list[Any]]:
    runtime = Runtime(chosen, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("weather for A1?")
    return summary, await runtime.events(summary.run_id)


PRICE = {"scripted": {"prompt": 1.0, "completion": 1.0}}


@pytest.mark.parametrize(
    ("budget", "prices", "reason"),
    [
        ({"max_tokens": 1}, {}, "token budget of 1 used up"),
        ({"max_cost": 0.001}, PRICE, "cost budget of 0.001 used up"),
    ],
    ids=["tokens", "cost"],
)
async def test_a_spent_budget_refuses_the_re_ask_and_hands_off(
    budget: dict[str, Any], prices: dict[str, Any], reason: str
) -> None:
    CALLS.clear()
    model = ScriptedModel([CYCLIC, GOOD])
    summary, events = await run(agent(model, budget, prices))
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.error_code == "BUDGET_EXCEEDED"
    assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"
    assert len(model.requests) == 1  # the re-ask that would pass the budget was not made
    assert CALLS == [] and summary.steps == []
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert len(calls) == 2 and calls[0]["accepted"] is False
    # The refused re-ask is an event too, marked as never sent.
    assert (calls[1]["refused"], calls[1]["error_code"]) == (True, "BUDGET_EXCEEDED")
    spent = [e.data["reason"] for e in events if e.type is EventType.BUDGET_EXCEEDED]
    assert spent == [reason]
    assert not any(e.type is EventType.PLAN_CREATED for e in events)


async def test_cost_is_priced_per_thousand_tokens() -> None:
    model = ScriptedModel([CYCLIC, GOOD])
    _, events = await run(agent(model, {}, {"scripted": {"prompt": 2.0, "completion": 4.0}}))
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert len(calls) == 2
    for call in calls:
        usage = call["usage"]
        expected = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 4.0) / 1000
        assert call["cost"] == pytest.approx(expected, abs=1e-6) and call["cost"] > 0


@pytest.mark.parametrize(
    ("budget", "prices"),
    [({"max_tokens": 0}, {}), ({"max_cost": 0}, PRICE)],
    ids=["tokens", "cost"],
)
async def test_a_zero_budget_never_asks_the_model(
    budget: dict[str, Any], prices: dict[str, Any]
) -> None:
    CALLS.clear()
    model = ScriptedModel([GOOD])
    summary, events = await run(agent(model, budget, prices))
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "BUDGET_EXCEEDED"
    assert model.requests == [] and CALLS == []
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert [(c["refused"], c["error_code"]) for c in calls] == [(True, "BUDGET_EXCEEDED")]


async def test_within_budget_the_same_run_finishes() -> None:
    CALLS.clear()
    model = ScriptedModel([CYCLIC, GOOD])
    summary, _ = await run(agent(model, {"max_tokens": 100_000, "max_cost": 100.0}, PRICE))
    assert summary.status is RunStatus.FINISHED and CALLS == ["A1"]
    model.assert_complete()
