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
from pathlib import Path

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, Runtime, SqlStore, tool
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


def waiting_agent(started: asyncio.Event, seconds: float = 3600) -> Agent:
    """An agent whose one tool waits ``seconds`` (unless cancelled), once ``started``."""

    @tool
    async def wait(n: int) -> Looked:
        """Waits, unless cancelled."""
        started.set()
        await asyncio.sleep(seconds)
        return Looked(n=n)

    return build_agent([wait], [{"id": "s1", "tool": "wait", "args": {"n": 1}}])


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


@pytest.mark.parametrize("when", ["during the grace", "before the close"])
async def test_a_hurry_stops_the_runs_at_once_and_leaves_the_stubborn_one_soon(
    when: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A second Ctrl-C (``Hub.hurry``) cuts the grace and both stops of 30 s short."""
    from corral.server.hub import Hub
    from corral.server.stopping import HURRIED_S

    started, relent = asyncio.Event(), asyncio.Event()
    hub = Hub()
    live = await hub.drive(stubborn_agent(started, relent).stream("go"))
    await started.wait()
    try:
        with caplog.at_level(logging.WARNING, logger="corral.server.hub"):
            if when == "before the close":
                hub.hurry()
            closing = asyncio.ensure_future(hub.close(grace_s=30, stop_s=30))
            await asyncio.sleep(0.1)
            began = time.monotonic()
            hub.hurry()
            await asyncio.wait({closing}, timeout=10)
        assert closing.done() and time.monotonic() - began < HURRIED_S + 2
        assert f"left to their leases: {live.run_id}" in caplog.text  # type: ignore[union-attr]
    finally:
        relent.set()
        others = asyncio.all_tasks() - {asyncio.current_task()}
        for task in others:
            task.cancel()
        await asyncio.wait(others, timeout=10)


async def test_a_hurried_run_that_stops_stores_what_it_did(tmp_path: Path) -> None:
    """Hurried, a run that obeys its cancellation is stopped and saved, not left behind."""
    from corral.server.hub import Hub

    started = asyncio.Event()
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(waiting_agent(started), store)
    hub = Hub()
    live = await hub.drive(runtime.stream("go"))
    await started.wait()
    closing = asyncio.ensure_future(hub.close(grace_s=30, stop_s=30))
    await asyncio.sleep(0.1)
    began = time.monotonic()
    hub.hurry()
    await asyncio.wait_for(closing, timeout=10)
    assert time.monotonic() - began < 2
    await runtime.aclose()
    run_id = live.run_id  # type: ignore[union-attr]
    record = store.get_run(run_id)
    assert record is not None and record.status == "executing"  # stored by its stop
    assert store.load_events(run_id)[-1].type is EventType.STEP_STARTED
    assert store.lease_holder(run_id) is None  # given back: resumable at once
    store.engine.dispose()


async def test_a_hurried_run_stopped_again_gets_a_moment_to_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its cleanup outlasts the hurry; stopped again, it ends at once: not left behind."""
    from corral.server.hub import Hub
    from corral.server.stopping import HURRIED_S

    started = asyncio.Event()

    @tool
    async def tidy(n: int) -> Looked:
        """Tidies up for longer than a hurry allows, unless stopped again."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(HURRIED_S + 2)  # the second stop ends this
        return Looked(n=n)

    agent = build_agent([tidy], [{"id": "s1", "tool": "tidy", "args": {"n": 1}}])
    hub = Hub()
    await hub.drive(Runtime(agent, MemoryStore()).stream("go"))
    await started.wait()
    with caplog.at_level(logging.WARNING, logger="corral.server.hub"):
        hub.hurry()
        await asyncio.wait_for(hub.close(grace_s=30, stop_s=30), timeout=10)
    assert "left to their leases" not in caplog.text
    assert not hub._tasks  # every run ended within the close


async def test_the_grace_counts_from_the_stop_signal_not_from_the_close() -> None:
    """uvicorn first waits for requests in flight (a follower holds it): that is grace spent."""
    from corral.server.hub import Hub, LiveRun

    started = asyncio.Event()
    hub = Hub()
    live = await hub.drive(Runtime(waiting_agent(started), MemoryStore()).stream("go"))
    await started.wait()
    hub.stopping(time.monotonic() - 5.5)  # the signal came 5.5 s ago
    began = time.monotonic()
    await asyncio.wait_for(hub.close(grace_s=6, stop_s=5), timeout=10)
    assert time.monotonic() - began < 2  # 0.5 s of grace left, then stopped: not 6 s
    assert isinstance(live, LiveRun) and isinstance(live.error, asyncio.CancelledError)


def test_a_hub_closed_in_a_hurry_closes_unhurried_on_another_loop() -> None:
    """A hurry is for one close: the next close (another loop, as in a test) waits again."""
    from corral.server.hub import Hub, LiveRun

    hub = Hub()

    async def close_with_a_run(hurried: bool) -> str:
        started = asyncio.Event()
        runtime = Runtime(waiting_agent(started, seconds=0.3), MemoryStore())
        live = await hub.drive(runtime.stream("go"))
        await started.wait()
        if hurried:
            hub.hurry()
        await hub.close(grace_s=10, stop_s=1)
        assert isinstance(live, LiveRun) and live.done
        if isinstance(live.error, asyncio.CancelledError):
            return "stopped"
        assert live.summary is not None
        return live.summary.status.value

    assert asyncio.run(close_with_a_run(hurried=True)) == "stopped"  # at once
    assert asyncio.run(close_with_a_run(hurried=False)) == "finished"  # waited for


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


def test_threads_left_waits_boundedly_and_names_what_it_leaves() -> None:
    """A stuck loop thread is left after ``wait_s``; the others get ``others_s``, no more."""
    import threading

    from corral.server.process import THREAD_PREFIX, threads_left

    release = threading.Event()
    stuck = threading.Thread(target=release.wait, name=f"{THREAD_PREFIX}_9")
    saving = threading.Thread(target=release.wait, name="a-save")
    brief = threading.Thread(target=time.sleep, args=(0.05,), name="brief")
    for thread in (stuck, saving, brief):
        thread.start()
    try:
        began = time.monotonic()
        left = threads_left(wait_s=0.1, others_s=0.3)  # other tests' threads may be named
        assert time.monotonic() - began < 2
        assert {"a-save", f"{THREAD_PREFIX}_9"} <= set(left) and "brief" not in left
    finally:
        release.set()
        for thread in (stuck, saving, brief):
            thread.join()
    began = time.monotonic()
    assert threads_left(wait_s=5, others_s=5) == []  # nothing of the loop's: no wait
    assert time.monotonic() - began < 1


def test_what_the_closing_loop_cancels_is_counted_and_any_other_error_still_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """uvicorn's reports of the requests and lifespan a stop cancels: one line."""
    import traceback

    from corral.server.process import _CancelledByTheStop, _close_quietly

    reports = logging.getLogger("uvicorn.error")
    loop = asyncio.new_event_loop()

    async def request(failing_first: bool = False) -> None:  # as uvicorn's ``run_asgi``
        try:
            try:
                if failing_first:
                    raise RuntimeError("disk full")
                await asyncio.sleep(3600)
            except RuntimeError:
                await asyncio.sleep(3600)  # cancelled while handling that failure
        except BaseException as exc:
            reports.error("Exception in ASGI application\n", exc_info=exc)
            raise

    async def lifespan(failing_first: bool = False) -> None:  # starlette's, as text
        try:
            try:
                if failing_first:
                    raise RuntimeError("the hub failed to close")
                await asyncio.sleep(3600)
            except RuntimeError:
                await asyncio.sleep(3600)
        except asyncio.CancelledError:
            reports.error(traceback.format_exc())
            raise

    async def failing() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            reports.error("Exception in ASGI application\n", exc_info=ValueError("broken"))
            raise

    works = (request(), request(), lifespan(), failing(), request(True), lifespan(True))
    tasks = [loop.create_task(work) for work in works]
    loop.run_until_complete(asyncio.sleep(0))
    with caplog.at_level(logging.INFO):
        reports.error("Cancel %s running task(s), timeout graceful shutdown exceeded", 2)
        _close_quietly(loop)
    shown = [(r.name, r.getMessage().splitlines()[0]) for r in caplog.records]
    # uvicorn's own line, as it was: the filter is on only while the loop closes here
    assert shown[0] == (
        "uvicorn.error",
        "Cancel 2 running task(s), timeout graceful shutdown exceeded",
    )
    assert sorted(shown[1:-1]) == [  # the tasks are cancelled in no particular order
        ("uvicorn.error", "Exception in ASGI application"),  # the ValueError
        ("uvicorn.error", "Exception in ASGI application"),  # cancelled after "disk full"
        ("uvicorn.error", "Traceback (most recent call last):"),  # after the hub's failure
    ]
    assert shown[-1] == (
        "corral.server.process",
        "stopped: cancelled 2 request(s) still in flight",
    )
    assert "disk full" in caplog.text and "the hub failed to close" in caplog.text
    assert not reports.filters  # only while the loop closes
    assert all(task.cancelled() for task in tasks)
    told = logging.LogRecord(
        "uvicorn.error", logging.ERROR, __file__, 0, shown[0][1].replace("2", "%s"), (2,), None
    )
    assert not _CancelledByTheStop().filter(told)  # counted request by request instead
