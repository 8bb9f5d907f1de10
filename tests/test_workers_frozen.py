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

from tests.extras import REQUIRE_ALL, import_extra
from tests.test_workers_takeover import live, write_held_on_one_of_two
from tests.workers_support import business, until

import_extra("dbos", REQUIRE_ALL)


def test_a_frozen_workers_run_is_taken_over_once_its_session_idles_out(tmp_path: Path) -> None:
    with write_held_on_one_of_two(tmp_path) as held:
        pool, frozen, survivor = held.pool, held.holder, held.survivor
        worker = held.started[frozen]
        worker.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            until(lambda: live(pool) == {survivor}, "the frozen session ended", 60)
            until(lambda: f"of executor {frozen}" in pool.log(survivor), "a takeover", 30)
            print(f"takeover: {time.monotonic() - frozen_at:.1f} s after the freeze")
            held.hold.unlink()
            summary = held.queue.wait(held.resume, 120)
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.send_signal(signal.SIGCONT)
    assert summary["status"] == "finished"
    assert len(business(pool.home, "SELECT idempotency_key FROM shipments")) == 1
