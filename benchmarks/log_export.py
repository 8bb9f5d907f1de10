"""What a run's JSONL log adds to a run, against the baseline: the same runs without a log.

``corral run`` and ``corral serve`` keep a JSONL file per run (``observe.logs``), written
from the run's events after its save (where the save was made: on the event loop's
thread for a SQLite save made in place, with the log beside the store). Workload C of
``overhead.py`` (the 5-step DAG, the full message -> reply path, one run at a time on a SQLite file,
``synchronous=OFF``), rounds alternating a runtime without a log and one with a log
folder, each on a new file, in one process: CPU per run (every thread), and the
difference, what the log costs. Then the parts of one export, timed one at a time in this
thread on one run's events: what each costs apart from the others.

    PYTHONPATH=src .venv/bin/python benchmarks/log_export.py
    PYTHONPATH=src .venv/bin/python benchmarks/log_export.py --rounds 7 --tasks 500
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from frameworks.corral_agent import DAG, agent  # noqa: E402
from saves_in_place import _store  # noqa: E402

from corral import Runtime  # noqa: E402
from corral.events import Event  # noqa: E402
from corral.files import write_private  # noqa: E402
from corral.observe.logs import _lines, log_records  # noqa: E402
from corral.observe.redact import redactor_for  # noqa: E402

MODES = ("no log (baseline)", "a JSONL log")


async def _measure(log: bool, tasks: int) -> tuple[float, list[Event]]:
    """CPU µs per run after 20 warm-up runs, on a new file; and the last run's events."""
    with tempfile.TemporaryDirectory() as folder:
        store = _store(Path(folder) / "bench.db", "off")
        logs = Path(folder) / "logs" if log else None
        runtime = Runtime(agent(0.0, DAG), store, log_dir=logs)
        for _ in range(20):
            await runtime.start("go")
        cpu = time.process_time()
        for _ in range(tasks):
            summary = await runtime.start("go")
        cpu = time.process_time() - cpu
        events = list(store.load_events(summary.run_id))
        await runtime.aclose()
        store.engine.dispose()
    return cpu / tasks * 1e6, events


def _parts(events: Sequence[Event], repeat: int) -> dict[str, float]:
    """Thread CPU µs of each part of one run's export, each timed alone."""
    redactor = redactor_for(events)
    records = log_records(events, redactor)
    content = _lines(records)
    with tempfile.TemporaryDirectory() as folder:
        files = iter(Path(folder) / f"run_{n:06d}.jsonl" for n in range(repeat))
        parts: dict[str, Callable[[], Any]] = {
            "the redactor (what is sensitive)": lambda: redactor_for(events),
            "the lines (summaries, redaction)": lambda: log_records(events, redactor),
            "their JSON": lambda: _lines(records),
            "the file (a new one, renamed in)": lambda: write_private(
                next(files), content, sync=False
            ),
        }
        timed = {}
        for name, part in parts.items():
            start = time.thread_time()
            for _ in range(repeat):
                part()
            timed[name] = (time.thread_time() - start) / repeat * 1e6
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternations (median)")
    parser.add_argument("--tasks", type=int, default=300, help="runs per measurement")
    args = parser.parse_args()
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    events: list[Event] = []
    for round_ in range(args.rounds):
        for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
            cpu, events = asyncio.run(_measure(mode != MODES[0], args.tasks))
            results[mode].append(cpu)
    base = statistics.median(results[MODES[0]])
    print(
        f"workload C: {args.tasks} runs x {args.rounds} rounds, one at a time, "
        f"synchronous=OFF; median CPU per run (every thread)\n"
    )
    print("| runtime | CPU per run | vs baseline |\n|---|---|---|")
    for mode in MODES:
        cpu = statistics.median(results[mode])
        print(f"| {mode} | {cpu:,.0f} µs | {cpu / base:.2f}× (+{cpu - base:,.0f} µs) |")
    print(f"\none export's parts, each alone, on the last run's {len(events)} events:\n")
    print("| part | thread CPU |\n|---|---|")
    for name, cpu in _parts(events, max(args.tasks, 200)).items():
        print(f"| {name} | {cpu:,.0f} µs |")


if __name__ == "__main__":
    main()
