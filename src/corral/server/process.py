"""Serving until stopped: uvicorn, with Ctrl-C and SIGTERM as a clean, graceful stop.

uvicorn re-raises the stopping signal once it has shut down, so a service stopped on
purpose would exit as killed (143) or print ``Aborted!``. Here a stop is the normal end of
``corral serve``: requests in flight finish, the app's runs are awaited a while (then left
resumable), and the process exits 0.

The event loop is closed without waiting for tasks that do not end when cancelled (a tool
that ignores cancellation, left behind by ``Hub.close``): ``asyncio.run`` would wait for
them for ever, and a supervisor would have to kill the process.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LEFT_S = 2.0
"""How long the closing loop lets tasks still running end once cancelled."""


def close_loop(loop: asyncio.AbstractEventLoop, wait_s: float = LEFT_S) -> None:
    """Cancel what still runs on ``loop``, wait up to ``wait_s`` for it, close the loop.

    ``asyncio.run``'s close, bounded: a task that has not ended by then is left pending
    (the loop is closed all the same; its run's lease expires, and it can be resumed).
    """
    try:
        tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=wait_s))
        for task in tasks:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: what failed was logged where it failed
        if any(not task.done() for task in tasks):
            # left behind (``Hub.close`` named them): their generators cannot be closed,
            # and the tasks are destroyed pending; asyncio would log each as an error
            loop.set_exception_handler(_left_behind)
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asyncio.set_event_loop(None)
        loop.close()  # its threads (sync tools): idle ones end, a stuck one: ``threads_left``


def threads_left(wait_s: float = LEFT_S) -> list[str]:
    """The threads that would keep the process from exiting, still running ``wait_s`` on.

    A sync tool's thread cannot be stopped; one whose tool never returns (a socket read
    with no timeout) outlives its run's timeout, and Python waits for it at exit, so a
    stopped server would never end. Its caller decides to exit without it (``corral
    serve``); the write it may be making is already marked as possibly done.
    """
    deadline = time.monotonic() + wait_s
    others = [
        thread
        for thread in threading.enumerate()
        if thread is not threading.current_thread() and not thread.daemon
    ]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    return sorted(thread.name for thread in others if thread.is_alive())


def _left_behind(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """What asyncio reports of tasks left behind at close: one debug line each."""
    logger.debug("left behind at close: %s", context.get("message"))


class _Server(uvicorn.Server):
    """uvicorn's server, whose stopping signals end it without being raised again."""

    def __init__(self, config: uvicorn.Config, hurry: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self._hurry = hurry

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve until stopped, then close the loop without waiting for ever (``close_loop``)."""
        loop_factory = getattr(self.config, "get_loop_factory", None)
        if loop_factory is None:  # an older uvicorn (before 0.36): its own run, unbounded
            super().run(sockets=sockets)
            return
        factory = loop_factory()
        loop = factory() if factory is not None else asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.serve(sockets=sockets))
        finally:
            close_loop(loop)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def _stop(self, sig: int, frame: FrameType | None) -> None:
        """First signal: stop gracefully. A second Ctrl-C: stop now.

        That is uvicorn's force exit, which stops waiting for requests in flight (and skips
        the app's shutdown if it has not begun), and ``hurry``, which cuts short the runs'
        bounded stop if it has (``Hub.hurry``: they are stopped at once, and left to their
        leases after ``corral.server.stopping.HURRIED_S``).
        """
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
            if self._hurry is not None:
                self._hurry()
        self.should_exit = True


def serve_until_stopped(
    app: FastAPI, host: str, port: int, grace_s: float, hurry: Callable[[], None] | None = None
) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT or SIGTERM (``hurry``: a second Ctrl-C)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(grace_s) + 1,
    )
    _Server(config, hurry).run()
