"""Decision layer, task memory and the state machine."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from corral import RunStatus, ToolPolicy, tool
from corral.config import Budget
from corral.decision import BudgetTracker, ToolHealth, rank_tools
from corral.errors import IllegalTransitionError
from corral.memory import Fact, FactSource, TaskMemory
from corral.runtime.machine import TRANSITIONS, check_transition
from corral.tools.registry import ToolRegistry


class Flights(BaseModel):
    price: int


@tool(name="fast_flights", policy=ToolPolicy(equivalent_group="flights", latency_ms=200, cost=5))
def fast() -> Flights:
    return Flights(price=1)


@tool(name="cheap_flights", policy=ToolPolicy(equivalent_group="flights", latency_ms=3000, cost=1))
def cheap() -> Flights:
    return Flights(price=1)


REGISTRY = ToolRegistry([fast, cheap])


def test_equivalent_tools_are_ranked_by_declared_policy() -> None:
    health = ToolHealth()
    by_latency = [s.name for s in rank_tools(REGISTRY, "cheap_flights", health, "latency")]
    by_cost = [s.name for s in rank_tools(REGISTRY, "fast_flights", health, "cost")]
    assert by_latency == ["fast_flights", "cheap_flights"]
    assert by_cost == ["cheap_flights", "fast_flights"]


def test_a_tool_failing_twice_in_a_row_is_degraded() -> None:
    health = ToolHealth()
    health.record("fast_flights", ok=False)
    assert not health.degraded("fast_flights")
    health.record("fast_flights", ok=False)
    assert health.degraded("fast_flights")
    assert next(s.name for s in rank_tools(REGISTRY, "fast_flights", health)) == "cheap_flights"
    health.record("fast_flights", ok=True)
    assert not health.degraded("fast_flights")


def test_budget_names_the_first_limit_passed() -> None:
    tracker = BudgetTracker(Budget(max_steps=2, max_tool_calls=5, max_wall_clock_s=10))
    assert tracker.exceeded(1.0) is None
    tracker.steps = 2
    assert "step budget" in (tracker.exceeded(1.0) or "")
    tracker.steps = 0
    assert "wall-clock" in (tracker.exceeded(11.0) or "")


def test_fact_priority_user_over_tool_over_model() -> None:
    memory = TaskMemory().with_fact(Fact("order_id", "A1", FactSource.MODEL, "guess"))
    tool_fact = Fact("order_id", "A2", FactSource.TOOL, "s1")
    assert memory.accepts(tool_fact)
    memory = memory.with_fact(tool_fact)
    user_fact = Fact("order_id", "A3", FactSource.USER, "message")
    memory = memory.with_fact(user_fact)
    assert not memory.accepts(Fact("order_id", "A4", FactSource.TOOL, "s2"))
    assert not memory.accepts(Fact("order_id", "A5", FactSource.MODEL, "guess"))
    assert memory.values() == {"order_id": "A3"}


def test_memory_is_immutable() -> None:
    memory = TaskMemory()
    updated = memory.with_fact(Fact("x", 1, FactSource.TOOL, "s1"))
    assert memory.facts == {} and updated.facts["x"].value == 1
    with pytest.raises(TypeError):
        updated.facts["y"] = 2  # type: ignore[index]


def test_illegal_transitions_raise() -> None:
    check_transition(RunStatus.PARSING, RunStatus.PLANNING)
    with pytest.raises(IllegalTransitionError) as info:
        check_transition(RunStatus.FINISHED, RunStatus.EXECUTING)
    assert info.value.code.value == "ILLEGAL_TRANSITION"
    with pytest.raises(IllegalTransitionError):
        check_transition(RunStatus.PARSING, RunStatus.EXECUTING)


def test_terminal_states_have_no_way_out() -> None:
    for status in RunStatus:
        assert (TRANSITIONS[status] == frozenset()) == status.terminal


def test_equivalent_tools_must_be_interchangeable() -> None:
    from corral.errors import ConfigInvalidError
    from tests.helpers import build_agent

    @tool(name="other_flights", policy=ToolPolicy(equivalent_group="flights"))
    def other(city: str) -> Flights:
        return Flights(price=1)

    with pytest.raises(ConfigInvalidError, match="differ in parameters"):
        build_agent([fast, cheap, other], [{"id": "s1", "tool": "fast_flights"}])
    build_agent([fast, cheap], [{"id": "s1", "tool": "fast_flights"}])
