"""Losing a worker: another live worker takes its run over, and the write acts once.

Two real ``corral worker`` processes share a fresh PostgreSQL database and drive the
depot test agent. Its write records each entry (idempotency key, process) and then waits
while a flag file exists, so the test knows which worker is inside it when it SIGKILLs
that worker. The other worker's watcher finds the dead worker's lock free, takes its
pending workflow over, and re-enters the write with the same key; the business table
(UNIQUE key) gets one row, and the run's events have no gap.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.store.sql import SqlStore
from corral.workers import names
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import corral_cli
from tests.workers_support import DEPOT, WorkerPool, business, until, worker_pool

import_extra("dbos", REQUIRE_ALL)

from corral.workers.client import RunQueue  # noqa: E402

WAIT_S = 90.0
"""The most a step of the test waits for the workers (a loaded 2-core CI machine)."""


def workers_json(pool: WorkerPool) -> dict[str, Any]:
    """``corral workers --json`` on the pool's store."""
    done = corral_cli(pool.home, "workers", "--store", pool.store_url, "--json")
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def live(pool: WorkerPool) -> set[str]:
    return {w["executor_id"] for w in workers_json(pool)["workers"]}


ENTERED = "SELECT idempotency_key, pid FROM entries"
"""The write's entries: its key and the process that entered it."""


@dataclass
class HeldWrite:
    """Two live workers, and a run's approved write held inside one of them."""

    pool: WorkerPool
    queue: RunQueue
    run_id: str
    resume: str
    """The approval's drive, the one in the write."""
    started: dict[str, subprocess.Popen[bytes]]
    holder: str
    """The worker inside the write."""
    survivor: str
    key: str
    hold: Path
    """The flag file: the write goes on once it is gone."""


@contextmanager
def write_held_on_one_of_two(tmp_path: Path) -> Iterator[HeldWrite]:
    """Start workers ``w-a`` and ``w-b``, pause a depot run, approve it, and hold its write."""
    hold = tmp_path / "hold"
    with worker_pool(tmp_path) as pool:
        pool.env["DEPOT_HOLD"] = str(hold)
        started = {w: pool.start(w) for w in ("w-a", "w-b")}
        until(lambda: live(pool) == {"w-a", "w-b"}, "two live workers", WAIT_S)
        with RunQueue(pool.store_url) as queue:
            run_id = queue.start("depot", "please ship A1")
            queue.wait(names.workflow_id(run_id, 0), WAIT_S)  # paused for the approval
            hold.touch()
            resume = queue.resume("depot", run_id, approve=True)
            until(lambda: len(business(pool.home, ENTERED)) == 1, "the write entered", WAIT_S)
            key, pid = business(pool.home, ENTERED)[0]
            holder = next(w for w, proc in started.items() if proc.pid == pid)
            survivor = next(w for w in started if w != holder)
            yield HeldWrite(pool, queue, run_id, resume, started, holder, survivor, key, hold)


def test_a_killed_workers_run_is_taken_over_by_the_other_and_its_write_acts_once(
    tmp_path: Path,
) -> None:
    with write_held_on_one_of_two(tmp_path) as held:
        pool, queue, run_id, started = held.pool, held.queue, held.run_id, held.started
        dead, survivor, first_key = held.holder, held.survivor, held.key
        pool.stop(started[dead], signal.SIGKILL)  # and reaped, as a supervisor does
        killed_at = time.monotonic()
        until(lambda: len(business(pool.home, ENTERED)) == 2, "the write again", WAIT_S)
        print(f"takeover: {time.monotonic() - killed_at:.2f} s from SIGKILL to re-entry")
        until(lambda: workers_json(pool)["recovered_total"] > 0, "a recovered run", WAIT_S)
        status = workers_json(pool)
        held.hold.unlink()
        summary = queue.wait(held.resume, WAIT_S)
        assert f"took over 1 workflow(s) of executor {dead}" in pool.log(survivor)
        store = SqlStore.open(pool.store_url)
        events = store.load_events(run_id)
        store.engine.dispose()

    assert summary["status"] == "finished"
    # the other worker re-entered the write, with the same key: one business row
    assert business(pool.home, ENTERED) == [
        (first_key, started[dead].pid),
        (first_key, started[survivor].pid),
    ]
    assert business(pool.home, "SELECT idempotency_key FROM shipments") == [(first_key,)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no event lost
    assert [e.type for e in events].count("run_finished") == 1
    # `corral workers` showed the survivor alone, driving the drive it recovered
    assert [w["executor_id"] for w in status["workers"]] == [survivor]
    assert status["workers"][0]["in_flight"] == 1
    recovered = status["recovered"]
    assert [(r["run_id"], r["drive"], r["executor_id"]) for r in recovered] == [
        (run_id, 1, survivor)
    ]
    assert recovered[0]["dispatches"] >= 2


def test_a_second_worker_with_a_live_executor_id_refuses_to_start(tmp_path: Path) -> None:
    with worker_pool(tmp_path) as pool:
        assert workers_json(pool) == {  # no worker ever came: DBOS has no tables yet
            "workers": [],
            "queues": [],
            "orphaned": [],
            "recovered_total": 0,
            "recovered": [],
        }
        first = pool.start("w-same")
        until(lambda: live(pool) == {"w-same"}, "the first worker", WAIT_S)
        twin = ("worker", "--store", pool.store_url, "--agent", str(DEPOT))
        twin += ("--executor-id", "w-same")
        refused = corral_cli(pool.home, *twin, ok=False, env=pool.env)
        assert refused.returncode == 2
        assert "WORKER_ID_IN_USE" in refused.stderr and "w-same" in refused.stderr
        assert live(pool) == {"w-same"} and first.poll() is None  # the first one goes on
        table = corral_cli(pool.home, "workers", "--store", pool.store_url).stdout
        assert "workers: 1 live" in table and "w-same" in table and "runs recovered: 0" in table
    on_sqlite = corral_cli(tmp_path / "home", "workers", ok=False)  # no --store: the home's
    assert on_sqlite.returncode == 2 and "CONFIG_INVALID" in on_sqlite.stderr
