"""N processes approve the same paused run at the same instant: how often is the write entered?

Each round pauses a fresh run of the ledger test agent (tests/agents/ledger) at its
confirmation, then N worker processes wait on one barrier and all call
``Runtime.resume(run, approve=True)``. The write tool counts its own entries.

    .venv/bin/python benchmarks/concurrent_approvals.py [--processes 8] [--rounds 50]

The baseline, ``leases off``, is the same code with the store's leases made no-ops (what
main did before one owner per run). Prints one row per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from leases_off import LeasesOff
from rich.console import Console
from rich.table import Table

from corral import load_agent
from corral.errors import CorralError
from corral.runtime.runtime import Runtime
from corral.store.sql import SqlStore

LEDGER = Path(__file__).resolve().parents[1] / "tests" / "agents" / "ledger"


def _runtime(home: Path, leases: bool) -> Runtime:
    agent = load_agent(LEDGER, data_dir=home / "data")
    store = SqlStore.open(home / "corral.db")
    return Runtime(agent, store if leases else LeasesOff(store))  # type: ignore[arg-type]


def _worker(home: str, leases: bool, jobs: Any, barrier: Any, results: Any) -> None:
    os.environ["LEDGER_WRITE_S"] = "0.05"
    runtime = _runtime(Path(home), leases)
    while (run_id := jobs.get()) is not None:
        barrier.wait(timeout=120)
        try:
            summary = asyncio.run(runtime.resume(run_id, approve=True))
            results.put(summary.status.value)
        except CorralError as exc:
            results.put(exc.code.value)
        except Exception as exc:  # the baseline may fail in any way
            results.put(type(exc).__name__)


def measure(processes: int, rounds: int, leases: bool) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="corral-approvals-"))
    runtime = _runtime(home, leases)
    ctx = mp.get_context("spawn")
    jobs, results, barrier = ctx.Queue(), ctx.Queue(), ctx.Barrier(processes)
    workers = [
        ctx.Process(target=_worker, args=(str(home), leases, jobs, barrier, results))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    entries_log = home / "data" / "entries.log"
    per_round: list[int] = []
    answers: dict[str, int] = {}
    started = time.perf_counter()
    for _ in range(rounds):
        before = len(entries_log.read_text().splitlines()) if entries_log.exists() else 0
        summary = asyncio.run(runtime.start("please cancel A12"))
        for _ in workers:
            jobs.put(summary.run_id)
        for _ in workers:
            answer = results.get(timeout=120)
            answers[answer] = answers.get(answer, 0) + 1
        per_round.append(len(entries_log.read_text().splitlines()) - before)
    for _ in workers:
        jobs.put(None)
    for worker in workers:
        worker.join(timeout=60)
    return {
        "rounds": rounds,
        "entries": sum(per_round),
        "max": max(per_round),
        "over_once": sum(1 for n in per_round if n > 1),
        "answers": answers,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    table = Table(title=f"{args.processes} processes approve one run at once, {args.rounds} rounds")
    for column in (
        "mode",
        "write entries",
        "rounds entered > once",
        "most in a round",
        "what callers were told",
        "s",
    ):
        table.add_column(column)
    for name, leases in (("leases off (baseline)", False), ("corral (one owner per run)", True)):
        row = measure(args.processes, args.rounds, leases)
        told = ", ".join(f"{k} {v}" for k, v in sorted(row["answers"].items()))
        table.add_row(
            name,
            f"{row['entries']} / {row['rounds']}",
            str(row["over_once"]),
            str(row["max"]),
            told,
            f"{row['seconds']:.0f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
