"""What exporting spans costs: tracing off, to the SDK's in-memory exporter, and to the console.

    PYTHONPATH=src python benchmarks/tracing_overhead.py [--runs 200] [--rounds 3] [--json]

Two workloads, each run on a SQLite file (spans are built from the stored events when a run
pauses or ends): ``dag``, the 5-step DAG of ``benchmarks/overhead.py``, and ``demo``, the
aftersales example's repair request (a rule intent, three tools, a templated reply), each
with the JSONL log the CLI writes (``--no-log``: without it). Each
mode runs the same runs in the same process; rounds are interleaved and the table shows
the median CPU time per run (process time) and its overhead over tracing off. The console
exporter writes to ``/dev/null`` so the terminal is not what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from frameworks.corral_agent import DAG  # noqa: E402
from frameworks.corral_agent import agent as dag_agent  # noqa: E402

from corral import Agent, Runtime, load_agent  # noqa: E402
from corral.observe.telemetry import RunTracer  # noqa: E402
from corral.store.sql import SqlStore  # noqa: E402

MODES = ("off", "in-memory", "console")


def _tracer(mode: str, sink: Any) -> RunTracer | None:
    if mode == "off":
        return None
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from corral.observe.otel import OtelTracer

    if mode == "in-memory":
        return OtelTracer(InMemorySpanExporter())
    return OtelTracer(ConsoleSpanExporter(out=sink))


async def _cpu_per_run(
    agent: Agent, message: str, tracer: RunTracer | None, runs: int, log: bool
) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = SqlStore.open(Path(folder) / "corral.db")
        logs = Path(folder) / "logs" if log else None
        runtime = Runtime(agent, store, tracer=tracer, log_dir=logs)
        await runtime.start(message)  # warm: first-call imports and caches
        began = time.process_time()
        for _ in range(runs):
            summary = await runtime.start(message)
            assert summary.status.value == "finished", summary
        return (time.process_time() - began) / runs * 1e6


def measure(runs: int, rounds: int, log: bool) -> dict[str, dict[str, float]]:
    """Median µs of CPU per run, per workload and mode."""
    with tempfile.TemporaryDirectory() as data:
        workloads: dict[str, tuple[Callable[[], Agent], str]] = {
            "dag": (lambda: dag_agent(0.0, DAG), "go"),
            "demo": (
                lambda: load_agent(ROOT / "examples" / "aftersales", data_dir=Path(data)),
                "打印机卡纸了，订单 HD20240501",
            ),
        }
        samples: dict[str, dict[str, list[float]]] = {w: {m: [] for m in MODES} for w in workloads}
        with open(os.devnull, "w", encoding="utf-8") as sink:
            for round_ in range(rounds):
                for name, (make, message) in workloads.items():
                    for mode in MODES[round_ % 3 :] + MODES[: round_ % 3]:
                        tracer = _tracer(mode, sink)
                        cpu = asyncio.run(_cpu_per_run(make(), message, tracer, runs, log))
                        samples[name][mode].append(cpu)
    return {
        name: {mode: statistics.median(values) for mode, values in modes.items()}
        for name, modes in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--no-log", action="store_true", help="no JSONL log (the CLI always writes one)"
    )
    args = parser.parse_args()
    for key in [k for k in os.environ if k.startswith("OTEL_")]:
        del os.environ[key]  # "off" must mean off, whatever the shell exports
    result = measure(args.runs, args.rounds, not args.no_log)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    log = "no JSONL log" if args.no_log else "with the JSONL log, as the CLI"
    print(f"{args.runs} runs x {args.rounds} rounds, {log}\n")
    print("| workload | mode | CPU µs / run | over off |")
    print("|---|---|---|---|")
    for name, modes in result.items():
        for mode, cpu in modes.items():
            over = cpu / modes["off"] - 1
            print(f"| {name} | {mode} | {cpu:,.0f} | {over:+.0%} |")


if __name__ == "__main__":
    main()
