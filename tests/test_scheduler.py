"""Decide + execute + verify through the run loop, on small agents built in code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from corral import (
    EventType,
    MemoryStore,
    RunStatus,
    Runtime,
    StepStatus,
    ToolPolicy,
    tool,
)
from corral.errors import TransientToolError
from corral.testing import FixedEffects
from corral.testing.evaluation import tools_selected
from corral.tools.policy import RetryPolicy
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


class Eligibility(BaseModel):
    eligible: bool


HANG_S = 5.0
"""How long a tool waits for a partner that should be in flight with it (under the default
tool timeout, 10 s, so the wait itself is what fails). Only a wrong
schedule ever waits this long: the wait then fails the test instead of hanging it."""


class Gauge:
    """Records which calls are in flight together; calls wait for each other, never a clock.

    Each call enters, notes everyone in flight with it, then waits for its ``partner``
    condition. A schedule that does not run the expected calls together never meets the
    condition: the wait times out, which the test sees in ``hung``.
    """

    def __init__(self) -> None:
        self.in_flight: set[str] = set()
        self.entered: set[str] = set()
        self.together: list[frozenset[str]] = []
        self.hung: list[str] = []
        self.changed = asyncio.Condition()

    async def enter(self, name: str, *, until: Callable[[Gauge], bool]) -> None:
        async with self.changed:
            self.entered.add(name)
            self.in_flight.add(name)
            self.together.append(frozenset(self.in_flight))
            self.changed.notify_all()
            try:
                async with asyncio.timeout(HANG_S):
                    await self.changed.wait_for(lambda: until(self))
            except TimeoutError:
                self.hung.append(name)
            self.in_flight.discard(name)
            self.changed.notify_all()

    @property
    def peak(self) -> int:
        return max(len(group) for group in self.together)


def runtime_for(agent_tools: list, steps: list, **kwargs) -> tuple[Runtime, FixedEffects]:  # type: ignore[type-arg]
    effects = FixedEffects()
    agent = build_agent(agent_tools, steps, **kwargs)
    return Runtime(agent, MemoryStore(), effects=effects), effects


async def test_independent_steps_run_concurrently() -> None:
    gauge = Gauge()

    @tool
    async def work(n: int) -> Value:
        # a barrier of three: each call ends only once all three have been in flight
        await gauge.enter(f"work{n}", until=lambda g: g.peak == 3)
        return Value(value=n)

    runtime, _ = runtime_for(
        [work], [{"id": f"s{i}", "tool": "work", "args": {"n": i}} for i in range(3)]
    )
    summary = await runtime.start("go")
    assert gauge.hung == []
    assert summary.status is RunStatus.FINISHED
    assert gauge.peak == 3


async def test_steps_writing_the_same_fact_run_one_after_another() -> None:
    gauge = Gauge()

    def c_with_a_or_b(g: Gauge) -> bool:
        return bool(g.in_flight & {"work1", "work2"})

    def c_has_entered(g: Gauge) -> bool:
        return "work3" in g.entered

    @tool
    async def work(n: int) -> Value:
        # c ends only while a or b is in flight; a and b only once c has entered. Run
        # one at a time, the first of a and b would wait for c forever.
        await gauge.enter(f"work{n}", until=c_with_a_or_b if n == 3 else c_has_entered)
        return Value(value=n)

    runtime, _ = runtime_for(
        [work],
        [
            {"id": "a", "tool": "work", "args": {"n": 1}, "facts": {"total": "result.value"}},
            {"id": "b", "tool": "work", "args": {"n": 2}, "facts": {"total": "result.value"}},
            {"id": "c", "tool": "work", "args": {"n": 3}},
        ],
    )
    summary = await runtime.start("go")
    assert gauge.hung == []
    assert summary.status is RunStatus.FINISHED
    assert not any({"work1", "work2"} <= group for group in gauge.together)  # never a with b
    assert gauge.peak == 2  # c alongside a or b
    state = await runtime.load_state(summary.run_id)
    assert state.memory.facts["total"].value == 2  # plan order: b wrote last


async def test_failed_step_blocks_its_dependents_and_hands_off_with_a_packet() -> None:
    @tool
    def broken() -> Value:
        raise ValueError("database is on fire")

    @tool
    def after(x: int) -> Value:
        raise AssertionError("must not run")

    runtime, _ = runtime_for(
        [broken, after],
        [
            {"id": "s1", "tool": "broken"},
            {"id": "s2", "tool": "after", "depends_on": ["s1"], "args": {"x": "$s1.result.value"}},
        ],
    )
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF
    statuses = {s.id: (s.status, s.error_code) for s in summary.steps}
    assert statuses == {
        "s1": (StepStatus.FAILED, "TOOL_FAILED"),
        "s2": (StepStatus.BLOCKED, "DEPENDENCY_FAILED"),
    }
    packet = summary.handoff
    assert packet is not None
    assert packet.reason_code == "TOOL_FAILED" and "database is on fire" in packet.reason
    assert packet.user_messages == ["go"] and packet.trace_id == summary.trace_id
    assert [s.id for s in packet.steps] == ["s1", "s2"]


async def test_recovery_ladder_retries_then_uses_an_equivalent_tool() -> None:
    primary_calls = 0

    @tool(name="primary", policy=ToolPolicy(equivalent_group="lookup", latency_ms=10))
    def primary() -> Value:
        nonlocal primary_calls
        primary_calls += 1
        raise TransientToolError("503")

    @tool(name="replica", policy=ToolPolicy(equivalent_group="lookup", latency_ms=500))
    def replica() -> Value:
        return Value(value=42)

    runtime, effects = runtime_for(
        [primary, replica],
        [
            {"id": "s1", "tool": "primary", "facts": {"answer": "result.value"}},
        ],
    )
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED
    assert primary_calls == 3  # first try + 2 retries
    assert effects.sleeps == [1.0, 2.0]
    assert summary.steps[0].tool == "replica" and summary.steps[0].attempts == 4
    events = runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
    # The plain pick of the planned tool has no event of its own (format 2); the fallback has.
    assert tools_selected(events) == ["primary", "replica"]
    fallback = [e.data for e in events if e.type is EventType.TOOL_SELECTED]
    assert [(d["tool"], d["reason"]) for d in fallback] == [("replica", "fallback after primary")]
    # The primary failed in a row: it is degraded, so the next run starts on the replica.
    await runtime.start("go")
    assert runtime.agent.health.degraded("primary")
    summary = await runtime.start("go")
    events = runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
    selected = [e.data for e in events if e.type is EventType.TOOL_SELECTED]
    assert selected[0]["tool"] == "replica"


async def test_missing_argument_is_never_filled_in() -> None:
    called = False

    @tool
    def lookup(order_id: str) -> Value:
        nonlocal called
        called = True
        return Value(value=1)

    runtime, _ = runtime_for(
        [lookup],
        [
            {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}},
        ],
    )
    summary = await runtime.start("go, my order is somewhere")
    assert called is False
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.steps[0].error_code == "MISSING_ARGUMENT"
    assert summary.handoff is not None and summary.handoff.reason_code == "MISSING_ARGUMENT"


async def test_timeout_in_a_run_is_retried_and_recorded() -> None:
    never = asyncio.Event()  # never set: every attempt times out, however slow the machine

    @tool(policy=ToolPolicy(timeout_s=0.02, retry=RetryPolicy(2, (1.0, 2.0))))
    async def slow() -> Value:
        await never.wait()
        return Value(value=1)

    runtime, effects = runtime_for([slow], [{"id": "s1", "tool": "slow"}])
    summary = await runtime.start("go")
    assert summary.steps[0].attempts == 3
    assert summary.steps[0].error_code == "TOOL_TIMEOUT"
    assert effects.sleeps == [1.0, 2.0]
    events = runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
    attempts = [e.data for e in events if e.type is EventType.TOOL_ATTEMPT]
    assert [a["error_code"] for a in attempts] == ["TOOL_TIMEOUT"] * 3
    assert [a["backoff_s"] for a in attempts] == [1.0, 2.0, None]


async def test_repeated_identical_calls_are_a_loop() -> None:
    calls = 0

    @tool
    def search(q: str) -> Value:
        nonlocal calls
        calls += 1
        return Value(value=1)

    runtime, _ = runtime_for(
        [search],
        [
            {"id": "a", "tool": "search", "args": {"q": "same"}},
            {"id": "b", "tool": "search", "args": {"q": "same"}, "depends_on": ["a"]},
            {"id": "c", "tool": "search", "args": {"q": "same"}, "depends_on": ["b"]},
        ],
    )
    summary = await runtime.start("go")
    assert calls == 2
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"


async def test_budget_stops_the_run_before_the_next_step() -> None:
    calls = 0

    @tool
    def step(n: int) -> Value:
        nonlocal calls
        calls += 1
        return Value(value=n)

    runtime, _ = runtime_for(
        [step],
        [
            {"id": "a", "tool": "step", "args": {"n": 1}},
            {"id": "b", "tool": "step", "args": {"n": 2}, "depends_on": ["a"]},
        ],
        budget={"max_tool_calls": 1},
    )
    summary = await runtime.start("go")
    assert calls == 1
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"


async def test_success_criterion_failure_fails_the_step() -> None:
    @tool
    def check() -> Value:
        return Value(value=0)

    runtime, _ = runtime_for(
        [check],
        [
            {"id": "s1", "tool": "check", "success": "result.value > 0"},
        ],
    )
    summary = await runtime.start("go")
    assert summary.steps[0].error_code == "SUCCESS_CRITERIA_FAILED"
    assert summary.status is RunStatus.HANDED_OFF


async def test_business_rule_skips_the_write_and_refuses_with_the_reason() -> None:
    wrote = False

    @tool
    def check() -> Eligibility:
        return Eligibility(eligible=False)

    @tool(policy=ToolPolicy(kind="write"))
    def write() -> Value:
        nonlocal wrote
        wrote = True
        return Value(value=1)

    runtime, _ = runtime_for(
        [check, write],
        [
            {"id": "s1", "tool": "check", "facts": {"eligible": "result.eligible"}},
            {"id": "s2", "tool": "write", "depends_on": ["s1"]},
        ],
        business_rules=[
            {
                "name": "must_be_eligible",
                "before_tool": "write",
                "require": "facts.eligible == true",
                "refusal": "nope",
            }
        ],
        templates={"nope": {"zh": "不符合条件", "en": "not eligible"}},
    )
    summary = await runtime.start("go")
    assert wrote is False
    assert summary.status is RunStatus.FINISHED and summary.outcome == "refused"
    assert summary.reply == "not eligible"
    assert summary.steps[1].status is StepStatus.SKIPPED


class Shipment(BaseModel):
    tracking: str | None = None


async def test_reply_never_claims_a_fact_no_tool_provided() -> None:
    """A name no step publishes is refused at load (``test_template_placeholders``); one a
    step publishes but its tool left empty is not claimed either: a person takes over."""
    from corral.errors import ConfigInvalidError

    @tool
    def nothing() -> Shipment:
        return Shipment()

    shipped = {"done_reply": {"zh": "订单 {tracking} 已发货", "en": "shipped {tracking}"}}
    with pytest.raises(ConfigInvalidError, match=r"uses \{tracking\}, which is no entity"):
        runtime_for([nothing], [{"id": "s1", "tool": "nothing"}], templates=shipped)
    runtime, _ = runtime_for(
        [nothing],
        [{"id": "s1", "tool": "nothing", "facts": {"tracking": "result.tracking"}}],
        templates=shipped,
    )
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None and summary.handoff.reason_code == "TEMPLATE_INVALID"


@pytest.mark.parametrize("size", [4001, 1_000_000])
async def test_huge_input_is_refused_before_any_run(size: int) -> None:
    from corral.errors import InputTooLargeError

    @tool
    def t() -> Value:
        return Value(value=1)

    runtime, _ = runtime_for([t], [{"id": "s1", "tool": "t"}])
    with pytest.raises(InputTooLargeError):
        await runtime.start("go " * (size // 3 + 1))
    assert runtime.store.list_runs() == []
