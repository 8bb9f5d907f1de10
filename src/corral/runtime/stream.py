"""A run's events as it writes them, as an async iterator (``Runtime.stream``).

The run is driven by a task of its own; its journal tells a queue of each event once the
event is applied, and the iterator hands them on in order, ending with the run's summary.
This is the one way events leave a run live: the HTTP server's streams and the dashboard
are built on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from corral.contracts import RunSummary
from corral.events import Event

Watch = Callable[[Event], None]
"""Told of each event of the run, in order, as the run applies it."""

StreamItem = Event | RunSummary
"""What ``Runtime.stream`` yields: events, then one summary, last."""


@dataclass(frozen=True, slots=True)
class _Ended:
    """Put on the queue after the run's last event."""


async def event_stream(
    drive: Callable[[Watch], Awaitable[RunSummary]],
) -> AsyncIterator[StreamItem]:
    """Drive a run (``drive(watch)``) and yield its events as they are emitted, then its summary.

    An error that ends the run (a store failure, an input refused before the run began)
    is raised from the iterator after the events that came before it. Leaving the loop
    early cancels the run, which stores the events it had applied, and ``Runtime.resume``
    picks the run up where its log ends.
    """
    queue: asyncio.Queue[Event | _Ended] = asyncio.Queue()
    driver = asyncio.ensure_future(drive(queue.put_nowait))
    driver.add_done_callback(lambda _: queue.put_nowait(_Ended()))
    try:
        while not isinstance(item := await queue.get(), _Ended):
            yield item
        yield driver.result()
    finally:
        if not driver.done():
            driver.cancel()
            try:
                await driver  # a second stop of this wait is passed on to the drive
            except asyncio.CancelledError:
                pass
            except Exception:
                task = asyncio.current_task()
                if task is None or task.cancelling() <= 1:
                    raise  # the drive's own error, from its stop
                # stopped again meanwhile: the consumer ends stopped, not with that error
