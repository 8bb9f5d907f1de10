"""A SQLite save made on the event loop's thread when nothing makes it wait, against the
baseline: every save handed to a store thread (``SqlStore.saves_in_place = False``).

Workload C of ``overhead.py``: the 5-step DAG, the full message -> reply path, on a SQLite
file in WAL mode, one save per run. ``--in-flight 1`` runs one task at a time (workload C);
more puts runs side by side, whose saves then meet each other's write lock now and then
(those go to a thread). Rounds alternate the two modes, each on a new file, in one process.

    PYTHONPATH=src .venv/bin/python benchmarks/saves_in_place.py
    PYTHONPATH=src .venv/bin/python benchmarks/saves_in_place.py --sync normal --in-flight 20
    PYTHONPATH=src .venv/bin/python benchmarks/saves_in_place.py --in-flight 20 --sessions 50
    PYTHONPATH=src .venv/bin/python benchmarks/saves_in_place.py --log   # as corral serve runs
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from frameworks.corral_agent import DAG, agent  # noqa: E402

from corral import Runtime, SqlStore  # noqa: E402

MODES = ("in a store thread (baseline)", "in place")


def _store(db: Path, sync: str) -> SqlStore:
    from sqlalchemy import event

    store = SqlStore.open(db)
    store.engine.dispose()  # connections opened from now on get the pragma below

    @event.listens_for(store.engine, "connect")
    def _sync(connection: Any, _record: Any) -> None:
        connection.execute(f"PRAGMA synchronous={sync.upper()}")

    return store


async def _measure(
    in_place: bool, tasks: int, in_flight: int, sync: str, sessions: int, log: bool
) -> tuple[float, float]:
    """CPU and wall µs per task, after 20 warm-up tasks, on a new file.

    ``sessions``: runs take turns over that many sessions (each run's end then updates its
    session, a write of its own, in a store thread); 0: no sessions. ``log``: the runtime
    keeps a JSONL log as ``corral run`` and ``corral serve`` do (exported in a thread).
    """
    with tempfile.TemporaryDirectory() as folder:
        store = _store(Path(folder) / "bench.db", sync)
        store.saves_in_place = in_place
        logs = Path(folder) / "logs" if log else None
        runtime = Runtime(agent(0.0, DAG), store, log_dir=logs)
        for _ in range(20):
            await runtime.start("go")
        gate = asyncio.Semaphore(in_flight)

        async def one(n: int) -> None:
            async with gate:
                session = f"s{n % sessions}" if sessions else None
                summary = await runtime.start("go", session_id=session)
            if summary.status.value != "finished":
                raise RuntimeError(f"the run did not finish: {summary}")

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(tasks)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await runtime.aclose()
        store.engine.dispose()
    return cpu / tasks * 1e6, wall / tasks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternations (median)")
    parser.add_argument("--tasks", type=int, default=300, help="runs per measurement")
    parser.add_argument("--in-flight", type=int, default=1, help="runs side by side")
    parser.add_argument("--sync", choices=("off", "normal"), default="off")
    parser.add_argument("--sessions", type=int, default=0, help="sessions the runs share")
    parser.add_argument("--log", action="store_true", help="a JSONL log, as the CLI keeps")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for round_ in range(args.rounds):
        order = MODES if round_ % 2 == 0 else MODES[::-1]
        for mode in order:
            shape = (args.tasks, args.in_flight, args.sync, args.sessions, args.log)
            measured = asyncio.run(_measure(mode == "in place", *shape))
            results[mode].append(measured)
    print(
        f"workload C: {args.tasks} runs x {args.rounds} rounds, {args.in_flight} in flight, "
        f"synchronous={args.sync.upper()}, {args.sessions or 'no'} sessions, "
        f"{'a' if args.log else 'no'} log; median per run\n"
    )
    print("| save | CPU per run | wall per run | CPU vs baseline |\n|---|---|---|---|")
    base = statistics.median(cpu for cpu, _ in results[MODES[0]])
    for mode in MODES:
        cpu = statistics.median(c for c, _ in results[mode])
        wall = statistics.median(w for _, w in results[mode])
        print(f"| {mode} | {cpu:,.0f} µs | {wall:,.0f} µs | {cpu / base:.2f}× |")


if __name__ == "__main__":
    main()
