"""One owner per run, with real processes: a double click never enters a write twice.

The ledger agent's write tool appends a line to ``entries.log`` each time it is entered,
so these tests count entries inside the tool, not rows in a table.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from corral import load_agent
from corral.effects import LiveEffects
from corral.errors import CorralError, LeaseLostError
from corral.runtime.runtime import Runtime
from corral.store.sql import SqlStore
from tests.extras import postgres_url
from tests.helpers import corral_cli

LEDGER = Path(__file__).parent / "agents" / "ledger"
ROOT = Path(__file__).resolve().parents[1]


def paused_run(home: Path) -> str:
    """A ledger run waiting for the confirmation of its write."""
    out = corral_cli(home, "run", str(LEDGER), "please cancel A12", "--json")
    summary = json.loads(out.stdout)
    assert summary["status"] == "awaiting_confirm"
    return str(summary["run_id"])


def entries(home: Path) -> list[str]:
    path = home / "data" / "ledger" / "entries.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _approve_in_process(
    home: str, run_id: str, barrier: Any, results: Any, url: str | None = None
) -> None:
    """One 'user' approving: load the agent as the CLI does, wait for the others, resume."""
    folder = Path(home)
    agent = load_agent(LEDGER, data_dir=folder / "data" / "ledger")
    store = SqlStore.open(url or folder / "corral.db")
    runtime = Runtime(agent, store, log_dir=folder / "logs")
    barrier.wait(timeout=600)  # spawning many processes is slow on a loaded machine
    try:
        summary = asyncio.run(runtime.resume(run_id, approve=True))
        results.put(("summary", summary.status.value))
    except CorralError as exc:
        results.put(("error", exc.code.value))


def approve_together(
    home: Path, run_id: str, processes: int, url: str | None = None
) -> list[tuple[str, str]]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=_approve_in_process, args=(str(home), run_id, barrier, results, url))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=900) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return outcomes


def test_eight_processes_approving_at_once_enter_the_write_once(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    outcomes = approve_together(tmp_path, run_id, 8)
    assert len(entries(tmp_path)) == 1, entries(tmp_path)
    # every caller gets the final summary or RUN_BUSY; nobody is told something else
    assert all(o in (("summary", "finished"), ("error", "RUN_BUSY")) for o in outcomes), outcomes
    assert ("summary", "finished") in outcomes
    events = SqlStore.open(tmp_path / "corral.db").load_events(run_id)
    assert [e.type.value for e in events].count("run_finished") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    replayed = corral_cli(tmp_path, "replay", run_id, "--json", ok=False)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["same_path"] is True


def test_concurrent_cli_approvals_with_wait_all_get_the_final_summary(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    command = [sys.executable, "-m", "corral", "resume", run_id, "--approve", "--json"]
    procs = [
        subprocess.Popen(
            [*command, "--wait", "--home", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    statuses = {json.loads(out)["status"] for out, _ in outputs}
    assert statuses == {"finished"}
    assert len(entries(tmp_path)) == 1


def test_a_second_resume_of_a_live_run_is_busy(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    command = [sys.executable, "-m", "corral", "resume", run_id, "--approve", "--json"]
    release = tmp_path / "release"  # the first stays in its write until this file exists
    first = subprocess.Popen(
        [*command, "--home", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LEDGER_HOLD_UNTIL": str(release)},
    )
    try:
        deadline = time.monotonic() + 60
        while not entries(tmp_path) and time.monotonic() < deadline:  # first is in the tool
            time.sleep(0.05)  # polls for the hand-off; the period orders nothing
        assert entries(tmp_path), "the first resume never entered its write"
        second = corral_cli(tmp_path, "resume", run_id, "--json", ok=False)
        assert second.returncode == 2
        assert json.loads(second.stdout)["error"]["code"] == "RUN_BUSY"
    finally:
        release.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert json.loads(out)["status"] == "finished"
    assert len(entries(tmp_path)) == 1


def test_a_repeated_approval_after_the_run_ended_returns_its_summary(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    first = json.loads(corral_cli(tmp_path, "resume", run_id, "--approve", "--json").stdout)
    again = json.loads(corral_cli(tmp_path, "resume", run_id, "--approve", "--json").stdout)
    assert first["status"] == again["status"] == "finished"
    assert again["reply"] == first["reply"]
    rejected = corral_cli(tmp_path, "resume", run_id, "--reject", "--json", ok=False)
    assert rejected.returncode == 2
    assert json.loads(rejected.stdout)["error"]["code"] == "RUN_NOT_RESUMABLE"
    assert len(entries(tmp_path)) == 1


def _open_store(path: str, barrier: Any, results: Any) -> None:
    barrier.wait(timeout=600)  # spawning many processes is slow on a loaded machine
    try:
        store = SqlStore.open(path)
        results.put(("ok", len(store.list_runs())))
    except Exception as exc:  # the defect: "table corral_runs already exists"
        results.put(("error", f"{type(exc).__name__}: {exc}"))


@pytest.mark.parametrize("processes", [16])
def test_sixteen_processes_open_a_new_home_at_once(tmp_path: Path, processes: int) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    path = str(tmp_path / "new" / "corral.db")
    workers = [
        ctx.Process(target=_open_store, args=(path, barrier, results)) for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=900) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    assert all(kind == "ok" for kind, _ in outcomes), outcomes


class _StallingEffects(LiveEffects):
    """Live effects whose clock freezes the event loop once, like a long GC pause or a
    suspended VM: the heartbeat cannot run, so the lease expires meanwhile. The freeze
    lasts until the test ends it (``thaw``), not for a guessed time."""

    def __init__(self, after_reads: int) -> None:
        self.reads, self.after_reads = 0, after_reads
        self.frozen, self.thaw = threading.Event(), threading.Event()

    def now(self) -> datetime:
        self.reads += 1
        if self.reads == self.after_reads:
            self.frozen.set()
            self.thaw.wait(timeout=120)  # the limit only ends a test that never thaws it
        return super().now()


def test_a_process_that_lost_its_lease_enters_no_tool(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")

    def runtime(effects: Any = None, **kwargs: Any) -> Runtime:
        store = SqlStore.open(tmp_path / "corral.db")
        return Runtime(agent, store, effects=effects, **kwargs)

    # A short lease for the owner that will stall: it only has to last until the stall.
    freezing = _StallingEffects(after_reads=2)
    stalled = runtime(freezing, lease_ttl_s=1.0)
    taken_over: dict[str, Any] = {}

    def other_process() -> None:
        try:
            if freezing.frozen.wait(timeout=120):  # the owner holds the lease, frozen
                # waits (polling the store) until the frozen owner's lease has expired
                other = runtime().resume(run_id, approve=True, wait_s=120)
                taken_over["summary"] = asyncio.run(other)
        finally:
            freezing.thaw.set()  # only now does the first owner go on

    thread = threading.Thread(target=other_process)
    thread.start()
    with pytest.raises(LeaseLostError):
        asyncio.run(stalled.resume(run_id, approve=True))
    thread.join(timeout=60)
    assert taken_over["summary"].status.value == "finished"
    assert len(entries(tmp_path)) == 1  # the stalled owner never entered the tool
    events = SqlStore.open(tmp_path / "corral.db").load_events(run_id)
    assert [e.type.value for e in events].count("confirmation_given") == 1


def test_eight_processes_approving_at_once_on_postgresql(tmp_path: Path) -> None:
    url = postgres_url()
    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")
    store = SqlStore.open(url)
    paused = asyncio.run(Runtime(agent, store).start("please cancel A12"))
    assert paused.status.value == "awaiting_confirm"
    outcomes = approve_together(tmp_path, paused.run_id, 8, url)
    assert len(entries(tmp_path)) == 1, entries(tmp_path)
    assert all(o in (("summary", "finished"), ("error", "RUN_BUSY")) for o in outcomes), outcomes
    events = store.load_events(paused.run_id)
    assert [e.type.value for e in events].count("run_finished") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_an_approval_names_its_step_so_a_late_click_never_approves_the_next(
    tmp_path: Path,
) -> None:
    first = json.loads(
        corral_cli(tmp_path, "run", str(LEDGER), "cancel and refund A12", "--json").stdout
    )
    run_id = first["run_id"]
    assert first["pending"]["step_id"] == "s2"
    approve = ("resume", run_id, "--approve", "--json", "--step")
    after_s2 = json.loads(corral_cli(tmp_path, *approve, "s2").stdout)
    assert after_s2["status"] == "awaiting_confirm" and after_s2["pending"]["step_id"] == "s3"
    late = json.loads(corral_cli(tmp_path, *approve, "s2").stdout)  # the same click, late
    assert late["pending"]["step_id"] == "s3"
    assert not any(line.startswith("refund") for line in entries(tmp_path))
    wrong = corral_cli(tmp_path, *approve, "s9", ok=False)
    assert wrong.returncode == 2
    assert json.loads(wrong.stdout)["error"]["code"] == "RUN_NOT_RESUMABLE"
    done = json.loads(corral_cli(tmp_path, *approve, "s3").stdout)
    assert done["status"] == "finished"
    assert [line.split()[0] for line in entries(tmp_path)].count("refund") == 1


@pytest.mark.parametrize("owner", ["alive", "pid reused", "gone", "killed, not reaped"])
def test_a_local_owner_is_taken_over_at_once_only_when_its_process_is_gone(
    owner: str, tmp_path: Path
) -> None:
    from corral.runtime.ownership import process_space, process_started
    from corral.store.memory import MemoryStore

    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")
    store = MemoryStore()
    paused = asyncio.run(Runtime(agent, store).start("please cancel A12"))
    me = os.getpid()
    zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    zombie.kill()  # SIGKILL; not waited for yet: a zombie until its parent reaps it
    while Path(f"/proc/{zombie.pid}/stat").read_text().split(")")[1].split()[0] != "Z":
        time.sleep(0.01)
    pid, started = {
        "alive": (me, process_started(me)),
        "pid reused": (me, "1"),  # same pid, another (earlier) process
        "gone": (2**22 + 7, "5"),  # beyond pid_max: no such process
        "killed, not reaped": (zombie.pid, process_started(zombie.pid)),
    }[owner]
    store.leases[paused.run_id] = (f"{process_space()}:{pid}.{started}:0a1b2c3d", time.time() + 60)
    if owner == "alive":
        with pytest.raises(CorralError) as caught:
            asyncio.run(Runtime(agent, store).resume(paused.run_id, approve=True))
        assert caught.value.code.value == "RUN_BUSY"
    else:
        done = asyncio.run(Runtime(agent, store).resume(paused.run_id, approve=True))
        assert done.status.value == "finished"
    zombie.wait()


async def test_the_heartbeat_fences_strictly_once_a_new_runs_row_exists() -> None:
    from dataclasses import replace

    from corral.runtime.ownership import Ownership
    from corral.store.base import RunRecord
    from corral.store.memory import MemoryStore

    renewed = asyncio.Event()

    async def io(call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        finally:
            if getattr(call, "__name__", "") == "renew_lease":
                renewed.set()  # a heartbeat tried to renew (and may have failed)

    store = MemoryStore()
    ownership = Ownership(store, io, ttl_s=0.06)
    async with ownership.holding("run_new", 0.0, new_run=True) as held:
        now = datetime.now()
        store.save(RunRecord("run_new", "t", "a", None, "parsing", now, now), [], lease=held.lease)
        held.lease = replace(held.lease, new_run=False)  # what the runtime does after it
        store.leases.pop("run_new")  # another owner took the run over and released it
        renewed.clear()
        async with asyncio.timeout(30):  # the next heartbeat, however late it comes
            await renewed.wait()
        # it must not have taken the lease back (the raw row: an expiry hides nothing)
        assert "run_new" not in store.leases


async def test_a_resume_cancelled_while_taking_the_lease_leaves_the_run_free(
    tmp_path: Path,
) -> None:
    """The store takes the lease in its thread, which a cancel cannot stop.

    A resume cancelled then (a client gone, a server stopping) used to leave the lease
    it had just taken: the run stayed ``RUN_BUSY`` for a whole lease time, driven by nobody.
    """
    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store)
    paused = await runtime.start("please cancel A12")
    taking, go = asyncio.Event(), threading.Event()
    loop = asyncio.get_running_loop()
    acquire = store.acquire_lease

    def slow_acquire(*args: Any, **kwargs: Any) -> str | None:
        loop.call_soon_threadsafe(taking.set)
        go.wait(30)
        return acquire(*args, **kwargs)

    store.acquire_lease = slow_acquire  # type: ignore[method-assign]
    resuming = asyncio.ensure_future(runtime.resume(paused.run_id, approve=True))
    await taking.wait()
    resuming.cancel()
    go.set()  # the store takes the lease after the cancel
    with pytest.raises(asyncio.CancelledError):
        await resuming
    assert store.lease_holder(paused.run_id) is None
    store.acquire_lease = acquire  # type: ignore[method-assign]
    done = await Runtime(agent, store).resume(paused.run_id, approve=True)
    assert done.status.value == "finished"
