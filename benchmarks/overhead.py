"""Harness overhead: corral against plain asyncio, Burr, LangGraph and pydantic-graph.

    pip install -e '.[bench]'            # or: a separate venv, with PYTHONPATH=src
    python benchmarks/overhead.py [--rounds 5] [--tasks 2000] [--json] [--markdown]
    python benchmarks/overhead.py --quick          # tiny counts, one round: a smoke test
    python benchmarks/overhead.py --profile        # cProfile of corral in workload A
    python benchmarks/overhead.py --gc-off         # each framework's own work, no collector

The task is a 5-step DAG, s1 -> (s2 || s3) -> s4 -> s5, each tool a thin function
(``benchmarks/frameworks/``: one module per framework). corral runs the full message ->
reply path with a rule intent. Every measurement is its own process (one framework, one
workload), rounds are interleaved (each round runs every framework once, in a rotated
order) and the table shows medians over rounds:

- A: CPU per task (process time: every thread), tools return at once, 200 in flight;
  peak RSS of that process (``ru_maxrss``, imports included).
- B: tasks per second with 10 ms tools (asyncio.sleep), 200 in flight.
- C: CPU per task, durable on a SQLite file (WAL, ``synchronous=OFF``), one task at a time:
  corral's SqlStore, Burr's SQLitePersister, LangGraph's SqliteSaver, and plain asyncio
  committing a run row and a row per step with sqlite3. "stored bytes per run" is the
  bytes of every value in every table of that file, divided by the runs in it.
- scaling: CPU per step on chains of 5, 20 and 50 steps, and what an added step costs
  (a run's fixed part left out), for the frameworks in ``CHAINS``: corral's steps each
  pass its gates, call, verdict and events; Burr's are actions; plain asyncio's, awaits.
- fixed part: what a run costs besides its steps, for the same frameworks: a 1-step
  chain, less what a step adds from 1 to 5 steps. corral's is the message -> reply path
  (intent, route, plan, reply, summary); Burr's, building and running an application.

Frameworks that are not installed are left out and said so. Absolute figures depend on the
machine and its load; read the ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import importlib.util
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from frameworks.common import RESULT, stored_bytes

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

FRAMEWORKS = {
    "plain asyncio": ("frameworks.plain", None),
    "Burr": ("frameworks.burr_app", "burr"),
    "pydantic-graph": ("frameworks.pydantic_graph_app", "pydantic_graph"),
    "LangGraph": ("frameworks.langgraph_app", "langgraph"),
    "corral": ("frameworks.corral_agent", "corral"),
}
NO_DURABLE = {"pydantic-graph"}
SCALE_STEPS = (5, 20, 50)
FIXED_STEPS = 1
"""The chain whose cost, less one added step, is a run's fixed part (``fixed_parts``)."""
CHAINS = ("plain asyncio", "Burr", "corral")
"""The frameworks whose ``make(latency_s, steps)`` builds a chain of ``steps`` calls."""
IN_FLIGHT = 200
TOOL_LATENCY_B_S = 0.010


# ------------------------------------------------------------------ child: one measurement


async def _drive(one: Any, tasks: int, in_flight: int, warm: int) -> tuple[float, float]:
    """Run ``warm`` tasks, then ``tasks`` with ``in_flight`` at once: (CPU s, wall s)."""
    for i in range(warm):
        value = await one(-1 - i)
        if value != RESULT:
            raise RuntimeError(f"the task returned {value}, not {RESULT}")
    semaphore = asyncio.Semaphore(in_flight)

    async def limited(i: int) -> None:
        async with semaphore:
            await one(i)

    cpu, wall = time.process_time(), time.perf_counter()
    if in_flight == 1:
        for i in range(tasks):
            await one(i)
    else:
        await asyncio.gather(*(limited(i) for i in range(tasks)))
    return time.process_time() - cpu, time.perf_counter() - wall


def child(name: str, workload: str, tasks: int, steps: int) -> dict[str, float]:
    module = importlib.import_module(FRAMEWORKS[name][0])
    warm = max(1, min(20, tasks // 10))
    if workload == "A":
        cpu, wall = asyncio.run(_drive(module.make(0.0), tasks, IN_FLIGHT, warm))
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {
            "cpu_us": cpu / tasks * 1e6,
            "wall_us": wall / tasks * 1e6,
            "rss_mb": peak_kb / 1024,
        }
    if workload == "B":
        _, wall = asyncio.run(_drive(module.make(TOOL_LATENCY_B_S), tasks, IN_FLIGHT, warm))
        return {"tasks_per_s": tasks / wall}
    if workload == "C":
        with tempfile.TemporaryDirectory() as folder:
            db = Path(folder) / "bench.db"
            cpu, wall = asyncio.run(_drive(module.durable(db), tasks, 1, warm))
            size = stored_bytes(db) / (tasks + warm)
        return {"cpu_us": cpu / tasks * 1e6, "wall_us": wall / tasks * 1e6, "bytes": size}
    if workload == "scale":
        cpu, _ = asyncio.run(_drive(module.make(0.0, steps), tasks, IN_FLIGHT, warm))
        return {"cpu_us_per_step": cpu / tasks / steps * 1e6}
    raise SystemExit(f"unknown workload {workload}")


def _area(filename: str, function: str) -> str:
    """Where a profiled function belongs: a corral subpackage, a library or a stdlib module."""
    if filename == "~":  # a built-in: name it by what it is a method of
        for word in ("pydantic", "json", "hash", "sqlite"):
            if word in function:
                return f"built-in ({word})"
        return "built-in (other)"
    if filename.startswith("<fast_init corral."):  # ``corral.records.fast_init``
        return "corral.records (frozen records' __init__)"
    if filename == "<string>":
        return "dataclass-generated methods"
    path = Path(filename)
    if "corral" in path.parts:
        inner = path.parts[path.parts.index("corral") + 1 : -1]
        return ".".join(["corral", *inner, path.stem])
    if "site-packages" in path.parts:
        return path.parts[path.parts.index("site-packages") + 1].split(".")[0]
    if "benchmarks" in path.parts:
        return "benchmark harness"
    parent = path.parent.name
    return path.stem if not parent or parent.startswith("python") else parent


def profile(tasks: int, top: int) -> None:
    """cProfile of corral in workload A, in this process: what dominates its CPU.

    Prints the share of own time by area (corral subpackage, library, stdlib module),
    garbage collection measured apart (``gc.callbacks``), then the top functions.
    """
    import cProfile
    import pstats

    module = importlib.import_module(FRAMEWORKS["corral"][0])
    one = module.make(0.0)
    asyncio.run(_drive(one, 20, IN_FLIGHT, 1))
    collecting: list[float] = []
    gc_seconds = [0.0]

    def on_gc(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collecting.append(time.perf_counter())
        elif collecting:
            gc_seconds[0] += time.perf_counter() - collecting.pop()

    gc.callbacks.append(on_gc)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    asyncio.run(_drive(one, tasks, IN_FLIGHT, 0))
    profiler.disable()
    wall = time.perf_counter() - started
    gc.callbacks.remove(on_gc)
    stats = pstats.Stats(profiler)
    areas: dict[str, float] = {}
    # From the profiler's own entries, one per code object: ``pstats`` keys functions by
    # file, line and name, and keeps only one of those that share them (every
    # ``__init__`` that ``dataclass`` generates is ``<string>``, line 2).
    for entry in profiler.getstats():
        code = entry.code  # a built-in's is its description
        where = ("~", code) if isinstance(code, str) else (code.co_filename, code.co_name)
        area = _area(*where)
        areas[area] = areas.get(area, 0.0) + entry.inlinetime
    total = sum(areas.values())
    print(f"corral, workload A: {tasks} tasks, {wall:.2f} s under the profiler")
    print(f"garbage collection: {gc_seconds[0] / wall * 100:.1f} % of the wall time\n")
    print("| share of own time | where |\n|---|---|")
    for area, seconds in sorted(areas.items(), key=lambda item: -item[1])[:top]:
        print(f"| {seconds / total * 100:.1f} % | {area} |")
    print()
    stats.sort_stats("tottime").print_stats(top)


# ------------------------------------------------------------------ parent: rounds and table


def _measure(
    name: str, workload: str, tasks: int, steps: int = 0, gc_off: bool = False
) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(HERE), *filter(None, [env.get("PYTHONPATH")])]
    )
    command = [sys.executable, str(Path(__file__).resolve()), "--child", name, workload]
    command += ["--tasks", str(tasks), "--steps", str(steps), *(["--gc-off"] if gc_off else [])]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{name} {workload} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def available() -> tuple[list[str], list[str]]:
    present, missing = [], []
    for name, (_, package) in FRAMEWORKS.items():
        if package is None or importlib.util.find_spec(package) is not None:
            present.append(name)
        else:
            missing.append(name)
    return present, missing


def run_rounds(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    scale: dict[str, dict[int, list[float]]] = {
        name: {n: [] for n in (FIXED_STEPS, *SCALE_STEPS)} for name in names if name in CHAINS
    }
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            for workload, tasks in (("A", args.tasks), ("B", args.tasks), ("C", args.durable)):
                if workload == "C" and name in NO_DURABLE:
                    continue
                print(f"round {round_ + 1}/{args.rounds}: {name} {workload}", file=sys.stderr)
                for key, value in _measure(name, workload, tasks, gc_off=args.gc_off).items():
                    samples[name].setdefault(f"{workload}.{key}", []).append(value)
            for steps in scale.get(name, {}):
                print(f"round {round_ + 1}: {name} {steps} steps", file=sys.stderr)
                result = _measure(name, "scale", args.scale_tasks, steps, args.gc_off)
                scale[name][steps].append(result["cpu_us_per_step"])
    medians = {
        name: {key: statistics.median(values) for key, values in found.items()}
        for name, found in samples.items()
    }
    per_task = {  # CPU per run, by chain length
        name: {n: statistics.median(v) * n for n, v in found.items() if v}
        for name, found in scale.items()
    }
    scaling = {
        name: {str(n): cost / n for n, cost in found.items() if n in SCALE_STEPS}
        for name, found in per_task.items()
    }
    return {
        "rounds": args.rounds,
        "tasks": args.tasks,
        "durable_tasks": args.durable,
        "scale_tasks": args.scale_tasks,
        "in_flight": IN_FLIGHT,
        "gc_off": args.gc_off,
        "python": sys.version.split()[0],
        "versions": _versions(names),
        "medians": medians,
        "samples": samples,
        "scaling": scaling,
        "fixed_part_us": fixed_parts(per_task),
        # corral's, under the key it had before the other frameworks' chains were measured
        "scaling_us_per_step": scaling.get("corral", {}),
    }


def _versions(names: list[str]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    distributions = {"Burr": "apache-burr", "LangGraph": "langgraph", "corral": "corral"}
    distributions["pydantic-graph"] = "pydantic-graph"
    found = {}
    for name in names:
        if name in distributions:
            try:
                found[name] = version(distributions[name])
            except PackageNotFoundError:
                found[name] = "source"
    return found


def _ratio(value: float, base: float) -> str:
    return f" ({value / base:,.0f}×)" if base else ""


def rows(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the side-by-side table (one column per framework)."""
    medians = result["medians"]
    names = list(medians)
    plain = medians.get("plain asyncio", {})
    header = ["workload", *(f"{n} {result['versions'].get(n, '')}".strip() for n in names)]

    def cell(name: str, key: str, fmt: str, ratio: bool = False) -> str:
        value = medians[name].get(key)
        if value is None:
            return "–"
        text = fmt.format(value).replace(",", " ")
        base = plain.get(key, 0.0)
        return text + (_ratio(value, base) if ratio and name != "plain asyncio" else "")

    ideal = IN_FLIGHT / (4 * TOOL_LATENCY_B_S)
    table = [
        [
            "A: CPU per task, tools return at once",
            *(cell(n, "A.cpu_us", "{:,.0f} µs", True) for n in names),
        ],
        [
            f"B: tasks/s, 10 ms tools, {IN_FLIGHT} in flight (ideal {ideal:,.0f})",
            *(cell(n, "B.tasks_per_s", "{:,.0f}") for n in names),
        ],
        [
            "C: durable on SQLite, sync off, per task",
            *(cell(n, "C.cpu_us", "{:,.0f} µs", True) for n in names),
        ],
        ["peak RSS during A", *(cell(n, "A.rss_mb", "{:,.0f} MB") for n in names)],
        ["stored bytes per run", *(cell(n, "C.bytes", "{:,.0f} B") for n in names)],
    ]
    return header, table


def scaling_line(result: dict[str, Any]) -> str:
    """A line per framework whose chains were measured: CPU per step, and per added step."""
    scaling = result.get("scaling") or {"corral": result["scaling_us_per_step"]}
    return "\n".join(
        _framework_scaling(name, per_step) for name, per_step in scaling.items() if per_step
    )


def _us(value: float) -> str:
    """Microseconds, to a tenth below 10 (plain asyncio's steps cost about one)."""
    return f"{value:,.1f}" if abs(value) < 10 else f"{value:,.0f}"


def _framework_scaling(name: str, per_step: dict[str, float]) -> str:
    parts = [f"{n} steps: {_us(v)} µs/step" for n, v in per_step.items()]
    values = list(per_step.values())
    spread = (max(values) / min(values) - 1) * 100
    line = f"{name}, CPU per step: " + ", ".join(parts) + f" (largest / smallest: +{spread:.0f} %)"
    added = added_step_costs({int(n): v * int(n) for n, v in per_step.items()})
    if added:
        shown = ", ".join(f"{a}→{b} steps: {_us(v)} µs" for (a, b), v in added.items())
        line += f"; per added step: {shown}"
        if len(added) > 1 and min(added.values()) > 0:  # noise can make a difference ≤ 0
            growth = (max(added.values()) / min(added.values()) - 1) * 100
            line += f" (largest / smallest: +{growth:.0f} %)"
    return line


def fixed_parts(per_task: dict[str, dict[int, float]]) -> dict[str, float]:
    """Each framework's fixed part of a run: its 1-step chain less what a step adds (1 -> 5).

    ``per_task``: CPU per run by chain length. What is left is what every run pays besides
    its steps (for corral: the message in, intent, route, plan, reply and summary).
    """
    first, then = FIXED_STEPS, SCALE_STEPS[0]
    return {
        name: found[first] - (found[then] - found[first]) / (then - first)
        for name, found in per_task.items()
        if first in found and then in found
    }


def fixed_line(result: dict[str, Any]) -> str:
    """A line: each framework's fixed part of a run (``fixed_parts``)."""
    fixed = result.get("fixed_part_us") or {}
    if not fixed:
        return ""
    shown = ", ".join(f"{name} {_us(value)} µs" for name, value in fixed.items())
    return f"fixed part of a run ({FIXED_STEPS}-step chain less one added step): {shown}"


def added_step_costs(per_task: dict[int, float]) -> dict[tuple[int, int], float]:
    """What each step added between two chain lengths costs: the cost of a run's steps
    without its fixed part (intent, route, plan, reply), which a total divided by the
    steps spreads over them (so short chains look dearer per step)."""
    return {
        (a, b): (per_task[b] - per_task[a]) / (b - a)
        for a, b in itertools.pairwise(sorted(per_task))
    }


def print_table(result: dict[str, Any], markdown: bool) -> None:
    header, table = rows(result)
    title = (
        f"5-step DAG, median of {result['rounds']} interleaved rounds; A and B "
        f"{result['tasks']} tasks, C {result['durable_tasks']} tasks"
        + ("; garbage collector off" if result.get("gc_off") else "")
    )
    if markdown:
        print(f"{title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(row) + " |")
        print()
        print("\n\n".join(scaling_line(result).splitlines()))  # a paragraph each
        if fixed_line(result):
            print(f"\n{fixed_line(result)}")
        return
    from rich.console import Console
    from rich.table import Table

    rich_table = Table(title=title)
    for i, column in enumerate(header):
        rich_table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in table:
        rich_table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else 180).print(rich_table)
    print(scaling_line(result))
    if fixed_line(result):
        print(fixed_line(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per process in A and B")
    parser.add_argument("--durable", type=int, default=300, help="tasks per process in C")
    parser.add_argument("--scale-tasks", type=int, default=200, help="runs per chain length")
    parser.add_argument("--quick", action="store_true", help="1 round, tiny counts: a smoke test")
    parser.add_argument("--only", action="append", help="measure only these (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--profile", action="store_true", help="cProfile corral in workload A")
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="measure with the garbage collector off: each framework's own work, apart from "
        "what collecting its cyclic garbage costs",
    )
    parser.add_argument(
        "--child", nargs=2, metavar=("FRAMEWORK", "WORKLOAD"), help=argparse.SUPPRESS
    )
    parser.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.gc_off:
            gc.disable()
        result = child(args.child[0], args.child[1], args.tasks, args.steps)
        print("RESULT " + json.dumps(result), flush=True)
        return
    sys.path[:0] = [str(ROOT / "src"), str(HERE)]
    if args.profile:
        profile(args.tasks if args.tasks != 2000 else 500, 25)
        return
    if args.quick:
        args.rounds, args.tasks, args.durable, args.scale_tasks = 1, 100, 20, 10
    names, missing = available()
    if args.only:
        names = [n for n in names if n in args.only]
    for name in missing:
        print(f"{name} is not installed: left out (pip install -e '.[bench]')", file=sys.stderr)
    result = run_rounds(args, names)
    result["missing"] = missing
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, args.markdown)


if __name__ == "__main__":
    main()
