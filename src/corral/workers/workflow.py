"""The ``corral.drive`` workflow: one drive of a run, through the ordinary ``Runtime`` entry.

``register`` declares it on DBOS for a set of loaded agents (a closure over them: no
module state), before launch; ``declare_queues`` gives each agent its queue, with the
concurrency of its ``workers:`` block, after launch (DBOS keeps queues in its tables).

The body calls ``Runtime._handle_message`` (a start), ``Runtime._run_plan`` or
``Runtime._resume`` with the run id the enqueuer chose: the layers run as they do in one
process, and every effect goes through ``DbosEffects``. A pause (a confirmation, a
question) ends the drive: its answer is the run's summary, and the input that continues
the run is a new drive, so no worker slot waits while a person thinks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from corral.decision.selector import ToolHealth
from corral.errors import AgentNotFoundError, CorralError
from corral.workers import names
from corral.workers.drive import DriveArgs, error_record
from corral.workers.effects import DbosEffects

if TYPE_CHECKING:
    from corral.contracts import RunSummary
    from corral.runtime.runtime import Runtime


def register(runtimes: Mapping[str, Runtime]) -> None:
    """Declare ``corral.drive`` on DBOS (before ``DBOS.launch``) for these agents' runtimes."""
    from dbos import DBOS

    async def drive(args: dict[str, Any]) -> dict[str, Any]:
        given = DriveArgs.model_validate(args)
        runtime = runtimes.get(given.agent)
        try:
            if runtime is None:
                raise AgentNotFoundError(f"this worker does not drive agent {given.agent!r}")
            summary = await run_drive(runtime, given)
        except CorralError as exc:  # the drive ended: its answer says how
            return error_record(exc)
        answer: dict[str, Any] = summary.model_dump(mode="json")
        return answer

    DBOS.workflow(name=names.DRIVE_WORKFLOW)(drive)


async def run_drive(shared: Runtime, given: DriveArgs) -> RunSummary:
    """Drive the run as ``given`` says, through the runtime's own entry points.

    The drive decides by its own copy of the agent's tool health, read (recorded) at its
    start: the worker's health changes with every drive it runs, and a re-execution must
    choose tools (and record ``degraded``) as the first execution did. What the drive
    learns of its tools is handed back to the worker's health when it ends.
    """
    health = shared.agent.health
    failures: dict[str, int] = shared.effects.recorded(
        "health", partial(dict, health.consecutive_failures), dict[str, int]
    )
    own = ToolHealth(failures, health.degrade_after)
    runtime = shared.with_agent(replace(shared.agent, health=own))
    if isinstance(runtime.effects, DbosEffects):  # the drive's own clock reading
        runtime.effects = runtime.effects.for_drive()
    try:
        return await _drive(runtime, given)
    finally:
        health.consecutive_failures.update(own.consecutive_failures)


async def _drive(runtime: Runtime, given: DriveArgs) -> RunSummary:
    if given.kind == "start":
        assert given.message is not None
        return await runtime._handle_message(
            given.message,
            given.session_id,
            None,
            given.priority,
            run_id=given.run_id,
            message_id=given.message_id,
        )
    if given.kind == "run_plan":
        assert given.plan is not None
        return await runtime._run_plan(
            given.plan, given.entities, given.session_id, None, given.priority, given.run_id
        )
    # a resume waits for a dead earlier drive's lease to expire (one of this host: not at all)
    wait_s = runtime.ownership.ttl_s * 2
    return await runtime._resume(
        given.run_id,
        given.approve,
        given.answer,
        given.step_id,
        wait_s,
        None,
        given.message,  # the session's message that gave the yes or no, if one did
        call=given.call,
        message_id=given.message_id,
    )


def declare_queues(runtimes: Mapping[str, Runtime]) -> None:
    """Register each agent's queue with its ``workers:`` concurrency (after launch)."""
    from dbos import DBOS

    for name, runtime in runtimes.items():
        workers = runtime.agent.config.workers
        DBOS.register_queue(
            names.agent_queue(name),
            global_concurrency=workers.concurrency,
            worker_concurrency=workers.worker_concurrency,
            polling_interval_sec=QUEUE_POLL_S,
            on_conflict="always_update",
        )


QUEUE_POLL_S = 0.1
"""How often a worker looks for new drives on its agents' queues: a drive waits this long
at most before it starts (one small query per queue per poll)."""
