"""The DBOS API a worker's takeover relies on keeps the shape corral calls it with.

``corral.workers.recovery`` calls one private classmethod of DBOS
(``DBOS._recover_pending_workflows``) and one public one (``DBOS.list_workflows``). The
``dbos`` extra pins the minor version; this test fails first if a DBOS upgrade moves,
renames or reshapes either, or drops the executor predicate that makes a takeover
idempotent. (That the takeover works end to end: ``test_workers_takeover.py``.)
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

from tests.extras import REQUIRE_ALL, import_extra

dbos = import_extra("dbos", REQUIRE_ALL)


def test_the_pinned_dbos_minor_is_the_one_installed() -> None:
    assert version("dbos").split(".")[:2] == ["3", "4"]


def test_the_private_recovery_entry_is_a_classmethod_taking_executor_ids() -> None:
    from corral.workers.recovery import RECOVERY_ENTRY

    raw = inspect.getattr_static(dbos.DBOS, RECOVERY_ENTRY)
    assert isinstance(raw, classmethod)
    signature = inspect.signature(getattr(dbos.DBOS, RECOVERY_ENTRY))
    assert list(signature.parameters) == ["executor_ids"]
    assert "WorkflowHandle" in str(signature.return_annotation)  # a list of handles: counted


def test_a_takeover_reenqueues_only_while_the_dead_executor_still_owns_the_workflow() -> None:
    from dbos._recovery import recover_pending_workflows
    from dbos._sys_db import SystemDatabase

    assert list(inspect.signature(recover_pending_workflows).parameters) == [
        "dbos",
        "executor_ids",
    ]
    reenqueue = inspect.signature(SystemDatabase.reenqueue_for_recovery)
    assert list(reenqueue.parameters) == [
        "self",
        "workflow_id",
        "executor_ids",
        "recovery_queue_name",
    ]


def test_the_public_listing_takes_the_filters_the_watcher_passes() -> None:
    listing = inspect.signature(dbos.DBOS.list_workflows).parameters
    assert {"status", "app_version", "load_input", "load_output"} <= set(listing)
    assert "executor_id" in inspect.get_annotations(dbos.WorkflowStatus)
