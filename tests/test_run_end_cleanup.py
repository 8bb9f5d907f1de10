"""A run that ends by a crash or a stop has ended its steps' tasks when it returns.

The steps that run beside the one that crashed (or beside a stop) are cancelled, and their
cleanup (a tool's ``finally``, its ``except CancelledError``) runs before the run's call
raises and before a stop's last save: never after the run ended, never only when the loop
closes, with no task left pending and no exception left for the collector to report. The
run raises what ended it, whatever its cancelled steps raise on their way out. A tool that
swallows its cancellation delays the end by a bounded grace at most, named in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, Runtime, tool
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


class Crash(BaseException):
    """Not an ``Exception``: a tool's envelope does not take it, it ends the run."""


BESIDE: list[dict[str, Any]] = [
    {"id": "s1", "tool": "left", "args": {"n": 1}},
    {"id": "s2", "tool": "right", "args": {"n": 2}},
]
"""Two independent steps: the round's concurrent calls."""


def runtime_of(
    left: Any, right: Any, store: MemoryStore | None = None, *, grace_s: float = 2.0
) -> Runtime:
    agent = build_agent([left, right], BESIDE, limits={"cancel_grace_s": grace_s})
    return Runtime(agent, store or MemoryStore())


@contextlib.contextmanager
def loop_reports() -> Iterator[list[dict[str, Any]]]:
    """What the running loop's exception handler is told (a destroyed pending task, an
    exception never retrieved), collected once the objects left behind are collected."""
    loop = asyncio.get_running_loop()
    reports: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reports.append(context))
    try:
        yield reports
        gc.collect()
    finally:
        loop.set_exception_handler(previous)


def others() -> set[asyncio.Task[Any]]:
    """The tasks of this loop other than the test's own."""
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


def cleaning_tool(name: str, cleaned: list[str], *, first_wait: bool = False) -> Any:
    """A tool that waits a long time; its ``finally`` closes something (it awaits), then
    notes that it ran."""

    async def fn(n: int) -> Value:
        try:
            if first_wait:
                await asyncio.sleep(0)
            await asyncio.sleep(3600)
        finally:
            for _ in range(10):  # closing a connection, say: a few turns of the loop
                await asyncio.sleep(0)
            cleaned.append(name)
        return Value(value=n)

    fn.__name__ = name
    fn.__doc__ = f"waits ({name})"
    return tool(fn)


def crashing_tool(*, at_once: bool = False) -> Any:
    """A tool that crashes the run: in its first step, or in a later one of its task."""

    @tool
    async def right(n: int) -> Value:
        if not at_once:
            await asyncio.sleep(0)
        raise Crash

    return right


def stubborn_tool(release: asyncio.Event) -> Any:
    """A tool that swallows every cancellation until ``release``, then fails."""

    @tool
    async def left(n: int) -> Value:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # it will not stop
                await release.wait()
        raise RuntimeError("ended late")

    return left


@pytest.mark.parametrize("crash_at_once", [True, False])
async def test_a_crash_beside_a_waiting_step_has_run_its_cleanup_when_the_run_raises(
    crash_at_once: bool,
) -> None:
    cleaned: list[str] = []

    right = crashing_tool(at_once=crash_at_once)

    with loop_reports() as reports:
        with pytest.raises(Crash):
            await runtime_of(cleaning_tool("left", cleaned), right).start("go")
        assert cleaned == ["left"]  # before the run's call raised, not at a later turn
        assert not others()
    assert reports == []


async def test_the_run_raises_what_ended_it_not_what_its_cancelled_steps_raise() -> None:
    @tool
    async def left(n: int) -> Value:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None  # its own, on the way out
        return Value(value=n)

    right = crashing_tool()

    with loop_reports() as reports:
        with pytest.raises(Crash):
            await runtime_of(left, right).start("go")
        assert not others()
    assert reports == []  # its RuntimeError was taken, not left for the collector


class SavesNoted(MemoryStore):
    """A store that notes each save in the list the tools note their cleanup in."""

    def __init__(self, noted: list[str]) -> None:
        super().__init__()
        self.noted = noted

    def save(self, run: Any, events: Sequence[Any], *args: Any, **kwargs: Any) -> None:
        self.noted.append("save")
        super().save(run, events, *args, **kwargs)


async def test_stopping_a_run_ends_its_steps_before_the_last_save() -> None:
    noted: list[str] = []
    store = SavesNoted(noted)
    runtime = runtime_of(
        cleaning_tool("left", noted), cleaning_tool("right", noted, first_wait=True), store
    )
    with loop_reports() as reports:
        run = asyncio.ensure_future(runtime.start("go"))
        for _ in range(5):  # both calls wait past their first step
            await asyncio.sleep(0)
        noted.clear()
        run.cancel()  # a server stopping, a stream's consumer leaving
        with pytest.raises(asyncio.CancelledError):
            await run
        assert sorted(noted[:2]) == ["left", "right"] and noted[2:] == ["save"]
        assert not others()
    assert reports == []
    (record,) = store.list_runs()
    kinds = [event.type for event in store.load_events(record.run_id)]
    assert kinds.count("step_started") == 2  # kept by the stopped run


async def test_leaving_a_run_stream_ends_its_steps_before_the_iterator_closes() -> None:
    cleaned: list[str] = []
    runtime = runtime_of(cleaning_tool("left", cleaned), cleaning_tool("right", cleaned))
    with loop_reports() as reports:
        stream = runtime.stream("go")
        async for item in stream:
            if getattr(item, "type", None) == "step_started" and item.data["step_id"] == "s2":
                break
        await stream.aclose()  # what a consumer that leaves does
        assert sorted(cleaned) == ["left", "right"]
        assert not others()
    assert reports == []


async def test_a_tool_that_swallows_its_cancellation_delays_the_end_only_by_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()
    left, right = stubborn_tool(release), crashing_tool()

    with loop_reports() as reports, caplog.at_level(logging.WARNING, "corral.runtime.scheduler"):
        try:
            with pytest.raises(Crash):
                await asyncio.wait_for(runtime_of(left, right, grace_s=0.05).start("go"), 30)
        finally:
            release.set()  # it ends, late: what it raises is taken, not reported
        assert "s1 (left) did not end" in caplog.text
        for _ in range(5):
            await asyncio.sleep(0)
        assert not others()
    assert reports == []


async def test_the_grace_is_the_agents_setting() -> None:
    """With ``limits.cancel_grace_s`` at an hour, the run still waits after the default's
    2 s (a lower bound, which load cannot break), and ends once the tool lets go."""
    release = asyncio.Event()
    left, right = stubborn_tool(release), crashing_tool()
    run = asyncio.ensure_future(runtime_of(left, right, grace_s=3600).start("go"))
    try:
        await asyncio.sleep(2.5)
        assert not run.done()
    finally:
        release.set()
    with pytest.raises(Crash):
        await asyncio.wait_for(run, 30)


async def test_a_crash_beside_a_sync_tool_does_not_wait_for_its_thread() -> None:
    release = threading.Event()
    entered = threading.Event()

    @tool
    def left(n: int) -> Value:
        entered.set()
        release.wait(60)  # a thread cannot be cancelled: it runs on after the run
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        while not entered.is_set():
            await asyncio.sleep(0.001)
        raise Crash

    try:
        with loop_reports() as reports:
            with pytest.raises(Crash):
                await asyncio.wait_for(runtime_of(left, right, grace_s=3600).start("go"), 10)
            # the step let go of the thread at once; only the thread's own future waits on
            (waiting,) = others()
            assert "to_thread" in repr(waiting.get_coro())
            release.set()
            await asyncio.wait_for(waiting, 10)
    finally:
        release.set()
    assert reports == []


async def test_a_second_stop_ends_the_wait_for_a_tool_that_will_not_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()
    left = stubborn_tool(release)

    @tool
    async def right(n: int) -> Value:
        await asyncio.sleep(0)
        await asyncio.sleep(3600)
        return Value(value=n)

    with loop_reports() as reports, caplog.at_level(logging.WARNING, "corral.runtime.scheduler"):
        run = asyncio.ensure_future(runtime_of(left, right, grace_s=3600).start("go"))
        for _ in range(5):
            await asyncio.sleep(0)
        run.cancel()  # the first stop: the run waits for its steps
        for _ in range(5):
            await asyncio.sleep(0)
        assert not run.done()
        run.cancel()  # the second: it waits no longer
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 10)
        assert "s1 (left) did not end" in caplog.text
        release.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not others()
    assert reports == []
