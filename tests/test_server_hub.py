"""The hub that owns the server's live runs: a stopping server waits for them, then cancels.

Driven in process (no HTTP), with a tool that waits for the test: nothing is timed.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from tests.extras import REQUIRE_ALL, import_extra

import_extra("fastapi", REQUIRE_ALL)

from corral import RunStatus, Runtime, tool  # noqa: E402
from corral.server.hub import Hub, LiveRun  # noqa: E402
from tests.helpers import build_agent  # noqa: E402


class Value(BaseModel):
    value: int


def gated_runtime(gate: asyncio.Event) -> Runtime:
    @tool
    async def slow(n: int) -> Value:
        await gate.wait()
        return Value(value=n)

    return Runtime(build_agent([slow], [{"id": "s1", "tool": "slow", "args": {"n": 1}}]))


async def test_closing_waits_for_a_run_in_flight_within_the_grace() -> None:
    gate = asyncio.Event()
    runtime = gated_runtime(gate)
    hub = Hub()
    live = await hub.drive(runtime.stream("go"))
    assert isinstance(live, LiveRun) and hub.live(live.run_id) is live
    closing = asyncio.create_task(hub.close(grace_s=60))
    for _ in range(5):  # let the close begin: it must still be waiting for the run
        await asyncio.sleep(0)
    assert not closing.done()
    gate.set()
    await closing
    summary = await live.outcome()
    assert summary.status is RunStatus.FINISHED
    assert hub.live(live.run_id) is None
    assert (await runtime.summary(live.run_id)).status is RunStatus.FINISHED


async def test_closing_cancels_a_run_that_outlives_the_grace() -> None:
    runtime = gated_runtime(asyncio.Event())  # never released
    hub = Hub()
    live = await hub.drive(runtime.stream("go"))
    assert isinstance(live, LiveRun)
    await hub.close(grace_s=0)
    assert live.done and hub.live(live.run_id) is None
    with pytest.raises(asyncio.CancelledError):
        await live.outcome()


async def test_an_input_refused_before_the_run_began_is_raised_and_nothing_is_live() -> None:
    runtime = gated_runtime(asyncio.Event())
    hub = Hub()
    with pytest.raises(Exception, match="INPUT_TOO_LARGE"):
        await hub.drive(runtime.stream("go" * 100_000))
    assert runtime.store.list_runs() == []
