"""The stats facts count each tool attempt as the log's readers see it.

``event_facts`` makes a sole attempt's fact from its ``step_finished`` directly (the save
runs it for every run); ``events.tool_attempts`` is the rule every other reader uses. The
two must agree, for a step's one attempt and for retried ones alike.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from corral import MemoryStore, Runtime, tool
from corral.effects import FixedEffects
from corral.errors import TransientToolError
from corral.events import Event, tool_attempts
from corral.store.facts import event_facts
from corral.tools.policy import RetryPolicy, ToolPolicy
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


def scenario_events() -> list[Event]:
    """A template run: a step that answers at once, one that fails once, then answers."""
    calls = {"flaky": 0}

    @tool
    def steady(n: int) -> Value:
        """Answers at once: its step's end stands for its one attempt."""
        return Value(value=n)

    @tool(policy=ToolPolicy(kind="read", retry=RetryPolicy(max_retries=2, backoff_s=(0.0,))))
    def flaky(n: int) -> Value:
        """Fails once, then answers: two attempts, each an event of its own."""
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise TransientToolError("503")
        return Value(value=n)

    steps = [
        {"id": "s1", "tool": "steady", "args": {"n": 1}},
        {"id": "s2", "tool": "flaky", "args": {"n": 2}, "depends_on": ["s1"]},
        {"id": "s3", "tool": "steady", "args": {"n": 3}, "depends_on": ["s2"]},
    ]
    runtime = Runtime(build_agent([steady, flaky], steps), MemoryStore(), effects=FixedEffects())

    async def run() -> list[Event]:
        summary = await runtime.start("go")
        assert summary.status.value == "finished", summary
        return list(await runtime.events(summary.run_id))

    return asyncio.run(run())


def test_the_facts_of_sole_and_retried_attempts_are_the_attempts_the_log_implies() -> None:
    events = scenario_events()
    attempts = list(tool_attempts(event.payload for event in events))
    facts = event_facts(events).tools
    assert [a.tool for a in attempts] == ["steady", "flaky", "flaky", "steady"]
    assert [(f.tool, f.status, f.error_code, f.duration_ms) for f in facts] == [
        (a.tool, a.status, a.error_code, a.duration_ms) for a in attempts
    ]
