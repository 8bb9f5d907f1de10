"""Steps that finish in the same wake-up of the loop are recorded in plan order.

``asyncio.wait`` hands back a set, whose order follows the tasks' addresses; recording in
that order would make two runs of the same message log different paths, and a replay of
one diverge from the other.
"""

from __future__ import annotations

from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, Runtime, parse_config, tool
from corral.testing import FixedEffects
from tests.one_intent import one_intent

STEPS = [{"id": f"s{i}", "tool": "echo", "args": {"n": i}} for i in range(1, 7)]


class Echo(BaseModel):
    n: int


@tool
async def echo(n: int) -> Echo:
    """Answer at once, so every step finishes in the same wake-up."""
    return Echo(n=n)


async def test_steps_finishing_together_are_recorded_in_plan_order() -> None:
    agent = Agent.build(parse_config(one_intent("go", steps=STEPS)), [echo])
    for _ in range(12):
        runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
        summary = await runtime.start("go")
        finished = [
            event.data["step_id"]
            for event in runtime.store.load_events(summary.run_id)
            if event.type is EventType.STEP_FINISHED
        ]
        assert finished == [step["id"] for step in STEPS]
