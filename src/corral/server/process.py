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
import errno
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import FrameType
from typing import Protocol

import uvicorn
from fastapi import FastAPI

from corral.errors import AddressInUseError, ConfigInvalidError
from corral.exiting import exit_waits_for, still_running

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LEFT_S = 2.0
"""How long the closing loop lets tasks still running end once cancelled, and how long
``threads_left`` waits for the loop's threads."""
OTHERS_S = 15.0
"""When the loop's threads are left behind, how long the process's other threads (a save
waiting for the database) get before they are left too."""
THREAD_PREFIX = "corral-serve"
"""The names of the serving loop's threads: those ``corral serve`` may exit without."""


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
        loop.close()  # its idle threads end; a stuck one: ``threads_left``


def threads_left(wait_s: float = LEFT_S, others_s: float = OTHERS_S) -> list[str]:
    """The threads still running once the serving loop's had ``wait_s`` to end.

    A thread of the loop (``THREAD_PREFIX``: a sync tool, a local model's completion, a
    store call) cannot be stopped (``corral.exiting``). When some are still running, every
    other thread that Python's exit would wait for (a run's save in a store thread, with
    its busy timeout and span export) gets up to ``others_s`` first, and is named too if it
    has not ended by then. Without any, nothing else is waited for here: Python's exit
    joins them. Idle pools must have been shut down (``Runtime.release_threads``): their
    threads end only then.
    """
    waited = exit_waits_for()
    loops = [t for t in waited if t.name.startswith(f"{THREAD_PREFIX}_")]
    left = still_running(loops, wait_s)
    if left:
        left += still_running([t for t in waited if t not in loops], others_s)
    return sorted(thread.name for thread in left)


def _left_behind(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """What asyncio reports of tasks left behind at close: one debug line each."""
    logger.debug("left behind at close: %s", context.get("message"))


_REPORTS = "uvicorn.error"
"""The logger uvicorn reports a request's or the lifespan's failure on."""
_TOLD_TO_STOP = "Cancel %s running task(s), timeout graceful shutdown exceeded"
"""uvicorn's line as it cancels the requests that outlived its wait for them."""


def _only_cancelled(error: BaseException | None) -> bool:
    """Whether ``error`` is a cancellation that no other failure led to."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if not isinstance(error, asyncio.CancelledError):
            return False
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return True


class _CancelledByTheStop(logging.Filter):
    """uvicorn's reports of the tasks a stop cancels, counted instead of printed.

    A stop cancels the requests still in flight (those that outlive uvicorn's wait for
    them, or all of them at a second Ctrl-C) and, forced, the app's lifespan, and uvicorn
    logs each as an ``ERROR`` with a page of traceback ending in ``CancelledError``
    ("Exception in ASGI application"; the lifespan's as the text of the traceback
    itself). Neither is a failure: the stop asked for it. A report whose cancellation
    came while handling another failure is printed, as is any other error.
    """

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _TOLD_TO_STOP:
            return False  # the requests it cancels are counted below, one by one
        if record.exc_info:
            if not _only_cancelled(record.exc_info[1]):
                return True
            self.requests += 1  # uvicorn gives an exception only for a request's task
            return False
        text = record.getMessage().rstrip()
        chained = "During handling of the above" in text or "was the direct cause" in text
        cancelled = text.startswith("Traceback") and text.endswith(".CancelledError")
        return chained or not cancelled


def _close_quietly(
    loop: asyncio.AbstractEventLoop, quiet: _CancelledByTheStop | None = None
) -> None:
    """``close_loop``, with uvicorn's reports of what the stop cancels kept to one line.

    ``quiet``: the filter the stop signal put on uvicorn's reports already (it counts the
    requests cancelled since); it is taken off here.
    """
    reports = logging.getLogger(_REPORTS)
    quiet = quiet or _CancelledByTheStop()
    reports.addFilter(quiet)
    try:
        close_loop(loop)
    finally:
        reports.removeFilter(quiet)
    if quiet.requests:
        logger.warning("stopped: cancelled %d request(s) still in flight", quiet.requests)


class StopListener(Protocol):
    """What is told of the stopping signals: the app's runs (``Hub``)."""

    def stopping(self, since: float) -> None:
        """The stop began at ``since`` (``time.monotonic()``)."""

    def hurry(self) -> None:
        """A second Ctrl-C: stop now. Called from a signal handler."""


class _Server(uvicorn.Server):
    """uvicorn's server, whose stopping signals end it without being raised again."""

    def __init__(self, config: uvicorn.Config, runs: StopListener | None = None) -> None:
        super().__init__(config)
        self._runs = runs
        self._cancelled = _CancelledByTheStop()
        """On uvicorn's reports from the stop signal until the loop is closed."""

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve until stopped, then close the loop without waiting for ever (``close_loop``)."""
        self._cancelled = _CancelledByTheStop()  # counts this run's cancelled requests
        factory = self.config.get_loop_factory()
        loop = factory() if factory is not None else asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        # the loop's threads (sync tools, the routes' store reads), named for ``threads_left``
        loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix=THREAD_PREFIX))
        try:
            loop.run_until_complete(self.serve(sockets=sockets))
        finally:
            _close_quietly(loop, self._cancelled)

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

        The first tells the runs when the stop began (``StopListener.stopping``: their
        grace counts from then, not from the end of uvicorn's wait for requests). The
        second is uvicorn's force exit, which stops waiting for requests in flight (and
        skips the app's shutdown if it has not begun), and ``StopListener.hurry``, which
        cuts short the runs' bounded stop if it has (``Hub.hurry``: they are stopped at
        once, and left to their leases after ``corral.server.stopping.HURRIED_S``).
        """
        logging.getLogger(_REPORTS).addFilter(self._cancelled)  # what the stop cancels
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
            if self._runs is not None:
                self._runs.hurry()
        elif not self.should_exit and self._runs is not None:
            self._runs.stopping(time.monotonic())
        self.should_exit = True


BACKLOG = 2048
"""Connections waiting to be accepted (uvicorn's default)."""


def listening(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on ``host:port`` for the server (port 0: one the system picks).

    Made and listening before anything is printed: a port another process listens on
    (or a second ``corral serve`` starting at the same moment) is refused here,
    ``ADDRESS_IN_USE`` and exit 2, not after a banner saying the server is up. As
    asyncio's ``create_server`` makes them: one socket per address the host resolves
    to (``localhost``: 127.0.0.1 and ::1), TCP (so ``TCP_NODELAY`` is set on what they
    accept: without it every answer waits 40 ms for a delayed ACK), ``SO_REUSEADDR``,
    IPv6 ones IPv6 only, and none inherited by a process a tool starts.
    """
    try:
        found = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:  # "not..a..host": no IDNA label
        why = exc.strerror if isinstance(exc, socket.gaierror) else "not a host name"
        raise ConfigInvalidError(
            f"cannot listen on {host}:{port}: {why}", hint="check --host"
        ) from None
    made: list[socket.socket] = []
    try:
        for family, address in dict.fromkeys((info[0], info[4]) for info in found):
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            made.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(made) > 1:  # every address on the port the first one got
                address = (address[0], made[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(BACKLOG)
    except OSError as exc:
        for sock in made:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUseError(
                f"another process listens on {host}:{port}",
                hint="stop it, or pass another --port",
            ) from None
        raise ConfigInvalidError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="check --host and --port",
        ) from None
    return made


def serve_until_stopped(
    app: FastAPI,
    sockets: list[socket.socket],
    grace_s: float,
    runs: StopListener | None = None,
) -> None:
    """Serve ``app`` on ``sockets`` (``listening``) until SIGINT or SIGTERM, telling ``runs``."""
    host, port = sockets[0].getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(grace_s) + 1,
    )
    _Server(config, runs).run(sockets=sockets)
