"""Helpers for the dashboard's browser tests and benchmark: `corral serve` and Chromium.

The server is the real command in a subprocess (``python -m corral serve``) on a free
loopback port, over a home of the test's own; the browser is Debian's ``chromium``
driven by Playwright, headless, with background networking off, so nothing leaves the
machine. Without ``/usr/bin/chromium`` the caller skips (CI installs it and turns skips
into failures).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking"]
START_S = 60.0
"""The longest a server may take to answer /healthz (a loaded CI machine)."""


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A running ``corral serve``: where it listens, its token and its home."""

    base: str
    token: str
    home: Path

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One JSON request with the token; the decoded answer (an HTTP error raises)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())

    def dashboard(self, route: str = "/runs") -> str:
        """The dashboard at ``route`` with the token in the fragment (never sent to a server)."""
        return f"{self.base}/ui/#{route}{'&' if '?' in route else '?'}token={self.token}"


@contextmanager
def serving(
    *agent_dirs: Path,
    home: Path,
    token: str = "dashboard-test-token",
    env: dict[str, str] | None = None,
) -> Iterator[Served]:
    """``corral serve`` of ``agent_dirs`` over ``home`` until the block ends (``env``: more
    variables for the server, e.g. ``OTEL_TRACES_EXPORTER``; its output is ``home/serve.log``)."""
    port = free_port()
    extra = [arg for folder in agent_dirs[1:] for arg in ("--agent", str(folder))]
    log = (home / "serve.log").open("wb")
    command = [sys.executable, "-m", "corral", "serve", str(agent_dirs[0]), *extra]
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port), "--home", str(home)],
        env={**os.environ, "CORRAL_API_TOKEN": token, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    served = Served(f"http://127.0.0.1:{port}", token, home)
    try:
        deadline = time.monotonic() + START_S
        while True:
            if process.poll() is not None:
                raise AssertionError(f"corral serve exited:\n{(home / 'serve.log').read_text()}")
            try:
                with urllib.request.urlopen(served.base + "/healthz", timeout=2):
                    break
            # a server still starting may take the connection and answer late: timed out
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise AssertionError("corral serve did not answer /healthz") from None
                time.sleep(0.1)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Debian's package) under Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()
