"""The scheduler's paths as users see them: keys, contexts, blocked steps, candidates, settling.

Each test drives a run through ``Runtime`` and reads what a user or an operator sees: the
step summaries, the handoff, the events in the log, what a tool was handed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import Any

import pytest
from pydantic import BaseModel

from corral import EventType, MemoryStore, RunStatus, Runtime, StepStatus, ToolContext, tool
from corral.runtime.scheduler import idempotency_key
from corral.runtime.state import fold
from corral.testing import FixedEffects
from corral.tools.policy import ToolPolicy
from tests.helpers import build_agent
from tests.test_write_safety import Done, Ledger, crash_then_resume, write_policy


class Value(BaseModel):
    value: int


def events_of(runtime: Runtime, run_id: str, kind: EventType) -> list[dict[str, Any]]:
    return [e.data for e in runtime.store.load_events(run_id) if e.type is kind]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- idempotency key


def test_the_idempotency_key_is_the_same_in_every_version() -> None:
    """A business system stores the key; a resumed write after an upgrade must reuse it.

    The pinned values cover non-ASCII text (hashed as UTF-8, not ``\\u`` escapes) and a value
    JSON cannot hold (a date, hashed as its text).
    """
    args = {"b": "é", "a": [1, 2]}
    assert idempotency_key("run-1", "s1", args) == "d01788bc8eb9df86f91f128ae37f450c"
    assert idempotency_key("run-1", "s1", {"a": [1, 2], "b": "é"}) == idempotency_key(
        "run-1", "s1", args
    )
    dated = {"when": datetime.date(2026, 1, 2)}
    assert idempotency_key("run-1", "s1", dated) == "ea1f1945fb32ceb740e80a4fff9a6abd"
    assert idempotency_key("run-1", "s1", dated) == idempotency_key(
        "run-1", "s1", {"when": "2026-01-02"}
    )
    assert idempotency_key("run-2", "s1", args) != idempotency_key("run-1", "s1", args)
    assert idempotency_key("run-1", "s2", args) != idempotency_key("run-1", "s1", args)


# --------------------------------------------------------------------------- tool context


async def test_a_tool_sees_its_run_step_key_facts_language_and_clock() -> None:
    seen: list[ToolContext] = []

    @tool
    def first() -> Value:
        return Value(value=5)

    @tool
    def second(x: int, ctx: ToolContext) -> Value:
        seen.append(ctx)
        return Value(value=x)

    agent = build_agent(
        [first, second],
        [
            {"id": "s1", "tool": "first", "facts": {"v": "result.value"}},
            {"id": "s2", "tool": "second", "args": {"x": 7}, "depends_on": ["s1"]},
        ],
        templates={"seen": {"zh": "看到 {v}", "en": "seen {v}"}},
    )
    agent = dataclasses.replace(agent, deps={"db": "orders.sqlite"})
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 请查一下")
    assert summary.status is RunStatus.FINISHED
    [ctx] = seen
    state = fold(summary.run_id, runtime.store.load_events(summary.run_id))  # type: ignore[attr-defined]
    assert ctx.run_id == summary.run_id and ctx.step_id == "s2"
    assert ctx.idempotency_key == idempotency_key(summary.run_id, "s2", {"x": 7})
    assert dict(ctx.deps) == {"db": "orders.sqlite"}
    assert dict(ctx.facts) == {"v": 5}
    assert ctx.language == state.language == "zh"
    assert state.received_at is not None and ctx.received_at == state.received_at
    assert ctx.render is not None
    assert ctx.render("seen", {"v": 5}) == "看到 5"  # in the run's language, with the values
    finished = events_of(runtime, summary.run_id, EventType.STEP_FINISHED)
    # No criterion declared: the verdict says nothing, and is not recorded (format 2).
    assert [(e["step_id"], e["status"], e["verdict"]) for e in finished] == [
        ("s1", "succeeded", None),
        ("s2", "succeeded", None),
    ]
    assert not events_of(runtime, summary.run_id, EventType.VERIFIED)


# --------------------------------------------------------------------------- blocked steps


async def _blocked_after_a_late_dependency(late_fails: bool) -> list[tuple[str, str]]:
    """``a`` fails at once; ``b`` ends later, while the run has already seen ``a`` fail."""

    @tool
    async def early() -> Value:
        raise ValueError("down")

    @tool
    async def late() -> Value:
        for _ in range(20):  # many turns of the event loop after ``a`` failed
            await asyncio.sleep(0)
        if late_fails:
            raise ValueError("down too")
        return Value(value=2)

    @tool
    def fine() -> Value:
        return Value(value=1)

    agent = build_agent(
        [early, late, fine],
        [
            {"id": "a", "tool": "early", "on_failure": "continue"},
            {"id": "b", "tool": "late", "on_failure": "continue"},
            {"id": "c", "tool": "fine", "depends_on": ["a", "b"]},
        ],
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert {s.id: s.status for s in summary.steps}["c"] is StepStatus.BLOCKED
    return [
        (e.data["step_id"], e.data.get("status") or e.data["reason"])
        for e in runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
        if e.type in (EventType.STEP_FINISHED, EventType.STEP_BLOCKED)
    ]


async def test_a_step_is_blocked_once_its_running_dependencies_have_ended() -> None:
    """Two concurrent failures name both, whichever ends first (review: a 3.13 flake).

    Blocking at the first failure named only the dependencies that had ended by then, so
    the log (and the reason a user reads) depended on a thread's timing.
    """
    assert await _blocked_after_a_late_dependency(late_fails=True) == [
        ("a", "failed"),
        ("b", "failed"),
        ("c", "depends on a, b, which did not succeed"),
    ]
    assert await _blocked_after_a_late_dependency(late_fails=False) == [
        ("a", "failed"),
        ("b", "succeeded"),
        ("c", "depends on a, which did not succeed"),
    ]


async def test_a_step_waits_for_a_dependency_that_has_not_started_yet() -> None:
    """``b`` is still pending behind ``x`` when ``a`` fails: the reason names both, either
    way the timing goes (review: waiting only for running dependencies named ``a`` alone
    when ``a`` failed first)."""

    def agent(a_turns: int, x_turns: int) -> Any:
        async def turns(n: int) -> None:
            for _ in range(n):
                await asyncio.sleep(0)

        @tool
        async def fail_a() -> Value:
            await turns(a_turns)
            raise ValueError("a is down")

        @tool
        async def slow_x() -> Value:
            await turns(x_turns)
            return Value(value=1)

        @tool
        async def fail_b() -> Value:
            raise ValueError("b is down")

        @tool
        def fine() -> Value:
            return Value(value=1)

        return build_agent(
            [fail_a, slow_x, fail_b, fine],
            [
                {"id": "a", "tool": "fail_a", "on_failure": "continue"},
                {"id": "x", "tool": "slow_x"},
                {"id": "b", "tool": "fail_b", "depends_on": ["x"], "on_failure": "continue"},
                {"id": "c", "tool": "fine", "depends_on": ["a", "b"]},
            ],
        )

    for a_turns, x_turns in [(10, 0), (0, 10)]:
        runtime = Runtime(agent(a_turns, x_turns), MemoryStore(), effects=FixedEffects())
        summary = await runtime.start("go")
        blocked = events_of(runtime, summary.run_id, EventType.STEP_BLOCKED)
        assert [(e["step_id"], e["reason"]) for e in blocked] == [
            ("c", "depends on a, b, which did not succeed")
        ], (a_turns, x_turns)


async def test_a_blocked_step_names_every_dependency_that_did_not_succeed() -> None:
    @tool
    def broken() -> Value:
        raise ValueError("down")

    @tool
    def fine() -> Value:
        return Value(value=1)

    agent = build_agent(
        [broken, fine],
        [
            {"id": "a", "tool": "broken", "on_failure": "continue"},
            {"id": "b", "tool": "broken", "on_failure": "continue"},
            {"id": "ok", "tool": "fine"},
            {"id": "c", "tool": "fine", "depends_on": ["a", "ok", "b"]},
            {"id": "d", "tool": "fine", "depends_on": ["c"]},
            {"id": "e", "tool": "fine", "depends_on": ["d"]},
        ],
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    statuses = {s.id: s.status for s in summary.steps}
    assert statuses == {
        "a": StepStatus.FAILED,
        "b": StepStatus.FAILED,
        "ok": StepStatus.SUCCEEDED,
        "c": StepStatus.BLOCKED,
        "d": StepStatus.BLOCKED,
        "e": StepStatus.BLOCKED,  # the whole chain, in one pass
    }
    blocked = events_of(runtime, summary.run_id, EventType.STEP_BLOCKED)
    assert [(e["step_id"], e["reason"], e["code"]) for e in blocked] == [
        ("c", "depends on a, b, which did not succeed", "DEPENDENCY_FAILED"),
        ("d", "depends on c, which did not succeed", "DEPENDENCY_FAILED"),
        ("e", "depends on d, which did not succeed", "DEPENDENCY_FAILED"),
    ]
    stages = {
        (e.type, e.stage)
        for e in runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
        if e.type in (EventType.STEP_BLOCKED, EventType.STEP_STARTED, EventType.TOOL_SELECTED)
    }
    started = events_of(runtime, summary.run_id, EventType.STEP_STARTED)
    assert sorted((e["step_id"], e["tool"]) for e in started) == [
        ("a", "broken"),
        ("b", "broken"),
        ("ok", "fine"),
    ]
    # The JSONL log shows each event's layer (its "stage" field).
    assert stages == {  # the plain pick of a read tool has no tool_selected (format 2)
        (EventType.STEP_BLOCKED, "execute"),
        (EventType.STEP_STARTED, "execute"),
    }


async def test_a_step_after_an_unknown_write_is_blocked_not_run() -> None:
    never = asyncio.Event()
    after_calls = 0

    @tool(policy=write_policy(timeout_s=0.05))
    async def cancel_order(ctx: ToolContext) -> Done:
        await never.wait()  # no answer within the timeout, no reconciler: unknown
        return Done(ref="x")

    @tool
    def notify() -> Value:
        nonlocal after_calls
        after_calls += 1
        return Value(value=1)

    agent = build_agent(
        [cancel_order, notify],
        [
            {"id": "w", "tool": "cancel_order"},
            {"id": "n", "tool": "notify", "depends_on": ["w"]},
        ],
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert after_calls == 0
    assert [(s.id, s.status) for s in summary.steps] == [
        ("w", StepStatus.UNKNOWN),
        ("n", StepStatus.BLOCKED),
    ]
    blocked = events_of(runtime, summary.run_id, EventType.STEP_BLOCKED)
    assert [(e["step_id"], e["reason"]) for e in blocked] == [
        ("n", "depends on w, which did not succeed")
    ]


# --------------------------------------------------------------------------- candidates


class Similar:
    """Capability matching with fixed scores, so the threshold and the order are exact."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.queries: list[str] = []

    def similarity(self, query: str) -> dict[str, float]:
        self.queries.append(query)
        return dict(self.scores)


class Other(BaseModel):
    other: str


async def test_capability_matching_proposes_similar_interchangeable_tools_best_first() -> None:
    entered: list[str] = []

    def lookup(name: str, *, fails: bool) -> Any:
        def run() -> Value:
            entered.append(name)
            if fails:
                raise ValueError(f"{name} is down")
            return Value(value=1)

        run.__doc__ = f"look up {name}"
        return tool(name=name)(run)

    @tool(name="different")
    def different() -> Other:
        """Look up differently."""
        raise AssertionError("another output model is never a fallback")

    tools = [
        lookup("planned", fails=True),
        lookup("at_threshold", fails=True),
        lookup("best", fails=True),
        lookup("below", fails=False),
        lookup("stranger", fails=False),
        different,
    ]
    agent = build_agent(
        tools,
        [{"id": "s1", "tool": "planned", "description": "find the parcel"}],
        intent_tools=["planned", "at_threshold", "best", "below", "different"],
    )
    scores = {"at_threshold": 0.15, "best": 0.9, "below": 0.1499, "different": 0.95}
    similar = Similar({**scores, "planned": 1.0, "stranger": 0.5})
    agent = dataclasses.replace(agent, capabilities=similar)  # type: ignore[arg-type]
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert entered == ["planned", "best", "at_threshold"]
    assert summary.steps[0].status is StepStatus.FAILED
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)
    assert [(e["tool"], e["reason"]) for e in selected] == [
        ("planned", "best ranked"),
        ("best", "fallback after planned"),
        ("at_threshold", "fallback after best"),
    ]
    assert selected[0]["candidates"] == ["planned", "best", "at_threshold"]
    assert selected[0]["excluded"] == {"stranger": "not allowed for this intent"}
    [query] = similar.queries
    assert "find the parcel" in query and "look up planned" in query


async def test_a_tool_its_constraint_cannot_judge_is_excluded_with_the_reason() -> None:
    from corral import parse_config
    from corral.agent import Agent

    def member(name: str, latency: int) -> Any:
        @tool(name=name, policy=ToolPolicy(equivalent_group="lookup", latency_ms=latency))
        def run() -> Value:
            raise ValueError(f"{name} is down")

        return run

    tools = [member("primary", 10), member("replica", 20), member("archive", 30)]
    base = build_agent(
        tools, [{"id": "s1", "tool": "primary"}], intent_tools=["primary", "archive"]
    )
    config = parse_config(
        {**base.config.model_dump(), "tool_constraints": {"archive": "facts.age > 1"}}
    )
    agent = Agent.build(config, tools)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)[0]
    assert selected["candidates"] == ["primary", "replica"]  # an equivalent is allowed
    assert list(selected["excluded"]) == ["archive"]
    assert selected["excluded"]["archive"].startswith("cannot be judged: 'facts.age > 1'")
    assert summary.steps[0].error_code == "TOOL_FAILED"


async def test_a_step_no_tool_may_run_fails_with_every_reason() -> None:
    from corral import parse_config
    from corral.agent import Agent

    calls = 0

    def member(name: str, latency: int) -> Any:
        @tool(name=name, policy=ToolPolicy(equivalent_group="lookup", latency_ms=latency))
        def run(days: int) -> Value:
            nonlocal calls
            calls += 1
            return Value(value=days)

        return run

    tools = [member("recent", 10), member("archive", 20)]
    base = build_agent(tools, [{"id": "s1", "tool": "recent", "args": {"days": 5}}])
    constraints = {"recent": "args.days > 30", "archive": "args.days > 90"}
    config = parse_config({**base.config.model_dump(), "tool_constraints": constraints})
    runtime = Runtime(Agent.build(config, tools), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == 0
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.steps[0].error_code == "NO_ELIGIBLE_TOOL"
    assert summary.handoff is not None
    assert "recent: args.days > 30 is false; archive: args.days > 90 is false" in (
        summary.handoff.reason
    )


# --------------------------------------------------------------------------- the call


async def test_a_fallback_tool_whose_arguments_do_not_fit_fails_with_the_validation_code() -> None:
    @tool(name="primary", policy=ToolPolicy(equivalent_group="lookup", latency_ms=10))
    def primary(order_id: str) -> Value:
        raise ValueError("primary is down")

    @tool(name="replica", policy=ToolPolicy(equivalent_group="lookup", latency_ms=20))
    def replica(order_id: int) -> Value:
        raise AssertionError("never entered: its arguments do not validate")

    agent = build_agent(
        [primary, replica], [{"id": "s1", "tool": "primary", "args": {"order_id": "A1"}}]
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert summary.steps[0].status is StepStatus.FAILED
    assert summary.steps[0].error_code == "INVALID_ARGUMENT"
    assert summary.handoff is not None
    assert "tool 'replica': order_id: " in summary.handoff.reason


# --------------------------------------------------------------------------- settling


async def test_resume_settles_an_interrupted_write_its_reconciler_cannot_find() -> None:
    """Found ``running`` on resume, not found by its reconciler: it did not act, and fails."""
    ledger = Ledger()

    @tool(policy=write_policy(), reconcile=ledger.find)
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        done = ledger.apply(ctx)
        ledger.effects.clear()  # the business system rolled the write back
        return done

    runtime, summary = await crash_then_resume(cancel_order)
    assert ledger.entries == 1 and ledger.lookups == 1
    assert summary.steps[0].status is StepStatus.FAILED
    assert summary.steps[0].error_code == "TOOL_FAILED"
    assert summary.handoff is not None
    assert "cancel_order failed (TOOL_FAILED) and find found no effect: not applied" in (
        summary.handoff.reason
    )
    settled = events_of(runtime, summary.run_id, EventType.OUTCOME_RECONCILED)
    assert [(e["step_id"], e["tool"], e["write"], e["status"]) for e in settled] == [
        ("w", "find", "cancel_order", "not_applied")
    ]
    attempts = events_of(runtime, summary.run_id, EventType.TOOL_ATTEMPT)
    # The write's own attempt, which the process died in, is recorded on resume; the
    # reconciler's is numbered after it.
    assert [(e["tool"], e["attempt"], e["error_code"]) for e in attempts] == [
        ("cancel_order", 1, "OUTCOME_UNKNOWN"),
        ("find", 2, None),
    ]
    assert summary.steps[0].attempts == 2


async def test_resume_leaves_an_interrupted_write_without_reconciler_unknown() -> None:
    ledger = Ledger()

    @tool(policy=write_policy())
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    runtime, summary = await crash_then_resume(cancel_order)
    assert ledger.entries == 1
    assert summary.steps[0].status is StepStatus.UNKNOWN
    assert events_of(runtime, summary.run_id, EventType.OUTCOME_RECONCILED) == []
    finished = events_of(runtime, summary.run_id, EventType.STEP_FINISHED)
    assert [(e["status"], e["error_code"]) for e in finished] == [("unknown", "OUTCOME_UNKNOWN")]
    assert finished[0]["reason"] == (
        "the run stopped while cancel_order was running; the write may or may not have happened"
    )


@pytest.mark.parametrize("found", [True, False])
async def test_the_reconciled_event_says_what_the_reconciler_settled(found: bool) -> None:
    ledger = Ledger()

    never = asyncio.Event()

    @tool(policy=write_policy(timeout_s=0.05), reconcile=ledger.find)
    async def cancel_order(ctx: ToolContext) -> Done:
        if found:
            ledger.apply(ctx)
        await never.wait()
        return Done(ref="x")

    agent = build_agent([cancel_order], [{"id": "w", "tool": "cancel_order"}])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    reconciled = events_of(runtime, summary.run_id, EventType.OUTCOME_RECONCILED)
    # Not found: proven not to have acted, the write is tried again (issue 11), within its
    # retries, and each try is settled the same way.
    assert len(reconciled) == (1 if found else 1 + write_policy().retry.max_retries)
    settled = reconciled[-1]
    assert settled["step_id"] == "w"
    assert settled["status"] == ("applied" if found else "not_applied")
    assert settled["reason"]
    attempts = events_of(runtime, summary.run_id, EventType.TOOL_ATTEMPT)
    numbers = [(e["tool"], e["attempt"]) for e in attempts]
    assert numbers[-1] == ("find", len(numbers))  # numbered after the write's attempts


async def test_a_reconciler_that_fails_leaves_the_write_unknown() -> None:
    never = asyncio.Event()

    def find(ctx: ToolContext) -> Done | None:
        raise ConnectionError("the ledger is down too")

    @tool(policy=write_policy(timeout_s=0.05), reconcile=find)
    async def cancel_order(ctx: ToolContext) -> Done:
        await never.wait()
        return Done(ref="x")

    agent = build_agent([cancel_order], [{"id": "w", "tool": "cancel_order"}])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert summary.steps[0].status is StepStatus.UNKNOWN
    events = [
        e
        for e in runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
        if e.type is EventType.OUTCOME_RECONCILED
    ]
    assert [(e.stage, e.data["step_id"], e.data["status"]) for e in events] == [
        ("verify", "w", "unknown")
    ]


# --------------------------------------------------------------------------- waiting steps


RULE_ON_X = {
    "name": "x_is_three",
    "before_tool": "read",
    "require": "facts.x == '3'",
    "refusal": "too_big",
}
"""A rule before ``read`` that reads fact ``x``: a step calling ``read`` waits for the
producers of ``x``."""

RULE_TEMPLATES = {"too_big": {"zh": "太大", "en": "too big"}}

ENTITIES = {
    "order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]},
    "x": {"kind": "pattern", "patterns": [r"x=(\d+)"]},
}
"""``x`` is also an entity (the user may say it), so a step reading it need not depend on
its producer: it only waits for it."""


async def test_a_step_waiting_for_a_producer_refused_before_its_tool_is_still_decided() -> None:
    """The producer fails at the gate (no order number); nothing is running then, so the
    step that waited for it must be decided in the same round, not left pending."""
    entered: list[str] = []

    @tool
    def produce(q: str) -> Value:
        entered.append("produce")
        return Value(value=1)

    @tool
    def read() -> Value:
        entered.append("read")
        return Value(value=1)

    steps = [
        {
            "id": "p",
            "tool": "produce",
            "args": {"q": "$entities.order_id"},
            "facts": {"x": "result.value"},
            "on_failure": "continue",
        },
        {"id": "r", "tool": "read"},
    ]
    agent = build_agent(
        [produce, read],
        steps,
        business_rules=[RULE_ON_X],
        templates=RULE_TEMPLATES,
        entities=ENTITIES,
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    statuses = {s.id: (s.status, s.error_code) for s in summary.steps}
    assert entered == []
    assert statuses["p"] == (StepStatus.FAILED, "MISSING_ARGUMENT")
    # Decided, with no value for x: the rule cannot hold, so the step is refused.
    assert statuses["r"] == (StepStatus.SKIPPED, "BUSINESS_RULE_VIOLATED")


async def test_a_step_waiting_for_a_producer_is_not_released_once_the_run_stopped() -> None:
    """The producer is the third identical call, a loop: the run stops, and nothing that
    waited for it starts after that."""
    calls: list[str] = []

    @tool
    def search(q: str) -> Value:
        calls.append(q)
        return Value(value=len(calls))  # a new state each time: only the calls repeat

    @tool
    def read() -> Value:
        calls.append("read")
        return Value(value=1)

    steps = [
        {"id": "a", "tool": "search", "args": {"q": "same"}, "facts": {"n": "result.value"}},
        {
            "id": "b",
            "tool": "search",
            "args": {"q": "same"},
            "depends_on": ["a"],
            "facts": {"n": "result.value"},
        },
        {
            "id": "c",
            "tool": "search",
            "args": {"q": "same"},
            "depends_on": ["b"],
            "facts": {"x": "result.value"},
        },
        {"id": "r", "tool": "read"},
    ]
    agent = build_agent(
        [search, read],
        steps,
        business_rules=[RULE_ON_X],
        templates=RULE_TEMPLATES,
        entities=ENTITIES,
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == ["same", "same"]
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"
    statuses = {s.id: (s.status, s.error_code) for s in summary.steps}
    assert statuses["c"] == (StepStatus.FAILED, "LOOP_DETECTED")  # refused at the gate
    assert statuses["r"] == (StepStatus.PENDING, None)


def two_readers(*, confirm_first: bool) -> tuple[Runtime, list[int]]:
    """``p`` fails at the gate; ``r1`` and ``r2`` wait for it (the rule on ``read`` reads
    fact ``x``, which the user gives as an entity)."""
    entered: list[int] = []

    @tool
    def produce(q: str) -> Value:
        raise AssertionError("never entered: its argument is missing")

    @tool
    def read(k: int) -> Value:
        entered.append(k)
        return Value(value=k)

    steps = [
        {
            "id": "p",
            "tool": "produce",
            "args": {"q": "$entities.order_id"},
            "facts": {"x": "result.value"},
            "on_failure": "continue",
        },
        {"id": "r1", "tool": "read", "args": {"k": 1}, "requires_confirmation": confirm_first},
        {"id": "r2", "tool": "read", "args": {"k": 2}},
    ]
    agent = build_agent(
        [produce, read],
        steps,
        business_rules=[RULE_ON_X],
        templates=RULE_TEMPLATES,
        entities=ENTITIES,
    )
    return Runtime(agent, MemoryStore(), effects=FixedEffects()), entered


async def test_every_step_waiting_for_a_refused_producer_starts_in_the_same_round() -> None:
    runtime, entered = two_readers(confirm_first=False)
    summary = await runtime.start("go x=3")
    assert sorted(entered) == [1, 2]
    order = [
        (e.type, e.data["step_id"])
        for e in runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
        if e.type in (EventType.STEP_STARTED, EventType.STEP_FINISHED) and e.data["step_id"] != "p"
    ]
    assert order == [
        (EventType.STEP_STARTED, "r1"),
        (EventType.STEP_STARTED, "r2"),
        (EventType.STEP_FINISHED, "r1"),
        (EventType.STEP_FINISHED, "r2"),
    ]


async def test_no_waiting_step_starts_once_a_released_one_asks_for_confirmation() -> None:
    runtime, entered = two_readers(confirm_first=True)
    summary = await runtime.start("go x=3")
    assert summary.status is RunStatus.AWAITING_CONFIRM
    assert entered == []
    statuses = {s.id: s.status for s in summary.steps}
    assert statuses["r2"] is StepStatus.PENDING


@pytest.mark.parametrize(
    ("preference", "order"),
    [("latency", ["fast", "cheap"]), ("cost", ["cheap", "fast"])],
)
async def test_equivalent_tools_are_tried_in_the_order_the_agent_prefers(
    preference: str, order: list[str]
) -> None:
    from corral import parse_config
    from corral.agent import Agent

    entered: list[str] = []

    def member(name: str, latency: int, cost: float) -> Any:
        policy = ToolPolicy(equivalent_group="lookup", latency_ms=latency, cost=cost)

        @tool(name=name, policy=policy)
        def run() -> Value:
            entered.append(name)
            raise ValueError(f"{name} is down")

        return run

    tools = [member("cheap", 50, 1.0), member("fast", 10, 5.0)]
    base = build_agent(tools, [{"id": "s1", "tool": "cheap"}])
    config = parse_config({**base.config.model_dump(), "tool_preference": preference})
    runtime = Runtime(Agent.build(config, tools), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert entered == order
    # The first pick is recorded when it is not the planned tool; the fallback always is.
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)
    assert [e["tool"] for e in selected] == (order if order[0] != "cheap" else order[1:])
    assert selected[-1]["candidates"] == order


async def test_a_step_runs_as_soon_as_it_is_ready_whatever_comes_before_it() -> None:
    """``a`` waits for ``c``, which waits for ``b``; ``x`` waits for ``a``; ``d`` needs
    nothing. A step in flight (``a``) or not ready (``x``) must not hold up the steps after
    it in plan order: ``c`` would never start, and ``a`` would wait in vain."""
    c_ran = asyncio.Event()

    @tool
    async def wait_for_c() -> Value:
        async with asyncio.timeout(5.0):  # only a wrong schedule waits this long, and fails
            await c_ran.wait()
        return Value(value=1)

    @tool
    def fine(k: int) -> Value:  # distinct calls and results: no loop to detect
        return Value(value=k)

    @tool
    async def signal() -> Value:  # on the event loop, which the Event belongs to
        c_ran.set()
        return Value(value=1)

    steps = [
        {"id": "a", "tool": "wait_for_c"},
        {"id": "b", "tool": "fine", "args": {"k": 1}},
        {"id": "x", "tool": "fine", "args": {"k": 3}, "depends_on": ["a"]},
        {"id": "c", "tool": "signal", "depends_on": ["b"]},
        {"id": "d", "tool": "fine", "args": {"k": 2}},
    ]
    runtime = Runtime(
        build_agent([wait_for_c, fine, signal], steps), MemoryStore(), effects=FixedEffects()
    )
    summary = await runtime.start("go")
    assert {s.id: s.status for s in summary.steps} == dict.fromkeys("abxcd", StepStatus.SUCCEEDED)
    kinds = [
        (e.type, e.data["step_id"])
        for e in runtime.store.load_events(summary.run_id)  # type: ignore[attr-defined]
        if e.type in (EventType.STEP_STARTED, EventType.STEP_FINISHED)
    ]
    assert kinds[:3] == [
        (EventType.STEP_STARTED, "a"),
        (EventType.STEP_STARTED, "b"),
        (EventType.STEP_STARTED, "d"),
    ]


async def test_resume_settles_a_write_after_a_finished_step_with_its_own_arguments() -> None:
    """The key the reconciler looks up is the write's (same arguments), and the step is
    judged on those arguments; the finished read before it changes nothing."""
    from corral.runtime.state import fold
    from tests.test_runtime import Crash, CrashAfterWrite

    ledger = Ledger()

    @tool
    def lookup() -> Value:
        return Value(value=1)

    @tool(policy=write_policy(), reconcile=ledger.find)
    def cancel_order(order_id: str, ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    steps = [
        {"id": "r", "tool": "lookup"},
        {
            "id": "w",
            "tool": "cancel_order",
            "args": {"order_id": "$entities.order_id"},
            "depends_on": ["r"],
            "success": "args.order_id == 'A7'",
        },
    ]
    agent = build_agent([lookup, cancel_order], steps)
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=CrashAfterWrite()).start("go A7")
    run_id = store.list_runs()[0].run_id
    assert fold(run_id, store.load_events(run_id)).steps["w"].status is StepStatus.RUNNING
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run_id)
    assert ledger.entries == 1 and ledger.lookups == 1
    assert summary.status is RunStatus.FINISHED
    assert [(s.id, s.status) for s in summary.steps] == [
        ("r", StepStatus.SUCCEEDED),
        ("w", StepStatus.SUCCEEDED),
    ]
