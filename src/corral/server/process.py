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
from collections.abc import Iterator
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
        loop.close()


def _left_behind(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """What asyncio reports of tasks left behind at close: one debug line each."""
    logger.debug("left behind at close: %s", context.get("message"))


class _Server(uvicorn.Server):
    """uvicorn's server, whose stopping signals end it without being raised again."""

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
        """First signal: stop gracefully. A second Ctrl-C: uvicorn's force exit.

        That stops waiting for requests in flight; once the app's shutdown has begun, its
        runs still get their bounded stop (``Hub.close``: the grace, then up to twice
        ``corral.server.hub.STOP_S``), which a second signal does not cut short.
        """
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


def serve_until_stopped(app: FastAPI, host: str, port: int, grace_s: float) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT or SIGTERM."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(grace_s) + 1,
    )
    _Server(config).run()
