"""A worker that lives on after its liveness connection was lost (a network split).

Its runs may be taken over by another worker while its own execution is still inside a
write. The old execution must then stand aside (DBOS refuses its next step): the run
finishes once, on the survivor, with the write's one business row and no event lost.
"""

from __future__ import annotations

import time
from pathlib import Path

from corral.store.sql import SqlStore
from corral.workers import names
from tests.extras import REQUIRE_ALL, import_extra
from tests.test_workers_takeover import WAIT_S, business, live
from tests.workers_support import sql, until, worker_pool

import_extra("dbos", REQUIRE_ALL)

from corral.workers.client import RunQueue  # noqa: E402


def test_a_live_worker_taken_over_after_a_lost_connection_finishes_nothing_twice(
    tmp_path: Path,
) -> None:
    hold = tmp_path / "hold"
    entered = "SELECT idempotency_key, pid FROM entries"
    with worker_pool(tmp_path) as pool:
        pool.env["DEPOT_HOLD"] = str(hold)
        started = {w: pool.start(w) for w in ("w-a", "w-b")}
        until(lambda: live(pool) == {"w-a", "w-b"}, "two live workers", WAIT_S)
        with RunQueue(pool.store_url) as queue:
            run_id = queue.start("depot", "please ship A1")
            queue.wait(names.workflow_id(run_id, 0), WAIT_S)  # paused for the approval
            hold.touch()
            resume = queue.resume("depot", run_id, approve=True)
            until(lambda: len(business(pool.home, entered)) == 1, "the write entered", WAIT_S)
            first_pid = business(pool.home, entered)[0][1]
            split = next(w for w, proc in started.items() if proc.pid == first_pid)
            survivor = next(w for w in started if w != split)

            def taken_over() -> bool:
                # the split worker's liveness session ends (its process lives on)
                sql(
                    pool.store_url,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    f"corral-worker:{split}",
                )
                time.sleep(0.2)  # polls another process's log; orders nothing
                return "took over 1 workflow(s)" in pool.log(survivor)

            until(taken_over, "the split worker's drive taken over", WAIT_S)
            hold.unlink()
            summary = queue.wait(resume, WAIT_S * 2)
        assert started[split].poll() is None  # it lived on all along
        store = SqlStore.open(pool.store_url)
        events = store.load_events(run_id)
        store.engine.dispose()
        assert "no longer owned by this execution" in pool.log(split)  # DBOS fenced it

    assert summary["status"] == "finished", summary
    assert len(business(pool.home, "SELECT idempotency_key FROM shipments")) == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events].count("run_finished") == 1
