"""A stopped ``corral worker`` exits, even with a sync tool's thread that never returns.

Python waits for every such thread at exit, and a thread cannot be stopped: a worker
given SIGTERM after a tool blocked for ever (a socket read with no timeout) never ended,
and its supervisor had to kill it. It now waits a bounded time for the process's
threads after DBOS is destroyed, then exits 0 naming the ones it leaves. Exiting is what
a kill would do, and a dead worker's runs are another worker's to take over (its
liveness lock ends with the process), so nothing acts twice.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.extras import REQUIRE_ALL, import_extra
from tests.workers_support import until, worker_pool

import_extra("dbos", REQUIRE_ALL)

from corral.workers import names  # noqa: E402
from corral.workers.client import RunQueue  # noqa: E402

STUCK = Path(__file__).resolve().parent / "agents" / "stuck"
WAIT_S = 90.0
"""The most a step of the test waits for the worker (a loaded 2-core CI machine)."""


def test_a_worker_stopped_with_a_stuck_sync_tool_exits_and_names_the_thread(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "mark"
    with worker_pool(tmp_path) as pool:
        pool.env["STUCK_MARK"] = str(mark)
        worker = pool.start("w-stuck", STUCK, options=["--stop-timeout", "1"])
        with RunQueue(pool.store_url) as queue:
            run_id = queue.start("stuck", "block")
            # the tool's 0.3 s timeout ends the drive; its thread runs on
            summary = queue.wait(names.workflow_id(run_id, 0), WAIT_S)
        assert mark.exists() and summary["status"] == "handed_off"
        began = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        try:
            until(lambda: worker.poll() is not None, "the worker's exit", 40)
        except AssertionError:
            raise AssertionError(f"the worker did not exit:\n{pool.log('w-stuck')}") from None
        took = time.monotonic() - began
        said = pool.log("w-stuck")
    assert worker.returncode == 0, said
    # the tool's thread, named; on a loaded machine the whole stop's bound may come first
    # and name the stop as well ("MainThread (its stop)")
    assert "stopped, leaving" in said and "thread(s) that did not end" in said, said
    assert took < 35  # bounded: the threads get 1 s, the whole stop 10 + 1 + 10 s at most


def test_a_worker_whose_threads_all_end_exits_after_its_grace(tmp_path: Path) -> None:
    """Idle thread pools end at Python's exit: nothing is left, nor said to be."""
    mark = tmp_path / "mark"
    with worker_pool(tmp_path) as pool:
        pool.env["STUCK_MARK"] = str(mark)
        options = ["--shutdown-grace", "1", "--stop-timeout", "30"]
        worker = pool.start("w-idle", STUCK, options=options)
        with RunQueue(pool.store_url) as queue:
            queue.start("stuck", "wait")  # an async tool: cancelled at the stop
            until(mark.exists, "the tool's call", WAIT_S)
            began = time.monotonic()
            pool.stop(worker)
            took = time.monotonic() - began
        said = pool.log("w-idle")
    assert worker.returncode == 0, said
    assert "leaving" not in said, said
    assert took < 8, said  # the drive's 1 s of grace, not the default 10 s nor the 30 s
