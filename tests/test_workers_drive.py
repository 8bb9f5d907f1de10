"""Runs as DBOS workflows on ``corral worker`` processes (PostgreSQL; corral[dbos]).

Each test has a database of its own and real worker processes (DBOS is one per process);
the depot test agent counts the entries of its write inside the tool and ships once per
idempotency key (a UNIQUE column), so "entered again" and "written twice" are told apart.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.agent import load_agent
from corral.errors import RunNotResumableError
from corral.events import Event
from corral.runtime.replay import compare
from corral.runtime.runtime import Runtime
from corral.store.memory import MemoryStore
from corral.store.sql import SqlStore
from corral.workers import names
from corral.workers.client import RunQueue
from tests.workers_support import DEPOT, WorkerPool, business, sql, until, worker_pool

MESSAGE = "please ship A1"


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerPool]:
    """Worker processes on a database of this test's own, every one killed at its end."""
    with worker_pool(tmp_path) as pool:
        yield pool


def stored_events(url: str, run_id: str) -> list[Event]:
    store = SqlStore.open(url)
    try:
        return store.load_events(run_id)
    finally:
        store.engine.dispose()


def dbos_status(url: str, workflow_id: str) -> tuple[str, int]:
    rows = sql(
        url,
        "SELECT status, recovery_attempts FROM dbos.workflow_status WHERE workflow_uuid = %s",
        workflow_id,
    )
    assert rows, f"no workflow {workflow_id}"
    return str(rows[0][0]), int(rows[0][1])


def in_process(tmp_path: Path, concurrent_steps: bool) -> list[Event]:
    """The same message, paused and approved, on one in-process runtime."""

    async def run() -> list[Event]:
        agent = load_agent(DEPOT, data_dir=tmp_path / f"inproc-{concurrent_steps}")
        async with Runtime(agent, MemoryStore(), concurrent_steps=concurrent_steps) as runtime:
            paused = await runtime.start(MESSAGE)
            done = await runtime.resume(paused.run_id, approve=True)
            assert done.status == "finished"
            return await runtime.events(paused.run_id)

    return asyncio.run(run())


def test_an_enqueued_run_finishes_on_a_worker_as_it_would_in_process(
    workers: WorkerPool, tmp_path: Path
) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        paused = queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        assert paused["status"] == "awaiting_confirm"
        done = queue.wait(queue.resume("depot", run_id, approve=True), timeout_s=60)
    assert done["status"] == "finished" and done["reply"] == "Order A1 is shipped"
    on_worker = stored_events(workers.store_url, run_id)
    one_by_one = in_process(tmp_path, concurrent_steps=False)
    assert [e.type for e in on_worker] == [e.type for e in one_by_one]
    assert compare(in_process(tmp_path, concurrent_steps=True), on_worker).same_path
    assert business(workers.home, "SELECT count(*) FROM shipments") == [(1,)]
    # the clock is one step per stretch between two waits, not one per event's timestamp
    steps = [
        str(name)
        for (name,) in sql(
            workers.store_url,
            "SELECT function_name FROM dbos.operation_outputs WHERE workflow_uuid LIKE %s",
            f"{run_id}.%",
        )
    ]
    waits = [n for n in steps if n.startswith(("corral.tool.", "corral.read.", "corral.model"))]
    clock = steps.count("corral.clock")
    assert 0 < clock <= len(waits) + 2 < len(on_worker), (steps, len(on_worker))
    times = [e.ts for e in on_worker]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_a_pause_ends_the_workflow_and_its_resume_is_a_new_one(workers: WorkerPool) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        start = names.workflow_id(run_id, 0)
        paused = queue.wait(start, timeout_s=60)
        assert dbos_status(workers.store_url, start)[0] == "SUCCESS"
        assert paused["status"] == "awaiting_confirm" and paused["pending"]["step_id"] == "s3"
        resume = queue.resume("depot", run_id, approve=True)
        assert resume == f"{run_id}.1"
        assert queue.wait(resume, timeout_s=60)["status"] == "finished"
    assert dbos_status(workers.store_url, resume)[0] == "SUCCESS"
    drives = sql(workers.store_url, "SELECT workflow_uuid FROM dbos.workflow_status ORDER BY 1")
    assert drives == [(start,), (resume,)]


def test_the_same_approval_enqueued_twice_runs_once(workers: WorkerPool) -> None:
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        workers.start("w1")
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        first = queue.resume("depot", run_id, approve=True)
        second = queue.resume("depot", run_id, approve=True)  # before or while it runs
        assert first == second == f"{run_id}.1"
        assert queue.wait(first, timeout_s=60)["status"] == "finished"
        late = queue.resume("depot", run_id, approve=True)  # after it finished
        assert late == first
        assert queue.wait(late, timeout_s=60)["status"] == "finished"
        with pytest.raises(RunNotResumableError, match=r"s3 .* was approved"):
            queue.resume("depot", run_id, approve=False)
    assert business(workers.home, "SELECT count(*) FROM entries") == [(1,)]
    confirmations = [
        e for e in stored_events(workers.store_url, run_id) if e.type == "confirmation_given"
    ]
    assert len(confirmations) == 1
    assert sql(workers.store_url, "SELECT count(*) FROM dbos.workflow_status") == [(2,)]


def test_a_decision_for_another_call_than_the_run_asks_is_refused_before_it_is_enqueued(
    workers: WorkerPool,
) -> None:
    """``call`` (``pending.call``) travels with the drive; a stale one enqueues nothing."""
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        workers.start("w1")
        paused = queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        shown = paused["pending"]["call"]
        assert shown
        with pytest.raises(RunNotResumableError, match="does not ask about the call"):
            queue.resume("depot", run_id, approve=True, step_id="s3", call="0" * 16)
        assert sql(workers.store_url, "SELECT count(*) FROM dbos.workflow_status") == [(1,)]
        resume = queue.resume("depot", run_id, approve=True, step_id="s3", call=shown)
        assert queue.wait(resume, timeout_s=60)["status"] == "finished"
    assert business(workers.home, "SELECT count(*) FROM entries") == [(1,)]


def test_a_finished_drive_executed_again_rederives_its_events_and_enters_no_tool(
    workers: WorkerPool,
) -> None:
    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        queue.wait(queue.resume("depot", run_id, approve=True), timeout_s=60)
        before = stored_events(workers.store_url, run_id)
        workers.stop(worker)
        drives = [names.workflow_id(run_id, 0), names.workflow_id(run_id, 1)]
        sql(
            workers.store_url,
            "UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = ANY(%s)",
            drives,
        )
        assert worker.returncode == 0  # SIGTERM stops a worker cleanly
        workers.start("w1")  # the same executor: DBOS recovers its pending workflows at launch
        for drive in drives:
            answer = queue.wait(drive, timeout_s=60)  # an EVENT_CONFLICT would raise here
            assert dbos_status(workers.store_url, drive) == ("SUCCESS", 2)
        assert answer["status"] == "finished"
    after = stored_events(workers.store_url, run_id)
    assert [(e.seq, e.type, e.ts, e.payload) for e in after] == [
        (e.seq, e.type, e.ts, e.payload) for e in before
    ]
    assert business(workers.home, "SELECT count(*) FROM entries") == [(1,)]
    assert "EVENT_CONFLICT" not in workers.log("w1")


def test_a_worker_killed_in_a_write_finishes_the_run_after_restart_with_one_shipment(
    workers: WorkerPool, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    workers.env["DEPOT_HOLD"] = str(hold)
    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", MESSAGE)
        queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        hold.touch()
        resume = queue.resume("depot", run_id, approve=True)
        entered = "SELECT count(*) FROM entries"
        until(lambda: business(workers.home, entered) == [(1,)], "the write to be entered")
        workers.stop(worker, signal.SIGKILL)
        assert dbos_status(workers.store_url, resume)[0] == "PENDING"
        hold.unlink()
        workers.start("w1")
        done = queue.wait(resume, timeout_s=90)
    assert done["status"] == "finished"
    entries = business(workers.home, "SELECT idempotency_key FROM entries")
    assert 1 <= len(entries) <= 2 and len(set(entries)) == 1
    assert business(workers.home, "SELECT idempotency_key FROM shipments") == [entries[0]]
    seqs = [e.seq for e in stored_events(workers.store_url, run_id)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_plan_enqueued_with_its_entities_runs_and_a_rejection_ends_it(
    workers: WorkerPool,
) -> None:
    workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.run_plan("depot", "ship", entities={"order_id": "A2"})
        paused = queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
        assert paused["status"] == "awaiting_confirm" and paused["pending"]["step_id"] == "s3"
        ended = queue.wait(queue.resume("depot", run_id, approve=False), timeout_s=60)
    assert ended["outcome"] == "cancelled"
    assert {s["id"]: s["status"] for s in ended["steps"]}["s3"] == "skipped"
    assert business(workers.home, "SELECT count(*) FROM entries") == [(0,)]


def test_a_worker_killed_in_a_write_of_a_start_takes_the_run_over_after_restart(
    workers: WorkerPool, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    workers.env["DEPOT_HOLD"] = str(hold)
    worker = workers.start("w1")
    with RunQueue(workers.store_url) as queue:
        run_id = queue.start("depot", "please tag A3")
        entered = "SELECT count(*) FROM entries"
        until(lambda: business(workers.home, entered) == [(1,)], "the write to be entered")
        workers.stop(worker, signal.SIGKILL)
        stored = stored_events(workers.store_url, run_id)  # saved before the write began
        assert stored and stored[-1].type == "tool_selected"
        hold.unlink()
        workers.start("w1")  # the run is stored, its lease a dead process's: taken at once
        done = queue.wait(names.workflow_id(run_id, 0), timeout_s=90)
    assert done["status"] == "finished" and done["reply"] == "Order A3 is tagged"
    entries = business(workers.home, "SELECT idempotency_key FROM entries")
    assert 1 <= len(entries) <= 2 and len(set(entries)) == 1
    assert business(workers.home, "SELECT idempotency_key FROM tags") == [entries[0]]
    seqs = [e.seq for e in stored_events(workers.store_url, run_id)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_the_queue_refuses_input_that_is_no_input_before_it_reads_or_enqueues() -> None:
    """Review of 4ce91f5: ``RunQueue.resume`` (the public queue API) answered a step named
    with an answer RUN_NOT_RESUMABLE where ``Runtime.resume`` says INVALID_INPUT, and a
    blank message was enqueued, to be refused by the worker after the run was accepted."""
    from corral.errors import InvalidInputError
    from tests.workers_support import fresh_database

    with fresh_database() as url, RunQueue(url) as queue:
        never = "run_0123456789abcdef"  # no such run: the input is refused before any read
        for given in (
            {"answer": "A1", "step_id": "s1"},
            {"approve": True, "answer": "A1"},
            {"answer": " \u200b "},
        ):
            with pytest.raises(InvalidInputError):
                queue.resume("depot", never, **given)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            queue.start("depot", "\u3000")
        assert sql(url, "SELECT count(*) FROM dbos.workflow_status") == [(0,)]
