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
"""

from __future__ import annotations

import asyncio
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


if sys.version_info >= (3, 12):

    def start(loop: asyncio.AbstractEventLoop, call: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``call``'s first step now, as a task; the task goes on if the call waits.

        The future returned is done when the call ended in its first step.
        """
        return asyncio.Task(call, loop=loop, eager_start=True)

else:

    class _First:
        """What the call's first step left for the task: what it waits for, or its end."""

        __slots__ = ("ended", "waiting")

        def __init__(self) -> None:
            self.ended = False
            self.waiting: Any = None

    def start(loop: asyncio.AbstractEventLoop, call: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``call``'s first step now, as a task; the task goes on if the call waits.

        The future returned is done when the call ended in its first step (then it is not
        the task, which ends at its own first step with nothing to do).
        """
        first = _First()
        rest = _rest(call, first)
        next(rest)  # to its first ``yield``: a cancellation before the task's first step
        context = contextvars.copy_context()  # reaches the call (see ``_rest``)
        task: asyncio.Task[Any] = asyncio.Task(rest, loop=loop, context=context)
        parent = asyncio.current_task(loop)
        if parent is not None:
            asyncio.tasks._leave_task(loop, parent)
        asyncio.tasks._enter_task(loop, task)
        ended: asyncio.Future[T] | None = None
        try:
            first.waiting = context.run(call.send, None)
        except StopIteration as done:
            ended = loop.create_future()
            ended.set_result(done.value)
        except asyncio.CancelledError:  # as a task that cancels itself: cancelled
            ended = loop.create_future()
            ended.cancel()
        except (KeyboardInterrupt, SystemExit):  # as a task's step: raised at once
            first.ended = True
            raise
        except BaseException as exc:
            ended = loop.create_future()
            ended.set_exception(exc)
        finally:
            asyncio.tasks._leave_task(loop, task)
            if parent is not None:
                asyncio.tasks._enter_task(loop, parent)
        if ended is not None:
            first.ended = True
            return ended
        return task

    @types.coroutine
    def _rest(call: Coroutine[Any, Any, T], first: _First) -> Generator[Any, Any, T | None]:
        """The task's part: whatever the call's first step left, then the rest of the call.

        ``start`` advances it to its first ``yield``, so that a cancellation thrown in
        before the task's first step is thrown into the call where it waits, as it would
        be for a task that ran that step itself.
        """
        try:
            yield  # ``start`` leaves it here
        except BaseException as exc:
            if first.ended:
                raise
            if isinstance(exc, GeneratorExit):
                call.close()
                raise
            try:
                waiting = call.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            if first.ended:
                return None  # the call ended in the first step: ``start`` has its outcome
            waiting, first.waiting = first.waiting, None
        return (yield from resume(call, waiting))
