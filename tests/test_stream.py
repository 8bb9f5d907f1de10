"""``Runtime.stream`` / ``stream_resume``: a run's events as it writes them, then its summary."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral import Agent, Runtime, SqlStore
from corral.contracts import EventType, RunStatus, RunSummary
from corral.effects import FixedEffects
from corral.errors import InputTooLargeError, RunNotFoundError
from corral.events import Event
from corral.store.memory import MemoryStore
from tests.helpers import exchange_count

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
    runtime = Runtime(aftersales, store, effects=FixedEffects(), lease_ttl_s=0.05)
    paused = await runtime.start(EXCHANGE)
    stream = runtime.stream_resume(paused.run_id, approve=True)
    seen = [await anext(stream), await anext(stream)]
    assert all(isinstance(e, Event) for e in seen)
    await stream.aclose()  # the consumer leaves mid-run
    await asyncio.sleep(0.1)  # the cancelled run's lease lapses
    left = await runtime.summary(paused.run_id)
    assert left.status is RunStatus.AWAITING_CONFIRM  # the approval was never stored
    assert exchange_count(aftersales) == 0
    done = await runtime.resume(paused.run_id, approve=True, wait_s=1.0)
    assert done.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1
