"""Runs share no memory: a new run's empty memory is one frozen default (``NO_MEMORY``,
``NO_FACTS``), so a write to it would leak into every later run of the process."""

from __future__ import annotations

from pydantic import BaseModel

from corral import MemoryStore, RunStatus, Runtime, tool
from corral.memory.task import NO_FACTS
from corral.runtime.state import NO_MEMORY
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


async def test_a_fact_one_run_writes_is_not_known_to_the_next_run() -> None:
    @tool
    async def work(n: int) -> Value:
        return Value(value=n)

    plan = [
        {"id": "a", "tool": "work", "args": {"n": 1}, "facts": {"total": "result.value"}},
        {"id": "b", "tool": "work", "args": {"n": 2}},
        {"id": "c", "tool": "work", "args": {"n": 3}},
    ]
    runtime = Runtime(build_agent([work], plan), MemoryStore())
    first = await runtime.start("go one")
    second = await runtime.start("go two")
    assert first.status is second.status is RunStatus.FINISHED
    one, two = await runtime.load_state(first.run_id), await runtime.load_state(second.run_id)
    assert one.memory.values() == {"total": 1} and two.memory.values() == {"total": 1}
    assert one.memory is not two.memory and one.memory.facts is not two.memory.facts
    assert one.memory.goal == "go one" and two.memory.goal == "go two"
    assert len(one.memory.completed_steps) == len(two.memory.completed_steps) == 3
    # the shared defaults are as empty as they were
    assert NO_MEMORY.facts is NO_FACTS and dict(NO_FACTS) == {}
    assert NO_MEMORY.completed_steps == () and NO_MEMORY.goal == ""
