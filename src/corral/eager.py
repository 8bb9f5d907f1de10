"""Start a coroutine as a task whose first step runs at once (``asyncio``'s eager start).

A task created the usual way runs its first step only at a later turn of the event loop:
whoever started it must give way and wait, even for a call that answers without waiting
for anything. With many runs in flight, every run then gave way at each step that ran
beside another, the runs interleaved, and each run's objects outlived the young garbage
collections to be walked again by the older ones. Started eagerly, such a call has ended
when ``start`` returns, and its run goes on without giving way.

Python 3.12 does this itself (``Task(eager_start=True)``). On 3.11 the task is created
first and the call's first step runs here *as that task*: ``asyncio.current_task()``,
the context and cancellation are the task's during that step, as they are for the rest of
the call; a deadline, a timeout or a cancel scope entered in the first step belongs to the
task it will be enforced on. The task's own first step then only hands over (``_rest``).

A loop given a task factory (tracing, structured concurrency, a test harness) makes every
task itself: there a call starts as the factory's task, at the loop's next turn, since an
eager task would be made without the factory.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sys
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


@types.coroutine
def resume(call: Coroutine[Any, Any, T], waiting: Any) -> Generator[Any, Any, T]:
    """Go on with a coroutine that has run its first step and yielded ``waiting``.

    What ``await`` does after that step: hand what the coroutine waits for to the task,
    and send (or throw) back into the coroutine what the task answers.
    """
    try:
        while True:
            try:
                answer = yield waiting
            except GeneratorExit:
                call.close()
                raise
            except BaseException as exc:  # a cancellation (a timeout) goes to the call
                waiting = call.throw(exc)
            else:
                waiting = call.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _raise(exc: BaseException) -> Any:
    """Raise ``exc`` in a task's own step, where it stops the event loop.

    An exit or an interrupt from a call's first step stops the loop as one from any task's
    step does, instead of ending the run that started the call (a run then cancelled keeps
    what it did: ``Runtime`` stores it).
    """
    raise exc


if sys.version_info >= (3, 12):

    def start(loop: asyncio.AbstractEventLoop, call: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``call``'s first step now, as a task; the task goes on if the call waits.

        The future returned is done when the call ended in its first step.
        """
        if loop.get_task_factory() is not None:
            return loop.create_task(call)  # the loop's factory makes its tasks
        try:
            return asyncio.Task(call, loop=loop, eager_start=True)
        except (KeyboardInterrupt, SystemExit) as exc:  # raised into this run: see ``_raise``
            return asyncio.Task(_raise(exc), loop=loop)

else:

    def start(loop: asyncio.AbstractEventLoop, call: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``call``'s first step now, as a task; the task goes on if the call waits.

        The future returned is done when the call ended in its first step. It is then not
        the task, whose own first step ends it with nothing to do (its coroutine is closed);
        on asyncio's own loops that step has run when ``start`` returns (``_end_now``). As
        with 3.12's eager start, the task has ended by then: callbacks the call added to
        it are queued already, and cancelling it does nothing.
        """
        if loop.get_task_factory() is not None:
            return loop.create_task(call)  # the loop's factory makes its tasks
        rest = _rest(call)
        context = contextvars.copy_context()
        task: asyncio.Task[Any] = asyncio.Task(rest, loop=loop, context=context)
        ready = getattr(loop, "_ready", None)  # where the task's own first step was queued
        queue = ready if isinstance(ready, collections.deque) else None
        queued_at = len(queue) - 1 if queue is not None else -1
        parent = asyncio.current_task(loop)
        if parent is not None:
            asyncio.tasks._leave_task(loop, parent)
        asyncio.tasks._enter_task(loop, task)
        ended: asyncio.Future[Any] | None = None
        try:
            waiting = context.run(call.send, None)
        except BaseException as exc:
            rest.close()  # it never started: it holds nothing from now on
            ended = _ended(loop, exc)
        finally:
            asyncio.tasks._leave_task(loop, task)
            if ended is not None and queue is not None:  # here, where no task is current
                _end_now(queue, queued_at, task)
            if parent is not None:
                asyncio.tasks._enter_task(loop, parent)
        if ended is not None:
            return ended
        next(rest)  # it takes what the call's first step waits for, for the task's first
        rest.send(waiting)  # parked: a cancellation before the task's first step reaches the call
        return task

    def _ended(loop: asyncio.AbstractEventLoop, exc: BaseException) -> asyncio.Future[Any]:
        """The outcome of a call that ended in its first step, as its task would hold it."""
        ended = loop.create_future()
        if isinstance(exc, StopIteration):
            ended.set_result(exc.value)
        elif isinstance(exc, asyncio.CancelledError):  # a call that cancels itself
            ended.cancel()
        elif isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return asyncio.Task(_raise(exc), loop=loop)  # out of the loop, as from its task
        else:
            ended.set_exception(exc)
        return ended

    def _end_now(ready: collections.deque[Any], at: int, task: asyncio.Task[Any]) -> None:
        """Take the task's own first step (``_rest``) now, off the loop's queue: it ends the task.

        The call ended in ``start``; the step has nothing left to do but end the task, as it
        would have at the loop's next turn. Queued, it kept the task, its context and its
        handle alive until then: with many runs in flight, hundreds of them at once. They
        outlived the young garbage collections, which walked them again and again, and
        which came more often: one 5-step DAG run after another on 3.11, 386 -> 365
        µs per run, 92 -> 37 young collections per 3 000 runs. Only the step found where
        ``start`` queued it is taken: a loop without that queue (uvloop) runs it at its turn.
        """
        if at >= len(ready):
            return
        handle = ready[at]
        step = getattr(handle, "_callback", None)
        if getattr(step, "__self__", None) is task:
            del ready[at]
            handle._run()  # in the task's context; an error goes to the loop's handler

    @types.coroutine
    def _rest(call: Coroutine[Any, Any, T]) -> Generator[Any, Any, T]:
        """The task's part: the rest of a call whose first step ``start`` ran.

        ``start`` sends it what that step waits for (no holder alive beside it while the
        call runs), then it parks at its next ``yield``, so that a cancellation thrown in before
        the task's first step is thrown into the call where it waits. That step hands the
        task what the call waits for; from the next on, the task drives the call itself
        (``yield from``: no frame of this one in between).
        """
        waiting: Any = yield  # what the call's first step waits for, from ``start``
        parked = True
        while True:
            try:
                if parked:
                    yield  # where ``start`` parks it
                    parked = False
                yield waiting  # a task sends ``None`` when what it waited for is done
                break
            except GeneratorExit:
                call.close()
                raise
            except BaseException as exc:  # a cancellation goes to the call
                if parked:
                    parked = False
                    if _cancelled_waiting(waiting, exc):
                        continue  # the task waits for it to end, then throws that in
                try:
                    waiting = call.throw(exc)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
        return (yield from call)  # type: ignore[no-any-return]


def _cancelled_waiting(waiting: Any, exc: BaseException) -> bool:
    """Cancel what a parked call waits for, as ``Task.cancel`` cancels its ``_fut_waiter``.

    A task cancelled while it waits cancels the future it waits on (a gathered or awaited
    task is cancelled with it) and throws the outcome into its coroutine once that future
    has ended. A call parked by ``start`` was not yet handed to its task: thrown straight
    into the call, the cancellation would leave what it waits for running, orphaned.
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    if not getattr(waiting, "_asyncio_future_blocking", False):
        return False  # a bare yield: the task would throw the cancellation in at once
    return bool(waiting.cancel(exc.args[0] if exc.args else None))
