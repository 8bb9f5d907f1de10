"""A worker that lives on after its liveness connection was lost (a network split).

Its runs may be taken over by another worker while its own execution is still inside a
write. The old execution must then stand aside (DBOS refuses its next step): the run
finishes once, on the survivor, with the write's one business row and no event lost.
"""

from __future__ import annotations

import time
from pathlib import Path

from corral.store.sql import SqlStore
from tests.extras import REQUIRE_ALL, import_extra
from tests.test_workers_takeover import WAIT_S, write_held_on_one_of_two
from tests.workers_support import business, sql, until

import_extra("dbos", REQUIRE_ALL)


def test_a_live_worker_taken_over_after_a_lost_connection_finishes_nothing_twice(
    tmp_path: Path,
) -> None:
    with write_held_on_one_of_two(tmp_path) as held:
        pool, split, survivor = held.pool, held.holder, held.survivor

        def taken_over() -> bool:
            # the split worker's liveness session ends (its process lives on)
            sql(
                pool.store_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND datname = current_database()",
                f"corral-worker:{split}",
            )
            time.sleep(0.2)  # polls another process's log; orders nothing
            return "took over 1 workflow(s)" in pool.log(survivor)

        until(taken_over, "the split worker's drive taken over", WAIT_S)
        held.hold.unlink()
        summary = held.queue.wait(held.resume, WAIT_S * 2)
        assert held.started[split].poll() is None  # it lived on all along
        store = SqlStore.open(pool.store_url)
        events = store.load_events(held.run_id)
        store.engine.dispose()
        assert "no longer owned by this execution" in pool.log(split)  # DBOS fenced it

    assert summary["status"] == "finished", summary
    assert len(business(pool.home, "SELECT idempotency_key FROM shipments")) == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events].count("run_finished") == 1
