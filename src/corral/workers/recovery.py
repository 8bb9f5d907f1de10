"""Taking over a dead executor's pending workflows: the one private DBOS entry point we use.

DBOS recovers, by itself, only its OWN executor id's pending workflows, when it launches;
taking over ANOTHER executor's is what DBOS Conductor (a hosted service) does through
``DBOS._recover_pending_workflows(executor_ids)``. dbos 3.4 has no public equivalent:
``DBOS.resume_workflow`` re-enqueues a workflow whatever executor runs it (a live one's
too), on DBOS's internal queue unless told otherwise, and resets its
``recovery_attempts`` (which ``corral workers`` reads to count recovered runs); forking
starts a new workflow id. So corral calls that classmethod here and nowhere else. It
re-enqueues each pending workflow of those executors on its own queue, only while it is
still PENDING on one of them (a duplicate request for an executor already taken over
matches nothing), and any live worker listening on that queue dequeues it and
re-executes it from its recorded steps.

The version is pinned by the ``dbos`` extra (``dbos>=3.4,<3.5``), and
``tests/test_workers_recovery.py`` fails if the method's shape changes. Everything else
here is DBOS's public API (``DBOS.list_workflows``).
"""

from __future__ import annotations

RECOVERY_ENTRY = "_recover_pending_workflows"
"""The private classmethod of ``dbos.DBOS`` that takes over other executors' workflows."""


def pending_owners() -> set[str]:
    """The executor ids that own PENDING workflows of this application version.

    Public API: ``DBOS.list_workflows`` (on a launched DBOS), without inputs or outputs.
    """
    from dbos import DBOS

    pending = DBOS.list_workflows(
        status="PENDING",
        app_version=DBOS.application_version,
        load_input=False,
        load_output=False,
    )
    return {w.executor_id for w in pending if w.executor_id}


def recover_executor(executor_id: str) -> int:
    """Take over ``executor_id``'s pending workflows (it is dead); how many were found.

    The caller proved it dead first (``liveness.Watcher``: its lock is free). The
    workflows go back to their queues and are run again by whichever live worker
    dequeues them; a completed step of theirs is never run again.
    """
    from dbos import DBOS

    recover = getattr(DBOS, RECOVERY_ENTRY)
    return len(recover([executor_id]))
