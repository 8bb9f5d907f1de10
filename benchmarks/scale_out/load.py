"""The load: exchange runs kept ``inflight`` at a time, each approved as soon as it pauses.

``distributed`` enqueues through corral's ``RunQueue`` and follows the drives in DBOS's
``workflow_status`` table (one query per poll for every drive in flight, not one waiter
per run); ``in_process`` is the baseline: the same runs through ``Runtime`` in this
process, on SQLite. A run's latency is from its start to its end, the scripted approval
included: in the distributed load, DBOS's own timestamps (the start's ``created_at``, the
last drive's ``completed_at``), so the poll's granularity does not count.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from harness import AGENT, AGENT_NAME, BUSINESS_ENV, MESSAGE, plain

if TYPE_CHECKING:
    from corral.workers.client import RunQueue

FINAL = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS statuses after which a drive goes on no further by itself."""


@dataclass
class Outcome:
    """What a load did: its runs, which were approved, their latencies, how long it took."""

    run_ids: list[str] = field(default_factory=list)
    approved: set[str] = field(default_factory=set)
    latencies_s: list[float] = field(default_factory=list)
    drive_errors: int = 0
    elapsed_s: float = 0.0
    drained: bool = True

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def distributed(
    queue: RunQueue,
    store_url: str,
    runs: int,
    inflight: int,
    drain_timeout_s: float,
    on_poll: Callable[[int], None] | None = None,
    poll_s: float = 0.05,
) -> Outcome:
    """Run ``runs`` exchanges through the workers; ``on_poll(done)`` after every poll."""
    from corral.workers.names import SYSTEM_SCHEMA, run_of, workflow_id

    outcome = Outcome()
    outstanding: dict[str, str] = {}  # workflow id -> run id
    created_ms: dict[str, int] = {}
    done = 0
    began = time.monotonic()
    drain_deadline: float | None = None
    with psycopg.connect(plain(store_url), autocommit=True) as conn:
        while done < runs:
            while len(outcome.run_ids) < runs and len(outstanding) < inflight:
                run_id = queue.start(AGENT_NAME, MESSAGE)
                outcome.run_ids.append(run_id)
                outstanding[workflow_id(run_id, 0)] = run_id
            if drain_deadline is None and len(outcome.run_ids) == runs:
                drain_deadline = time.monotonic() + drain_timeout_s
            if drain_deadline is not None and time.monotonic() > drain_deadline:
                outcome.drained = False
                break
            ended = conn.execute(
                "SELECT workflow_uuid, status, created_at, coalesce(completed_at, updated_at) "
                f"FROM {SYSTEM_SCHEMA}.workflow_status "
                "WHERE workflow_uuid = ANY(%s) AND status = ANY(%s)",
                (list(outstanding), list(FINAL)),
            ).fetchall()
            statuses = dict(
                conn.execute(
                    "SELECT run_id, status FROM corral_runs WHERE run_id = ANY(%s)",
                    ([outstanding[row[0]] for row in ended],),
                ).fetchall()
                if ended
                else []
            )
            for workflow, status, created, completed in ended:
                run_id, drive = run_of(workflow)
                del outstanding[workflow]
                if drive == 0:
                    created_ms[run_id] = created
                if status != "SUCCESS":
                    outcome.drive_errors += 1
                elif drive == 0 and statuses.get(run_id) == "awaiting_confirm":
                    outstanding[queue.resume(AGENT_NAME, run_id, approve=True)] = run_id
                    outcome.approved.add(run_id)
                    continue
                done += 1
                outcome.latencies_s.append((completed - created_ms[run_id]) / 1000)
            if on_poll is not None:
                on_poll(done)
            time.sleep(poll_s)
    outcome.elapsed_s = time.monotonic() - began
    return outcome


async def _in_process(store_path: Path, data_dir: Path, runs: int, inflight: int) -> Outcome:
    from corral import load_agent
    from corral.runtime.runtime import Runtime
    from corral.store.sql import SqlStore

    agent = load_agent(AGENT, data_dir=data_dir)
    options: dict[str, Any] = {"log_dir": data_dir / "logs", "concurrent_steps": False}
    runtime = Runtime(agent, SqlStore.open(store_path), **options)
    outcome = Outcome()
    slots = asyncio.Semaphore(inflight)

    async def one() -> None:
        async with slots:
            began = time.perf_counter()
            summary = await runtime.start(MESSAGE)
            outcome.run_ids.append(summary.run_id)
            if summary.status == "awaiting_confirm":
                outcome.approved.add(summary.run_id)
                await runtime.resume(summary.run_id, approve=True)
            outcome.latencies_s.append(time.perf_counter() - began)

    began = time.monotonic()
    async with runtime:
        await asyncio.gather(*(one() for _ in range(runs)))
    outcome.elapsed_s = time.monotonic() - began
    return outcome


def in_process(
    store_path: Path, data_dir: Path, business_url: str, runs: int, inflight: int
) -> Outcome:
    """The baseline: the same runs on one process, a SQLite store, the same tools."""
    os.environ[BUSINESS_ENV] = business_url
    return asyncio.run(_in_process(store_path, data_dir, runs, inflight))
