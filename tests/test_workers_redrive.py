"""Drives of a run executed again, or enqueued with inputs the run does not take (workers).

A drive's re-execution (its worker died after its last save, before DBOS recorded its end)
may come after a later drive of the same run ran; and an input enqueued for a run must be
the one its drive number stands for. Real worker processes, a database each.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.agent import load_agent
from corral.errors import AgentNotFoundError, ErrorCode, RunNotFoundError, RunNotResumableError
from corral.runtime.runtime import Runtime
from corral.store.sql import SqlStore
from corral.workers import names
from corral.workers.client import RunQueue
from corral.workers.drive import DriveFailedError
from tests.test_workers_drive import MESSAGE, dbos_status, stored_events
from tests.workers_support import DEPOT, WorkerPool, business, sql, until, worker_pool


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerPool]:
    with worker_pool(tmp_path) as pool:
        yield pool


def stored_status(url: str, run_id: str) -> str:
    store = SqlStore.open(url)
    try:
        record = store.get_run(run_id)
        assert record is not None
        return record.status
    finally:
        store.engine.dispose()


def test_an_earlier_drive_executed_again_after_a_later_one_leaves_the_run_as_it_is(
    workers: WorkerPool,
) -> None:
    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        queue.wait(queue.resume("depot", run_id, approve=True), timeout_s=60)
        assert stored_status(workers.store_url, run_id) == "finished"
        workers.stop(worker)
        start = names.workflow_id(run_id, 0)  # as if its worker died before DBOS noted its end
        sql(
            workers.store_url,
            "UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = %s",
            start,
        )
        workers.start("w1")
        assert queue.wait(start, timeout_s=60)["status"] == "awaiting_confirm"
        assert dbos_status(workers.store_url, start) == ("SUCCESS", 2)
    assert stored_status(workers.store_url, run_id) == "finished"


def test_an_input_the_run_does_not_wait_for_is_refused_and_its_drive_stays_free(
    workers: WorkerPool,
) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        with pytest.raises(RunNotResumableError, match="waits for a confirmation"):
            queue.resume("depot", run_id, answer="yes, ship it")
        with pytest.raises(RunNotResumableError, match="waits for a confirmation"):
            queue.resume("depot", run_id)
        resume = queue.resume("depot", run_id, approve=True)
        assert resume == names.workflow_id(run_id, 1)
        assert queue.wait(resume, timeout_s=60)["status"] == "finished"
    assert business(workers.home, "SELECT count(*) FROM shipments") == [(1,)]


def test_a_rejection_enqueued_beside_an_approval_is_refused_not_merged_into_it(
    workers: WorkerPool,
) -> None:
    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        workers.stop(worker)  # both inputs are enqueued before any worker takes one
        first = queue.resume("depot", run_id, approve=True)
        with pytest.raises(RunNotResumableError, match=r"brings an approval of step s3"):
            queue.resume("depot", run_id, approve=False)
        workers.start("w1")
        assert queue.wait(first, timeout_s=60)["status"] == "finished"
    assert business(workers.home, "SELECT count(*) FROM shipments") == [(1,)]


def test_an_input_for_a_run_that_ended_without_asking_is_refused(workers: WorkerPool) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", "please tag A5")
        assert queue.wait(names.workflow_id(run_id, 0), timeout_s=60)["status"] == "finished"
        with pytest.raises(RunNotResumableError, match="already ended"):
            queue.resume("depot", run_id, approve=True)
        with pytest.raises(RunNotResumableError, match="already ended"):
            queue.resume("depot", run_id, answer="hello")


def test_waiting_for_a_drive_nobody_enqueued_is_run_not_found(workers: WorkerPool) -> None:
    with RunQueue(workers.store_url) as queue, pytest.raises(RunNotFoundError, match="no drive"):
        queue.wait(names.workflow_id("run_nobody", 0), timeout_s=1)


def killed_in_its_write(workers: WorkerPool, hold: Path, message: str) -> dict[str, Any]:
    """Start a run whose write the worker is SIGKILLed in (entered, not yet acting), then
    restart the worker with the same id: the start drive's answer once it ends."""
    hold.touch()
    workers.env["DEPOT_HOLD"] = str(hold)
    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", message)
        entered = "SELECT count(*) FROM entries"
        until(lambda: business(workers.home, entered) == [(1,)], "the write to be entered")
        workers.stop(worker, signal.SIGKILL)
        hold.unlink()
        workers.start("w1")
        return queue.wait(names.workflow_id(run_id, 0), timeout_s=90)


def test_a_write_that_is_not_idempotent_in_flight_at_a_kill_is_not_entered_again(
    workers: WorkerPool, tmp_path: Path
) -> None:
    done = killed_in_its_write(workers, tmp_path / "hold", "please stamp A7")
    assert business(workers.home, "SELECT count(*) FROM entries") == [(1,)]
    assert business(workers.home, "SELECT count(*) FROM stamps") == [(0,)]  # killed before
    # as `corral resume` settles it: nobody can tell whether it acted, so a person is asked
    assert done["status"] == "handed_off"
    assert {s["id"]: s["status"] for s in done["steps"]}["s1"] == "unknown"


def test_an_idempotent_write_with_a_reconciler_in_flight_at_a_kill_is_entered_again(
    workers: WorkerPool, tmp_path: Path
) -> None:
    """Its key makes a second entry safe, as ``corral resume`` enters it again: not a
    person's job (the chaos load handed such runs off before)."""
    done = killed_in_its_write(workers, tmp_path / "hold", "please label A8")
    assert done["status"] == "finished" and done["reply"] == "Order A8 is labelled"
    keys = business(workers.home, "SELECT DISTINCT idempotency_key FROM entries")
    assert business(workers.home, "SELECT count(*) FROM entries") == [(2,)] and len(keys) == 1
    assert business(workers.home, "SELECT count(*) FROM labels") == [(1,)]


def test_an_approval_of_a_step_the_run_does_not_wait_for_leaves_its_drive_free(
    workers: WorkerPool,
) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        with pytest.raises(RunNotResumableError, match=r"step s9 \(it waits for s3\)"):
            queue.resume("depot", run_id, approve=True, step_id="s9")
        done = queue.wait(queue.resume("depot", run_id, approve=True), timeout_s=60)
    assert done["status"] == "finished"


def test_a_resume_that_names_another_agent_than_the_runs_is_refused(workers: WorkerPool) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        with pytest.raises(AgentNotFoundError, match="a run of agent 'depot'"):
            queue.resume("aftersales", run_id, approve=True)  # its queue: no depot worker
        done = queue.wait(queue.resume("depot", run_id, approve=True), timeout_s=60)
    assert done["status"] == "finished"


def test_a_drive_whose_save_fails_while_the_store_is_unreachable_goes_on_once_it_is_back(
    workers: WorkerPool, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    workers.env["DEPOT_HOLD"] = str(hold)
    workers.start("w1")
    url = workers.store_url
    with RunQueue(url) as queue:
        run_id = queue.start("depot", "please tag A9")
        entered = "SELECT count(*) FROM entries"
        until(lambda: business(workers.home, entered) == [(1,)], "the write to be entered")
        # the store fails every save (each failed try counted by a sequence, which no
        # rollback takes back) until the test lets it work again
        sql(url, "CREATE SEQUENCE failed_saves")
        sql(
            url,
            "CREATE FUNCTION fail_save() RETURNS trigger AS $$ BEGIN "
            "PERFORM nextval('failed_saves'); RAISE EXCEPTION 'the server is restarting'; "
            "END $$ LANGUAGE plpgsql",
        )
        sql(
            url,
            "CREATE TRIGGER fail_save BEFORE INSERT ON corral_events "
            "FOR EACH ROW EXECUTE FUNCTION fail_save()",
        )
        hold.unlink()
        tried = "SELECT last_value, is_called FROM failed_saves"
        until(lambda: sql(url, tried)[0][1], "a save to fail")
        sql(url, "DROP TRIGGER fail_save ON corral_events")
        done = queue.wait(names.workflow_id(run_id, 0), timeout_s=90)
    assert done["status"] == "finished" and done["reply"] == "Order A9 is tagged"
    assert business(workers.home, "SELECT count(*) FROM entries") == [(1,)]
    seqs = [e.seq for e in stored_events(url, run_id)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_drive_that_failed_before_bringing_its_input_is_tried_again_under_a_new_id(
    workers: WorkerPool,
) -> None:
    """One workflow id runs once: a retry of the same approval got the failure back for ever."""
    from dbos import DBOSClient

    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        workers.stop(worker, signal.SIGTERM)  # the approval's drive waits on the queue
        first = queue.resume("depot", run_id, approve=True)
        assert first == names.workflow_id(run_id, 1)
        operator = DBOSClient(
            system_database_url=names.system_database_url(workers.store_url),
            dbos_system_schema=names.SYSTEM_SCHEMA,
        )
        operator.cancel_workflow(first)  # it ends without bringing the approval
        operator.destroy()
        with pytest.raises(RunNotResumableError, match="cancelled"):
            queue.wait(first, timeout_s=10)
        again = queue.resume("depot", run_id, approve=True)
        assert again == f"{run_id}.1r1" and names.drive_of(again) == (run_id, 1, 1)
        assert queue.resume("depot", run_id, approve=True) == again  # a double click: one
        workers.start("w1")
        assert queue.wait(again, timeout_s=60)["status"] == "finished"
        assert queue.resume("depot", run_id, approve=True) == again  # late: the one that did
    assert business(workers.home, "SELECT count(*) FROM shipments") == [(1,)]


def test_a_run_id_given_to_the_enqueuer_must_have_the_shape_of_one(workers: WorkerPool) -> None:
    """A dot would be read as the drive's separator (``run.1`` would be drive 1 of ``run``)."""
    from corral.errors import InvalidArgumentError

    with RunQueue(workers.store_url) as queue:
        for bad in ("run.1", "../etc", "", "x" * 65):
            with pytest.raises(InvalidArgumentError, match="is not a run id"):
                queue.start("depot", MESSAGE, run_id=bad)
        assert queue.start("depot", MESSAGE, run_id="run_given-1") == "run_given-1"
    assert sql(workers.store_url, "SELECT workflow_uuid FROM dbos.workflow_status") == [
        ("run_given-1.0",)
    ]


def test_a_drive_executed_again_after_a_deploy_that_rewrote_its_write_enters_nothing(
    workers: WorkerPool, tmp_path: Path
) -> None:
    """A worker dies in an idempotent write; a deploy rewrites that write into another
    tool; DBOS recovers the drive on the restarted worker. The re-execution derives other
    events than the stored log's and stops at its first save (``EVENT_CONFLICT``), having
    entered no tool; ``corral resume`` then settles the write as the deployed agent sees it:
    not the call the worker died in, so a person is asked (``SameCallAgain``)."""
    depot = tmp_path / "depot"  # deployed in place: the same folder, a new agent.yaml
    shutil.copytree(DEPOT, depot)
    hold = tmp_path / "hold"
    hold.touch()
    workers.env["DEPOT_HOLD"] = str(hold)
    worker = workers.start("w1", depot)
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", "please tag A8")
        entered = "SELECT count(*) FROM entries"
        until(lambda: business(workers.home, entered) == [(1,)], "the write to be entered")
        workers.stop(worker, signal.SIGKILL)
        with (depot / "agent.yaml").open("a", encoding="utf-8") as config:
            config.write(
                "argument_rewrites:\n"
                "  - {name: relabel, tool: tag_order, when: 'true', use_tool: label_order}\n"
            )
        hold.unlink()
        workers.start("w1", depot)
        with pytest.raises(DriveFailedError) as failed:
            queue.wait(names.workflow_id(run_id, 0), timeout_s=90)
    assert failed.value.code is ErrorCode.EVENT_CONFLICT
    assert business(workers.home, "SELECT count(*) FROM labels") == [(0,)]
    assert business(workers.home, entered) == [(1,)]
    agent = load_agent(depot, data_dir=workers.home / "data" / "depot")
    store = SqlStore.open(workers.store_url)
    try:
        summary = asyncio.run(Runtime(agent, store).resume(run_id, wait_s=60))
    finally:
        store.engine.dispose()
    assert summary.status.value == "handed_off" and summary.error_code == "OUTCOME_UNKNOWN"
    assert summary.handoff is not None and "tag_order" in summary.handoff.reason
    assert business(workers.home, "SELECT count(*) FROM labels") == [(0,)]
    assert business(workers.home, entered) == [(1,)]
