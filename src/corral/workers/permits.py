"""Per-tool rate limits across every worker: a call of a limited tool waits for a permit.

A permit is a no-op child workflow (``corral.permit``) on the tool's own DBOS queue
(``names.tool_queue``), whose limiter lets at most ``calls`` permits be dequeued in any
window; the queue is in PostgreSQL, so the limit holds across all workers, however many.
The permit answers when it was dequeued (DBOS's ``dequeued_at``, the moment the limiter
admitted it, on the database's clock); the waiting worker reads the database's clock once
more to learn the permit's age, and the tool step that follows checks, before it calls
the tool, that it is still within ``USE_WITHIN_S`` of the dequeue: on the tool's own
thread (or in its first step), just before its function runs, on the worker's monotonic
clock. No two machines' clocks are compared: a worker whose clock ran ahead of the
database's found every permit too old and asked for permits without end. A call delayed
longer (a loaded machine, a worker that died and was taken over) asks for a new permit,
and the old one is spent unused: a limit may be under-used, never exceeded.

DBOS's limiter counts when permits are dequeued, not when the calls that use them start,
so the queue's window is the tool's ``per_s`` plus ``MARGIN_S``: the calls made in any
``per_s`` seconds used permits dequeued within ``per_s + USE_WITHIN_S`` seconds. The
steady rate is therefore ``calls`` per ``per_s + MARGIN_S`` seconds.

A run outside a worker (``Runtime`` in one process) does not wait for permits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.workers import names

if TYPE_CHECKING:
    import sqlalchemy as sa
    from dbos import Queue, WorkflowHandleAsync

    from corral.agent import Agent
    from corral.tools.policy import RateLimit
    from corral.tools.spec import ToolSpec

USE_WITHIN_S = 0.25
"""How soon after its permit was dequeued a call must begin, or it asks for another."""

MARGIN_S = USE_WITHIN_S + 0.05
"""Added to each limited tool's window (see above): ``USE_WITHIN_S``, and a little for the
database's clock (``dequeued_at`` is a millisecond count, taken at its transaction's start)."""

PermitGate = Callable[
    [str, Callable[[float | None], Awaitable[dict[str, Any]]]], Awaitable[dict[str, Any]]
]
"""``Permits.call`` for one agent: (tool, step) -> the step's record, after a permit."""

POLL_S = 0.02
"""How often a limited queue is polled for permits, and a permit's answer for its end."""

EXPIRED = {"permit_expired": True}
"""The record of a tool step that found its permit too old, and called nothing."""


def limits(agents: Mapping[str, Agent]) -> dict[str, RateLimit]:
    """The rate-limited tools of these agents: queue name -> limit."""
    found = {}
    for name, agent in agents.items():
        for spec in agent.tools:
            if spec.policy.rate_limit is not None:
                found[names.tool_queue(name, spec.name)] = spec.policy.rate_limit
    return found


def expired(use_by: float | None) -> bool:
    """Whether a permit that must be used by ``use_by`` (``time.monotonic``) is too old now."""
    return use_by is not None and time.monotonic() > use_by


def use_by(dequeued_at: float, database_now: Callable[[], float]) -> float:
    """The monotonic moment by which a permit dequeued at ``dequeued_at`` must be used.

    Its age is read on the database's clock, which also timed its dequeue; the monotonic
    reading is taken before that read, so the deadline errs early, never late.
    """
    before = time.monotonic()
    age = database_now() - dequeued_at
    return before - age + USE_WITHIN_S


def database_clock(engine: sa.Engine) -> float:
    """The database's clock now, in epoch seconds: the clock DBOS timed the dequeue by."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        now = conn.execute(sa.text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one()
    return float(now)


class PermitExpiredError(Exception):
    """The permit was too old when the tool was about to run: nothing was called.

    Raised by ``checked``'s function before the tool's own, and turned into ``EXPIRED``
    by the tool step (never recorded as the tool's failure).
    """


def checked(spec: ToolSpec, use_by: float) -> ToolSpec:
    """``spec`` whose function first checks its permit, where the tool runs.

    On the tool's thread (or in its first step), so no wait for a thread on a busy
    machine falls between the check and the call.
    """
    call = spec.fn
    if inspect.iscoroutinefunction(call):

        async def fresh_async(*args: Any, **kwargs: Any) -> Any:
            if expired(use_by):
                raise PermitExpiredError(spec.name)
            return await call(*args, **kwargs)

        return dataclasses.replace(spec, fn=fresh_async)

    def fresh(*args: Any, **kwargs: Any) -> Any:
        if expired(use_by):
            raise PermitExpiredError(spec.name)
        return call(*args, **kwargs)

    return dataclasses.replace(spec, fn=fresh)


async def _permit() -> float:
    """The permit workflow: when it was dequeued, the moment its queue's limiter chose.

    Not when its body runs: that may come later on a busy worker, and a call timed from
    it could fall outside the window the limiter counted.
    """
    from dbos import DBOS

    workflow = DBOS.workflow_id
    status = None if workflow is None else await DBOS.get_workflow_status_async(workflow)
    if status is None or status.dequeued_at is None:  # not on a queue: now is its start
        return time.time()
    return status.dequeued_at / 1000


@dataclass
class Permits:
    """The permits of one worker: the permit workflow, and each limited tool's queue."""

    limits: dict[str, RateLimit]
    """Queue name -> limit (``limits``)."""
    database_now: Callable[[], float] = time.time
    """The database's clock, in epoch seconds (the worker's: one query on the store)."""
    queues: dict[str, Queue] = field(default_factory=dict)
    declared: threading.Event = field(default_factory=threading.Event)
    """Set once the queues exist: a drive DBOS recovers at launch may call a tool before."""
    _workflow: Callable[[], Coroutine[Any, Any, float]] | None = None

    def register(self) -> None:
        """Declare the permit workflow (before ``DBOS.launch``)."""
        from dbos import DBOS

        self._workflow = DBOS.workflow(name=names.PERMIT_WORKFLOW)(_permit)

    def declare(self) -> None:
        """Create or update each limited tool's queue (after ``DBOS.launch``)."""
        from dbos import DBOS

        for queue, limit in self.limits.items():
            self.queues[queue] = DBOS.register_queue(
                queue,
                limiter={"limit": limit.calls, "period": limit.per_s + MARGIN_S},
                polling_interval_sec=POLL_S,
                on_conflict="always_update",
            )
        self.declared.set()

    async def call(
        self, agent: str, tool: str, step: Callable[[float | None], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """``step(use_by)``'s record, after a permit when ``tool`` is limited.

        A step that found its permit expired (``EXPIRED``) is run again with a new one.
        """
        name = names.tool_queue(agent, tool)
        if name not in self.limits:
            return await step(None)
        if not self.declared.is_set():
            await asyncio.to_thread(self.declared.wait)
        queue = self.queues[name]
        assert self._workflow is not None, "Permits.register runs before launch"
        while True:
            handle: WorkflowHandleAsync[float] = await queue.enqueue_async(self._workflow)
            started: float = await handle.get_result(polling_interval_sec=POLL_S)
            deadline = await asyncio.to_thread(use_by, started, self.database_now)
            record = await step(deadline)
            if record != EXPIRED:
                return record
