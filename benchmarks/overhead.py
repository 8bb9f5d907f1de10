"""Harness overhead: corral against plain asyncio on the same 5-step plan.

The plan is s1 -> (s2 || s3) -> s4 -> s5 with trivial async tools, so what is measured is
the harness itself: intent rules, routing, binding, validation, events, verification.
corral runs with its in-memory store (no disk) so the comparison is about the run loop.

    .venv/bin/python benchmarks/overhead.py [--tasks 2000] [--concurrency 200]
        [--tool-latency-ms 0] [--sqlite-tasks 300]

Prints a table: per-task time for each, the ratio, and runs per second at the given
concurrency. The baseline is named ``plain asyncio`` and runs in the same process.
A second table measures what one owner per run costs on a durable store: the same runs
on a SQLite file with leases (acquire, fenced saves, release) and with leases off.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from leases_off import LeasesOff
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from corral import Agent, MemoryStore, Runtime, SqlStore, parse_config, tool


class Out(BaseModel):
    value: int


TOOL_LATENCY_S = 0.0
"""Set by --tool-latency-ms: how long each tool "works" (asyncio.sleep)."""


async def _work() -> None:
    if TOOL_LATENCY_S:
        await asyncio.sleep(TOOL_LATENCY_S)


@tool
async def fetch(n: int) -> Out:
    """Stands for a lookup."""
    await _work()
    return Out(value=n)


@tool
async def combine(a: int, b: int) -> Out:
    """Stands for a computation over two results."""
    await _work()
    return Out(value=a + b)


CONFIG = parse_config(
    {
        "name": "bench",
        "intents": [
            {
                "name": "go",
                "rules": [{"keywords": ["go"], "confidence": 0.95}],
                "route": "plan",
                "plan": "p",
                "reply": "done",
            }
        ],
        "plans": {
            "p": {
                "steps": [
                    {"id": "s1", "tool": "fetch", "args": {"n": 1}},
                    {
                        "id": "s2",
                        "tool": "fetch",
                        "args": {"n": "$s1.result.value"},
                        "depends_on": ["s1"],
                    },
                    {"id": "s3", "tool": "fetch", "args": {"n": 3}, "depends_on": ["s1"]},
                    {
                        "id": "s4",
                        "tool": "combine",
                        "depends_on": ["s2", "s3"],
                        "args": {"a": "$s2.result.value", "b": "$s3.result.value"},
                    },
                    {
                        "id": "s5",
                        "tool": "combine",
                        "depends_on": ["s4"],
                        "args": {"a": "$s4.result.value", "b": 1},
                    },
                ]
            }
        },
        "templates": {"done": {"zh": "完成", "en": "done"}},
        "budget": {"max_wall_clock_s": 3600},
    }
)


async def plain_asyncio() -> int:
    """The same plan written by hand: the baseline."""
    s1 = await fetch.fn(1)
    s2, s3 = await asyncio.gather(fetch.fn(s1.value), fetch.fn(3))
    s4 = await combine.fn(s2.value, s3.value)
    s5 = await combine.fn(s4.value, 1)
    return int(s5.value)


async def timed(make: object, tasks: int, concurrency: int) -> float:
    semaphore = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with semaphore:
            await make()  # type: ignore[operator]

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(tasks)))
    return time.perf_counter() - started


async def main(tasks: int, concurrency: int, repeats: int) -> None:
    agent = Agent.build(CONFIG, [fetch, combine])
    runtime = Runtime(agent, MemoryStore())
    summary = await runtime.start("go")
    assert summary.status.value == "finished", summary
    assert await plain_asyncio() == 5
    results: dict[str, list[float]] = {"plain asyncio": [], "corral": []}
    for _ in range(repeats):
        results["plain asyncio"].append(await timed(plain_asyncio, tasks, concurrency))
        fresh = Runtime(agent, MemoryStore())
        results["corral"].append(await timed(partial(fresh.start, "go"), tasks, concurrency))
    table = Table(
        title=f"5-step plan, {tasks} tasks, concurrency {concurrency}, tools "
        f"{TOOL_LATENCY_S * 1000:g} ms each, median of {repeats}"
    )
    for column in ("runner", "µs per task", "tasks per s", "vs baseline"):
        table.add_column(column, justify="right")
    base = statistics.median(results["plain asyncio"])
    for name, samples in results.items():
        median = statistics.median(samples)
        table.add_row(
            name, f"{median / tasks * 1e6:,.1f}", f"{tasks / median:,.0f}", f"{median / base:,.1f}x"
        )
    Console().print(table)


async def lease_cost(tasks: int, concurrency: int, repeats: int) -> None:
    """The same runs on a SQLite file, with and without leases."""
    agent = Agent.build(CONFIG, [fetch, combine])
    samples: dict[str, list[float]] = {"SQLite, leases off": [], "SQLite, one owner per run": []}
    for _ in range(repeats):
        for name in samples:
            store = SqlStore.open(Path(tempfile.mkdtemp()) / "corral.db")
            chosen = LeasesOff(store) if "off" in name else store
            runtime = Runtime(agent, chosen)  # type: ignore[arg-type]
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
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tool-latency-ms", type=float, default=0.0)
    parser.add_argument("--sqlite-tasks", type=int, default=300)
    args = parser.parse_args()
    TOOL_LATENCY_S = args.tool_latency_ms / 1000
    asyncio.run(main(args.tasks, args.concurrency, args.repeats))
    if args.sqlite_tasks:
        asyncio.run(lease_cost(args.sqlite_tasks, min(args.concurrency, 20), args.repeats))
