"""What ``corral workers`` (and the dashboard's workers panel) shows: read-only SQL.

- Live workers: the sessions named ``corral-worker:<executor id>`` in
  ``pg_stat_activity`` (``liveness.py``: a worker is alive while that session is).
- Per queue (an agent's runs, a rate-limited tool's permits): how many workflows wait
  (``ENQUEUED``/``DELAYED``), run (``PENDING``), finished (``SUCCESS``) or failed.
- Runs in flight per executor, dead ones included (their runs wait to be taken over).
- Runs recovered: drives that DBOS dispatched more than once. DBOS 3.4 adds one to a
  workflow's ``recovery_attempts`` each time a worker dequeues it; a takeover (ours, or
  DBOS's own at a worker's launch) puts it back on its queue, so a recovered drive was
  dequeued at least twice.

It reads DBOS's ``workflow_status`` system table (documented by DBOS as its system
database schema) and PostgreSQL's views; it imports neither DBOS nor a workflow, and
writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from corral.workers import names
from corral.workers.liveness import APP_NAME_PREFIX

if TYPE_CHECKING:
    import sqlalchemy as sa

RECOVERED_SHOWN = 50
"""The most recent recovered runs listed (the total is counted apart)."""

AGENT_QUEUES = names.agent_queue("")
"""What every agent's queue name starts with (``corral.agent.``)."""
TOOL_QUEUES = names.tool_queue("", "").removesuffix(".")
"""What every rate-limited tool's queue name starts with (``corral.tool.``)."""

_WAITING = ("ENQUEUED", "DELAYED")
_FAILED = ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LiveWorker(_Out):
    """One worker whose liveness session is open."""

    executor_id: str
    since: datetime
    """When its liveness connection opened (its start, or its last reconnect)."""
    host: str
    """The client address PostgreSQL sees (``local`` for a Unix socket)."""
    backend_pid: int
    """The PostgreSQL server process serving that session (``pg_stat_activity.pid``)."""
    in_flight: int
    """Runs it is driving now."""


class QueueFigures(_Out):
    """One DBOS queue of corral: an agent's runs, or one rate-limited tool's permits."""

    queue: str
    kind: str
    """``agent`` or ``tool``."""
    name: str
    """The agent, or ``agent.tool``."""
    enqueued: int
    in_flight: int
    finished: int
    failed: int


class OrphanedFlight(_Out):
    """Runs in flight on an executor that is not alive: the next watcher round takes them."""

    executor_id: str
    in_flight: int


class RecoveredRun(_Out):
    """A drive that was taken over from a worker (dispatched more than once)."""

    run_id: str
    drive: int
    executor_id: str | None
    """The executor that ran it last."""
    dispatches: int
    """How often a worker dequeued it (``recovery_attempts``)."""
    status: str
    updated_at: datetime | None


class WorkersStatus(_Out):
    """``corral workers --json`` and ``GET /workers``."""

    workers: list[LiveWorker]
    queues: list[QueueFigures]
    orphaned: list[OrphanedFlight]
    recovered_total: int
    recovered: list[RecoveredRun]
    """The most recent ones, newest first (at most ``RECOVERED_SHOWN``)."""


def workers_status(engine: sa.Engine) -> WorkersStatus:
    """The figures, read in one transaction from the store's PostgreSQL database."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        live = _live(conn)
        table = sa.text(f"SELECT to_regclass('{names.SYSTEM_SCHEMA}.workflow_status')")
        if conn.execute(table).scalar() is None:  # no worker or enqueuer came yet
            return WorkersStatus(
                workers=[_worker(row, 0) for row in live],
                queues=[],
                orphaned=[],
                recovered_total=0,
                recovered=[],
            )
        flights = _in_flight(conn)
        queues = _queues(conn)
        total, recovered = _recovered(conn)
    alive = {str(row["executor_id"]) for row in live}
    return WorkersStatus(
        workers=[_worker(row, flights.get(str(row["executor_id"]), 0)) for row in live],
        queues=queues,
        orphaned=[
            OrphanedFlight(executor_id=executor, in_flight=count)
            for executor, count in sorted(flights.items())
            if executor not in alive
        ],
        recovered_total=total,
        recovered=recovered,
    )


def _live(conn: sa.Connection) -> list[dict[str, Any]]:
    import sqlalchemy as sa

    rows = conn.execute(
        sa.text(
            "SELECT substr(application_name, :cut) AS executor_id, backend_start, "
            "coalesce(client_hostname, host(client_addr), 'local') AS host, pid "
            "FROM pg_stat_activity WHERE application_name LIKE :named "
            "AND datname = current_database() ORDER BY backend_start, executor_id"
        ),
        {"cut": len(APP_NAME_PREFIX) + 1, "named": APP_NAME_PREFIX + "%"},
    )
    return [dict(row._mapping) for row in rows]


def _worker(row: dict[str, Any], in_flight: int) -> LiveWorker:
    return LiveWorker(
        executor_id=row["executor_id"],
        since=row["backend_start"],
        host=row["host"],
        backend_pid=row["pid"],
        in_flight=in_flight,
    )


def _in_flight(conn: sa.Connection) -> dict[str, int]:
    import sqlalchemy as sa

    rows = conn.execute(
        sa.text(
            f"SELECT executor_id, count(*) FROM {names.SYSTEM_SCHEMA}.workflow_status "
            "WHERE name = :drive AND status = 'PENDING' GROUP BY executor_id"
        ),
        {"drive": names.DRIVE_WORKFLOW},
    )
    return {str(executor): int(count) for executor, count in rows}


def _queues(conn: sa.Connection) -> list[QueueFigures]:
    import sqlalchemy as sa

    rows = conn.execute(
        sa.text(
            f"SELECT queue_name, status, count(*) FROM {names.SYSTEM_SCHEMA}.workflow_status "
            "WHERE queue_name LIKE :agents OR queue_name LIKE :tools "
            "GROUP BY queue_name, status"
        ),
        {"agents": AGENT_QUEUES + "%", "tools": TOOL_QUEUES + "%"},
    )
    counts: dict[str, dict[str, int]] = {}
    for queue, status, count in rows:
        counts.setdefault(str(queue), {})[str(status)] = int(count)
    return [_figures(queue, by_status) for queue, by_status in sorted(counts.items())]


def _figures(queue: str, by_status: dict[str, int]) -> QueueFigures:
    kind = "agent" if queue.startswith(AGENT_QUEUES) else "tool"
    prefix = AGENT_QUEUES if kind == "agent" else TOOL_QUEUES
    return QueueFigures(
        queue=queue,
        kind=kind,
        name=queue[len(prefix) :],
        enqueued=sum(by_status.get(s, 0) for s in _WAITING),
        in_flight=by_status.get("PENDING", 0),
        finished=by_status.get("SUCCESS", 0),
        failed=sum(by_status.get(s, 0) for s in _FAILED),
    )


def _recovered(conn: sa.Connection) -> tuple[int, list[RecoveredRun]]:
    import sqlalchemy as sa

    where = (
        f"FROM {names.SYSTEM_SCHEMA}.workflow_status WHERE name = :drive AND recovery_attempts > 1"
    )
    total = conn.execute(sa.text(f"SELECT count(*) {where}"), {"drive": names.DRIVE_WORKFLOW})
    rows = conn.execute(
        sa.text(
            "SELECT workflow_uuid, executor_id, recovery_attempts, status, updated_at "
            f"{where} ORDER BY updated_at DESC, workflow_uuid LIMIT :shown"
        ),
        {"drive": names.DRIVE_WORKFLOW, "shown": RECOVERED_SHOWN},
    )
    recovered = []
    for workflow, executor, attempts, status, updated in rows:
        run_id, drive = names.run_of(str(workflow))
        recovered.append(
            RecoveredRun(
                run_id=run_id,
                drive=drive,
                executor_id=executor,
                dispatches=int(attempts),
                status=str(status),
                updated_at=None if updated is None else datetime.fromtimestamp(updated / 1000, UTC),
            )
        )
    return int(total.scalar() or 0), recovered


ACTIVE = ("ENQUEUED", "DELAYED", "PENDING")
"""DBOS statuses of a drive that will still go on by itself."""


def under_way(drives: Mapping[str, str]) -> bool:
    """Whether any of a run's drives (``run_drives``) will still go on by itself."""
    return any(status in ACTIVE for status in drives.values())


NOT_ENDED = (*_WAITING, "PENDING")
"""DBOS statuses of a drive that has not ended: waiting in its queue, or running."""


def unended_starts(engine: sa.Engine, newest: int, agent: str | None = None) -> list[str]:
    """The newest ``newest`` first drives of runs (``<run id>.0``, any attempt) not ended.

    ``agent``: only its runs' (its queue's).
    """
    import sqlalchemy as sa

    queues = names.agent_queue(agent) if agent is not None else None
    query = sa.text(
        f"SELECT workflow_uuid FROM {names.SYSTEM_SCHEMA}.workflow_status "
        "WHERE name = :drive AND status IN :statuses "
        "AND workflow_uuid ~ '[.]0(r[0-9]+)?$' "
        "AND (CAST(:queue AS text) IS NULL OR queue_name = :queue) "
        "ORDER BY created_at DESC, workflow_uuid DESC LIMIT :newest"
    ).bindparams(sa.bindparam("statuses", expanding=True))
    bound = {"drive": names.DRIVE_WORKFLOW, "statuses": NOT_ENDED, "newest": newest}
    with engine.connect() as conn:
        rows = conn.execute(query, {**bound, "queue": queues})
        return [str(workflow) for (workflow,) in rows]


def run_drives(engine: sa.Engine, run_id: str) -> dict[str, str]:
    """Each drive of ``run_id`` that was enqueued (each attempt), with its DBOS status.

    Workflow id -> status, in the order of the drives and their attempts: the last one is
    the latest drive.
    """
    import sqlalchemy as sa

    prefix = names.workflow_id(run_id, 0)[:-1]  # "<run id>."
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT workflow_uuid, status FROM {names.SYSTEM_SCHEMA}.workflow_status "
                "WHERE name = :drive AND left(workflow_uuid, :n) = :prefix"
            ),
            {"drive": names.DRIVE_WORKFLOW, "n": len(prefix), "prefix": prefix},
        )
        found = {str(workflow): str(status) for workflow, status in rows}
    return {w: found[w] for w in sorted(found, key=lambda w: names.drive_of(w)[1:])}
