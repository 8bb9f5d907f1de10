"""What the worker tests share: a fresh PostgreSQL database each, and worker processes.

DBOS is one per process, so every worker is a real ``python -m corral worker`` process;
``WorkerPool`` kills each one it started when the test ends, whatever happened.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.extras import postgres_url

ROOT = Path(__file__).resolve().parents[1]
DEPOT = ROOT / "tests" / "agents" / "depot"


def _admin_url(url: str) -> str:
    """The server's URL as psycopg takes it (no SQLAlchemy driver part)."""
    _, _, rest = url.partition("://")
    return "postgresql://" + rest


def _with_database(url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    from corral.store.registry import sql_target

    rendered: str = (
        make_url(str(sql_target(url))).set(database=name).render_as_string(hide_password=False)
    )
    return rendered


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new database on the test server with corral's schema (its store URL), then dropped."""
    import psycopg

    base = postgres_url()
    name = f"corral_workers_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_admin_url(str(_with_database(base, "postgres"))), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(base, name)
    from corral.store.sql import SqlStore

    try:
        SqlStore.open(url, upgrade=True).engine.dispose()
        yield url
    finally:
        _drop(base, name)


def _drop(base: str, name: str) -> None:
    import psycopg

    with psycopg.connect(_admin_url(str(_with_database(base, "postgres"))), autocommit=True) as c:
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')


def sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one query on the store's database (DBOS's tables are in schema ``dbos``)."""
    import psycopg

    with psycopg.connect(_admin_url(url), autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


@dataclass
class WorkerPool:
    """``corral worker`` processes of one test, on one store and home."""

    store_url: str
    home: Path
    env: dict[str, str] = field(default_factory=dict)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    executor_ids: list[str] = field(default_factory=list)
    """Of ``started``, in order."""

    def start(
        self, executor_id: str, *agents: Path, options: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        """A worker for ``agents`` (the depot agent by default), logging to HOME/ID.log."""
        folders = agents or (DEPOT,)
        command = [sys.executable, "-m", "corral", "worker", "--store", self.store_url]
        for folder in folders:
            command += ["--agent", str(folder)]
        command += ["--executor-id", executor_id, "--home", str(self.home), *options]
        log = open(self.home / f"{executor_id}.log", "ab")  # noqa: SIM115 (the child keeps it)
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            cwd=ROOT,
        )
        log.close()
        self.started.append(process)
        self.executor_ids.append(executor_id)
        return process

    def log(self, executor_id: str) -> str:
        return (self.home / f"{executor_id}.log").read_text(encoding="utf-8", errors="replace")

    def stop(self, process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` and wait until the process has ended."""
        if process.poll() is None:
            process.send_signal(sig)
        process.wait(timeout=60)

    def report(self) -> str:
        """Each worker's exit code (None: still running) and the end of its log.

        Added to a failing worker test's error: a worker that died, or never got as far
        as a test waited for, says why in its own log, which the test's ``tmp_path`` only
        keeps on this machine.
        """
        parts = []
        for process, executor_id in zip(self.started, self.executor_ids, strict=True):
            tail = self.log(executor_id)[-3000:]
            parts.append(f"--- worker {executor_id} (exit code {process.poll()}):\n{tail}")
        return "\n".join(parts)

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


@contextmanager
def worker_pool(tmp_path: Path) -> Iterator[WorkerPool]:
    """Worker processes on a fresh database, every one killed at the end, then dropped."""
    home = tmp_path / "home"
    home.mkdir()
    with fresh_database() as url:
        pool = WorkerPool(url, home)
        try:
            yield pool
        except BaseException as exc:
            exc.add_note(pool.report())
            raise
        finally:
            pool.close()


def until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Wait for ``condition`` (a state another process reaches), failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polls another process's state; orders nothing


def business(home: Path, query: str) -> list[tuple[Any, ...]]:
    """Rows of the depot's business database (none before a worker has made it).

    A worker's ``setup`` creates the file, then its tables: a look in between (a loaded
    machine can pause the worker there) finds the file without them, which is "not made
    yet" too.
    """
    path = home / "data" / "depot" / "depot.db"
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=10) as conn:
        try:
            return list(conn.execute(query).fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
