"""One worker process: DBOS launched on the store's PostgreSQL, driving its agents' runs.

The worker takes drives from its agents' queues (``names.agent_queue``) and runs each as
the ``corral.drive`` workflow on DBOS's event loop. At launch DBOS recovers the pending
workflows of this executor id and application version: a worker restarted with the same
``executor_id`` finishes what it was driving when it died. It stops on SIGTERM or SIGINT.

The process is built in stages (``Worker.launch``, ``Worker.wait``, ``Worker.stop``) so
that more may run beside DBOS (a liveness watcher thread, for one) without reshaping it.
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from corral.workers import names
from corral.workers.stopping import SHUTDOWN_GRACE_S

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.runtime.runtime import Runtime
    from corral.store.sql import SqlStore
    from corral.workers.effects import DbosEffects
    from corral.workers.liveness import Liveness


SAVE_RETRY_S = 300.0
"""How long a drive's save waits for an unreachable store (a PostgreSQL restart) before the
drive fails: a drive that failed is never driven again, and its run would stay unfinished."""


def default_executor_id() -> str:
    """``host-pid``: unique per process.

    A stable id given by the deployment (``--executor-id``) is what lets a restarted worker
    recover its own unfinished drives.
    """
    return f"{socket.gethostname()}-{os.getpid()}"


def dbos_config(store_url: str, executor_id: str) -> dict[str, Any]:
    """DBOS's configuration for a worker of ``store_url``: the same database, its own schema."""
    return {
        "name": names.APP_NAME,
        "system_database_url": names.system_database_url(store_url),
        "dbos_system_schema": names.SYSTEM_SCHEMA,
        "executor_id": executor_id,
        "application_version": names.APPLICATION_VERSION,
        "sys_db_pool_size": names.SYS_DB_POOL_SIZE,
    }


@dataclass
class Worker:
    """A launched DBOS with the runtimes of the agents it drives.

    ``threads``: what runs beside DBOS until ``stop`` (started after launch, joined after
    DBOS is destroyed); a liveness watcher is one.
    """

    store_url: str
    agents: Sequence[Agent]
    executor_id: str
    log_dir: Path | None = None
    grace_s: float = SHUTDOWN_GRACE_S
    """How long a stop waits for the drives in flight to end."""
    stopping: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    runtimes: dict[str, Runtime] = field(default_factory=dict)
    store: SqlStore | None = None
    effects: list[DbosEffects] = field(default_factory=list)
    """Each agent's (its rate-limited tools wait for permits of that agent's queues)."""
    takeover_poll_s: float = 1.0
    """How often this worker looks for dead workers' runs to take over (``liveness.py``)."""
    takeover_settle_s: float | None = None
    """How long its watcher waits after it connects before it calls anyone dead: at least
    three polls of the slowest worker of the fleet. ``None``: ``settle_time_s`` of this
    worker's own poll, right for a fleet whose workers all poll alike."""
    liveness: Liveness | None = None
    on_stop: Callable[[], object] | None = None
    """Called as the stop begins (``corral worker`` bounds the whole stop from there)."""
    queues: list[str] = field(default_factory=list)
    """The queues it takes work from, once launched: each agent's, each limited tool's."""

    def launch(self) -> None:
        """Open the store, make each agent's runtime, register the workflow, launch DBOS.

        The executor id's liveness lock is taken first: a second worker of a live id is
        refused (``WORKER_ID_IN_USE``) before DBOS's launch could recover its runs.
        """
        from dbos import DBOS

        from corral.runtime.runtime import Runtime
        from corral.store.registry import sql_target
        from corral.store.sql import SqlStore
        from corral.workers import recovery
        from corral.workers.effects import DbosEffects
        from corral.workers.liveness import Watcher, chosen_settle_s, hold, idle_timeout_s
        from corral.workers.permits import Permits, database_clock, limits
        from corral.workers.workflow import declare_queues, register

        settle_s = chosen_settle_s(self.takeover_settle_s, self.takeover_poll_s)
        self.liveness = hold(
            names.system_database_url(self.store_url),
            self.executor_id,
            idle_s=idle_timeout_s(self.takeover_poll_s),
        )
        # released when the process ends, after Python joined every thread (see ``stop``)
        atexit.register(self.liveness.close)
        watcher = Watcher(
            self.liveness,
            recovery.pending_owners,
            recovery.recover_executor,
            poll_s=self.takeover_poll_s,
            settle_s=settle_s,
        )
        # the lock is kept by a thread of its own: a scan blocked on DBOS must not lose it
        self.threads.append(self.liveness.keeper(self.stopping, self.takeover_poll_s))
        self.threads.append(watcher.thread(self.stopping))
        self.store = SqlStore.open(sql_target(self.store_url))
        permits = Permits(
            limits({agent.name: agent for agent in self.agents}),
            partial(database_clock, self.store.engine),
        )
        for agent in self.agents:
            effects = DbosEffects(permits=partial(permits.call, agent.name))
            self.effects.append(effects)
            self.runtimes[agent.name] = Runtime(
                agent,
                self.store,
                effects=effects,
                log_dir=self.log_dir,
                concurrent_steps=False,
                save_retry_s=SAVE_RETRY_S,
            )
        DBOS(config=dbos_config(self.store_url, self.executor_id))  # type: ignore[arg-type]
        register(self.runtimes)
        permits.register()
        self.queues = [*(names.agent_queue(name) for name in self.runtimes), *permits.limits]
        DBOS.listen_queues(self.queues)
        DBOS.launch()
        declare_queues(self.runtimes)
        permits.declare()
        for thread in self.threads:
            thread.start()

    def wait(self) -> None:
        """Block until SIGTERM or SIGINT (or ``stopping`` is set)."""

        def stop(signum: int, frame: FrameType | None) -> None:
            self.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not self.stopping.wait(1.0):
            pass

    def stop(self) -> None:
        """Destroy DBOS, then close the agents and the store.

        Drives in flight get ``grace_s`` to end; those that do not stay ``PENDING`` in DBOS
        and are recovered later (by this executor id's next launch, or a takeover). A
        failure to close an agent is reported; the drives' outcomes are stored already.
        """
        from dbos import DBOS

        self.stopping.set()
        if self.on_stop is not None:
            self.on_stop()
        if self.liveness is not None:  # held until the process ends, however long (below)
            self.liveness.keep()
        DBOS.destroy(workflow_completion_timeout_sec=math.ceil(self.grace_s))
        for thread in self.threads:
            thread.join(timeout=5.0)
        # The liveness lock is not released here but at exit (``atexit``, which runs once
        # Python joined every thread): a drive still in a tool's thread keeps its runs this
        # worker's until then, so no other worker takes them over while they may still act.

        async def close() -> None:
            for runtime in self.runtimes.values():
                try:
                    await runtime.aclose()
                except Exception as exc:  # reported; nothing of a run depends on it
                    print(
                        f"corral worker: closing {runtime.agent.name} failed: {exc}",
                        file=sys.stderr,
                    )

        asyncio.run(close())
        for effects in self.effects:
            effects.close()
        if self.store is not None:
            self.store.engine.dispose()


def run_worker(
    store_url: str,
    agents: Sequence[Agent],
    *,
    executor_id: str | None = None,
    log_dir: Path | None = None,
    takeover_poll_s: float = 1.0,
    takeover_settle_s: float | None = None,
    grace_s: float = SHUTDOWN_GRACE_S,
    on_stop: Callable[[], object] | None = None,
    on_ready: Callable[[Sequence[str]], object] | None = None,
) -> None:
    """Run a worker for ``agents`` on ``store_url`` (PostgreSQL) until SIGTERM or SIGINT.

    ``grace_s``: how long the drives in flight then get to end (``Worker.stop``);
    ``on_stop``: called as the stop begins; ``on_ready``: with the queues it listens to,
    once they are all declared (DBOS logs a queue only when it inserts it: a queue another
    worker declared first is not in this one's log).
    """
    worker = Worker(
        store_url,
        agents,
        executor_id or default_executor_id(),
        log_dir,
        takeover_poll_s=takeover_poll_s,
        takeover_settle_s=takeover_settle_s,
        grace_s=grace_s,
        on_stop=on_stop,
    )
    worker.launch()
    if on_ready is not None:
        on_ready(worker.queues)
    try:
        worker.wait()
    finally:
        worker.stop()
