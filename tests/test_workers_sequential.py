"""``Runtime(concurrent_steps=False)``: a round's independent steps run one after another,
in dispatch order, so a run's effects come in one order whatever their timing (what a
durable engine that matches recorded steps by position, DBOS, needs)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from corral import RunStatus, Runtime, tool
from corral.store.memory import MemoryStore
from corral.testing import FixedEffects
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


async def run_three(concurrent_steps: bool) -> list[str]:
    """Three independent steps that each yield to the loop between entering and leaving."""
    trace: list[str] = []

    @tool
    async def work(n: int) -> Value:
        trace.append(f"enter {n}")
        await asyncio.sleep(0)  # lets any other step in flight run; orders nothing by time
        trace.append(f"leave {n}")
        return Value(value=n)

    steps = [{"id": f"s{i}", "tool": "work", "args": {"n": i}} for i in (2, 0, 1)]
    agent = build_agent([work], steps)
    runtime = Runtime(
        agent, MemoryStore(), effects=FixedEffects(), concurrent_steps=concurrent_steps
    )
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED
    return trace


async def test_without_concurrent_steps_each_step_ends_before_the_next_begins() -> None:
    assert await run_three(concurrent_steps=False) == [
        "enter 2",
        "leave 2",
        "enter 0",
        "leave 0",
        "enter 1",
        "leave 1",
    ]


async def test_by_default_independent_steps_are_in_flight_together() -> None:
    trace = await run_three(concurrent_steps=True)
    assert trace[:3] == ["enter 2", "enter 0", "enter 1"]
