"""Steps that run beside each other start eagerly (``corral.eager``).

A call whose tools answer at once ends in its first step: the run takes its outcome
without a task turn, and never gives way to the event loop. A call that waits goes on as
its own task, beside the others, under its deadline, and is cancelled with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, RunStatus, Runtime, StepStatus, ToolPolicy, tool
from corral.eager import start
from corral.tools.policy import RetryPolicy
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


DAG: list[dict[str, Any]] = [
    {"id": "s1", "tool": "first", "args": {"n": 1}},
    {"id": "s2", "tool": "left", "args": {"n": 2}, "depends_on": ["s1"]},
    {"id": "s3", "tool": "right", "args": {"n": 3}, "depends_on": ["s1"]},
    {"id": "s4", "tool": "first", "args": {"n": 4}, "depends_on": ["s2", "s3"]},
]
"""s1 -> (s2 ‖ s3) -> s4: s2 and s3 are the round's concurrent calls."""


def dag_runtime(left: Any, right: Any) -> Runtime:
    @tool
    async def first(n: int) -> Value:
        return Value(value=n)

    return Runtime(build_agent([first, left, right], DAG), MemoryStore())


def task_noting_tools(tasks: list[asyncio.Task[Any] | None]) -> tuple[Any, Any]:
    """Two tools that answer at once and note the task each ran in."""

    @tool
    async def left(n: int) -> Value:
        tasks.append(asyncio.current_task())
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        tasks.append(asyncio.current_task())
        return Value(value=n)

    return left, right


class Turns:
    """Counts the event loop's turns: a callback that schedules itself again each turn."""

    def __init__(self) -> None:
        self.count = 0
        self.loop = asyncio.get_running_loop()
        self.loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self.loop.call_soon(self._tick)


async def test_a_run_whose_tools_answer_at_once_never_gives_way_to_the_loop() -> None:
    tasks: list[asyncio.Task[Any] | None] = []
    runtime = dag_runtime(*task_noting_tools(tasks))
    await runtime.start("go")  # warm: the first run imports and builds what it needs
    tasks.clear()
    turns = Turns()
    await asyncio.sleep(0)
    before = turns.count
    summary = await runtime.start("go")
    assert turns.count == before  # no step waited for a turn: s2 and s3 ended at once
    assert summary.status is RunStatus.FINISHED
    assert [step.status for step in summary.steps] == [StepStatus.SUCCEEDED] * 4
    # each concurrent call ran as a task of its own, not as the run's
    run_task = asyncio.current_task()
    assert len(tasks) == 2 and None not in tasks and run_task not in tasks
    assert tasks[0] is not tasks[1]


async def test_calls_that_wait_still_run_side_by_side_each_in_its_own_task() -> None:
    left_in, right_in = asyncio.Event(), asyncio.Event()
    seen: dict[str, tuple[Any, Any]] = {}

    @tool
    async def left(n: int) -> Value:
        before = asyncio.current_task()
        left_in.set()
        await asyncio.wait_for(right_in.wait(), 5)  # only met if s3 runs beside it
        seen["left"] = (before, asyncio.current_task())
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        before = asyncio.current_task()
        right_in.set()
        await asyncio.wait_for(left_in.wait(), 5)
        seen["right"] = (before, asyncio.current_task())
        return Value(value=n)

    summary = await dag_runtime(left, right).start("go")
    assert summary.status is RunStatus.FINISHED
    # a call goes on in the task its first step ran as (timeouts and cancel scopes need it)
    assert seen["left"][0] is seen["left"][1] and seen["right"][0] is seen["right"][1]
    assert seen["left"][0] is not seen["right"][0]


async def test_a_call_that_waits_past_its_deadline_is_timed_out_beside_one_that_answers() -> None:
    never = asyncio.Event()
    cancelled: list[str] = []

    @tool(policy=ToolPolicy(timeout_s=0.02, retry=RetryPolicy(0, ())))
    async def left(n: int) -> Value:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append("left")
            raise
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        return Value(value=n)

    runtime = dag_runtime(left, right)
    summary = await runtime.start("go")
    by_id = {step.id: step for step in summary.steps}
    assert by_id["s2"].error_code == "TOOL_TIMEOUT"  # its deadline cancelled its own task
    assert by_id["s3"].status is StepStatus.SUCCEEDED
    assert cancelled == ["left"]
    assert asyncio.current_task() is not None and not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_stopping_a_run_cancels_the_calls_waiting_after_their_first_step() -> None:
    never = asyncio.Event()
    entered: list[str] = []
    cancelled: list[str] = []

    def waiting_tool(name: str) -> Any:
        async def fn(n: int) -> Value:
            entered.append(name)
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise
            return Value(value=n)

        fn.__name__ = name
        fn.__doc__ = f"waits ({name})"
        return tool(fn)

    runtime = dag_runtime(waiting_tool("left"), waiting_tool("right"))
    run = asyncio.ensure_future(runtime.start("go"))
    while len(entered) < 2:  # both first steps ran (eagerly, before the run waited)
        await asyncio.sleep(0)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    await asyncio.sleep(0)  # the calls' tasks take their cancellation
    assert sorted(cancelled) == ["left", "right"]


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def test_start_runs_the_first_step_in_the_task_and_context_it_goes_on_in() -> None:
    gate = asyncio.Event()

    async def call() -> tuple[Any, Any, str]:
        VAR.set("set in the first step")
        before = asyncio.current_task()
        await gate.wait()
        return before, asyncio.current_task(), VAR.get()

    loop = asyncio.get_running_loop()
    task = start(loop, call())
    assert not task.done() and VAR.get() == "unset"  # waits; nothing leaked to the caller
    assert asyncio.current_task() is not task
    gate.set()
    before, after, value = await task
    assert before is after is task and value == "set in the first step"


async def test_start_gives_the_outcome_of_a_call_that_ends_in_its_first_step() -> None:
    async def answers() -> int:
        return 7

    async def fails() -> int:
        raise ValueError("no")

    async def cancels_itself() -> int:
        raise asyncio.CancelledError

    loop = asyncio.get_running_loop()
    done = start(loop, answers())
    assert done.done() and done.result() == 7
    failed = start(loop, fails())
    assert failed.done() and isinstance(failed.exception(), ValueError)
    assert start(loop, cancels_itself()).cancelled()


async def test_the_task_of_a_call_that_ends_in_its_first_step_has_ended_with_it() -> None:
    """It ended at once, not at the loop's next turn (3.11 left it queued until then: with
    many runs in flight, hundreds of such tasks waited there, walked by every young
    garbage collection). Held by the call, it can still be awaited."""
    tasks: list[asyncio.Task[Any] | None] = []

    async def answers() -> int:
        tasks.append(asyncio.current_task())
        return 7

    loop = asyncio.get_running_loop()
    pending = asyncio.all_tasks()
    done = start(loop, answers())
    assert done.done() and done.result() == 7
    (task,) = tasks
    assert task is not None and task is not asyncio.current_task()
    assert task.done() and not task.cancelled()
    assert not task.cancel()  # it has ended, as with 3.12's eager start
    assert asyncio.all_tasks() == pending
    await asyncio.wait_for(task, 1)


async def test_a_call_cancelled_before_its_task_first_ran_is_cancelled_where_it_waits() -> None:
    never = asyncio.Event()
    cleaned: list[str] = []

    async def call() -> None:
        try:
            await never.wait()
        finally:
            cleaned.append("finally ran")

    task = start(asyncio.get_running_loop(), call())
    task.cancel()  # at once: the task has not taken a step of its own yet (3.11)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert task.cancelled() and cleaned == ["finally ran"]


async def test_a_call_that_waits_again_and_again_is_driven_and_cancelled_as_a_task() -> None:
    gate = asyncio.Event()
    steps: list[str] = []

    async def call() -> str:
        await asyncio.sleep(0)  # a bare yield first: the task steps it again next turn
        steps.append("after a bare yield")
        await asyncio.sleep(0)
        await gate.wait()
        return "answered"

    loop = asyncio.get_running_loop()
    answered = start(loop, call())
    for _ in range(5):
        await asyncio.sleep(0)
    assert steps == ["after a bare yield"] and not answered.done()
    gate.set()
    assert await answered == "answered"

    cleaned: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(0)
            await asyncio.Event().wait()
        finally:
            cleaned.append("finally ran")

    waiting = start(loop, waits())
    for _ in range(3):  # the task drives the call itself by now
        await asyncio.sleep(0)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert waiting.cancelled() and cleaned == ["finally ran"]


class Crash(BaseException):
    """Not an ``Exception``: a tool's envelope does not take it, it ends the run."""


async def test_a_crash_beside_a_call_waiting_on_a_task_cancels_that_task_too() -> None:
    children: list[asyncio.Future[Any]] = []

    @tool
    async def left(n: int) -> Value:
        child = asyncio.ensure_future(asyncio.Event().wait())
        children.append(child)
        await child  # its first step waits on a task of its own
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        raise Crash  # in its first step, while s2 waits

    with pytest.raises(Crash):  # the run ends with what crashed it
        await dag_runtime(left, right).start("go")
    for _ in range(5):  # the cancellations take their turns
        await asyncio.sleep(0)
    # as a task cancelled while it waits: what it waits for is cancelled with it
    assert len(children) == 1 and children[0].cancelled()


def test_an_exit_in_a_first_step_leaves_a_call_started_before_it_to_its_task() -> None:
    never = asyncio.Event()
    ended: list[str] = []

    @tool
    async def left(n: int) -> Value:
        try:
            await never.wait()
        except BaseException as exc:
            ended.append(type(exc).__name__)
            raise
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        # in its first step, after s2's has parked: a BaseException that is no tool's
        # failure (a tool's SystemExit is one: ``ToolExited``)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(dag_runtime(left, right).start("go"))
    # s2 was cancelled as a task, where it waits; never closed under the run's task
    assert ended == ["CancelledError"]


async def test_a_loop_with_its_own_task_factory_makes_the_calls_tasks() -> None:
    made: list[Any] = []
    loop = asyncio.get_running_loop()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        made.append(task)
        return task

    tasks: list[asyncio.Task[Any] | None] = []
    left, right = task_noting_tools(tasks)

    loop.set_task_factory(factory)  # what tracing or structured-concurrency tools install
    try:
        summary = await dag_runtime(left, right).start("go")
    finally:
        loop.set_task_factory(None)
    assert summary.status is RunStatus.FINISHED
    assert len(tasks) == 2 and all(task in made for task in tasks)


def test_an_exit_in_a_first_step_stops_the_loop_and_the_run_keeps_what_it_did() -> None:
    never = asyncio.Event()

    @tool
    async def left(n: int) -> Value:
        await never.wait()
        return Value(value=n)

    @tool
    async def right(n: int) -> Value:
        raise KeyboardInterrupt  # as from any task: it stops the loop, the run is cancelled

    @tool
    async def first(n: int) -> Value:
        return Value(value=n)

    store = MemoryStore()
    runtime = Runtime(build_agent([first, left, right], DAG), store)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(runtime.start("go"))
    (record,) = store.list_runs()
    kinds = [event.type for event in store.load_events(record.run_id)]
    assert "step_started" in kinds  # kept by the cancelled run, as a stop keeps it
