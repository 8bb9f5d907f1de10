"""The observed-latency query of a run start, at 0, 50 000 and 400 000 step facts.

Every run start of an agent with equivalent tools asks the store for each such tool's
p95 over its latest ``decision.latency_window`` (100) timed attempts: successes, and
timeouts that took the tool's whole timeout (``SqlStore.tool_latency``). This fills a
SQLite home's stats projection with synthetic facts (runs of two agents, each with tool
attempts, some failed or timed out, and stage rows) and times that query against the
baseline, an unbounded ``ROW_NUMBER`` window (which numbers every past attempt of the
tools before keeping the latest 100). Both must give the same p95s. It also times the
one-time ``CREATE INDEX`` of both partial indexes that an older home pays when it is
upgraded, and prints SQLite's plan of the query.

    nice -n 19 .venv/bin/python benchmarks/latency_query.py
    nice -n 19 .venv/bin/python benchmarks/latency_query.py --rows 0,5000 --repeat 3  # quick
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, func, insert, select, text
from sqlalchemy.dialects import sqlite

from corral.store import projection
from corral.store.figures import WHOLE_TIMEOUT, ToolLatency, latencies
from corral.store.sql import SqlStore

AGENTS = ("ops", "other")
EQUIVALENT = ("search_flights_fast", "search_flights_cheap")
TOOLS = (*EQUIVALENT, "fetch_sales", "compute_wow", "post_to_group", "get_weather")
STAGES = ("parse", "route", "plan", "execute", "reply")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
LATENCY_INDEXES = ("ix_corral_step_facts_recent", "ix_corral_step_facts_timeouts")
"""The partial indexes the query walks (schema revisions 0002 and 0004)."""
TIMEOUT_MS = 10_000.0
TIMEOUTS = dict.fromkeys(EQUIVALENT, TIMEOUT_MS)
"""Each equivalent tool's ``timeout_s`` in ms, as a run start passes them."""
FAILURES = (("TOOL_UNAVAILABLE", None), ("TOOL_TIMEOUT", TIMEOUT_MS), ("TOOL_TIMEOUT", 50.0))
"""A failed attempt's code and duration (``None``: drawn): a whole timeout, a short one."""
Answer = TypeVar("Answer")


def unbounded(
    conn: Connection, agent: str, tools: Sequence[str], last: int
) -> dict[str, ToolLatency]:
    """The baseline: the window query of before, which numbers every past attempt."""
    steps = projection.step_facts.c
    number = (
        func.row_number()
        .over(partition_by=steps.name, order_by=(steps.created_at.desc(), steps.seq.desc()))
        .label("n")
    )
    timed_out = (steps.error_code == "TOOL_TIMEOUT") & (
        steps.duration_ms >= TIMEOUT_MS * WHOLE_TIMEOUT
    )
    ranked = (
        select(steps.name, steps.duration_ms, number)
        .where(
            steps.kind == projection.TOOL,
            steps.name.in_(list(tools)),
            steps.agent == agent,
            (steps.status == "success") | timed_out,
        )
        .subquery()
    )
    query = select(ranked.c.name, ranked.c.duration_ms).where(ranked.c.n <= last)
    out: dict[str, list[float]] = {}
    for name, millis in conn.execute(query):
        out.setdefault(str(name), []).append(float(millis))
    return latencies(out)


def bounded_query(conn: Connection, last: int) -> Callable[[], dict[str, ToolLatency]]:
    """The query a run start makes now (what ``SqlStore.tool_latency`` runs), built once."""
    shape, params = projection.latency_request("ops", EQUIVALENT, last, TIMEOUTS)
    query = projection.latency_query(shape)
    return lambda: latencies(projection.durations(conn.execute(query, params)))


def fill(store: SqlStore, rows: int, worst: bool, seed: int = 7) -> None:
    """``rows`` step facts: runs of 8 tool attempts (1 in 10 failed) and 5 stage rows.

    A failure is a ``TOOL_UNAVAILABLE``, a timeout that took the whole ``TIMEOUT_MS``, or
    a tool's own 50 ms timeout, one in three each.

    Runs of two agents calling six tools, two of them equivalent; ``worst``: every row is
    an attempt of the two equivalent tools by the agent asked about (no stage rows).
    """
    rng = random.Random(seed)
    batch: list[dict[str, Any]] = []
    run = 0
    with store.engine.begin() as conn:
        while len(batch) < rows:
            run += 1
            owner = {
                "run_id": f"run_{run:08d}",
                "agent": AGENTS[0] if worst else AGENTS[run % 2],
                "created_at": T0 + timedelta(seconds=run),
            }
            for seq in range(1, 9):
                tools = EQUIVALENT if worst else TOOLS
                tool = tools[rng.randrange(len(tools))]
                ok = rng.random() >= 0.1
                code, millis = (None, None) if ok else FAILURES[rng.randrange(len(FAILURES))]
                batch.append(
                    {
                        **owner,
                        "kind": projection.TOOL,
                        "name": tool,
                        "seq": seq,
                        "status": "success" if ok else "error",
                        "error_code": code,
                        "duration_ms": rng.lognormvariate(4.5, 0.6) if millis is None else millis,
                    }
                )
            for stage in () if worst else STAGES:
                row = {**owner, "kind": projection.STAGE, "name": stage, "seq": 0}
                batch.append(row | {"status": None, "error_code": None, "duration_ms": 3.0})
            if len(batch) >= 20_000:
                conn.execute(insert(projection.step_facts), batch)
                rows -= len(batch)
                batch = []
        if batch and rows > 0:
            conn.execute(insert(projection.step_facts), batch[:rows])


def median_ms(call: Callable[[], Answer], repeat: int) -> tuple[float, Answer]:
    """The median wall time of ``call`` in ms, and its answer."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        answer = call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), answer


def plan(store: SqlStore, last: int) -> list[str]:
    """SQLite's ``EXPLAIN QUERY PLAN`` of the query a run start makes."""
    query = projection.recent_tool_query("ops", EQUIVALENT, last, TIMEOUTS)
    sql = str(query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    with store.engine.connect() as conn:
        return [str(row[3]) for row in conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"))]


def measure(rows: int, last: int, repeat: int, worst: bool) -> dict[str, Any]:
    """Fill a home with ``rows`` facts; time the query, the baseline and the index build."""
    folder = Path(tempfile.mkdtemp(prefix="corral-latency-"))
    store = SqlStore.open(folder / "corral.db")
    fill(store, rows, worst)
    start_ms, bounded = median_ms(
        lambda: store.tool_latency("ops", EQUIVALENT, last, TIMEOUTS), repeat
    )
    with store.engine.connect() as conn:
        bounded_ms, _ = median_ms(bounded_query(conn, last), repeat)
        base_ms, base = median_ms(lambda: unbounded(conn, "ops", EQUIVALENT, last), repeat)
    if bounded != base:
        raise SystemExit(f"the queries disagree at {rows} rows: {bounded} != {base}")
    found = plan(store, last)
    latency_indexes = [
        index for index in projection.step_facts.indexes if index.name in LATENCY_INDEXES
    ]
    with store.engine.begin() as conn:  # an older home: what `corral db upgrade` builds
        for index in latency_indexes:
            index.drop(conn)
        start = time.perf_counter()
        for index in latency_indexes:
            index.create(conn)
        index_ms = (time.perf_counter() - start) * 1000
    store.engine.dispose()
    shutil.rmtree(folder)
    return {
        "rows": rows,
        "bounded_ms": bounded_ms,
        "start_ms": start_ms,
        "unbounded_ms": base_ms,
        "open_ms": index_ms,
        "plan": found,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="0,50000,400000", help="step facts, comma-separated")
    parser.add_argument("--last", type=int, default=100, help="decision.latency_window")
    parser.add_argument("--repeat", type=int, default=7, help="timings per query (median)")
    parser.add_argument(
        "--worst", action="store_true", help="every fact an attempt of the tools asked about"
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    results = [measure(n, args.last, args.repeat, args.worst) for n in sizes]
    mix = "every fact theirs" if args.worst else "2 of 6 tools, 2 agents, stage rows"
    print(f"latest {args.last} timed attempts of {len(EQUIVALENT)} tools ({mix}), median ms")
    print(
        f"{'step facts':>10} | {'LIMIT per tool':>14} | {'baseline window':>15} | "
        f"{'speed-up':>8} | {'tool_latency()':>14} | {'CREATE INDEX (both)':>19}"
    )
    for r in results:
        ratio = r["unbounded_ms"] / r["bounded_ms"] if r["bounded_ms"] else float("nan")
        print(
            f"{r['rows']:>10} | {r['bounded_ms']:>14.2f} | {r['unbounded_ms']:>15.2f} | "
            f"{ratio:>7.1f}x | {r['start_ms']:>14.2f} | {r['open_ms']:>19.1f}"
        )
    print("plan (each tool):", "; ".join(results[-1]["plan"]))


if __name__ == "__main__":
    main()
