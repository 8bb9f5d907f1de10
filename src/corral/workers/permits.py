"""Per-tool rate limits across every worker: a call of a limited tool waits for a permit.

A permit is a no-op child workflow (``corral.permit``) on the tool's own DBOS queue
(``names.tool_queue``), whose limiter lets at most ``calls`` permits start in any window;
the queue is in PostgreSQL, so the limit holds across all workers, however many. The
permit answers when it started; the tool step that follows checks, before it calls the
tool, that it is still within ``USE_WITHIN_S`` of that (a step delayed longer, by a
loaded machine or a worker that died and was taken over, asks for a new permit, and the
old one is spent unused: a limit may be under-used, never exceeded).

DBOS's limiter counts when permits start, not when the calls that use them do, so the
queue's window is the tool's ``per_s`` plus ``MARGIN_S``: the calls made in any ``per_s``
seconds used permits that started within ``per_s + MARGIN_S`` seconds (``USE_WITHIN_S``
for the step, the rest for the moment between the step's check and the tool's first
line). The steady rate is therefore ``calls`` per ``per_s + MARGIN_S`` seconds. The
permit's time and the step's check read the wall clocks of two workers: they must agree
to well within ``MARGIN_S`` (NTP does).

A run outside a worker (``Runtime`` in one process) does not wait for permits.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.workers import names

if TYPE_CHECKING:
    from dbos import Queue, WorkflowHandleAsync

    from corral.agent import Agent
    from corral.tools.policy import RateLimit

MARGIN_S = 0.3
"""Added to each limited tool's window (see above); half of it is ``USE_WITHIN_S``."""

USE_WITHIN_S = MARGIN_S / 2
"""How soon after its permit started a call must begin, or it asks for another."""

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
    """Whether a permit that must be used by ``use_by`` (wall clock) is too old now."""
    return use_by is not None and time.time() > use_by


async def _permit() -> float:
    """The permit workflow: when it started (its queue's limiter decided that moment)."""
    return time.time()


@dataclass
class Permits:
    """The permits of one worker: the permit workflow, and each limited tool's queue."""

    limits: dict[str, RateLimit]
    """Queue name -> limit (``limits``)."""
    queues: dict[str, Queue] = field(default_factory=dict)
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

    async def call(
        self, agent: str, tool: str, step: Callable[[float | None], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """``step(use_by)``'s record, after a permit when ``tool`` is limited.

        A step that found its permit expired (``EXPIRED``) is run again with a new one.
        """
        queue = self.queues.get(names.tool_queue(agent, tool))
        if queue is None:
            return await step(None)
        assert self._workflow is not None, "Permits.register runs before launch"
        while True:
            handle: WorkflowHandleAsync[float] = await queue.enqueue_async(self._workflow)
            started: float = await handle.get_result(polling_interval_sec=POLL_S)
            record = await step(started + USE_WITHIN_S)
            if record != EXPIRED:
                return record
