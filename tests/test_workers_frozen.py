"""A worker that stops answering without its socket closing: a host lost or frozen.

SIGSTOP stands for it: the process neither runs nor closes its connections, as a machine
that lost power or its network leaves PostgreSQL's end of the socket open (for about two
hours, until the kernel's keepalive gives up). Its liveness session must still end, and
another worker take its run over, in bounded time.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from corral.workers import names
from tests.extras import REQUIRE_ALL, import_extra
from tests.test_workers_takeover import WAIT_S, business, live
from tests.workers_support import until, worker_pool

import_extra("dbos", REQUIRE_ALL)

from corral.workers.client import RunQueue  # noqa: E402


def test_a_frozen_workers_run_is_taken_over_once_its_session_idles_out(tmp_path: Path) -> None:
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
            frozen_pid = business(pool.home, entered)[0][1]
            frozen = next(w for w, proc in started.items() if proc.pid == frozen_pid)
            survivor = next(w for w in started if w != frozen)
            started[frozen].send_signal(signal.SIGSTOP)
            frozen_at = time.monotonic()
            try:
                until(lambda: live(pool) == {survivor}, "the frozen session ended", 60)
                until(lambda: f"of executor {frozen}" in pool.log(survivor), "a takeover", 30)
                print(f"takeover: {time.monotonic() - frozen_at:.1f} s after the freeze")
                hold.unlink()
                summary = queue.wait(resume, 120)
            finally:
                started[frozen].send_signal(signal.SIGKILL)
                started[frozen].send_signal(signal.SIGCONT)
    assert summary["status"] == "finished"
    assert len(business(pool.home, "SELECT idempotency_key FROM shipments")) == 1
