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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from corral.contracts import RunSummary
from corral.errors import CorralError
from corral.events import Event

logger = logging.getLogger(__name__)

STOP_S = 10.0
"""How long a stopping server lets each run it stopped store what it did (``Hub.close``)."""


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

    def __init__(self) -> None:
        self._live: dict[str, LiveRun] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._run_of: dict[asyncio.Task[None], str] = {}
        """The run each task drives, once its first event named it (``close``'s log)."""

    def live(self, run_id: str) -> LiveRun | None:
        """The run if this server is driving it now."""
        return self._live.get(run_id)

    async def drive(self, stream: AsyncIterator[Event | RunSummary]) -> LiveRun | RunSummary:
        """Consume ``stream`` in a task of the hub; return as soon as the run is known.

        That is its ``LiveRun`` once it emitted an event, or its summary when it emitted
        none (a double click answered by the run's current summary). An error before the
        first event (a refused input, ``RUN_BUSY``) is raised here: nothing was written.
        """
        first: asyncio.Future[LiveRun | RunSummary] = asyncio.get_running_loop().create_future()
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
        the close returns, and the run's lease expires (``docs/server.md``).
        """
        tasks = set(self._tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_s)
        for task in pending:
            task.cancel()
        left: set[asyncio.Task[None]] = set()
        if pending:
            _, stuck = await asyncio.wait(pending, timeout=stop_s)
            for task in stuck:
                task.cancel()
            if stuck:
                _, left = await asyncio.wait(stuck, timeout=stop_s)
        for task in pending - left:
            if not task.cancelled():
                task.exception()  # retrieved: its failure is logged by ``_pump``
        if left:
            names = sorted(self._run_of.get(task, "(a run not started yet)") for task in left)
            logger.warning(
                "%d run(s) did not stop and were left to their leases: %s",
                len(left),
                ", ".join(names),
            )


def _log_failure(run_id: str, error: BaseException) -> None:
    """Log a drive that failed: its code for a corral error, the traceback for a crash.

    A corral error's words may quote the run (a tool's result), so only its code is
    logged; followers get the redacted words on the stream.
    """
    if isinstance(error, CorralError):
        logger.error("run %s failed: %s", run_id, error.code.value)
    elif isinstance(error, Exception):
        logger.error("run %s failed", run_id, exc_info=error)
