"""The hub that owns the server's live runs: a stopping server waits for them, then cancels.

Driven in process (no HTTP), with a tool that waits for the test: nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

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


async def test_a_follower_of_a_run_the_stopping_server_cancels_is_told_so(tmp_path: Path) -> None:
    """In process, over ASGI: the stream ends with an ``error`` that says how to go on."""
    import httpx

    from corral.server.app import ServerSettings, create_app

    gate = asyncio.Event()  # never released: the run outlives the grace
    agent = gated_runtime(gate).agent
    app = create_app(ServerSettings(agents=(agent,), home=tmp_path, token="t", shutdown_grace_s=0))
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://x", headers=headers) as http:
        started = await http.post("/agents/test/runs", json={"message": "go", "wait": False})
        run_id = started.json()["run_id"]
        following = asyncio.create_task(http.get(f"/runs/{run_id}/stream"))
        live = app.state.corral.hub.live(run_id)
        while not live.events or live.events[-1].type.value != "step_started":
            await asyncio.sleep(0)  # the run reaches its held step
        while not live._wake._waiters:  # the follower waits for the run's next event
            await asyncio.sleep(0.01)
        await app.state.corral.hub.close(0)
        answer = await following
    messages = [block for block in answer.text.split("\r\n\r\n") if block.strip()]
    assert "event: error" in messages[-2]
    error = json.loads(messages[-2].split("data: ", 1)[1])["error"]
    assert error["code"] is None and "stopped" in error["message"]
    assert "/resume" in error["hint"]
    # the stopped run stored what it had done: the stream ends with it, resumable
    assert "event: summary" in messages[-1]
    assert json.loads(messages[-1].split("data: ", 1)[1])["status"] == "executing"
