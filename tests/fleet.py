"""Workers in tests: a fresh PostgreSQL database per test, and real worker processes.

DBOS is a process-wide singleton, so every worker is a ``python -m corral worker``
subprocess; each is killed when its test ends, whatever happened. Every test gets its
own database on the server CI starts (``CORRAL_TEST_PG_URL``), dropped afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.extras import postgres_url
from tests.helpers import corral_cli

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def _admin(url: str) -> str:
    """A libpq URL for psycopg (no ``+driver``)."""
    return "postgresql://" + url.partition("://")[2]


@contextmanager
def fresh_database(tag: str) -> Iterator[str]:
    """A new database on the test server, upgraded to corral's schema; its store URL."""
    import psycopg

    server = postgres_url()
    name = f"fleet_{tag}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_admin(server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server.rpartition("/")
    url = f"{base}/{name}"
    try:
        yield url
    finally:
        with psycopg.connect(_admin(server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def upgraded(home: Path, url: str) -> str:
    """``url`` after ``corral db upgrade`` made corral's tables in it."""
    corral_cli(home, "db", "upgrade", "--store", url)
    return url


@dataclass
class Fleet:
    """Worker processes of one test, each logging to its own file; all killed at the end."""

    home: Path
    store: str
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self, executor_id: str, *agents: Path, poll_s: float = 0.5
    ) -> subprocess.Popen[bytes]:
        """A ``corral worker`` with this executor id, for these agent folders."""
        args = [sys.executable, "-m", "corral", "worker", "--store", self.store]
        for agent in agents:
            args += ["--agent", str(agent)]
        args += ["--executor-id", executor_id, "--takeover-poll-s", str(poll_s)]
        args += ["--home", str(self.home)]
        log = (self.home / f"worker-{executor_id}.log").open("ab")
        proc = subprocess.Popen(
            args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env}
        )
        self.procs[executor_id] = proc
        return proc

    def log(self, executor_id: str) -> str:
        path = self.home / f"worker-{executor_id}.log"
        return path.read_text(encoding="utf-8", errors="replace")

    def workers(self) -> dict[str, Any]:
        """``corral workers --json``."""
        done = corral_cli(self.home, "workers", "--store", self.store, "--json")
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def live(self) -> set[str]:
        return {w["executor_id"] for w in self.workers()["workers"]}

    def kill(self, executor_id: str) -> None:
        """SIGKILL one worker, and reap it as a supervisor would.

        A zombie's pid still answers ``kill(pid, 0)``: until it is reaped, the run's lease
        owner looks alive, and a takeover waits for the lease to expire.
        """
        proc = self.procs[executor_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(timeout=30)


@contextmanager
def fleet(home: Path, store: str, env: dict[str, str] | None = None) -> Iterator[Fleet]:
    """Workers that are all killed when the block ends."""
    workers = Fleet(home, store, env or {})
    try:
        yield workers
    finally:
        workers.kill_all()


def until(what: Callable[[], T | None], timeout_s: float, about: str) -> T:
    """``what()`` once it is truthy, polled; fails after ``timeout_s`` naming ``about``.

    Waiting on another process's progress, not timing it: no test asserts a speed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        found = what()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {about}")
        time.sleep(0.05)
