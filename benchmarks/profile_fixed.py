"""The fixed cost of a corral run: CPU per run at 0, 1 and 5 steps, and where it goes.

    python benchmarks/profile_fixed.py                 # CPU per run: reply route, 1, 5 steps
    python benchmarks/profile_fixed.py --profile 0     # cProfile of the reply route (no plan)
    python benchmarks/profile_fixed.py --profile 1     # ... of a 1-step plan

The reply route (an intent answered from a template, no plan) is the message -> reply
path with no step at all: its cost is what every run pays. The difference between the
1- and 5-step chains, divided by four, is the cost per step; what is left is the fixed
part. ``--profile`` prints the functions by own time with their calls per run, which
are robust where the timings on a shared machine are not.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from pathlib import Path

from frameworks.corral_agent import DAG, agent, chain

from corral import MemoryStore, Runtime


def _runtime(steps: int) -> tuple[Runtime, str]:
    """A runtime whose agent answers ``hi`` from a template and runs ``go`` as a plan."""
    plan = DAG if steps == -5 else chain(max(steps, 1))
    hi = {
        "name": "hi",
        "rules": [{"keywords": ["hi"], "confidence": 0.95}],
        "route": "reply",
        "reply": "done",
    }
    runtime = Runtime(agent(0.0, plan, [hi]), MemoryStore(max_ended_runs=100))
    return runtime, "hi" if steps == 0 else "go"


async def _run(runtime: Runtime, message: str, tasks: int) -> float:
    """CPU seconds per run over ``tasks`` runs, one at a time, after a warm-up."""
    for _ in range(50):
        await runtime.start(message)
    started = time.process_time()
    for _ in range(tasks):
        summary = await runtime.start(message)
    assert summary.status.value == "finished", summary
    return (time.process_time() - started) / tasks


def measure(tasks: int, rounds: int) -> None:
    """Median CPU per run of the reply route, a 1-step and a 5-step chain, and the DAG."""
    cases = {"reply route (0 steps)": 0, "1-step chain": 1, "5-step chain": 5, "5-step DAG": -5}
    found: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, steps in cases.items():
            runtime, message = _runtime(steps)
            found[name].append(asyncio.run(_run(runtime, message, tasks)))
    medians = {name: statistics.median(values) * 1e6 for name, values in found.items()}
    for name, value in medians.items():
        print(f"{name:24} {value:7.1f} µs per run")
    per_step = (medians["5-step chain"] - medians["1-step chain"]) / 4
    print(f"{'per step':24} {per_step:7.1f} µs")
    print(f"{'fixed (1-step - step)':24} {medians['1-step chain'] - per_step:7.1f} µs")


def profile(steps: int, tasks: int, top: int, sort: str) -> None:
    """cProfile ``tasks`` runs; functions by ``sort`` with their calls per run."""
    runtime, message = _runtime(steps)
    asyncio.run(_run(runtime, message, 10))
    profiler = cProfile.Profile()

    async def many() -> None:
        for _ in range(tasks):
            await runtime.start(message)

    profiler.enable()
    asyncio.run(many())
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows: list[tuple[float, float, float, str]] = []
    total_calls = 0
    total_time = 0.0
    for (filename, line, function), entry in stats.stats.items():  # type: ignore[attr-defined]
        calls, tottime, cumtime = entry[1], entry[2], entry[3]
        total_calls += calls
        total_time += tottime
        path = Path(filename)
        where = f"{path.parent.name}/{path.name}:{line}({function})" if line else function
        rows.append((calls / tasks, tottime / tasks * 1e6, cumtime / tasks * 1e6, where))
    index = {"tottime": 1, "cumtime": 2, "calls": 0}[sort]
    print(f"{total_calls / tasks:.0f} calls per run, {total_time / tasks * 1e6:.0f} µs per run")
    print(f"{'calls/run':>9} {'own µs':>7} {'cum µs':>7}  function")
    for calls, own, cum, where in sorted(rows, key=lambda r: -r[index])[:top]:
        print(f"{calls:9.1f} {own:7.1f} {cum:7.1f}  {where}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=int, metavar="STEPS", help="0: the reply route")
    parser.add_argument("--sort", choices=("tottime", "cumtime", "calls"), default="tottime")
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    if args.profile is not None:
        profile(args.profile, args.tasks, args.top, args.sort)
    else:
        measure(args.tasks, args.rounds)


if __name__ == "__main__":
    main()
