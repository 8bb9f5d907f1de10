"""Runs this server drives, live: their events so far, and who waits for more.

Every run the server starts or resumes is one iteration of ``Runtime.stream`` or
``Runtime.stream_resume`` (the one path events take), consumed by a task the hub owns,
not by the request: a client that goes away never stops a run. The hub keeps each live
run's events in memory until the run pauses or ends (by then the store has them all) and
wakes the SSE followers as each one comes.

The hub belongs to one app (``app.state``); closing it waits a while for its runs, then
cancels the rest, which leaves them resumable (their lease runs out; no tool is entered
without it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from corral.contracts import RunSummary
from corral.errors import CorralError
from corral.events import Event
from corral.server.stopping import HURRIED_S, STOP_S

logger = logging.getLogger(__name__)

_LAST_LOOK_S = 0.2
"""However late a hurry comes, how long a run stopped (again) may take to end before it is
left behind: it may need only a turn of the loop."""


@dataclass
class LiveRun:
    """One run being driven here: its events from this drive on, then its outcome."""

    run_id: str
    events: list[Event] = field(default_factory=list)
    summary: RunSummary | None = None
    error: BaseException | None = None
    done: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, event: Event) -> None:
        """Record an event and wake whoever follows the run."""
        self.events.append(event)
        self._notify()

    def finish(self, summary: RunSummary | None, error: BaseException | None = None) -> None:
        """The drive is over: paused or ended (``summary``), or it failed (``error``)."""
        self.summary, self.error, self.done = summary, error, True
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def follow(self, after: int) -> AsyncIterator[Event]:
        """The events with ``seq`` over ``after``, as they come, until the drive is over."""
        index = 0
        while True:
            wake = self._wake
            while index < len(self.events):
                event = self.events[index]
                index += 1
                if event.seq > after:
                    yield event
            if self.done:
                return
            await wake.wait()

    async def outcome(self) -> RunSummary:
        """The summary the drive ended with; its error, raised, if it failed."""
        while not self.done:
            await self._wake.wait()
        if self.error is not None:
            raise self.error
        assert self.summary is not None
        return self.summary


class Hub:
    """The live runs of one app, and the tasks that drive them."""

    def __init__(self, grace_s: float | None = None) -> None:
        self._grace_s = grace_s
        """With a grace, a stop (``stopping``) stops the runs still going once it is over,
        while the server still waits for its requests: their followers are then told
        (an ``error`` event) before the server cuts their streams. ``None``: only
        ``close`` stops them."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grace_timer: asyncio.TimerHandle | None = None
        self._stopped: set[asyncio.Task[None]] = set()
        """The tasks the grace's end stopped, and when (``_stopped_at``, monotonic)."""
        self._stopped_at: float | None = None
        self._live: dict[str, LiveRun] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._run_of: dict[asyncio.Task[None], str] = {}
        """The run each task drives, once its first event named it (``close``'s log)."""
        self._hurry_asked = False
        self._stop_began: float | None = None
        self._hurried_at: float | None = None
        self._closing: asyncio.AbstractEventLoop | None = None
        self._woken = asyncio.Event()

    def live(self, run_id: str) -> LiveRun | None:
        """The run if this server is driving it now."""
        return self._live.get(run_id)

    def in_flight(self) -> list[LiveRun]:
        """The runs this server is driving now (a copy: the listing reads it in a thread)."""
        return [live for live in self._live.values() if not live.done]

    async def drive(self, stream: AsyncIterator[Event | RunSummary]) -> LiveRun | RunSummary:
        """Consume ``stream`` in a task of the hub; return as soon as the run is known.

        That is its ``LiveRun`` once it emitted an event, or its summary when it emitted
        none (a double click answered by the run's current summary). An error before the
        first event (a refused input, ``RUN_BUSY``) is raised here: nothing was written.
        """
        self._loop = asyncio.get_running_loop()
        first: asyncio.Future[LiveRun | RunSummary] = self._loop.create_future()
        task = asyncio.create_task(self._pump(stream, first))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(first)

    async def _pump(
        self,
        stream: AsyncIterator[Event | RunSummary],
        first: asyncio.Future[LiveRun | RunSummary],
    ) -> None:
        live: LiveRun | None = None
        summary: RunSummary | None = None
        try:
            async for item in stream:
                if isinstance(item, RunSummary):
                    summary = item
                    break
                if live is None:
                    live = LiveRun(item.run_id)
                    self._live[item.run_id] = live
                    task = asyncio.current_task()
                    if task is not None:
                        self._run_of[task] = item.run_id
                    first.set_result(live)
                live.add(item)
        except BaseException as exc:  # the run's outcome, handed to whoever waits for it
            if live is not None:
                _log_failure(live.run_id, exc)  # nobody may be waiting (202): the log knows
                live.finish(None, exc)
            elif not first.done() and isinstance(exc, Exception):
                first.set_exception(exc)
            elif not first.done():
                first.cancel()
            if not isinstance(exc, Exception):
                raise
        else:
            if live is not None:
                live.finish(summary)
            elif summary is not None:
                first.set_result(summary)
            else:
                first.set_exception(RuntimeError("the run's stream ended without a summary"))
        finally:
            if live is not None and self._live.get(live.run_id) is live:
                del self._live[live.run_id]
            task = asyncio.current_task()
            if task is not None:
                self._run_of.pop(task, None)

    async def close(self, grace_s: float, stop_s: float = STOP_S) -> None:
        """Wait up to ``grace_s`` for the runs in flight, then stop the rest.

        A stopped run stores what it did, which may wait for its steps to clean up and for
        a store call already in its thread: one still stopping ``stop_s`` later is
        stopped again, and waits for nothing more. One that has still not ended
        ``stop_s`` after that (a tool that ignores cancellation) is left behind, logged:
        the close returns, and the run's lease expires (``docs/server.md``). ``hurry``
        cuts all of this short: the runs are stopped at once and given ``HURRIED_S``.
        """
        tasks = set(self._tasks)
        began, self._stop_began = self._stop_began, None
        timer, self._grace_timer = self._grace_timer, None
        if timer is not None:  # the close stops them itself, as the grace says
            timer.cancel()
        stopped, self._stopped = self._stopped, set()
        stopped_at, self._stopped_at = self._stopped_at, None
        if not tasks:
            self._hurry_asked = False
            return
        if began is not None:  # the grace counts from the stop, not from this close
            grace_s = max(0.0, grace_s - (time.monotonic() - began))
        logger.warning(
            "stopping: waiting up to %g s for %d run(s) in flight (Ctrl-C again stops them now)",
            round(grace_s, 2),
            len(tasks),
        )
        self._woken, self._hurried_at = asyncio.Event(), None
        self._closing = asyncio.get_running_loop()
        try:
            if self._hurry_asked:  # asked before the close began
                self._hurry_now()
            if stopped_at is not None:  # stopped already as the grace ended: what is left
                left = await self._stopped_left(tasks, stopped & tasks, stopped_at, stop_s)
            else:
                left = await self._stop(tasks, grace_s, stop_s)
        finally:
            self._closing, self._hurry_asked = None, False
        if left:
            names = sorted(self._run_of.get(task, "(a run not started yet)") for task in left)
            logger.warning(
                "%d run(s) did not stop and were left to their leases: %s",
                len(left),
                ", ".join(names),
            )

    async def _stop(
        self, tasks: set[asyncio.Task[None]], grace_s: float, stop_s: float
    ) -> set[asyncio.Task[None]]:
        """The grace, then two stops (``close``): the runs still going after them."""
        pending = await self._still_running(tasks, grace_s, grace=True)
        if not pending:
            return set()
        return await self._stopped_left(pending, set(), time.monotonic(), stop_s)

    async def _stopped_left(
        self,
        tasks: set[asyncio.Task[None]],
        stopped: set[asyncio.Task[None]],
        stopped_at: float,
        stop_s: float,
    ) -> set[asyncio.Task[None]]:
        """The two stops of ``tasks``: the runs still going after them.

        ``stopped`` were stopped at ``stopped_at`` already (the grace's end, ``_grace_over``)
        and their stop time counts from then; the others are stopped now. One still going
        ``stop_s`` later is stopped again, and given ``stop_s`` more.
        """
        for task in tasks - stopped:
            task.cancel()
        spent = time.monotonic() - stopped_at
        stuck = await self._still_running(tasks, max(0.0, stop_s - spent))
        for task in stuck:
            task.cancel()
        left = await self._still_running(stuck, stop_s) if stuck else set()
        for task in tasks - left:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: its failure is logged by ``_pump``
        return left

    def stopping(self, since: float) -> None:
        """The server's stop began at ``since`` (``time.monotonic()``), before this close.

        The grace of the close that follows counts from then: the time uvicorn spent
        waiting for requests in flight (a ``wait: true`` start, a follower) is part of it.
        With a grace of its own (``grace_s``) the hub stops the runs still going when it
        ends, inside that wait. Called from a signal handler: it only asks the loop.
        """
        self._stop_began = since
        loop = self._loop
        if self._grace_s is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._arm_grace, since)

    def _arm_grace(self, since: float) -> None:
        if self._grace_timer is not None or self._closing is not None or self._grace_s is None:
            return
        delay = max(0.0, since + self._grace_s - time.monotonic())
        self._grace_timer = asyncio.get_running_loop().call_later(delay, self._grace_over)

    def _grace_over(self) -> None:
        """Stop the runs still going: the grace is over, the server still waits for requests.

        Each stores what it did and ends its followers' streams with an ``error`` that
        says how to go on; the server would otherwise cut them first.
        """
        self._grace_timer = None
        if self._closing is not None or not self._tasks:
            return
        self._stopped, self._stopped_at = set(self._tasks), time.monotonic()
        logger.warning(
            "stopping: the grace is over; stopping %d run(s) in flight", len(self._stopped)
        )
        for task in self._stopped:
            task.cancel()

    def hurry(self) -> None:
        """Cut a close short (a second Ctrl-C): stop the runs now, wait ``HURRIED_S`` at most.

        Safe from a signal handler and from another thread: it only asks the close's loop.
        Asked before the close begins, the close hurries from its start.
        """
        self._hurry_asked = True
        loop = self._closing
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._hurry_now)

    def _hurry_now(self) -> None:
        if self._hurried_at is None and self._closing is not None:
            self._hurried_at = self._closing.time()
            self._woken.set()

    async def _still_running(
        self, tasks: set[asyncio.Task[None]], timeout_s: float, *, grace: bool = False
    ) -> set[asyncio.Task[None]]:
        """The ``tasks`` not ended ``timeout_s`` from now, or sooner once hurried.

        A hurry ends a grace at once (the runs are stopped next), and a stop's wait
        ``HURRIED_S`` after the hurry, though never before ``_LAST_LOOK_S`` (or
        ``timeout_s``) from its start: a run stopped again gets a moment to end.
        """
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + timeout_s
        pending = set(tasks)
        while pending:
            if self._hurried_at is not None:
                hurried_end = began if grace else self._hurried_at + HURRIED_S
                last_look = began + min(timeout_s, 0.0 if grace else _LAST_LOOK_S)
                deadline = min(deadline, max(hurried_end, last_look))
                remaining = deadline - loop.time()
                if remaining > 0:  # nothing more can cut this wait short
                    _, pending = await asyncio.wait(pending, timeout=remaining)
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            woken = asyncio.ensure_future(self._woken.wait())
            try:
                done, _ = await asyncio.wait(
                    {*pending, woken}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                woken.cancel()
            pending.difference_update(done)
        return pending


def _log_failure(run_id: str, error: BaseException) -> None:
    """Log a drive that failed: its code for a corral error, the traceback for a crash.

    A corral error's words may quote the run (a tool's result), so only its code is
    logged; followers get the redacted words on the stream.
    """
    if isinstance(error, CorralError):
        logger.error("run %s failed: %s", run_id, error.code.value)
    elif isinstance(error, Exception):
        logger.error("run %s failed", run_id, exc_info=error)
