"""Decision policies from config: constraints, rewrites, capability matching, plan rules."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, ToolPolicy, tool
from corral.decision.capabilities import CapabilityIndex
from corral.errors import ConfigInvalidError
from corral.testing import FixedEffects
from corral.tools.registry import ToolRegistry
from tests.helpers import build_agent


class Found(BaseModel):
    where: str


class Age(BaseModel):
    age_days: int


@tool
def how_old(days: str) -> Age:
    """Compute how far back the query reaches."""
    return Age(age_days=int(days))


@tool(name="search_recent", policy=ToolPolicy(equivalent_group="search", latency_ms=10))
def search_recent(q: str) -> Found:
    """Search recent orders by keyword."""
    return Found(where="recent")


@tool(name="search_archive", policy=ToolPolicy(equivalent_group="search", latency_ms=900))
def search_archive(q: str) -> Found:
    """Search the order archive by keyword."""
    return Found(where="archive")


class Done(BaseModel):
    done: bool


@tool(policy=ToolPolicy(kind="write"))
def cancel(q: str) -> Done:
    """Cancel something."""
    return Done(done=True)


STEPS = [
    {
        "id": "s1",
        "tool": "how_old",
        "args": {"days": "$entities.days"},
        "facts": {"age_days": "result.age_days"},
    },
    {
        "id": "s2",
        "tool": "search_recent",
        "args": {"q": "x"},
        "depends_on": ["s1"],
        "facts": {"where": "result.where"},
    },
]
CONSTRAINTS = {"search_recent": "facts.age_days <= 90", "search_archive": "facts.age_days > 90"}
DAYS = {"days": {"kind": "pattern", "patterns": [r"(\d+) days"]}}


async def run(agent: Agent, message: str) -> tuple[Runtime, str]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start(message)
    state = await runtime.load_state(summary.run_id)
    return runtime, state.memory.values().get("where", summary.status.value)


def agent_with(**extra: object) -> Agent:
    agent = build_agent(
        [how_old, search_recent, search_archive, cancel], STEPS, entities=DAYS, **extra
    )  # type: ignore[arg-type]
    return agent


@pytest.mark.parametrize(("days", "where"), [(10, "recent"), (90, "recent"), (120, "archive")])
async def test_hard_constraint_picks_the_tool(days: int, where: str) -> None:
    from corral import parse_config

    agent = agent_with()
    config = parse_config({**agent.config.model_dump(), "tool_constraints": CONSTRAINTS})
    constrained = Agent.build(config, [how_old, search_recent, search_archive, cancel])
    runtime, found = await run(constrained, f"go {days} days")
    assert found == where
    events = [
        e
        for e in await runtime.events(runtime.store.list_runs()[0].run_id)
        if e.type is EventType.TOOL_SELECTED and e.data["step_id"] == "s2"
    ]
    assert events[0].data["excluded"]  # the other one is recorded with its reason


async def test_no_eligible_tool_is_a_clear_failure() -> None:
    from corral import parse_config

    agent = agent_with()
    config = parse_config(
        {
            **agent.config.model_dump(),
            "tool_constraints": {
                "search_recent": "facts.age_days < 0",
                "search_archive": "facts.age_days < 0",
            },
        }
    )
    constrained = Agent.build(config, [how_old, search_recent, search_archive, cancel])
    runtime = Runtime(constrained, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 5 days")
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.steps[1].error_code == "NO_ELIGIBLE_TOOL"


async def test_argument_rewrite_turns_a_filter_into_an_action() -> None:
    from corral import parse_config

    steps = [{"id": "s1", "tool": "search_recent", "args": {"q": "$entities.q"}}]
    agent = build_agent(
        [search_recent, search_archive, cancel],
        steps,
        entities={"q": {"kind": "pattern", "patterns": [r"q=(\w+)"]}},
        intent_tools=["search_recent", "cancel"],
    )
    config = parse_config(
        {
            **agent.config.model_dump(),
            "argument_rewrites": [
                {
                    "name": "canceled_means_cancel",
                    "tool": "search_recent",
                    "when": 'args.q == "canceled"',
                    "use_tool": "cancel",
                }
            ],
        }
    )
    rewriting = Agent.build(config, [search_recent, search_archive, cancel])
    runtime = Runtime(rewriting, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go q=canceled")
    assert summary.steps[0].tool == "cancel"
    events = await runtime.events(summary.run_id)
    assert [e.data["to"] for e in events if e.type is EventType.TOOL_REWRITTEN] == ["cancel"]
    plain = await runtime.start("go q=shipped")
    assert plain.steps[0].tool == "search_recent"


def test_bad_policies_fail_at_load() -> None:
    from corral import parse_config

    agent = agent_with()
    config = parse_config(
        {
            **agent.config.model_dump(),
            "tool_constraints": {"nope": "facts.x > 1"},
            "argument_rewrites": [
                {
                    "name": "r",
                    "tool": "search_recent",
                    "when": "__import__('os')",
                    "use_tool": "missing",
                    "args": {"q": "$s1.result.x"},
                }
            ],
        }
    )
    with pytest.raises(ConfigInvalidError) as info:
        Agent.build(config, [how_old, search_recent, search_archive, cancel])
    text = str(info.value)
    assert "unknown tool 'nope'" in text and "unknown tool 'missing'" in text
    assert "only $entities and $facts" in text


def test_capability_index_finds_tools_by_description() -> None:
    index = CapabilityIndex.build(ToolRegistry([how_old, search_recent, search_archive, cancel]))
    assert index is not None
    best = index.search("search the archive of old orders", limit=2)
    assert best[0][0] == "search_archive"
    assert {name for name, _ in best} == {"search_archive", "search_recent"}


def test_capability_matching_on_the_orders_example(orders: Agent) -> None:
    assert orders.capabilities is not None
    names = [name for name, _ in orders.capabilities.search("查询历史订单 search orders", 3)]
    assert {"search_orders", "search_historical_orders"} <= set(names)


async def test_plan_rules_choose_the_template(orders: Agent) -> None:
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    detail = await runtime.start("查订单 OD2611200002")
    assert [s.tool for s in detail.steps][:2] == ["get_order", "get_logistics"]
    search = await runtime.start("查一下上个月的订单")
    assert [s.tool for s in search.steps][:2] == ["resolve_order_params", "search_orders"]
    cancel_plan = await runtime.start("查一下 OD2611250001 这单，状态改成已取消")
    assert cancel_plan.status is RunStatus.AWAITING_CONFIRM
    assert [s.tool for s in cancel_plan.steps][1] == "cancel_order"


def test_optional_reference_only_for_parameters_that_accept_none() -> None:
    with pytest.raises(ConfigInvalidError, match="does not accept None"):
        build_agent(
            [search_recent],
            [{"id": "s1", "tool": "search_recent", "args": {"q": "$entities.order_id?"}}],
        )


def test_a_bad_plan_rule_fails_at_load() -> None:
    from corral import parse_config

    agent = agent_with()
    data = agent.config.model_dump()
    data["intents"][0]["plan_rules"] = [{"when": "__import__('os')", "plan": "p"}]
    with pytest.raises(ConfigInvalidError, match="plan rule"):
        Agent.build(parse_config(data), [how_old, search_recent, search_archive, cancel])
