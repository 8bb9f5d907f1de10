"""Tool deadlines watched by one watcher per event loop, as ``asyncio.timeout_at`` did.

A call still waiting at its deadline is cancelled and its caller gets ``TimeoutError``;
what was not the deadline's doing (a cancellation from outside, a tool that swallowed
the cancellation) reaches the caller as it would through ``asyncio.timeout_at``; and the
calls that answered in time leave nothing behind on the loop.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from corral import ToolContext, tool
from corral.deadlines import COMPACT_AT, Deadlines
from corral.effects import LiveEffects
from corral.tools.spec import ToolSpec


class Out(BaseModel):
    value: int


def _context() -> ToolContext:
    return ToolContext(run_id="run_1", step_id="s1", idempotency_key="")


async def _call(effects: LiveEffects, spec: ToolSpec, timeout_s: float, n: int) -> object:
    return await effects.call_tool(spec, spec.input_model(n=n), _context(), timeout_s)


def _stuck(never: asyncio.Event, seen: list[int]) -> ToolSpec:
    @tool
    async def stuck(n: int) -> Out:
        """Waits for what never comes, or returns ``n`` when it is let go."""
        await asyncio.sleep(0)
        try:
            await never.wait()
        except asyncio.CancelledError:
            seen.append(n)
            raise
        return Out(value=n)

    return stuck


async def test_of_calls_in_flight_only_the_late_one_is_cancelled_and_the_task_is_whole() -> None:
    effects, never, seen = LiveEffects(), asyncio.Event(), []
    stuck = _stuck(never, seen)
    patient = asyncio.ensure_future(_call(effects, stuck, 30.0, 1))
    await asyncio.sleep(0)
    # A shorter deadline than the one the watcher's timer is armed for, added later.
    with pytest.raises(TimeoutError):
        await _call(effects, stuck, 0.02, 2)
    assert seen == [2]
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    never.set()
    assert await patient == Out(value=1)
    assert seen == [2]


async def test_a_deadline_already_past_cancels_the_tool_at_its_first_wait() -> None:
    never, seen = asyncio.Event(), []
    with pytest.raises(TimeoutError):
        await _call(LiveEffects(), _stuck(never, seen), 0.0, 3)
    assert seen == []  # cancelled in its first ``sleep(0)``, before it waits for ``never``
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    effects, never, seen = LiveEffects(), asyncio.Event(), []
    call = asyncio.ensure_future(_call(effects, _stuck(never, seen), 30.0, 4))
    for _ in range(3):
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert seen == [4]


async def test_a_tool_that_swallows_its_cancellation_answers_as_through_timeout_at() -> None:
    late = asyncio.Event()

    @tool
    async def stubborn(n: int) -> Out:
        """Ignores being cancelled once, and answers."""
        await asyncio.sleep(0)
        try:
            await late.wait()
        except asyncio.CancelledError:
            return Out(value=-n)
        return Out(value=n)

    assert await _call(LiveEffects(), stubborn, 0.02, 5) == Out(value=-5)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_calls_that_answer_in_time_leave_no_timer_per_call_on_the_loop() -> None:
    loop = asyncio.get_running_loop()
    effects = LiveEffects()

    @tool
    async def quick(n: int) -> Out:
        """Waits one turn of the loop."""
        await asyncio.sleep(0)
        return Out(value=n)

    before = len(loop._scheduled)  # type: ignore[attr-defined]
    for n in range(3 * COMPACT_AT):
        assert await _call(effects, quick, 30.0, n) == Out(value=n)
    assert len(loop._scheduled) - before <= 1  # type: ignore[attr-defined]
    watcher = effects._deadlines[loop]
    assert len(watcher.heap) < COMPACT_AT  # the entries of ended calls are dropped
    assert all(entry[2].task is None for entry in watcher.heap)


async def test_a_watcher_arms_again_for_the_call_still_waiting() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    first = deadlines.watch(loop, loop.time() + 0.01)
    first.close(None)  # ended in time: its entry is dead
    task = asyncio.current_task()
    assert task is not None
    second = deadlines.watch(loop, loop.time() + 0.02)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.Event().wait()  # cancelled by the watcher at the second deadline
    assert second.expired and not first.expired
    with pytest.raises(TimeoutError):
        second.close(asyncio.CancelledError())
    assert task.cancelling() == 0
    assert deadlines.heap == []
