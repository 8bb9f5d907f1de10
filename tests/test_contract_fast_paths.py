"""``Contract.whole`` and ``Contract.replaced``: what the checked paths give, made cheaper."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, MemoryStore, Runtime, parse_config, tool
from corral.contracts import IntentResult, Plan, RouteAction, RouteDecision, Step
from corral.events import IntentClassified, Routed
from tests.one_intent import one_intent

INTENT = {
    "label": "refund",
    "confidence": 0.9,
    "entities": {"order_id": "HD1"},
    "source": "rule",
    "need_clarification": False,
    "evidence": "keyword 退款",
}
ROUTE = {
    "action": RouteAction.PLAN,
    "intent": "refund",
    "template": "refund",
    "reason": "run plan",
    "missing_entities": [],
    "allowed_tools": ["find_order", "refund"],
}


def _same(fast: BaseModel, checked: BaseModel) -> None:
    assert fast == checked
    assert repr(fast) == repr(checked)
    assert fast.model_dump() == checked.model_dump()
    assert fast.model_dump_json() == checked.model_dump_json()
    assert fast.model_dump(exclude_unset=True) == checked.model_dump(exclude_unset=True)
    assert fast.model_fields_set == checked.model_fields_set
    assert pickle.loads(pickle.dumps(fast)) == checked


@pytest.mark.parametrize(("cls", "values"), [(IntentResult, INTENT), (RouteDecision, ROUTE)])
def test_a_whole_contract_is_the_constructed_one(cls: Any, values: dict[str, Any]) -> None:
    fast = cls.whole(**dict(reversed(values.items())))  # any order of the keywords
    _same(fast, cls(**values))
    assert list(fast.__dict__) == list(cls.model_fields)  # shown in the declared order
    assert fast.model_fields_set is cls.whole(**values).model_fields_set  # one set, shared
    with pytest.raises(ValueError, match="frozen"):
        fast.label = "other"
    with pytest.raises(TypeError, match="read-only"):  # it would change every instance's
        fast.model_fields_set.discard("intent")


def test_whole_takes_every_field_and_no_other() -> None:
    missing = {k: v for k, v in ROUTE.items() if k != "reason"}
    with pytest.raises(TypeError, match="every field"):
        RouteDecision.whole(**missing)
    with pytest.raises(TypeError, match="every field"):
        RouteDecision.whole(**{**missing, "reasons": "typo"})


def _plan(**extra: Any) -> Plan:
    return Plan(
        plan_id="plan_1",
        intent="refund",
        steps=[Step(id="s1", tool="find_order", args={"order_id": "HD1"})],
        **extra,
    )


@pytest.mark.parametrize("extra", [{"template": "refund"}, {}])
def test_replaced_is_model_copy(extra: dict[str, Any]) -> None:
    plan = _plan(**extra)
    for changes in ({"plan_id": "plan_2"}, {"template": "other"}, {"intent": None}):
        _same(plan.replaced(**changes), plan.model_copy(update=changes))
    shared = plan.replaced(plan_id="plan_2")
    assert shared.model_fields_set is plan.model_fields_set  # nothing to add: one set
    with pytest.raises(TypeError, match="read-only"):  # shared from now on
        shared.model_fields_set.add("source")
    assert plan.model_dump(exclude_unset=True) == _plan(**extra).model_dump(exclude_unset=True)
    added = plan.replaced(template="other")
    if "template" not in extra:  # a field not set before: the copy's set is its own
        assert added.model_fields_set is not plan.model_fields_set
        assert "template" not in plan.model_fields_set


class Found(BaseModel):
    order_id: str


@tool
async def find_order(order_id: str) -> Found:
    """Finds an order."""
    return Found(order_id=order_id)


async def test_a_rule_run_logs_the_intent_and_route_the_constructors_would_make() -> None:
    steps = [{"id": "s1", "tool": "find_order", "args": {"order_id": "A1"}}]
    agent = Agent.build(parse_config(one_intent("find", steps=steps)), [find_order])
    runtime = Runtime(agent, MemoryStore())
    summary = await runtime.start("find order A1")
    assert summary.status.value == "finished"
    events = runtime.store.load_events(summary.run_id)
    understood = next(e.payload for e in events if isinstance(e.payload, IntentClassified))
    routed = next(e.payload for e in events if isinstance(e.payload, Routed))
    _same(understood.result, IntentResult(**understood.result.model_dump()))
    _same(routed.decision, RouteDecision(**routed.decision.model_dump()))
    assert understood.result.source == "rule"
    assert routed.decision.action is RouteAction.PLAN
