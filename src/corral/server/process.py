"""Serving until stopped: uvicorn, with Ctrl-C and SIGTERM as a clean, graceful stop.

uvicorn re-raises the stopping signal once it has shut down, so a service stopped on
purpose would exit as killed (143) or print ``Aborted!``. Here a stop is the normal end of
``corral serve``: requests in flight finish, the app's runs are awaited a while (then left
resumable), and the process exits 0.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    """uvicorn's server, whose stopping signals end it without being raised again."""

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
        """First signal: stop gracefully. A second Ctrl-C: stop now."""
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
