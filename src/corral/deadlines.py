"""Tool-call deadlines, watched by one timer per event loop instead of one timer per call.

``asyncio.timeout_at`` pushes a timer on the loop's heap for every call and cancels it
when the call answers. The cancelled timer stays in the heap until its time comes (a
tool's timeout, 10 s by default), and the heap orders timers with a comparison written in
Python: with many calls in flight, every timer of the loop (the tools' own sleeps too)
paid for thousands of dead ones. Here an event loop has one ``Deadlines``: a heap of
``(deadline, order, watch)`` tuples, compared in C, and one timer armed for the earliest
deadline of a call still waiting. A call past its deadline is cancelled, and its
cancellation becomes ``TimeoutError``, exactly as ``asyncio.timeout_at`` does it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

COMPACT_AT = 100
"""Dead entries are dropped from a heap of at least this many once they are half of it
(``asyncio``'s rule for its own cancelled timers): memory stays within twice the calls
in flight."""


@dataclass(slots=True, eq=False)
class Watch:
    """One waiting call: the task to cancel at its deadline, and what it was before."""

    owner: Deadlines
    task: asyncio.Task[Any] | None
    """``None`` once the call has ended: its heap entry is dead."""
    cancelling: int
    """The task's pending cancellations when the call began (``Task.cancelling``)."""
    listed: bool = True
    """Its entry is in the heap (not for a call late from the start, nor once expired)."""
    expired: bool = False

    def close(self, exc: BaseException | None) -> None:
        """The call ended (``exc``: with that exception); raises ``TimeoutError`` if late.

        As ``asyncio.Timeout.__aexit__``: a call that this watch cancelled takes back
        that cancellation, and a ``CancelledError`` that no one else asked for becomes
        ``TimeoutError`` (from it).
        """
        task, self.task = self.task, None
        if self.listed:
            self.owner.left()
        if (
            self.expired
            and task is not None
            and task.uncancel() <= self.cancelling  # taken back whatever ended the call
            and type(exc) is asyncio.CancelledError
        ):
            raise TimeoutError from exc


@dataclass(slots=True, eq=False)
class Deadlines:
    """The deadlines of the calls waiting on one event loop."""

    heap: list[tuple[float, int, Watch]] = field(default_factory=list)
    order: itertools.count[int] = field(default_factory=itertools.count)
    """Breaks ties between equal deadlines (first come, first cancelled)."""
    armed_at: float = math.inf
    """When this watcher's timer fires next (``inf``: none is armed)."""
    dead: int = 0
    """Entries of calls that ended, still in the heap."""

    def watch(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Watch:
        """Start watching the current task's call until ``deadline`` (``loop.time()``)."""
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a tool deadline is only watched inside a task")
        watch = Watch(self, task, task.cancelling())
        if deadline <= loop.time():  # already late: cancelled at the next turn, as asyncio
            watch.listed = False
            loop.call_soon(self._expire, watch)
            return watch
        heapq.heappush(self.heap, (deadline, next(self.order), watch))
        if deadline < self.armed_at:
            self._arm(loop, deadline)
        return watch

    def left(self) -> None:
        """A watched call ended: its entry is dead; drop the dead once they are half."""
        self.dead += 1
        heap = self.heap
        if self.dead * 2 > len(heap) >= COMPACT_AT:
            heap[:] = [entry for entry in heap if entry[2].task is not None]
            heapq.heapify(heap)
            self.dead = 0

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        # The timer is not kept: it would hold the loop, the key of this watcher's entry.
        # An earlier deadline arms a second one; the first then finds nothing of its own.
        self.armed_at = when
        loop.call_at(when, self._fire, when)

    def _fire(self, when: float) -> None:
        """Cancel every call whose deadline has come, then arm for the next live one."""
        loop = asyncio.get_running_loop()
        now = max(when, loop.time())
        heap = self.heap
        while heap and heap[0][0] <= now:
            watch = heapq.heappop(heap)[2]
            if watch.task is None:
                self.dead -= 1
            else:
                watch.listed = False
                self._expire(watch)
        if when != self.armed_at:
            return  # a timer that an earlier deadline replaced
        while heap and heap[0][2].task is None:  # arm for a call that still waits
            heapq.heappop(heap)
            self.dead -= 1
        self.armed_at = math.inf
        if heap:
            self._arm(loop, heap[0][0])

    @staticmethod
    def _expire(watch: Watch) -> None:
        """The call is late: cancel its task (``asyncio.Timeout``'s ``_on_timeout``)."""
        if watch.task is not None and not watch.expired:
            watch.expired = True
            watch.task.cancel()
