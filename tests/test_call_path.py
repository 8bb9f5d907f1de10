"""The call path's short cuts give what the general machinery gave.

A step whose tool has no equivalent, no constraint and no capability match takes its one
candidate without ranking; concurrent steps wake the dispatch loop by a callback each
instead of ``asyncio.wait``. The answers, and the order of the log, are the same.
"""

from __future__ import annotations

import asyncio
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, RunStatus, Runtime, ToolContext, tool
from corral.decision.candidates import NOT_ALLOWED, eligible_tools, simple, sole_candidate
from corral.decision.selector import ToolHealth
from corral.testing import FixedEffects
from corral.verify.expressions import compile_expression
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


@tool
async def lookup(n: int) -> Value:
    """Looks a number up."""
    return Value(value=n)


def test_a_step_with_one_possible_tool_gets_it_only_when_the_intent_allows_it() -> None:
    agent = build_agent([lookup], [{"id": "s", "tool": "lookup", "args": {"n": 1}}])
    assert simple(lookup, agent.policy, agent.capabilities)
    assert sole_candidate(lookup, agent.tools, ["lookup"]) == ([lookup], {})
    assert sole_candidate(lookup, agent.tools, ["other"]) == ([], {"lookup": NOT_ALLOWED})
    assert NOT_ALLOWED == "not allowed for this intent"
    for allowed in (["lookup"], ["other"], []):
        assert eligible_tools(
            lookup,
            agent.tools,
            ToolHealth(),
            "latency",
            allowed=allowed,
            policy=agent.policy,
            names={},
        ) == sole_candidate(lookup, agent.tools, allowed)


def test_a_declared_constraint_takes_the_general_path() -> None:
    agent = build_agent([lookup], [{"id": "s", "tool": "lookup", "args": {"n": 1}}])
    constrained = replace(agent.policy, constraints={"lookup": compile_expression("args.n > 0")})
    assert not simple(lookup, constrained, agent.capabilities)


async def _finished_order(release_first: str) -> list[tuple[str, str]]:
    """Run s1 -> (s2 || s3) -> s4 where the waiting tools end in the order asked for."""
    gates = {"s2": asyncio.Event(), "s3": asyncio.Event()}
    entered: list[str] = []

    @tool
    async def wait(step: str) -> Value:
        """Waits until the test lets this step go."""
        entered.append(step)
        await gates[step].wait()
        return Value(value=len(entered))

    steps = [
        {"id": "s1", "tool": "lookup", "args": {"n": 1}},
        {"id": "s2", "tool": "wait", "args": {"step": "s2"}, "depends_on": ["s1"]},
        {"id": "s3", "tool": "wait", "args": {"step": "s3"}, "depends_on": ["s1"]},
        {"id": "s4", "tool": "lookup", "args": {"n": 4}, "depends_on": ["s2", "s3"]},
    ]
    runtime = Runtime(build_agent([lookup, wait], steps), MemoryStore(), effects=FixedEffects())
    run = asyncio.ensure_future(runtime.start("go"))
    while len(entered) < 2:
        await asyncio.sleep(0)
    assert entered == ["s2", "s3"]  # started in dispatch order
    gates[release_first].set()
    for _ in range(5):
        await asyncio.sleep(0)
    gates["s3" if release_first == "s2" else "s2"].set()
    summary = await run
    assert summary.status is RunStatus.FINISHED
    return [
        (e.type, e.as_json()["data"]["step_id"])
        for e in runtime.store.load_events(summary.run_id)
        if e.type in ("step_started", "step_finished")
    ]


async def test_concurrent_steps_are_finished_in_the_order_they_end() -> None:
    assert await _finished_order("s3") == [
        ("step_started", "s1"),
        ("step_finished", "s1"),
        ("step_started", "s2"),
        ("step_started", "s3"),
        ("step_finished", "s3"),
        ("step_finished", "s2"),
        ("step_started", "s4"),
        ("step_finished", "s4"),
    ]
    assert (await _finished_order("s2"))[4:6] == [
        ("step_finished", "s2"),
        ("step_finished", "s3"),
    ]


async def test_concurrent_steps_that_end_together_are_finished_in_dispatch_order() -> None:
    steps = [
        {"id": "s1", "tool": "lookup", "args": {"n": 1}},
        {"id": "s2", "tool": "lookup", "args": {"n": 2}, "depends_on": ["s1"]},
        {"id": "s3", "tool": "lookup", "args": {"n": 3}, "depends_on": ["s1"]},
    ]
    runtime = Runtime(build_agent([lookup], steps), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    finished = [
        e.as_json()["data"]["step_id"]
        for e in runtime.store.load_events(summary.run_id)
        if e.type == "step_finished"
    ]
    assert finished == ["s1", "s2", "s3"]


def test_a_call_context_is_the_one_the_constructor_makes() -> None:
    when = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    values: dict[str, Any] = {
        "run_id": "run_1",
        "step_id": "s1",
        "idempotency_key": "k",
        "deps": {"db": "x"},
        "facts": {"a": 1},
        "language": "en",
        "received_at": when,
        "render": None,
        "timezone": "Asia/Shanghai",
    }
    made = ToolContext.of_call(*values.values())
    built = ToolContext(**values)
    assert made == built
    assert repr(made) == repr(built)
    assert made.today() == built.today()
    assert replace(made, step_id="s2") == replace(built, step_id="s2")
    with pytest.raises(FrozenInstanceError):
        made.step_id = "s2"  # type: ignore[misc]
