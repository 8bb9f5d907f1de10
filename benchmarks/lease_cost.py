"""What one owner per run costs on a durable store: leases on against leases off.

    .venv/bin/python benchmarks/lease_cost.py [--tasks 300] [--concurrency 20] [--repeats 3]

The 5-step plan of ``benchmarks/overhead.py`` (corral's own agent there) runs on a SQLite
file with leases (acquire, fenced saves, release) and on a store whose leases are no-ops
(``leases_off.py``, the baseline). Moved here from overhead.py, which now compares
frameworks.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from frameworks.corral_agent import DAG, agent
from leases_off import LeasesOff
from rich.console import Console
from rich.table import Table

from corral import Runtime, SqlStore


async def timed(make: object, tasks: int, concurrency: int) -> float:
    semaphore = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with semaphore:
            await make()  # type: ignore[operator]

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(tasks)))
    return time.perf_counter() - started


async def lease_cost(tasks: int, concurrency: int, repeats: int) -> None:
    """The same runs on a SQLite file, with and without leases."""
    built = agent(0.0, DAG)
    samples: dict[str, list[float]] = {"SQLite, leases off": [], "SQLite, one owner per run": []}
    for _ in range(repeats):
        for name in samples:
            store = SqlStore.open(Path(tempfile.mkdtemp()) / "corral.db")
            chosen = LeasesOff(store) if "off" in name else store
            runtime = Runtime(built, chosen)  # type: ignore[arg-type]
            samples[name].append(await timed(partial(runtime.start, "go"), tasks, concurrency))
    table = Table(title=f"lease cost: {tasks} runs on SQLite, concurrency {concurrency}")
    for column in ("store", "ms per run", "runs per s", "vs leases off"):
        table.add_column(column, justify="right")
    base = statistics.median(samples["SQLite, leases off"])
    for name, values in samples.items():
        median = statistics.median(values)
        table.add_row(
            name, f"{median / tasks * 1e3:,.2f}", f"{tasks / median:,.0f}", f"{median / base:.2f}x"
        )
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(lease_cost(args.tasks, args.concurrency, args.repeats))
