"""PostgreSQL restarts under load: workers reconnect, runs continue, no write is repeated.

The test starts a PostgreSQL server of its own (``.ci/start-postgres.sh``, as CI starts
the shared one), because it restarts it: two real workers drive eight runs of the depot
agent, each held inside its write while the server restarts (``pg_ctl restart -m fast``
ends every session). Then every run finishes, each write was entered once and shipped
once, and no worker took another's runs over (each took its own liveness lock back).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from corral.workers import names
from tests.extras import REQUIRE_ALL, REQUIRE_PG, import_extra, skip_or_fail
from tests.workers_support import ROOT, business, until, worker_pool

import_extra("dbos", REQUIRE_ALL)

from corral.workers.client import RunQueue  # noqa: E402

RUNS = 8
"""Drives in flight at once: the depot agent's 4 per worker, on 2 workers."""
WAIT_S = 90.0


@contextmanager
def private_postgres() -> Iterator[tuple[str, Callable[[], None]]]:
    """A throwaway server of this test's own: its URL, and how to restart it."""
    started = subprocess.run(
        ["bash", str(ROOT / ".ci" / "start-postgres.sh")], capture_output=True, text=True
    )
    if started.returncode != 0:
        skip_or_fail(f"cannot start a PostgreSQL server: {started.stderr[-300:]}", REQUIRE_PG)
    url, data, bin_dir = started.stdout.split()[-3:]

    def pg_ctl(*args: str) -> None:
        command = ["runuser", "-u", "postgres", "--", f"{bin_dir}/pg_ctl", "-D", data, *args]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)

    log = str(Path(data).parent / "restarted.log")
    try:
        yield url, lambda: pg_ctl("-l", log, "-m", "fast", "-w", "restart")
    finally:
        pg_ctl("-m", "immediate", "-w", "stop")
        shutil.rmtree(Path(data).parent, ignore_errors=True)


def repeated_entries(by_worker: list[tuple[object, ...]], workers: dict[int, str]) -> str:
    """Each key entered more than once, with the workers that entered it, in order."""
    entered: dict[object, list[str]] = {}
    for key, pid in by_worker:
        entered.setdefault(key, []).append(workers.get(int(str(pid)), str(pid)))
    repeats = {str(key)[:8]: names for key, names in entered.items() if len(names) > 1}
    return f"{len(by_worker)} entries for {len(entered)} keys; repeated: {repeats}"


def test_a_server_restart_mid_write_loses_no_run_and_repeats_no_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    with private_postgres() as (server, restart):
        monkeypatch.setenv("CORRAL_TEST_PG_URL", server)  # the pool's database goes there
        with worker_pool(tmp_path) as pool:
            pool.env["DEPOT_HOLD"] = str(hold)
            for executor in ("r-a", "r-b"):
                pool.start(executor)
            with RunQueue(pool.store_url) as queue:
                runs = [queue.start("depot", f"please ship A{i}") for i in range(RUNS)]
                for run in runs:
                    queue.wait(names.workflow_id(run, 0), WAIT_S)
                hold.touch()
                drives = [queue.resume("depot", run, approve=True) for run in runs]
                entered = "SELECT idempotency_key FROM entries"
                until(lambda: len(business(pool.home, entered)) == RUNS, "every write", WAIT_S)
            restart()
            hold.unlink()
            with RunQueue(pool.store_url) as queue:  # a new client: the old one's server went
                done = [queue.wait(drive, WAIT_S)["status"] for drive in drives]
            taken_back = "liveness lock taken again"  # each worker, its own, at its next poll
            until(lambda: all(taken_back in pool.log(w) for w in ("r-a", "r-b")), taken_back)
            logs = pool.log("r-a") + pool.log("r-b")
            keys = business(pool.home, entered)
            shipped = business(pool.home, "SELECT idempotency_key FROM shipments")
            by_worker = business(pool.home, "SELECT idempotency_key, pid FROM entries")
            workers = {
                process.pid: name
                for process, name in zip(pool.started, pool.executor_ids, strict=True)
            }
    # Shown by pytest only when the test fails: the whole of both logs (the assertion's own
    # message is cut short), for a failure seen about once in fifty runs under load.
    print(f"entries (key, worker): {[(key, workers.get(pid, pid)) for key, pid in by_worker]}")
    print(logs)
    assert done == ["finished"] * RUNS
    # each write entered once (the message: which worker entered a repeated key, to tell a
    # repeat in one worker from one after a takeover)
    assert len(keys) == RUNS and len(set(keys)) == RUNS, repeated_entries(by_worker, workers)
    assert sorted(shipped) == sorted(keys)
    assert logs.count(taken_back) == 2
    assert "took over" not in logs  # nobody was called dead
