"""The decision layer, task memory and binding, pinned at their boundaries.

Whole runs in ``test_decision_policy.py`` show that a constraint picks a tool and a rewrite
turns a filter into an action; these tests pin the edges a silent bug would move: the exact
budget limits, when a tool counts as degraded, each tie-break of the ranking, when a rewrite
applies and what it passes on, the reason a constraint gives, and which fact may replace
which (mutation testing, docs/testing.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from corral import Plan, Step, ToolPolicy, tool
from corral.config import ArgumentRewrite, Budget
from corral.decision import BudgetTracker, ToolHealth, rank_tools
from corral.decision.capabilities import CapabilityIndex, interchangeable
from corral.decision.policy import DecisionPolicy, Rewrite
from corral.errors import MissingArgumentError
from corral.memory import Fact, FactSource, TaskMemory
from corral.planning import PlanContext, bind_arguments, validate_plan
from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec
from corral.verify import compile_expression

# ------------------------------------------------------------------ budget


def tracker(steps: int = 0, tool_calls: int = 0) -> BudgetTracker:
    budget = Budget(max_steps=3, max_tool_calls=5, max_wall_clock_s=10.0)
    return BudgetTracker(budget, steps=steps, tool_calls=tool_calls)


def test_step_budget_is_used_up_at_exactly_max_steps() -> None:
    assert tracker(steps=2).exceeded(0.0) is None
    assert tracker(steps=3).exceeded(0.0) == "step budget of 3 used up"


def test_tool_call_budget_is_used_up_at_exactly_max_tool_calls() -> None:
    assert tracker(tool_calls=4).exceeded(0.0) is None
    assert tracker(tool_calls=5).exceeded(0.0) == "tool-call budget of 5 used up"


def test_wall_clock_budget_counts_active_seconds_and_allows_the_last_instant() -> None:
    assert tracker().exceeded(10.0) is None  # exactly 10 s in: not yet passed
    assert tracker().exceeded(10.5) == "wall-clock budget of 10 s used up"


def test_the_first_limit_passed_is_named() -> None:
    assert tracker(steps=3, tool_calls=5).exceeded(1000.0) == "step budget of 3 used up"
    assert tracker(tool_calls=5).exceeded(1000.0) == "tool-call budget of 5 used up"


# ------------------------------------------------------------------ health and ranking


def test_a_tool_is_degraded_after_consecutive_failures_only() -> None:
    health = ToolHealth()
    assert health.degraded("never_called") is False
    health.record("t", ok=False)
    assert health.degraded("t") is False
    health.record("t", ok=True)  # a success resets the count
    health.record("t", ok=False)
    assert health.degraded("t") is False
    health.record("t", ok=False)
    assert health.degraded("t") is True
    strict = ToolHealth(degrade_after=1)
    assert strict.degraded("never_called") is False
    strict.record("t", ok=False)
    assert strict.degraded("t") is True


def test_the_degraded_tools_are_listed_in_the_order_asked() -> None:
    health = ToolHealth()
    assert health.degraded_among(["a", "b"]) == []
    for name in ("b", "b", "a", "a", "c", "d", "d"):
        health.record(name, ok=False)
    health.record("d", ok=True)
    assert health.degraded_among(["a", "b", "c", "d", "e"]) == ["a", "b"]
    assert health.degraded_among(["b", "a"]) == ["b", "a"]


class Hit(BaseModel):
    hit: str


def searcher(name: str, latency_ms: float, cost: float) -> ToolSpec:
    def search(q: str) -> Hit:
        return Hit(hit=name)

    search.__doc__ = f"Search by keyword ({name})."
    policy = ToolPolicy(equivalent_group="search", latency_ms=latency_ms, cost=cost)
    return tool(name=name, policy=policy)(search)


def ranked(registry: ToolRegistry, requested: str, health: ToolHealth, **kw: Any) -> list[str]:
    return [spec.name for spec in rank_tools(registry, requested, health, **kw)]


def test_ranking_prefers_latency_by_default_and_cost_when_asked() -> None:
    registry = ToolRegistry([searcher("fast", 10, 5.0), searcher("cheap", 500, 0.1)])
    assert ranked(registry, "cheap", ToolHealth()) == ["fast", "cheap"]
    assert ranked(registry, "cheap", ToolHealth(), prefer="latency") == ["fast", "cheap"]
    assert ranked(registry, "fast", ToolHealth(), prefer="cost") == ["cheap", "fast"]


def test_ties_fall_to_the_other_measure_then_the_planned_tool_then_the_name() -> None:
    registry = ToolRegistry(
        [searcher("c", 10, 2.0), searcher("b", 10, 1.0), searcher("a", 99, 1.0)]
    )
    assert ranked(registry, "c", ToolHealth()) == ["b", "c", "a"]  # same latency: cost
    assert ranked(registry, "c", ToolHealth(), prefer="cost") == ["b", "a", "c"]  # latency
    twins = ToolRegistry([searcher("x", 10, 1.0), searcher("y", 10, 1.0), searcher("z", 10, 1)])
    assert ranked(twins, "y", ToolHealth()) == ["y", "x", "z"]
    assert ranked(twins, "z", ToolHealth(), exclude=["y"]) == ["z", "x"]


def test_a_degraded_tool_goes_last_whatever_its_speed() -> None:
    registry = ToolRegistry([searcher("fast", 10, 0.0), searcher("slow", 900, 0.0)])
    health = ToolHealth()
    health.record("fast", ok=False)
    health.record("fast", ok=False)
    assert ranked(registry, "fast", health) == ["slow", "fast"]


# ------------------------------------------------------------------ rewrites and constraints


def rewrite(when: str, args: dict[str, Any]) -> Rewrite:
    rule = ArgumentRewrite(
        name="canceled_means_cancel", tool="search", when=when, use_tool="cancel", args=args
    )
    return Rewrite(rule, compile_expression(when))


def test_a_rewrite_applies_only_to_its_tool_and_only_when_its_condition_is_known_true() -> None:
    canceled = rewrite('args.q == "canceled"', {})
    assert canceled.applies("search", {"args": {"q": "canceled"}}) is True
    assert canceled.applies("search", {"args": {"q": "shipped"}}) is False
    assert canceled.applies("get_order", {"args": {"q": "canceled"}}) is False
    assert canceled.applies("search", {"args": {}}) is False  # unknown is not true


def test_rewritten_arguments_carry_over_then_take_literals_and_references() -> None:
    changed = rewrite(
        "true",
        {"reason": "$entities.reason", "by": "$facts.user", "note": "$$5 fee", "count": 2},
    )
    args = changed.arguments(
        {"q": "canceled", "note": "old"}, {"reason": "late"}, {"user": "ann", "reason": "no"}
    )
    assert args == {"q": "canceled", "note": "$5 fee", "reason": "late", "by": "ann", "count": 2}
    with pytest.raises(MissingArgumentError, match=r"\$entities.reason has no value"):
        changed.arguments({}, {}, {"user": "ann"})


def policy_with(constraints: dict[str, str]) -> DecisionPolicy:
    return DecisionPolicy(
        (), {name: compile_expression(text) for name, text in constraints.items()}
    )


def test_a_constraint_gives_the_reason_recorded_for_an_excluded_tool() -> None:
    policy = policy_with({"search_recent": "facts.age_days <= 90"})
    assert policy.allows("search_recent", {"facts": {"age_days": 90}})[0] is True
    assert policy.allows("search_recent", {"facts": {"age_days": 91}}) == (
        False,
        "facts.age_days <= 90 is false",
    )
    held, reason = policy.allows("search_recent", {"facts": {}})
    assert held is False
    assert reason.startswith("cannot be judged: 'facts.age_days <= 90': ")
    assert policy.allows("unconstrained", {"facts": {}})[0] is True


def test_the_first_applicable_rewrite_wins() -> None:
    first, second = rewrite("args.n > 1", {"which": "first"}), rewrite("true", {})
    policy = DecisionPolicy((first, second), {})
    assert policy.rewrite("search", {"args": {"n": 2}}) is first
    assert policy.rewrite("search", {"args": {"n": 0}}) is second
    assert policy.rewrite("other", {"args": {"n": 2}}) is None


# ------------------------------------------------------------------ capabilities


class Other(BaseModel):
    other: str


def test_interchangeable_needs_both_the_same_parameters_and_the_same_output() -> None:
    def other(q: str) -> Other:
        """Search elsewhere."""
        return Other(other=q)

    def by_id(order_id: str) -> Hit:
        """Look one up."""
        return Hit(hit=order_id)

    a, b = searcher("a", 1, 0), searcher("b", 1, 0)
    assert interchangeable(a, b) is True
    assert interchangeable(a, tool(other)) is False  # same parameters, other output
    assert interchangeable(a, tool(by_id)) is False  # same output, other parameters


def test_capability_search_returns_five_rounded_scores_best_first() -> None:
    pytest.importorskip("sklearn")
    names = ["refund", "cancel", "track", "invoice", "address", "rating"]
    index = CapabilityIndex.build(ToolRegistry([searcher(n, 1, 0) for n in names]))
    assert index is not None
    found = index.search("track the parcel")
    assert len(found) == 5 and found[0][0] == "track"
    scores = [score for _, score in found]
    assert scores == sorted(scores, reverse=True)
    assert 0 < scores[0] < 1 and all(round(s, 4) == s for s in scores)
    assert set(index.similarity("track the parcel")) == set(names)
    assert index.search("track the parcel", limit=2) == found[:2]


# ------------------------------------------------------------------ task memory


def fact(source: FactSource, value: Any = 1) -> Fact:
    return Fact("amount", value, source, "s1")


def test_a_fact_is_replaced_by_the_same_or_a_higher_priority_only() -> None:
    memory = TaskMemory().with_fact(fact(FactSource.TOOL))
    assert memory.accepts(fact(FactSource.TOOL, 2)) is True  # a newer tool result
    assert memory.accepts(fact(FactSource.USER)) is True
    assert memory.accepts(fact(FactSource.MODEL)) is False
    corrected = memory.with_fact(fact(FactSource.USER, 3))
    assert corrected.accepts(fact(FactSource.TOOL, 4)) is False
    assert corrected.values() == {"amount": 3}


def test_completing_a_step_appends_its_summary() -> None:
    memory = TaskMemory(goal="g", completed_steps=("s1 ok",))
    done = memory.with_completed("s2 ok")
    assert (done.completed_steps, done.goal) == (("s1 ok", "s2 ok"), "g")
    assert memory.completed_steps == ("s1 ok",)  # the old value is unchanged


# ------------------------------------------------------------------ binding


@tool
def tag(labels: list[str], meta: dict[str, str]) -> Hit:
    """Tag an order."""
    return Hit(hit=",".join(labels))


def test_references_inside_lists_and_dicts_are_bound_and_escapes_undone() -> None:
    step = {
        "id": "s1",
        "tool": "tag",
        "args": {
            "labels": ["$entities.order_id", "$$vip", "plain"],
            "meta": {"by": "$entities.user", "price": "$$5"},
        },
    }
    graph = validate_plan(
        Plan(plan_id="p", steps=[Step.model_validate(step)]),
        PlanContext(ToolRegistry([tag]), {"order_id": str, "user": str}),
    )
    bound = bind_arguments(graph.steps["s1"], {"order_id": "A1", "user": "ann"}, {}, {})
    assert bound == {"labels": ["A1", "$vip", "plain"], "meta": {"by": "ann", "price": "$5"}}
    with pytest.raises(MissingArgumentError):
        bind_arguments(graph.steps["s1"], {"order_id": "A1"}, {}, {})


@pytest.mark.parametrize("low_fraction", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("max_tokens", [0, 6000])
def test_the_calm_thresholds_are_each_limit_less_its_low_share(
    low_fraction: float, max_tokens: int
) -> None:
    """Steps, calls, tokens and seconds at or under which no budget is low; none if off."""
    budget = Budget(
        max_steps=10,
        max_tool_calls=16,
        max_tokens=max_tokens,
        max_wall_clock_s=60,
        low_fraction=low_fraction,
    )
    never, share = float("inf"), 1.0 - low_fraction
    on = low_fraction > 0
    expected = (
        share * 10 if on else never,
        share * 16 if on else never,
        share * max_tokens if on and max_tokens > 0 else never,
        share * 60 - 0.001 if on else never,
    )
    assert BudgetTracker(budget).calm == expected
