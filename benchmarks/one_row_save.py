"""What storing a run's events as one row would save in SQLite, against today's row per event.

Workload C of ``overhead.py`` saves a 5-step run once, at its end: 21 event rows, the run
row and its stats facts, in one transaction. This measures the database's share of that
save with the ``sqlite3`` module alone (no corral, no SQLAlchemy): the rows of one real
run, written by ``SqlStore`` to a scratch file first, are inserted again under new run ids,

- as they are stored today, one ``corral_events`` row per event (the baseline), and
- with the events of the save as one row (a JSON array of them), the other tables as today,

each save one ``BEGIN IMMEDIATE`` ... ``COMMIT`` on a WAL file with ``synchronous=OFF``, as
in workload C. Rounds alternate the two layouts, each on a new file with the schema that
``SqlStore`` made (its indexes included), in one process; the table shows medians.

    PYTHONPATH=src .venv/bin/python benchmarks/one_row_save.py
    PYTHONPATH=src .venv/bin/python benchmarks/one_row_save.py --saves 5000 --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from frameworks import corral_agent  # noqa: E402

LAYOUTS = ("a row per event (today, baseline)", "the save's events as one row")
EVENTS = "corral_events"
SKIPPED = ("corral_plans", "sqlite_sequence")
"""Tables a save of a known plan writes nothing to (its body is stored once per store)."""


def sample(folder: Path) -> tuple[list[str], dict[str, list[dict[str, Any]]]]:
    """The schema ``SqlStore`` made, and every row of one 5-step run, by table."""
    db = folder / "sample.db"
    one = corral_agent.durable(db)
    asyncio.run(one(0))
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        schema = [
            row["sql"]
            for row in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        ]
        (run_id,) = conn.execute("SELECT run_id FROM corral_runs").fetchone()
        tables = [row["name"] for row in conn.execute("SELECT name FROM sqlite_master")]
        rows: dict[str, list[dict[str, Any]]] = {}
        for table in tables:
            if table in SKIPPED or not _has_run_id(conn, table):
                continue
            query = f"SELECT * FROM {table} WHERE run_id = ?"
            rows[table] = [dict(row) for row in conn.execute(query, (run_id,))]
    return schema, {table: found for table, found in rows.items() if found}


def _has_run_id(conn: sqlite3.Connection, table: str) -> bool:
    columns = conn.execute(f"PRAGMA table_info({table})").fetchall()
    return any(column[1] == "run_id" for column in columns)


def as_one_row(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The save's events as one row, keyed by its last ``seq``: their columns as a JSON array."""
    packed = [[e["seq"], e["ts"], e["type"], e["stage"], json.loads(e["data"])] for e in events]
    last = events[-1]
    return [
        {
            **last,
            "type": "batch",
            "stage": "",
            "data": json.dumps(packed, ensure_ascii=False, separators=(",", ":")),
        }
    ]


def _open(path: Path, schema: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    for statement in schema:
        conn.execute(statement)
    return conn


def _saver(
    conn: sqlite3.Connection, rows: dict[str, list[dict[str, Any]]]
) -> Callable[[str], None]:
    """One save: every table's rows under ``run_id``, in one write transaction."""
    statements = []
    for table, found in rows.items():
        names = list(found[0])
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        statements.append((sql, [tuple(row[n] for n in names) for row in found], names))

    def save(run_id: str) -> None:
        conn.execute("BEGIN IMMEDIATE")
        for sql, values, names in statements:
            at = names.index("run_id")
            conn.executemany(sql, [(*v[:at], run_id, *v[at + 1 :]) for v in values])
        conn.execute("COMMIT")

    return save


def measure(
    folder: Path, schema: list[str], rows: dict[str, list[dict[str, Any]]], saves: int, n: int
) -> tuple[float, float]:
    """CPU µs per save and stored bytes per run, on a new file."""
    path = folder / f"layout-{n}.db"
    conn = _open(path, schema)
    save = _saver(conn, rows)
    for i in range(50):  # warm-up: the file's first pages and the statement cache
        save(f"warm-{i}")
    started = time.process_time()
    for i in range(saves):
        save(f"run-{i:08d}")
    cpu = (time.process_time() - started) / saves * 1e6
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return cpu, path.stat().st_size / (saves + 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=2000, help="saves per round and layout")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        schema, rows = sample(folder)
        layouts = [rows, {**rows, EVENTS: as_one_row(rows[EVENTS])}]
        cpu: list[list[float]] = [[], []]
        size: list[list[float]] = [[], []]
        for r in range(args.rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for k in order:
                us, per_run = measure(folder, schema, layouts[k], args.saves, r * 2 + k)
                cpu[k].append(us)
                size[k].append(per_run)
    events = len(rows[EVENTS])
    print(f"SQLite's share of one save of a {events}-event run, {args.saves} saves per round,")
    print(f"median of {args.rounds} interleaved rounds (sqlite3 {sqlite3.sqlite_version})\n")
    print("| layout | CPU µs per save | vs baseline | file bytes per run |")
    print("|---|---|---|---|")
    base = statistics.median(cpu[0])
    for k, label in enumerate(LAYOUTS):
        us = statistics.median(cpu[k])
        print(f"| {label} | {us:,.0f} | {us / base:.2f}× | {statistics.median(size[k]):,.0f} |")


if __name__ == "__main__":
    main()
