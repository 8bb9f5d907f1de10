"""Workload A in instructions, and garbage collection under load, side by side.

    python benchmarks/instructions.py                     # both tables, every framework present
    python benchmarks/instructions.py --only corral --only Burr --gc-only
    python benchmarks/instructions.py --chains            # corral on 5, 20, 50-step chains

CPU time on a shared machine swings by 30 % with the load; the number of instructions a
task executes does not. The first table counts them with valgrind's callgrind (``apt-get
install valgrind``): each framework runs the 5-step DAG of ``overhead.py`` (tools that
answer at once) one task at a time in its own process, twice, with ``--small`` and
``--large`` tasks after the same warm-up; the difference divided by the extra tasks is
what one task costs, with imports and warm-up cancelled out. plain asyncio is the
baseline of the same run.

The second table is what one task costs with 200 in flight (workloads A and B of
``overhead.py``) and how much of it was garbage collection, timed by ``gc.callbacks``
per generation (CPU time of the collecting thread, so a busy machine does not inflate
it; tasks/s is wall time and does). Tasks that interleave keep each other's objects alive, so young
collections promote them and middle and full collections walk them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from overhead import (
    FRAMEWORKS,
    IN_FLIGHT,
    SCALE_STEPS,
    TOOL_LATENCY_B_S,
    _drive,
    added_step_costs,
    available,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARM = 30


# ------------------------------------------------------------------ children


async def _sequential(name: str, tasks: int, steps: int = 0) -> None:
    module = importlib.import_module(FRAMEWORKS[name][0])
    one = module.make(0.0, steps) if steps else module.make(0.0)
    for i in range(WARM + tasks):
        await one(i)


def _gc_child(name: str, workload: str, tasks: int) -> None:
    """Print CPU, wall and GC seconds per task for ``tasks`` at 200 in flight."""
    spent = [0.0, 0.0, 0.0]
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            spent[info["generation"]] += time.thread_time() - started[0]

    one = importlib.import_module(FRAMEWORKS[name][0]).make(
        TOOL_LATENCY_B_S if workload == "B" else 0.0
    )
    gc.callbacks.append(timed)
    cpu, wall = asyncio.run(_drive(one, tasks, IN_FLIGHT, 20))
    gc.callbacks.remove(timed)
    print("RESULT", cpu / tasks, wall / tasks, *(s / tasks for s in spent))


# ------------------------------------------------------------------ parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(HERE), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def _instructions(name: str, tasks: int, steps: int = 0) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        command += [sys.executable, __file__, "--child-seq", name, str(tasks), str(steps)]
        subprocess.run(command, check=True, capture_output=True, env=_env(), timeout=1800)
        found = re.search(r"^(?:summary|totals):\s*(\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit(f"callgrind wrote no total for {name}")
        return int(found.group(1))


def _gc(name: str, workload: str, tasks: int) -> list[float]:
    command = [sys.executable, __file__, "--child-gc", name, workload, str(tasks)]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{name} {workload} failed:\n{done.stderr[-3000:]}")
    return [float(value) for value in lines[-1].split()[1:]]


def _chains(small: int, large: int) -> None:
    """corral's instructions per task on chains, per step and per added step."""
    print("\ncorral, one task at a time on chains: instructions (callgrind)\n")
    print("| steps | per task | per step | per added step |")
    print("|---|---|---|---|")
    per_task: dict[int, float] = {}
    for steps in SCALE_STEPS:
        counts = [_instructions("corral", tasks, steps) for tasks in (small, large)]
        per_task[steps] = (counts[1] - counts[0]) / (large - small)
        added = added_step_costs(per_task)
        last = f"{list(added.values())[-1]:,.0f}" if added else "–"
        cost = per_task[steps]
        print(f"| {steps} | {cost:,.0f} | {cost / steps:,.0f} | {last} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="measure only these (repeatable)")
    parser.add_argument("--small", type=int, default=100, help="tasks of the short count")
    parser.add_argument("--large", type=int, default=400, help="tasks of the long count")
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per GC measurement")
    parser.add_argument("--gc-only", action="store_true", help="skip the callgrind table")
    parser.add_argument(
        "--chains", action="store_true", help="corral on 5, 20 and 50-step chains instead"
    )
    parser.add_argument("--child-seq", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--child-gc", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_seq:
        name, tasks, steps = args.child_seq
        asyncio.run(_sequential(name, int(tasks), int(steps)))
        return
    if args.chains:
        _chains(args.small, args.large)
        return
    if args.child_gc:
        _gc_child(args.child_gc[0], args.child_gc[1], int(args.child_gc[2]))
        return
    names, missing = available()
    if args.only:
        names = [name for name in names if name in args.only]
    if missing:
        print(f"not installed, left out: {', '.join(missing)}")
    base = "plain asyncio"
    if not args.gc_only:
        if shutil.which("valgrind") is None:
            raise SystemExit("valgrind is not installed (apt-get install valgrind)")
        print("\nWorkload A, one task at a time: instructions per task (callgrind)\n")
        print("| framework | instructions per task | × plain asyncio |")
        print("|---|---|---|")
        counts = {}
        for name in names:
            small, large = _instructions(name, args.small), _instructions(name, args.large)
            counts[name] = (large - small) / (args.large - args.small)
            ratio = f"{counts[name] / counts[base]:.1f}×" if base in counts else "–"
            print(f"| {name} | {counts[name]:,.0f} | {ratio} |", flush=True)
    heading = f"{IN_FLIGHT} tasks in flight, {args.tasks} tasks: µs per task, and of it GC"
    print(f"\n{heading}\n")
    print("| framework | workload | CPU | of it GC | young / middle / full GC | tasks/s |")
    print("|---|---|---|---|---|---|")
    for name in names:
        for workload in ("A", "B"):
            cpu, wall, *by_generation = _gc(name, workload, args.tasks)
            shares = " / ".join(f"{s * 1e6:.0f}" for s in by_generation)
            print(
                f"| {name} | {workload} | {cpu * 1e6:,.0f} | {sum(by_generation) * 1e6:,.0f} "
                f"| {shares} | {1 / wall:,.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
