"""Scale-out: runs/s and latency of the exchange load on 1, 2 and 4 workers, against one process.

    python benchmarks/scale_out/bench.py                  # 2 000 runs per row
    python benchmarks/scale_out/bench.py --runs 300       # a shorter one
    python benchmarks/scale_out/bench.py --json

Starts its own PostgreSQL (``.ci/start-postgres.sh``, ``fsync=off`` as CI's; ``--pg-url``
uses a running server, in fresh databases), then for each worker count a fresh store and
business database, the ``corral worker`` processes, and the load (``load.distributed``:
8 runs in flight per worker, each approved as soon as it pauses). The baseline, in the
same run: the same runs through ``Runtime`` on this one process, a SQLite store, the same
agent and the same 50 ms tools on the same PostgreSQL business database, 8 in flight.

Per row: runs/s, p50 and p99 latency (start to end, the scripted approval included), CPU
ms per run of the workers (or the one process), of PostgreSQL and of the load generator
(from /proc: the postmaster, its live backends and the ones it reaped), the machine's
busy share and how much of it was not ours; events, DBOS step rows, transactions (reads
included), rows written and WAL bytes per run, and the bytes per run of corral's tables and
of DBOS's (tables, indexes and TOAST, ``pg_total_relation_size``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from harness import (
    CLK_TCK,
    Databases,
    Pool,
    Server,
    databases,
    plain,
    pool,
    postgres,
    postgres_cpu_s,
    process_cpu_s,
    scratch,
    self_cpu_s,
    stop_on_sigterm,
    upgrade_store,
    wait_ready,
)
from load import Outcome, distributed, in_process

STATS_FLUSH_S = 1.5
"""PostgreSQL publishes a backend's commit counts about once a second: wait that long."""


@dataclass
class Snapshot:
    """Counters read before and after a load; a row is their difference."""

    at: float
    postgres_s: float | None
    workers_s: float
    generator_s: float
    machine_busy_s: float
    wal: str | None
    commits: int | None
    rows_written: int | None


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def snapshot(
    server: Server, conn: psycopg.Connection[Any] | None, workers: Pool | None
) -> Snapshot:
    wal = commits = written = None
    if conn is not None:
        wal = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        commits, written = conn.execute(
            "SELECT sum(xact_commit)::bigint, "
            "sum(tup_inserted + tup_updated + tup_deleted)::bigint FROM pg_stat_database"
        ).fetchone()  # type: ignore[misc]
    if workers is None:  # the baseline: this process runs the runs, no generator apart
        running, generator = self_cpu_s(), 0.0
    else:
        running = process_cpu_s([w.process.pid for w in workers.alive()])
        generator = self_cpu_s()
    return Snapshot(
        time.monotonic(),
        postgres_cpu_s(server),
        running,
        generator,
        machine_busy_s(),
        wal,
        commits,
        written,
    )


def sizes(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    """Bytes of corral's tables (``corral_*``) and of DBOS's (its schema), indexes included."""
    rows = conn.execute(
        "SELECT n.nspname, c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
        "AND (n.nspname = %s OR c.relname LIKE 'corral%%')",
        (schema,),
    ).fetchall()
    corral = sum(size for space, _, size in rows if space != schema)
    return {"corral": corral, "dbos": sum(size for space, _, size in rows if space == schema)}


def row(
    name: str, outcome: Outcome, before: Snapshot, after: Snapshot, extra: dict[str, Any]
) -> dict[str, Any]:
    runs = len(outcome.latencies_s)
    wall = after.at - before.at

    def per_run_ms(first: float | None, last: float | None) -> float | None:
        return None if first is None or last is None else round((last - first) * 1000 / runs, 1)

    ours = sum(
        v or 0.0
        for v in (
            (after.postgres_s or 0) - (before.postgres_s or 0),
            after.workers_s - before.workers_s,
            after.generator_s - before.generator_s,
        )
    )
    busy = after.machine_busy_s - before.machine_busy_s
    return {
        "setup": name,
        "runs": runs,
        "runs_per_s": round(runs / outcome.elapsed_s, 1),
        "p50_ms": round(outcome.percentile(0.5) * 1000),
        "p99_ms": round(outcome.percentile(0.99) * 1000),
        "cpu_ms_per_run": {
            "workers": per_run_ms(before.workers_s, after.workers_s),
            "postgres": per_run_ms(before.postgres_s, after.postgres_s),
            "generator": per_run_ms(before.generator_s, after.generator_s),
        },
        "machine_busy_pct": round(100 * busy / (2 * wall)),
        "not_ours_pct": round(100 * max(0.0, busy - ours) / (2 * wall)),
        "drive_errors": outcome.drive_errors,
        "drained": outcome.drained,
        **extra,
    }


def measure_workers(server: Server, count: int, args: argparse.Namespace) -> dict[str, Any]:
    from corral.workers.client import RunQueue
    from corral.workers.names import SYSTEM_SCHEMA

    with (
        databases(server, f"bench{count}") as dbs,
        scratch(args.keep) as folder,
        pool(dbs, folder) as workers,
    ):
        upgrade_store(dbs.store_url, folder / "home", dbs.business_url)
        wait_ready(dbs.store_url, [workers.start(f"w{i}").executor_id for i in range(count)])
        with (
            RunQueue(dbs.store_url) as queue,
            psycopg.connect(plain(dbs.store_url), autocommit=True) as conn,
        ):
            before = snapshot(server, conn, workers)
            outcome = distributed(
                queue, dbs.store_url, args.runs, args.inflight * count, args.drain_timeout_s
            )
            time.sleep(STATS_FLUSH_S)
            after = snapshot(server, conn, workers)
            return row(
                f"{count} worker(s)",
                outcome,
                before,
                after,
                stored(conn, dbs, before, after, outcome, SYSTEM_SCHEMA),
            )


def stored(
    conn: psycopg.Connection[Any],
    dbs: Databases,
    before: Snapshot,
    after: Snapshot,
    outcome: Outcome,
    schema: str,
) -> dict[str, Any]:
    """Events, DBOS rows, commits, WAL and table bytes, per run."""
    runs = len(outcome.run_ids)

    def one(sql: str) -> Any:
        return conn.execute(sql).fetchone()[0]  # type: ignore[index]

    wal = one(f"SELECT pg_wal_lsn_diff('{after.wal}', '{before.wal}')::bigint")
    steps = conn.execute(
        f"SELECT function_name, count(*) FROM {schema}.operation_outputs "
        "GROUP BY function_name ORDER BY count(*) DESC LIMIT 10"
    ).fetchall()
    bytes_ = sizes(conn, schema)
    return {
        "events_per_run": round(one("SELECT count(*) FROM corral_events") / runs, 1),
        "dbos_steps_per_run": round(
            one(f"SELECT count(*) FROM {schema}.operation_outputs") / runs, 1
        ),
        "dbos_workflows_per_run": round(
            one(f"SELECT count(*) FROM {schema}.workflow_status") / runs, 2
        ),
        "dbos_steps_per_run_by_name": {name: round(n / runs, 1) for name, n in steps},
        "commits_per_run": round(((after.commits or 0) - (before.commits or 0)) / runs, 1),
        "rows_written_per_run": round(
            ((after.rows_written or 0) - (before.rows_written or 0)) / runs, 1
        ),
        "wal_bytes_per_run": round(wal / runs),
        "corral_bytes_per_run": round(bytes_["corral"] / runs),
        "dbos_bytes_per_run": round(bytes_["dbos"] / runs),
    }


def measure_baseline(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    with databases(server, "bench_base") as dbs, scratch(args.keep) as folder:
        store = folder / "corral.db"
        before = snapshot(server, None, None)
        outcome = in_process(store, folder / "data", dbs.business_url, args.runs, args.inflight)
        after = snapshot(server, None, None)
        with sqlite3.connect(store) as db:
            events = db.execute("SELECT count(*) FROM corral_events").fetchone()[0]
        return row(
            "1 process, SQLite",
            outcome,
            before,
            after,
            {
                "events_per_run": round(events / len(outcome.run_ids), 1),
                "sqlite_bytes_per_run": round(store.stat().st_size / len(outcome.run_ids)),
            },
        )


def print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="scale-out: the exchange load (4 tools x 50 ms, one approval per run)")
    columns = ["setup", "runs/s", "p50 ms", "p99 ms", "CPU ms/run (run / PG / gen)"]
    columns += ["busy %", "not ours %", "events/run", "xacts/run", "rows/run", "WAL B/run"]
    columns += ["corral B/run", "DBOS B/run"]
    for column in columns:
        table.add_column(column, justify="right")
    for r in rows:
        cpu = r["cpu_ms_per_run"]
        table.add_row(
            r["setup"],
            str(r["runs_per_s"]),
            str(r["p50_ms"]),
            str(r["p99_ms"]),
            f"{cpu['workers']} / {cpu['postgres']} / {cpu['generator']}",
            str(r["machine_busy_pct"]),
            str(r["not_ours_pct"]),
            str(r.get("events_per_run", "")),
            str(r.get("commits_per_run", "")),
            str(r.get("rows_written_per_run", "")),
            str(r.get("wal_bytes_per_run", "")),
            str(r.get("corral_bytes_per_run", r.get("sqlite_bytes_per_run", ""))),
            str(r.get("dbos_bytes_per_run", "")),
        )
    Console(width=200).print(table)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--inflight", type=int, default=8, help="runs in flight per worker")
    parser.add_argument("--drain-timeout-s", type=float, default=600.0)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument("--pg-url", help="a running PostgreSQL (fresh databases, dropped after)")
    parser.add_argument("--keep", action="store_true", help="keep the worker logs' folders")
    return parser.parse_args()


def main() -> None:
    args = parse()
    stop_on_sigterm()
    rows = []
    with postgres(args.pg_url) as server:
        for count in (int(c) for c in args.workers.split(",")):
            rows.append(measure_workers(server, count, args))
        if not args.no_baseline:
            rows.append(measure_baseline(server, args))
    if args.save is not None:
        args.save.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if args.json:
        print(json.dumps(rows))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
