"""``Runtime.stream`` / ``stream_resume``: a run's events as it writes them, then its summary."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from corral import Agent, Runtime, SqlStore, ToolContext, ToolPolicy, parse_config, tool
from corral.contracts import EventType, RunStatus, RunSummary
from corral.effects import FixedEffects
from corral.errors import InputTooLargeError, RunNotFoundError
from corral.events import Event
from corral.store.memory import MemoryStore
from tests.helpers import build_agent, exchange_count
from tests.one_intent import one_intent

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
REPAIR = "订单 HD20240501 的打印机坏了，要报修"


async def _collect(stream: object) -> tuple[list[Event], RunSummary]:
    items = [item async for item in stream]  # type: ignore[attr-defined]
    *events, summary = items
    assert all(isinstance(e, Event) for e in events)
    assert isinstance(summary, RunSummary)
    return events, summary


async def test_stream_yields_every_stored_event_in_order_then_the_summary(
    runtime: Runtime,
) -> None:
    events, summary = await _collect(runtime.stream(REPAIR))
    stored = await runtime.events(summary.run_id)
    assert [e.seq for e in events] == list(range(1, len(stored) + 1))
    assert [(e.seq, e.type) for e in events] == [(e.seq, e.type) for e in stored]
    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type is EventType.RUN_FINISHED
    assert summary == await runtime.summary(summary.run_id)
    assert summary.status is RunStatus.FINISHED


async def test_events_arrive_while_the_run_is_still_going(aftersales: Agent) -> None:
    """The first event reaches the consumer before the run has stored anything."""
    store = MemoryStore()
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    stream = runtime.stream(REPAIR)
    first = await anext(stream)
    assert isinstance(first, Event) and first.type is EventType.RUN_STARTED
    assert store.load_events(first.run_id) == []  # not yet stored: seen live
    rest = [item async for item in stream]
    assert isinstance(rest[-1], RunSummary) and rest[-1].status is RunStatus.FINISHED
    assert len(store.load_events(first.run_id)) == len(rest)  # every event, stored at the end


async def test_a_paused_run_streams_to_its_pause_and_stream_resume_continues_it(
    runtime: Runtime, aftersales: Agent
) -> None:
    events, paused = await _collect(runtime.stream(EXCHANGE))
    assert paused.status is RunStatus.AWAITING_CONFIRM
    assert events[-1].type is not EventType.RUN_FINISHED
    assert exchange_count(aftersales) == 0

    more, done = await _collect(runtime.stream_resume(paused.run_id, approve=True))
    assert done.status is RunStatus.FINISHED
    assert more[0].seq == events[-1].seq + 1  # no gap, no repeat
    assert more[0].type is EventType.CONFIRMATION_GIVEN
    assert [e.seq for e in events + more] == [e.seq for e in await runtime.events(done.run_id)]
    assert exchange_count(aftersales) == 1


async def test_refused_input_is_raised_from_the_iterator(runtime: Runtime) -> None:
    with pytest.raises(InputTooLargeError):
        await _collect(runtime.stream("坏" * 1_000_000))
    with pytest.raises(RunNotFoundError):
        await _collect(runtime.stream_resume("run_missing", approve=True))


async def test_leaving_the_loop_early_cancels_the_run_which_resume_then_finishes(
    aftersales: Agent, tmp_path: Path
) -> None:
    """Leaving early is a crash: what was stored stays; ``resume`` finishes the run."""
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects(), lease_ttl_s=0.5)
    paused = await runtime.start(EXCHANGE)
    stream = runtime.stream_resume(paused.run_id, approve=True)
    seen = [await anext(stream), await anext(stream)]
    assert all(isinstance(e, Event) for e in seen)
    await stream.aclose()  # the consumer leaves mid-run
    # The run is its own task, so it may have got as far as storing the approval (and
    # entering the write) before it was cancelled; either way nothing is lost or repeated.
    left = await runtime.summary(paused.run_id)
    assert left.status in {RunStatus.AWAITING_CONFIRM, RunStatus.EXECUTING}
    if left.status is RunStatus.AWAITING_CONFIRM:  # the approval was never stored
        assert exchange_count(aftersales) == 0
        done = await runtime.resume(paused.run_id, approve=True, wait_s=5.0)
    else:  # picked up where its log ends, the write settled by its key
        done = await runtime.resume(paused.run_id, wait_s=5.0)
    assert done.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1


class Looked(BaseModel):
    n: int


async def test_a_run_stopped_before_its_first_save_is_stored_and_resumes(tmp_path: Path) -> None:
    """A stop (a consumer leaving, a server shutting down) stores what the run did.

    The read waits on a gate, so the run is stopped before any durability point; it used
    to leave nothing (``RUN_NOT_FOUND`` for a run id the caller had seen).
    """
    gate = asyncio.Event()

    @tool
    async def look(n: int) -> Looked:
        """A read that waits until the test opens the gate."""
        await gate.wait()
        return Looked(n=n)

    agent = Agent.build(
        parse_config(one_intent("go", steps=[{"id": "s1", "tool": "look", "args": {"n": 1}}])),
        [look],
    )
    runtime = Runtime(agent, SqlStore.open(tmp_path / "corral.db"), effects=FixedEffects())
    stream = runtime.stream("go")
    seen: list[Event] = []
    async for item in stream:
        assert isinstance(item, Event)
        seen.append(item)
        if item.type is EventType.STEP_STARTED:  # the read has begun, and waits
            break
    await stream.aclose()
    run_id = seen[0].run_id
    stored = await runtime.events(run_id)
    assert [e.seq for e in stored] == [e.seq for e in seen]  # every event it had applied
    gate.set()
    done = await runtime.resume(run_id, wait_s=2.0)
    assert done.status is RunStatus.FINISHED


class Refunded(BaseModel):
    ref: str


async def test_a_write_still_running_when_the_run_is_stopped_is_not_settled_as_not_applied(
    tmp_path: Path,
) -> None:
    """A stop cannot end a sync write's thread: its effect may still come after the stop.

    The stopped run must not let a resume take "not found" as proof that the write never
    acted (it used to release its lease as a clean end, and the write, found nowhere yet,
    was settled as not applied just before its thread made it). The lease is left to
    expire instead, and the write is handed to a person as ``OUTCOME_UNKNOWN``.
    """
    made: dict[str, str] = {}
    entered, finish, acted = asyncio.Event(), threading.Event(), threading.Event()
    loop = asyncio.get_running_loop()

    def find(ctx: ToolContext) -> Refunded | None:
        ref = made.get(ctx.idempotency_key)
        return Refunded(ref=ref) if ref else None

    @tool(policy=ToolPolicy(kind="write", timeout_s=60), reconcile=find)
    def refund(ctx: ToolContext) -> Refunded:
        """A sync write that acts only once the test lets it: after the stop."""
        loop.call_soon_threadsafe(entered.set)
        finish.wait(30)
        made[ctx.idempotency_key] = "R1"
        acted.set()
        return Refunded(ref="R1")

    agent = build_agent([refund], [{"id": "s1", "tool": "refund"}])
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store, effects=FixedEffects(), lease_ttl_s=0.5)
    stream = runtime.stream("go")
    first = await anext(stream)
    assert isinstance(first, Event)
    await entered.wait()  # the write's thread runs
    await stream.aclose()  # the consumer leaves: the run is stopped
    done = await runtime.resume(first.run_id, wait_s=5.0)
    finish.set()  # the thread the stop could not end makes the write
    assert await asyncio.to_thread(acted.wait, 30)
    step = done.steps[0]
    assert step.error_code == "OUTCOME_UNKNOWN", (step.status, step.error_code, done.outcome)
    assert made  # it did act: "not applied" would have been a false claim


async def test_a_stopped_run_stops_the_steps_it_was_running_beside_each_other(
    tmp_path: Path,
) -> None:
    """Steps that run side by side are tasks of their own: a stop must end them too.

    The run's task stopped, but its steps' tasks ran on: an async write that a stop
    would have cancelled made its effect after the stop, and nothing recorded it.
    """
    made: list[str] = []
    gate, entered, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @tool
    async def look(n: int) -> Looked:
        """A read that waits until the test opens the gate."""
        await gate.wait()
        return Looked(n=n)

    @tool(policy=ToolPolicy(kind="write"))
    async def charge(ctx: ToolContext) -> Refunded:
        """An async write, stopped (cancelled) or, once the gate opens, made."""
        entered.set()
        try:
            await gate.wait()
            made.append(ctx.idempotency_key)
            return Refunded(ref="C1")
        finally:
            ended.set()

    steps = [{"id": "s1", "tool": "look", "args": {"n": 1}}, {"id": "s2", "tool": "charge"}]
    agent = build_agent([look, charge], steps)
    runtime = Runtime(agent, SqlStore.open(tmp_path / "corral.db"), effects=FixedEffects())
    stream = runtime.stream("go")
    assert isinstance(await anext(stream), Event)
    await entered.wait()  # both steps run, each in its task
    await stream.aclose()  # the run is stopped
    gate.set()
    async with asyncio.timeout(30):
        await ended.wait()
    assert made == []


async def test_a_consumer_stopped_twice_is_stopped_whatever_the_drive_ended_with() -> None:
    """The second stop reaches the drive, and the consumer ends cancelled, not with the
    drive's own error (a timeout or a task group that stopped it must see a stop)."""
    from corral.runtime.stream import event_stream

    stopping = asyncio.Event()

    async def drive(watch: object) -> RunSummary:
        try:
            await asyncio.Event().wait()  # a run that never ends by itself
        except asyncio.CancelledError:
            stopping.set()
            try:
                await asyncio.Event().wait()  # storing what it did, for as long as it may
            except asyncio.CancelledError:
                raise RuntimeError("the save failed as it was given up") from None
        raise AssertionError("unreachable")

    async def consume() -> None:
        async for _ in event_stream(drive):
            pass

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0)
    consumer.cancel()
    await stopping.wait()  # the first stop reached the drive, which is still stopping
    assert not consumer.done()
    consumer.cancel()
    await asyncio.wait({consumer})
    assert consumer.cancelled()


async def test_a_stream_stopped_by_an_anyio_cancel_scope_stores_the_run_and_frees_it() -> None:
    """anyio cancels a scope's task again at every turn until it leaves: one stop still."""
    import anyio

    gate = asyncio.Event()  # never set: the run is stopped in its step

    @tool
    async def slow(n: int) -> Looked:
        await gate.wait()
        return Looked(n=n)

    store = MemoryStore()
    runtime = Runtime(build_agent([slow], [{"id": "s1", "tool": "slow", "args": {"n": 1}}]), store)
    seen: list[Event] = []

    async def follow(scope: anyio.CancelScope) -> None:
        async for item in runtime.stream("go"):
            assert isinstance(item, Event)
            seen.append(item)
            if item.type is EventType.STEP_STARTED:
                scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(follow, group.cancel_scope)
    (run_id,) = store.runs
    assert [e.seq for e in store.load_events(run_id)] == [e.seq for e in seen]
    assert store.lease_holder(run_id) is None
