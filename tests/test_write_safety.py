"""Writes are never retried blindly, and an unknown outcome is never reported as done or not.

Each tool counts its own entries, so "not retried" means the tool body ran once, not just
"one row". The effect of a write is kept in a dict keyed by the idempotency key, which the
reconcilers read.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, StepStatus, ToolContext, tool
from corral.effects import LiveEffects
from corral.errors import ConfigInvalidError, RunNotResumableError, TransientToolError
from corral.observe.stats import run_stats
from corral.runtime.replay import replay_run
from corral.runtime.state import fold
from corral.store.base import RunRecord
from corral.store.sql import SqlStore
from corral.testing import FixedEffects
from corral.tools.policy import NO_RETRY, RetryPolicy, ToolPolicy
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent, corral_cli, exchange_count, write_agent
from tests.test_runtime import Crash, CrashAfterWrite
from tests.test_scheduler_events import numbered_plans

FAST = RetryPolicy(max_retries=2, backoff_s=(0.0,))
"""Two retries: a write that is wrongly retried is entered three times."""

HANG_S = 30.0
"""The longest a tool's thread waits for the test to let it answer. Only a run that waits
for a write it should have given up on ever waits this long, and then fails."""


class LateSignal(LiveEffects):
    """Live effects that tell a tool's thread the moment corral found its write late."""

    def __init__(self) -> None:
        self.late = threading.Event()

    async def late_write(self, spec: ToolSpec, work: asyncio.Future[Any], timeout_s: float) -> Any:
        self.late.set()
        return await super().late_write(spec, work, timeout_s)


class Done(BaseModel):
    ref: str


class Ledger:
    """A fake business system: effects by idempotency key, and how often each tool ran."""

    def __init__(self) -> None:
        self.effects: dict[str, str] = {}
        self.entries = 0
        self.lookups = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.entries += 1

    def apply(self, ctx: ToolContext) -> Done:
        with self.lock:
            self.effects.setdefault(ctx.idempotency_key, f"R{len(self.effects) + 1}")
            return Done(ref=self.effects[ctx.idempotency_key])

    def find(self, ctx: ToolContext) -> Done | None:
        self.lookups += 1
        ref = self.effects.get(ctx.idempotency_key)
        return Done(ref=ref) if ref else None


def write_policy(timeout_s: float = 5.0, *, idempotent: bool = False) -> ToolPolicy:
    return ToolPolicy(kind="write", timeout_s=timeout_s, retry=FAST, idempotent=idempotent)


async def killed_in_a_write(agent: Agent, effects: FixedEffects) -> tuple[MemoryStore, RunRecord]:
    """A run started on a new memory store whose process died (``Crash``) in a write."""
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=effects).start("go")
    [run] = store.list_runs()
    return store, run


def run_write(write: ToolSpec, effects: FixedEffects | None = None, **kwargs: Any) -> Runtime:
    agent = build_agent(
        [write], [{"id": "w", "tool": write.name, "facts": {"ref": "result.ref"}}], **kwargs
    )
    return Runtime(agent, MemoryStore(), effects=effects or FixedEffects())


def assert_unknown(runtime: Runtime, summary: Any) -> None:
    """Unknown everywhere it shows, and a reply that claims neither success nor failure."""
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.outcome == "unknown" and summary.error_code == "OUTCOME_UNKNOWN"
    assert summary.steps[0].status is StepStatus.UNKNOWN
    assert summary.steps[0].error_code == "OUTCOME_UNKNOWN"
    assert summary.handoff is not None and summary.handoff.reason_code == "OUTCOME_UNKNOWN"
    state = fold(summary.run_id, runtime.store.load_events(summary.run_id))
    expected = runtime.agent.renderer.render("outcome_unknown", {}, state.language)
    assert summary.reply == expected
    for claim in ("done", "Done", "完成", "not done", "failed", "失败", "未能", "没能"):
        assert claim not in expected


async def test_a_write_that_timed_out_after_its_effect_is_not_retried() -> None:
    ledger = Ledger()

    answer = threading.Event()

    @tool(policy=write_policy(timeout_s=0.05))
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        done = ledger.apply(ctx)  # the order is cancelled...
        answer.wait(HANG_S)  # ...but the answer comes only once corral has given up
        return done

    runtime = run_write(cancel_order)
    try:
        summary = await runtime.start("go")
    finally:
        answer.set()
    assert ledger.entries == 1
    assert_unknown(runtime, summary)
    key = summary.handoff.steps[0].idempotency_key  # what a person looks the effect up by
    events = runtime.store.load_events(summary.run_id)
    attempts = [e.data for e in events if e.type is EventType.TOOL_ATTEMPT]
    assert [(a["error_code"], a["in_flight"]) for a in attempts] == [("TOOL_TIMEOUT", True)]
    assert list(ledger.effects) == [key]  # the effect did happen: "failed" would have been a lie


async def test_a_write_that_acted_then_lost_its_connection_is_not_retried() -> None:
    ledger = Ledger()

    @tool(policy=write_policy())
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        ledger.apply(ctx)
        raise ConnectionResetError("connection reset by peer")

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    assert ledger.entries == 1 and len(ledger.effects) == 1
    assert_unknown(runtime, summary)


@pytest.mark.parametrize(
    "failure",
    [
        TransientToolError("503 before the order was touched", applied=False),
        ConnectionRefusedError("connection refused"),
    ],
)
async def test_a_write_that_provably_did_not_act_is_retried(failure: Exception) -> None:
    ledger = Ledger()

    @tool(policy=write_policy())
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        if ledger.entries == 1:
            raise failure
        return ledger.apply(ctx)

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    assert ledger.entries == 2
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"


async def test_an_ambiguous_transient_error_is_not_retried() -> None:
    ledger = Ledger()

    @tool(policy=write_policy())
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        raise TransientToolError("502 from the gateway")

    runtime = run_write(cancel_order)
    assert_unknown(runtime, await runtime.start("go"))
    assert ledger.entries == 1


async def test_an_idempotent_write_is_retried_after_a_timeout() -> None:
    ledger = Ledger()

    never = asyncio.Event()  # the first answer never comes: that attempt times out

    @tool(policy=write_policy(timeout_s=0.05, idempotent=True))
    async def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        done = ledger.apply(ctx)  # finds its own earlier effect by key
        if ledger.entries == 1:
            await never.wait()
        return done

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    assert ledger.entries == 2 and len(ledger.effects) == 1
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"


async def test_an_async_write_is_cancelled_at_its_timeout() -> None:
    ledger = Ledger()

    answer = asyncio.Event()  # set only after the run: too late for the timeout
    cancelled: list[bool] = []

    @tool(policy=write_policy(timeout_s=0.05))
    async def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        try:
            await answer.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return ledger.apply(ctx)

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    answer.set()
    for _ in range(3):  # a tool left running would resume here and act
        await asyncio.sleep(0)
    assert cancelled == [True]
    assert ledger.entries == 1 and ledger.effects == {}  # cancelled: it never acted
    assert_unknown(runtime, summary)


async def test_the_reconciler_settles_a_write_that_happened() -> None:
    ledger = Ledger()

    never = asyncio.Event()

    @tool(policy=write_policy(timeout_s=0.05), reconcile=ledger.find)
    async def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        done = ledger.apply(ctx)
        await never.wait()  # acted, then was cancelled before answering
        return done

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    assert ledger.entries == 1 and ledger.lookups == 1
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"
    assert summary.steps[0].status is StepStatus.SUCCEEDED
    assert summary.error_code is None
    state = fold(summary.run_id, runtime.store.load_events(summary.run_id))
    assert state.memory.facts["ref"].value == "R1"
    events = runtime.store.load_events(summary.run_id)
    settled = [e.data for e in events if e.type is EventType.OUTCOME_RECONCILED]
    assert [(d["tool"], d["write"], d["status"]) for d in settled] == [
        ("find", "cancel_order", "applied")
    ]
    report = await replay_run(runtime.agent, events)
    assert report.same_path, report


async def test_the_reconciler_proves_a_write_did_not_happen() -> None:
    ledger = Ledger()

    never = asyncio.Event()

    @tool(policy=write_policy(timeout_s=0.05), reconcile=ledger.find)
    async def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        await never.wait()  # cancelled before it acted
        return ledger.apply(ctx)

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    # Each time the reconciler proved it had not acted, so it was tried again (FAST: two
    # retries), never before the lookup; it never acted.
    assert ledger.entries == 3 and ledger.lookups == 3 and ledger.effects == {}
    assert summary.steps[0].status is StepStatus.FAILED
    assert summary.steps[0].error_code == "TOOL_TIMEOUT"
    assert summary.handoff is not None and summary.handoff.reason_code == "TOOL_TIMEOUT"
    assert "not applied" in summary.handoff.reason
    events = runtime.store.load_events(summary.run_id)
    assert [e.data["status"] for e in events if e.type is EventType.OUTCOME_RECONCILED] == [
        "not_applied"
    ] * 3


async def test_a_write_proven_not_applied_is_entered_again_and_acts_once() -> None:
    """Issue 11: a write that may have acted is entered again only after its reconciler
    proved it had not; a write it found is never entered again (entered once per key)."""
    ledger = Ledger()

    never = asyncio.Event()

    @tool(policy=write_policy(timeout_s=0.05, idempotent=True), reconcile=ledger.find)
    async def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        if ledger.entries == 1:
            await never.wait()  # the first try times out before it acted
        return ledger.apply(ctx)

    runtime = run_write(cancel_order)
    summary = await runtime.start("go")
    assert ledger.entries == 2 and ledger.lookups == 1 and len(ledger.effects) == 1
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"
    events = runtime.store.load_events(summary.run_id)
    attempts = [e.data["tool"] for e in events if e.type is EventType.TOOL_ATTEMPT]
    assert attempts == ["cancel_order", "find", "cancel_order"]


async def test_not_found_proves_nothing_while_a_sync_write_is_still_running() -> None:
    ledger = Ledger()

    answer, acted = threading.Event(), threading.Event()

    @tool(policy=write_policy(timeout_s=0.05), reconcile=ledger.find)
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        answer.wait(HANG_S)  # a thread cannot be stopped: it acts after corral gave up
        done = ledger.apply(ctx)
        acted.set()
        return done

    runtime = run_write(cancel_order)
    try:
        summary = await runtime.start("go")
    finally:
        answer.set()
    assert ledger.lookups == 0  # "not found" now would be a lie a moment later
    assert_unknown(runtime, summary)
    assert await asyncio.to_thread(acted.wait, HANG_S)
    assert len(ledger.effects) == 1


@pytest.mark.parametrize("with_reconciler", [True, False])
async def test_a_sync_write_that_ends_within_the_grace_keeps_its_result(
    with_reconciler: bool,
) -> None:
    ledger = Ledger()
    signal = LateSignal()

    # The grace is as long as the timeout: 2 s leave the thread ample time to answer once
    # told the write is late, on a loaded machine too.
    @tool(policy=write_policy(timeout_s=2.0), reconcile=ledger.find if with_reconciler else None)
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        signal.late.wait(HANG_S)  # answers only once corral has found it late
        return ledger.apply(ctx)

    runtime = run_write(cancel_order, FixedEffects(_live=signal))
    summary = await runtime.start("go")
    assert signal.late.is_set()  # it did miss its timeout
    assert ledger.entries == 1 and ledger.lookups == 0  # its own answer is the outcome
    assert summary.status is RunStatus.FINISHED and summary.steps[0].status is StepStatus.SUCCEEDED
    assert len(ledger.effects) == 1


def test_a_reconciler_must_fit_its_write() -> None:
    def finds_nothing_optional(ctx: ToolContext) -> Done:
        return Done(ref="x")

    def needs_more(order_id: str, ctx: ToolContext) -> Done | None:
        return None

    with pytest.raises(ConfigInvalidError, match=r"Done \| None"):

        @tool(policy=write_policy(), reconcile=finds_nothing_optional)
        def w1(ctx: ToolContext) -> Done:
            return Done(ref="x")

    with pytest.raises(ConfigInvalidError, match="order_id"):

        @tool(policy=write_policy(), reconcile=needs_more)
        def w2(ctx: ToolContext) -> Done:
            return Done(ref="x")

    with pytest.raises(ConfigInvalidError, match="only write tools"):

        @tool(reconcile=needs_more)
        def r1(order_id: str, ctx: ToolContext) -> Done:
            return Done(ref="x")


# --------------------------------------------------------------------------- crash + resume


async def crash_then_resume(write: ToolSpec) -> tuple[Runtime, Any]:
    agent = build_agent([write], [{"id": "w", "tool": write.name, "facts": {"ref": "result.ref"}}])
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=CrashAfterWrite()).start("go")
    run_id = store.list_runs()[0].run_id
    state = fold(run_id, store.load_events(run_id))
    assert state.steps["w"].status is StepStatus.RUNNING
    assert state.steps["w"].tool_used == write.name  # stored before the tool was entered
    runtime = Runtime(agent, store, effects=FixedEffects())
    return runtime, await runtime.resume(run_id)


async def test_resume_never_reenters_a_write_that_was_in_flight() -> None:
    ledger = Ledger()

    @tool(policy=write_policy())
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    runtime, summary = await crash_then_resume(cancel_order)
    assert ledger.entries == 1
    assert_unknown(runtime, summary)


async def test_resume_reconciles_a_write_that_was_in_flight() -> None:
    ledger = Ledger()

    @tool(policy=write_policy(), reconcile=ledger.find)
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    _, summary = await crash_then_resume(cancel_order)
    assert ledger.entries == 1 and ledger.lookups == 1
    assert summary.status is RunStatus.FINISHED and summary.steps[0].status is StepStatus.SUCCEEDED


async def test_resume_reenters_an_idempotent_write_once() -> None:
    ledger = Ledger()

    @tool(policy=write_policy(idempotent=True))
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    _, summary = await crash_then_resume(cancel_order)
    assert ledger.entries == 2 and len(ledger.effects) == 1
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"


@pytest.mark.parametrize("store_kind", ["memory", "sql"])
@pytest.mark.parametrize(
    ("kind", "entries", "calls"),
    [
        ("no reconciler", 1, {"cancel_order": 1}),  # unknown: a person takes it
        ("reconciler", 1, {"cancel_order": 1, "find": 1}),  # found: it succeeded
        ("idempotent", 2, {"cancel_order": 2}),  # entered again with the same key
    ],
)
async def test_a_write_killed_inside_its_call_counts_as_an_attempt(
    kind: str, entries: int, calls: dict[str, int], store_kind: str, tmp_path: Path
) -> None:
    """The process died inside the write: that call was made, whatever it did.

    It counts as one attempt, in the step's attempts (summary, handoff packet) and in
    stats' tool calls, like every attempt that ended: it was counted as none, and a
    write that was entered read as one refused before any tool ran.
    """
    ledger = Ledger()

    @tool(
        policy=write_policy(idempotent=kind == "idempotent"),
        reconcile=ledger.find if kind == "reconciler" else None,
    )
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    agent = build_agent([cancel_order], [{"id": "w", "tool": "cancel_order"}])
    store = MemoryStore() if store_kind == "memory" else SqlStore.open(tmp_path / "corral.db")
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=CrashAfterWrite()).start("go")
    [run] = store.list_runs()
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert ledger.entries == entries
    assert [step.attempts for step in summary.steps] == [sum(calls.values())]
    if kind == "no reconciler":
        assert summary.steps[0].status is StepStatus.UNKNOWN
        assert summary.handoff is not None
        assert [step.attempts for step in summary.handoff.steps] == [1]
    else:
        assert summary.steps[0].status is StepStatus.SUCCEEDED
    assert run_stats(store).tool_calls == calls
    # the same again from the log alone
    assert fold(run.run_id, store.load_events(run.run_id)).steps["w"].attempts == sum(
        calls.values()
    )


async def test_a_write_killed_twice_counts_each_call_it_was_killed_in_once() -> None:
    """Killed inside the write, then again inside it when the resume entered it again.

    Each call the process died in is one attempt, recorded once (by the next resume):
    three entries, three attempts.
    """
    ledger = Ledger()

    @tool(policy=write_policy(idempotent=True))
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    agent = build_agent([cancel_order], [{"id": "w", "tool": "cancel_order"}])
    store, run = await killed_in_a_write(agent, CrashAfterWrite())
    with pytest.raises(Crash):  # entered again, and killed inside again
        await Runtime(agent, store, effects=CrashAfterWrite()).resume(run.run_id)
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert ledger.entries == 3
    assert summary.status is RunStatus.FINISHED
    assert [step.attempts for step in summary.steps] == [3]
    assert run_stats(store).tool_calls == {"cancel_order": 3}


def poison_write(ledger: Ledger, reconciled: bool, **policy: Any) -> ToolSpec:
    """An idempotent write the process dies in on every call, before it acts."""

    @tool(
        policy=ToolPolicy(kind="write", idempotent=True, retry=FAST, **policy),
        reconcile=ledger.find if reconciled else None,
    )
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        raise Crash("the process died inside the write, before it acted")

    return cancel_order


async def resumed_until_it_ends(agent: Agent, store: MemoryStore, run_id: str) -> Any:
    """Resume after each death until a resume returns (at most 20 resumes)."""
    for _ in range(20):
        try:
            return await Runtime(agent, store, effects=FixedEffects()).resume(run_id)
        except Crash:
            continue
    raise AssertionError("the write was entered again by 20 resumes")


@pytest.mark.parametrize("reconciled", [False, True])
async def test_a_write_that_kills_every_call_is_entered_again_a_bounded_number_of_times(
    reconciled: bool,
) -> None:
    """A review: an idempotent write that kills the process on every call (a poison
    input) was entered again by every resume, without end (101 entries in 100 resumes).

    Once ``max_interrupted_calls`` (3 by default) of its calls were interrupted, the next
    resume enters it no more and hands the run to a person, saying why: the write's
    outcome unknown, or failed when its reconciler found that it never acted.
    """
    ledger = Ledger()
    agent = build_agent([poison_write(ledger, reconciled)], [{"id": "w", "tool": "cancel_order"}])
    store, run = await killed_in_a_write(agent, FixedEffects())
    summary = await resumed_until_it_ends(agent, store, run.run_id)
    assert ledger.entries == 3 and not ledger.effects
    assert summary.status is RunStatus.HANDED_OFF, summary
    [step] = summary.steps
    assert summary.handoff is not None
    assert "died in each of 3 calls of cancel_order" in summary.handoff.reason
    if reconciled:  # it looked after each death: the write provably never acted
        assert step.status is StepStatus.FAILED and step.error_code == "TOOL_FAILED"
        assert step.attempts == 6 and ledger.lookups == 3  # three calls, three lookups
    else:
        assert step.status is StepStatus.UNKNOWN and step.attempts == 3
    assert run_stats(store).tool_calls["cancel_order"] == 3
    with pytest.raises(RunNotResumableError):  # a person has it now
        await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert ledger.entries == 3


@pytest.mark.parametrize("reconciled", [False, True])
async def test_the_bound_on_interrupted_calls_is_the_tools_own_not_its_retries(
    reconciled: bool,
) -> None:
    """A review: bounded by ``retry.max_retries``, a write that may not be retried
    (``NO_RETRY``) was handed to a person after one kill of the process (a deploy),
    where it had been entered again with its key. ``max_interrupted_calls`` bounds it."""
    ledger = Ledger()

    @tool(policy=ToolPolicy(kind="write", idempotent=True, retry=NO_RETRY))
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    agent = build_agent([cancel_order], [{"id": "w", "tool": "cancel_order"}])
    store, run = await killed_in_a_write(agent, CrashAfterWrite())
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success", summary
    assert ledger.entries == 2 and len(ledger.effects) == 1  # the key found the effect
    once = Ledger()
    agent = build_agent(
        [poison_write(once, reconciled, max_interrupted_calls=1)],
        [{"id": "w", "tool": "cancel_order"}],
    )
    store, run = await killed_in_a_write(agent, FixedEffects())
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert summary.status is RunStatus.HANDED_OFF and once.entries == 1, summary


async def test_a_replan_does_not_enter_a_write_past_its_bound_again() -> None:
    """A review: the bound ended the step failed (its reconciler found no effect), so a
    model plan was replanned and the write planned again under a new count: 9 entries
    in 9 resumes. Past the bound the run goes to a person, with no replan."""
    ledger = Ledger()

    def find(n: int, ctx: ToolContext) -> Done | None:
        return ledger.find(ctx)

    @tool(policy=ToolPolicy(kind="write", idempotent=True, retry=FAST), reconcile=find)
    def poison(n: int, ctx: ToolContext) -> Done:
        ledger.enter()
        raise Crash("the process died inside the write, before it acted")

    model = numbered_plans("poison")
    steps = [{"id": "s1", "tool": "poison", "args": {"n": 0}}]
    config = build_agent([poison], steps, intent_tools=["poison"]).config
    intent = config.intents[0].model_copy(update={"planner": "model", "plan": None})
    agent = Agent.build(config.model_copy(update={"intents": [intent]}), [poison], model=model)
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=FixedEffects()).start("go with 0, 1, 2 or 3")
    [run] = store.list_runs()
    summary = await resumed_until_it_ends(agent, store, run.run_id)
    assert summary.status is RunStatus.HANDED_OFF, summary
    assert ledger.entries == 3 and len(model.requests) == 1


class FreezeAtWrite(FixedEffects):
    """The owner freezes, or dies, as it enters the write (SIGSTOP, a VM pause, a kill):
    it has not acted."""

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        if spec.policy.kind == "write":
            raise Crash("stopped before acting; a frozen one may act when it wakes up")
        return await super().call_tool(spec, args, context, timeout_s)


def read_then_write(ledger: Ledger, budget: dict[str, int], *, reconciled: bool = False) -> Agent:
    """A read ``r``, then ``w``: an idempotent write into ``ledger``, under ``budget``."""

    @tool(policy=ToolPolicy(kind="read", timeout_s=5.0))
    def look() -> Done:
        return Done(ref="x")

    @tool(policy=write_policy(idempotent=True), reconcile=ledger.find if reconciled else None)
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    steps = [{"id": "r", "tool": "look"}, {"id": "w", "tool": "cancel_order", "depends_on": ["r"]}]
    return build_agent([look, cancel_order], steps, budget=budget)


async def test_a_budget_that_stops_an_interrupted_write_hands_it_off_as_unknown() -> None:
    """A review: a resume whose budget stopped an interrupted write's settling handed the
    run off over the budget with the step still running, and the reply said nothing of
    the write: it may have acted. It goes to a person as ``OUTCOME_UNKNOWN``.

    Here the reconciler's lookup spends the last tool call, so the write it proved had not
    acted cannot be entered again (the person is told it may have: the safe side).
    """
    ledger = Ledger()
    agent = read_then_write(ledger, {"max_tool_calls": 2}, reconciled=True)
    store, run = await killed_in_a_write(agent, FreezeAtWrite())
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert summary.status is RunStatus.HANDED_OFF and summary.outcome == "unknown", summary
    assert summary.error_code == "OUTCOME_UNKNOWN" and summary.handoff is not None
    assert "step w (cancel_order) was entered" in summary.handoff.reason
    assert "tool-call budget of 2 used up" in summary.handoff.reason
    assert ledger.entries == 0 and ledger.lookups == 1


async def test_a_write_entered_again_is_no_new_step_of_the_budget() -> None:
    """A review: with ``max_steps`` equal to the plan's steps, the resume refused to enter
    the interrupted write again (the step budget counted it a second time), so a write
    its key makes safe to enter again went to a person. It is the same step."""
    ledger = Ledger()
    agent = read_then_write(ledger, {"max_steps": 2})
    store, run = await killed_in_a_write(agent, CrashAfterWrite())
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success", summary
    assert ledger.entries == 2 and len(ledger.effects) == 1


async def test_the_recorded_call_spends_none_of_the_budget_the_settling_needs() -> None:
    """A review: with a budget of one tool call, recording the call the process died in
    used it up, so the write was not entered again: the run was handed off over the
    budget with the write's step still running, and nobody was told it may have acted."""
    ledger = Ledger()

    @tool(policy=write_policy(idempotent=True))
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    steps = [{"id": "w", "tool": "cancel_order"}]
    agent = build_agent([cancel_order], steps, budget={"max_tool_calls": 1})
    store, run = await killed_in_a_write(agent, CrashAfterWrite())
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success", summary
    assert ledger.entries == 2 and [step.attempts for step in summary.steps] == [2]


class CrashWaitingToRetry(FixedEffects):
    """Dies in the wait before a retry, once another step's start has saved the run."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0.3)
        raise Crash("process killed while waiting to retry")


async def test_a_retry_the_process_died_waiting_for_is_no_attempt() -> None:
    """A review: an attempt that said it would be retried opened a call, so dying in the
    wait before the retry (the attempt saved by another write's start) counted a second
    attempt of a tool entered once."""
    ledger, other = Ledger(), Ledger()

    @tool(policy=write_policy())
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        if ledger.entries == 1:
            raise TransientToolError("503 before the order was touched", applied=False)
        return ledger.apply(ctx)

    @tool(policy=ToolPolicy(kind="read", timeout_s=5.0))
    async def look() -> Done:
        await asyncio.sleep(0.1)
        return Done(ref="x")

    @tool(policy=write_policy(idempotent=True))
    def note(ctx: ToolContext) -> Done:
        other.enter()
        return other.apply(ctx)

    steps = [
        {"id": "w", "tool": "cancel_order"},
        {"id": "r", "tool": "look"},
        {"id": "n", "tool": "note", "depends_on": ["r"]},
    ]
    agent = build_agent([cancel_order, look, note], steps)
    store, run = await killed_in_a_write(agent, CrashWaitingToRetry())
    saved = [e.data for e in store.load_events(run.run_id) if e.type is EventType.TOOL_ATTEMPT]
    assert [(a["step_id"], a["attempt"]) for a in saved] == [("w", 1)]  # saved before dying
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run.run_id)
    [w] = [step for step in summary.steps if step.id == "w"]
    assert ledger.entries == 1 and w.attempts == 1, summary
    assert run_stats(store).tool_calls["cancel_order"] == 1


# --------------------------------------------------------------------------- the CLI


AGENT_YAML = """
name: risky
default_language: en
intents:
  - name: cancel
    rules: [{keywords: [cancel], confidence: 0.95}]
    route: plan
    plan: cancel
    reply: cancelled_ok
plans:
  cancel:
    steps:
      - {id: s1, tool: cancel_order}
templates:
  cancelled_ok: {zh: 已取消, en: Your order is cancelled.}
"""

TOOLS_HEAD = """
import os
import signal
import time
from pathlib import Path

from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool


def setup(data_dir: Path) -> dict:
    data_dir.mkdir(parents=True, exist_ok=True)
    return {"ledger": data_dir / "entries.txt"}


class Cancelled(BaseModel):
    order_id: str

"""
"""What the test agents' ``tools.py`` below share: imports, the ledger file, the result."""

TOOLS_PY = (
    TOOLS_HEAD
    + """
@tool(policy=ToolPolicy(kind="write", timeout_s=0.2))
def cancel_order(ctx: ToolContext) -> Cancelled:
    \"\"\"Cancel the order (slowly: the answer comes once the run has recorded the step).\"\"\"
    with open(ctx.deps["ledger"], "a") as ledger:
        ledger.write("entered\\n")
    log = Path(ctx.deps["ledger"]).parents[2] / "logs" / f"{ctx.run_id}.jsonl"
    deadline = time.monotonic() + 60  # reached only if corral waits for this answer
    while time.monotonic() < deadline:
        if log.exists() and "step_finished" in log.read_text(encoding="utf-8"):
            break
        time.sleep(0.01)  # polls a file for the hand-off; its period orders nothing
    return Cancelled(order_id="A1")
"""
)


def test_cli_json_names_an_unknown_outcome(tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "risky", AGENT_YAML, TOOLS_PY)
    home = tmp_path / "home"
    done = corral_cli(home, "run", str(agent), "please cancel my order", "--json", ok=False)
    summary = json.loads(done.stdout)
    assert {"run_id", "status", "steps", "reply"} <= set(summary)
    assert summary["status"] == "handed_off"
    assert summary["error_code"] == "OUTCOME_UNKNOWN"
    assert summary["outcome"] == "unknown"
    assert summary["steps"][0]["status"] == "unknown"
    assert summary["steps"][0]["error_code"] == "OUTCOME_UNKNOWN"
    assert summary["handoff"]["reason_code"] == "OUTCOME_UNKNOWN"
    assert "could not confirm" in summary["reply"]
    assert "cancelled" not in summary["reply"]
    entries = (home / "data" / "risky" / "entries.txt").read_text(encoding="utf-8")
    assert entries.count("entered") == 1
    shown = corral_cli(home, "show", summary["run_id"]).stdout
    assert "? s1 cancel_order" in shown and "OUTCOME_UNKNOWN" in shown
    log = (home / "logs" / f"{summary['run_id']}.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in log.splitlines()]
    finished = [x for x in lines if x["event"] == "step_finished"]
    assert [(x["status"], x["level"]) for x in finished] == [("unknown", "warn")]


POISON_TOOLS_PY = (
    TOOLS_HEAD
    + """
@tool(policy=ToolPolicy(kind="write", idempotent=True))
def cancel_order(ctx: ToolContext) -> Cancelled:
    \"\"\"Cancel the order; on this input the process is killed inside the call.\"\"\"
    with open(ctx.deps["ledger"], "a") as ledger:
        ledger.write("entered\\n")
    os.kill(os.getpid(), signal.SIGKILL)
    return Cancelled(order_id="A1")
"""
)


def test_cli_a_write_that_kills_its_process_is_entered_three_times(tmp_path: Path) -> None:
    """End to end: ``corral run`` is killed inside the write, and so is each ``corral
    resume`` that enters it again, until ``max_interrupted_calls`` (3) calls were; the
    next resume hands the run to a person and enters it no more."""
    agent = write_agent(tmp_path / "poison", AGENT_YAML, POISON_TOOLS_PY)
    home = tmp_path / "home"
    killed = corral_cli(home, "run", str(agent), "please cancel my order", ok=False)
    assert killed.returncode == -signal.SIGKILL
    [run] = json.loads(corral_cli(home, "runs", "--json").stdout)
    run_id = run["run_id"]
    for _ in range(2):
        assert corral_cli(home, "resume", run_id, ok=False).returncode == -signal.SIGKILL
    done = corral_cli(home, "resume", run_id, "--json", ok=False)
    summary = json.loads(done.stdout)
    assert summary["status"] == "handed_off" and summary["error_code"] == "OUTCOME_UNKNOWN"
    assert summary["steps"][0]["attempts"] == 3
    assert "died in each of 3 calls of cancel_order" in summary["handoff"]["reason"]
    entries = (home / "data" / "poison" / "entries.txt").read_text(encoding="utf-8")
    assert entries.count("entered") == 3


class SlowStore(MemoryStore):
    """A store whose saves block in a thread (like SQL), recording each batch's seqs."""

    def __init__(self) -> None:
        super().__init__(blocking=True)
        self.batches: list[list[int]] = []
        self.overlapping = 0
        self.saving = 0
        self.lock = threading.Lock()

    def save(self, record: Any, events: Any, handoff: Any = None, **fencing: Any) -> None:
        with self.lock:
            self.saving += 1
            self.overlapping = max(self.overlapping, self.saving)
        # A save that takes a while, so that a second save issued alongside it would be
        # seen overlapping. Its length decides nothing when saves are serial (the passing
        # case): then nothing overlaps however long it takes.
        time.sleep(0.02)
        with self.lock:
            self.batches.append([e.seq for e in events])
            self.saving -= 1
        super().save(record, events, handoff, **fencing)


async def test_concurrent_writes_persist_one_batch_at_a_time() -> None:
    @tool(policy=ToolPolicy(kind="write"))
    async def write_a(ctx: ToolContext) -> Done:
        return Done(ref="a")

    @tool(policy=ToolPolicy(kind="write"))
    async def write_b(ctx: ToolContext) -> Done:
        return Done(ref="b")

    agent = build_agent(
        [write_a, write_b], [{"id": "a", "tool": "write_a"}, {"id": "b", "tool": "write_b"}]
    )
    store = SlowStore()
    summary = await Runtime(agent, store, effects=FixedEffects()).start("go")
    assert summary.status is RunStatus.FINISHED
    assert store.overlapping == 1
    seqs = [seq for batch in store.batches for seq in batch]
    assert seqs == sorted(seqs) == list(range(1, len(seqs) + 1))


async def test_attempts_are_numbered_across_the_tools_of_a_step_so_replay_finds_each() -> None:
    @tool(name="primary", policy=ToolPolicy(equivalent_group="lookup", latency_ms=10, retry=FAST))
    def primary() -> Done:
        raise TransientToolError("503")

    @tool(name="replica", policy=ToolPolicy(equivalent_group="lookup", latency_ms=500))
    def replica() -> Done:
        return Done(ref="r")

    agent = build_agent([primary, replica], [{"id": "s1", "tool": "primary"}])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    events = runtime.store.load_events(summary.run_id)
    attempts = [
        (e.data["tool"], e.data["attempt"]) for e in events if e.type is EventType.TOOL_ATTEMPT
    ]
    assert attempts == [("primary", 1), ("primary", 2), ("primary", 3), ("replica", 4)]
    report = await replay_run(agent, events)
    assert report.same_path, report


class AnswersLost(FixedEffects):
    """The write acts, but every answer is lost on the way back (a timeout)."""

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        result = await super().call_tool(spec, args, context, timeout_s)
        if spec.policy.kind == "write":
            raise TimeoutError
        return result


async def test_the_example_exchange_is_settled_by_its_reconciler(aftersales: Agent) -> None:
    store = MemoryStore()
    paused = await Runtime(aftersales, store, effects=FixedEffects()).start(
        "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
    )
    done = await Runtime(aftersales, store, effects=AnswersLost()).resume(
        paused.run_id, approve=True
    )
    assert exchange_count(aftersales) == 1
    assert done.status is RunStatus.FINISHED and "换新单 EX" in (done.reply or "")
    events = store.load_events(done.run_id)
    tools = [
        e.data["tool"]
        for e in events
        if e.type is EventType.TOOL_ATTEMPT and e.data["step_id"] == "s4"
    ]
    # Idempotent, but it has a reconciler: asked before any second entry (issue 11).
    assert tools == ["create_exchange_order", "find_exchange_by_key"]


@pytest.mark.parametrize("earlier_owner", ["silent", "gone"])
async def test_not_found_after_a_takeover_proves_nothing_while_the_owner_may_live(
    earlier_owner: str,
) -> None:
    ledger = Ledger()

    @tool(policy=write_policy(), reconcile=ledger.find)
    def cancel_order(ctx: ToolContext) -> Done:
        ledger.enter()
        return ledger.apply(ctx)

    agent = build_agent([cancel_order], [{"id": "w", "tool": "cancel_order"}])
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=FreezeAtWrite()).start("go")
    run_id = store.list_runs()[0].run_id
    if earlier_owner == "silent":  # its lease expired, but nothing proves it dead
        store.leases[run_id] = ("elsewhere/pid[1]:4242:0a1b2c3d", time.time() - 1)
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run_id)
    assert ledger.entries == 0 and ledger.lookups == 1
    if earlier_owner == "silent":
        assert summary.error_code == "OUTCOME_UNKNOWN"  # not "not applied": it may still act
        assert summary.steps[0].status is StepStatus.UNKNOWN
    else:
        assert summary.steps[0].status is StepStatus.FAILED
        assert summary.handoff is not None and "not applied" in summary.handoff.reason
