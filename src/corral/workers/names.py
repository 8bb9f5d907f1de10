"""Every name the enqueuer and the workers must agree on, in one place.

A workflow id is derived from the run id and the drive (0: the start, n: the n-th
resume), so enqueueing the same drive twice is one workflow: DBOS keeps the first.
The application version is fixed per corral version, the same for the enqueuer and every
worker: DBOS dequeues and recovers only workflows of its own version, so a version
computed from source hashes (DBOS's default) would strand runs between processes.
"""

from __future__ import annotations

from corral import __version__

APP_NAME = "corral"
"""The DBOS application name of every corral worker and enqueuer."""

DRIVE_WORKFLOW = "corral.drive"
"""The workflow that drives a run once: a start, a resume, or a given plan."""

PERMIT_WORKFLOW = "corral.permit"
"""The no-op workflow a rate-limited tool's call waits for on that tool's queue."""

SYSTEM_SCHEMA = "dbos"
"""The PostgreSQL schema of DBOS's own tables, beside corral's in the same database."""

APPLICATION_VERSION = f"corral-{__version__}"
"""DBOS's application version for every process of this corral version."""

SYS_DB_POOL_SIZE = 10
"""Connections each process keeps to DBOS's tables: modest, many workers share a server."""


def agent_queue(agent: str) -> str:
    """The DBOS queue the drives of ``agent``'s runs wait on."""
    return f"corral.agent.{agent}"


def tool_queue(agent: str, tool: str) -> str:
    """The DBOS queue that meters the calls of one rate-limited tool across all workers."""
    return f"corral.tool.{agent}.{tool}"


def workflow_id(run_id: str, drive: int, attempt: int = 0) -> str:
    """The workflow id of a run's ``drive`` (0: the start, n: the n-th resume).

    ``attempt``: a drive that failed without bringing its input to the run (a run busy
    elsewhere, a store down for longer than the save retries) is tried again under a new
    id, ``<run>.<drive>r<attempt>``: DBOS runs one workflow id once, and answers every
    later enqueue of it with the first one's failure.
    """
    if drive < 0 or attempt < 0:
        raise ValueError(f"a drive and its attempts are counted from 0, not {drive}/{attempt}")
    return f"{run_id}.{drive}" if attempt == 0 else f"{run_id}.{drive}r{attempt}"


def message_run_id(agent: str, session_id: str | None, message_id: str) -> str:
    """The run id a queued start of a client's message takes: the same for every retry.

    Two enqueues of one message (a client's retry while the first still waits in the
    queue) are then one DBOS workflow, which DBOS runs once. Derived from what names the
    message in the store (``MessageLog``: the agent, the session, the id), not its time.
    """
    from corral.hashing import stable_hash

    return "run_m" + stable_hash([agent, session_id, message_id], 32)


def drive_of(workflow: str) -> tuple[str, int, int]:
    """The run id, drive and attempt a workflow id names (``workflow_id``'s inverse)."""
    run_id, dot, tail = workflow.rpartition(".")
    drive, r, attempt = tail.partition("r")
    if not dot or not drive.isdigit() or (r and not attempt.isdigit()):
        raise ValueError(f"{workflow!r} is not a corral workflow id")
    return run_id, int(drive), int(attempt or 0)


def run_of(workflow: str) -> tuple[str, int]:
    """The run id and drive a workflow id names, whichever attempt it is."""
    run_id, drive, _ = drive_of(workflow)
    return run_id, drive


def system_database_url(store_url: str) -> str:
    """DBOS's system database URL for a corral PostgreSQL store URL: the same database.

    DBOS takes a plain ``postgresql://`` URL and picks its own driver; corral's
    ``postgresql+psycopg://`` (or any ``+driver``) is stripped. Anything but PostgreSQL is
    ``CONFIG_INVALID``: workers share their queue through one server.
    """
    from corral.errors import ConfigInvalidError

    scheme, colon, rest = store_url.strip().partition(":")
    base = scheme.lower().partition("+")[0]
    if not colon or base not in ("postgresql", "postgres"):
        raise ConfigInvalidError(
            f"workers need a PostgreSQL store, not {store_url.split(':', 1)[0]!r}",
            hint="pass --store postgresql://user@host/db (or set CORRAL_STORE_URL)",
        )
    return "postgresql:" + rest
