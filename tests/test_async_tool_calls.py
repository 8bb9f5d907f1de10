"""An async tool's call through ``LiveEffects``: its first step runs at once, the rest under
its timeout, and what it waits for, raises or returns reaches the caller as with ``await``."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from corral import ToolContext, tool
from corral.effects import LiveEffects
from corral.tools.spec import ToolSpec


class Out(BaseModel):
    value: int


def _context() -> ToolContext:
    return ToolContext(run_id="run_1", step_id="s1", idempotency_key="")


async def _call(spec: ToolSpec, timeout_s: float = 5.0, **args: int) -> object:
    return await LiveEffects().call_tool(spec, spec.input_model(**args), _context(), timeout_s)


async def test_a_tool_that_never_waits_answers_in_its_first_step() -> None:
    @tool
    async def double(n: int) -> Out:
        """Doubles."""
        return Out(value=2 * n)

    assert await _call(double, n=4) == Out(value=8)


async def test_a_tool_that_waits_gets_each_answer_it_waits_for() -> None:
    loop = asyncio.get_running_loop()
    answers: list[asyncio.Future[int]] = []

    @tool
    async def gather(n: int) -> Out:
        """Waits for n answers and adds them up."""
        total = 0
        for _ in range(n):
            answer: asyncio.Future[int] = loop.create_future()
            answers.append(answer)
            total += await answer
            await asyncio.sleep(0)
        return Out(value=total)

    call = asyncio.ensure_future(_call(gather, n=3))
    for k in (10, 20, 30):
        while len(answers) < k // 10:
            await asyncio.sleep(0)
        answers[-1].set_result(k)
    assert await call == Out(value=60)


async def test_a_tool_still_waiting_at_its_timeout_is_cancelled() -> None:
    never = asyncio.Event()
    seen: list[str] = []

    @tool
    async def stuck(n: int) -> Out:
        """Waits for what never comes."""
        await asyncio.sleep(0)  # a first step that waits: the timeout covers what follows
        try:
            await never.wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return Out(value=n)

    with pytest.raises(TimeoutError):
        await _call(stuck, timeout_s=0.02, n=1)
    assert seen == ["cancelled"]


async def test_a_failure_after_waiting_reaches_the_caller_as_raised() -> None:
    @tool
    async def flaky(n: int) -> Out:
        """Fails once it has waited."""
        await asyncio.sleep(0)
        raise ConnectionResetError(f"reset after {n}")

    with pytest.raises(ConnectionResetError, match="reset after 2"):
        await _call(flaky, n=2)


async def test_cancelling_the_caller_cancels_the_waiting_tool() -> None:
    entered, never = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    @tool
    async def slow(n: int) -> Out:
        """Waits until cancelled."""
        entered.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return Out(value=n)

    call = asyncio.ensure_future(_call(slow, n=1))
    await entered.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert seen == ["cancelled"]
