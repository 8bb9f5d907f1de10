"""A server stopping with a run whose tool ignores cancellation still stops, boundedly.

``Hub.close`` stopped the run once, then again, then awaited it for ever; and the serve
loop's close (``asyncio.run``'s) waited for every task again. A supervisor had to kill the
process. Now the run is left behind, logged, to its lease (``corral resume`` finishes it).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import pytest
from pydantic import BaseModel

from corral import MemoryStore, Runtime, tool
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import build_agent

import_extra("fastapi", REQUIRE_ALL)
import_extra("uvicorn", REQUIRE_ALL)


class Looked(BaseModel):
    n: int


def stubborn_agent(started: asyncio.Event, relent: asyncio.Event | None = None) -> Runtime:
    @tool
    async def stubborn(n: int) -> Looked:
        """Swallows every cancellation (a badly written tool), until ``relent`` is set."""
        started.set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if relent is not None and relent.is_set():
                    raise

    agent = build_agent([stubborn], [{"id": "s1", "tool": "stubborn", "args": {"n": 1}}])
    return Runtime(agent, MemoryStore())


async def test_closing_the_hub_leaves_a_run_that_will_not_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from corral.server.hub import Hub

    started, relent = asyncio.Event(), asyncio.Event()
    hub = Hub()
    live = await hub.drive(stubborn_agent(started, relent).stream("go"))
    await started.wait()
    began = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="corral.server.hub"):
            closing = asyncio.ensure_future(hub.close(grace_s=0.05, stop_s=0.2))
            await asyncio.wait({closing}, timeout=10)  # a close that swallows a cancel
        assert closing.done() and time.monotonic() - began < 5  # grace, two stops of 0.2 s
        assert f"left to their leases: {live.run_id}" in caplog.text  # type: ignore[union-attr]
    finally:  # the test's loop must end: the tool gives in now
        relent.set()
        others = asyncio.all_tasks() - {asyncio.current_task()}
        for task in others:
            task.cancel()
        await asyncio.wait(others, timeout=10)


# the stuck coroutine, destroyed by the collector, cannot be closed cleanly: Python says so
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_serve_loop_closes_without_waiting_for_a_task_that_will_not_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As ``corral serve`` ends: the hub left the run behind, then the loop closes."""
    from corral.server.hub import Hub
    from corral.server.process import close_loop

    loop = asyncio.new_event_loop()

    async def serve_then_stop() -> None:
        started = asyncio.Event()
        hub = Hub()
        await hub.drive(stubborn_agent(started).stream("go"))
        await started.wait()
        await hub.close(grace_s=0.05, stop_s=0.1)

    loop.run_until_complete(serve_then_stop())
    began = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        close_loop(loop, wait_s=0.2)
        assert time.monotonic() - began < 5 and loop.is_closed()
        gc.collect()  # the tasks left pending are destroyed
    # what asyncio says of them is not an error: the hub's warning named the run
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, caplog.text
