"""Review 10b: the default store drops ended runs (``max_ended_runs=100``).

A handed-off run ended for the machine but not for the person who must act on its
packet; and a caller that drives a batch concurrently reads the runs afterwards.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from corral import Agent, Runtime, ToolFailedError, parse_config, tool
from corral.testing import FixedEffects
from tests.one_intent import one_intent


class Found(BaseModel):
    total: float


@tool
async def look(order_id: str) -> Found:
    """Order A1 is broken (the run is handed to a person); others answer."""
    if order_id == "A1":
        raise ToolFailedError("the order system refused A1")
    return Found(total=1.0)


def runtime() -> Runtime:
    steps = [{"id": "s1", "tool": "look", "args": {"order_id": "$entities.order_id"}}]
    agent = Agent.build(parse_config(one_intent("go", steps=steps)), [look])
    return Runtime(agent, effects=FixedEffects())  # the default store, as a user gets it


async def test_a_handed_off_runs_packet_outlives_a_hundred_later_runs() -> None:
    rt = runtime()
    handed = await rt.start("go A1")
    assert handed.status.value == "handed_off"
    assert rt.store.get_handoff(handed.run_id) is not None
    for n in range(2, 103):
        await rt.start(f"go A{n}")
    # nobody has looked at the packet yet: the person's queue must still hold it
    assert rt.store.get_handoff(handed.run_id) is not None


async def test_a_concurrent_batch_can_be_read_back_after_it_ends() -> None:
    rt = runtime()
    summaries = await asyncio.gather(*(rt.start(f"go A{n}") for n in range(2, 152)))
    first = summaries[0].run_id
    assert rt.store.load_events(first), "the batch's first run is gone before its caller read it"
