"""What a save costs as the store grows: time-ordered run ids against random ones.

    PYTHONPATH=src .venv/bin/python benchmarks/run_ids.py [--runs 20000] [--window 1000]
    PYTHONPATH=src .venv/bin/python benchmarks/run_ids.py --url postgresql+psycopg://...

The 5-step plan of ``benchmarks/overhead.py`` runs one run at a time on a new SQLite file
(or an emptied PostgreSQL database: ``--url``), once with corral's run ids (the time in
milliseconds, then 64 random bits: ``corral.effects.TIME_ORDERED``) and once with the
baseline, 16 random hex digits (corral's run ids before, and any uuid4). The table shows
the CPU of ``SqlStore.save`` per run (the store thread's own time; on PostgreSQL the
client's only) and its wall time (the server's work included) over the first and the last
``--window`` runs and one in the middle: what a save costs at each size of the store.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frameworks.corral_agent import DAG, agent
from rich.console import Console
from rich.table import Table

from corral import Runtime, SqlStore
from corral.effects import LiveEffects


class RandomRunIds(LiveEffects):
    """The baseline: every id 16 random hex digits, a run's too."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{os.urandom(8).hex()}"


class TimedStore(SqlStore):
    """A ``SqlStore`` that keeps the thread CPU and the wall time of each ``save``."""

    costs: list[float]
    waits: list[float]

    def save(self, *args: Any, **kwargs: Any) -> None:
        started, began = time.thread_time(), time.perf_counter()
        try:
            super().save(*args, **kwargs)
        finally:
            self.costs.append(time.thread_time() - started)
            self.waits.append(time.perf_counter() - began)


def _open(url: str | None, folder: Path) -> TimedStore:
    if url is None:
        store = TimedStore.open(folder / "corral.db")
    else:
        from sqlalchemy import create_engine

        engine = create_engine(url)
        _drop(engine)
        store = TimedStore(engine, upgrade=True)
    assert isinstance(store, TimedStore)
    store.costs, store.waits = [], []
    return store


def _drop(engine: Any) -> None:
    """Empty a PostgreSQL database of corral's tables, so both runs start from nothing."""
    from sqlalchemy import MetaData

    found = MetaData()
    found.reflect(engine)
    found.drop_all(engine)


async def _fill(store: TimedStore, effects: LiveEffects, runs: int) -> None:
    runtime = Runtime(agent(0.0, DAG), store, effects=effects)
    for _ in range(runs):
        summary = await runtime.start("go")
        if summary.status.value != "finished":
            raise SystemExit(f"a run did not finish: {summary}")


def _windows(costs: Sequence[float], window: int) -> list[tuple[str, float]]:
    """Mean µs per save over the first, a middle and the last ``window`` saves."""
    middle = len(costs) // 2 - window // 2
    spans = {
        f"runs 1–{window:,}": (0, window),
        f"runs {middle + 1:,}–{middle + window:,}": (middle, middle + window),
        f"runs {len(costs) - window + 1:,}–{len(costs):,}": (len(costs) - window, len(costs)),
    }
    return [(name, statistics.fmean(costs[a:b]) * 1e6) for name, (a, b) in spans.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000, help="runs per id form")
    parser.add_argument("--window", type=int, default=1_000, help="saves per reported span")
    parser.add_argument("--url", help="a PostgreSQL URL (emptied first) instead of SQLite")
    args = parser.parse_args()
    forms = {"random ids (baseline)": RandomRunIds(), "time-ordered ids (corral)": LiveEffects()}
    results: dict[str, list[tuple[str, float]]] = {}
    waits: dict[str, list[tuple[str, float]]] = {}
    for name, effects in forms.items():
        with tempfile.TemporaryDirectory() as folder:
            store = _open(args.url, Path(folder))
            asyncio.run(_fill(store, effects, args.runs))
            results[name] = _windows(store.costs, args.window)
            waits[name] = _windows(store.waits, args.window)
            store.engine.dispose()
    where = "PostgreSQL" if args.url else "SQLite (synchronous=NORMAL)"
    for title, figures in (("CPU", results), ("wall time", waits)):
        table = Table(title=f"SqlStore.save {title} per run as the store grows, {where}")
        table.add_column("saves", justify="left")
        for name in forms:
            table.add_column(name, justify="right")
        table.add_column("time-ordered / random", justify="right")
        baseline, ours = (figures[name] for name in forms)
        for (span, base), (_, mine) in zip(baseline, ours, strict=True):
            table.add_row(span, f"{base:,.0f} µs", f"{mine:,.0f} µs", f"{mine / base:.2f}×")
        Console(width=120).print(table)


if __name__ == "__main__":
    main()
