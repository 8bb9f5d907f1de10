"""Events and stored bytes per run: the 5-step plan of ``overhead.py`` on a SQLite file.

    .venv/bin/python benchmarks/event_size.py [--runs 20]

Prints events per run, the bytes of the stored event rows (``run_id``, ``ts``, ``type``,
``stage``, ``data``: what the log costs, whatever the database pages add), the growth of
the database file (pages, indexes, run rows) and the bytes of the shared,
content-addressed plan bodies, which a store holds once however many runs use them.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
from pathlib import Path

from frameworks.corral_agent import DAG, agent

from corral import Runtime, SqlStore


def _pages(db: sqlite3.Connection) -> int:
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    count = db.execute("PRAGMA page_count").fetchone()[0]
    return int(count) * int(db.execute("PRAGMA page_size").fetchone()[0])


async def measure(runs: int) -> None:
    """Run ``runs`` tasks into a fresh SQLite store and print the per-run figures."""
    path = Path(tempfile.mkdtemp()) / "corral.db"
    store = SqlStore.open(path)
    runtime = Runtime(agent(0.0, DAG), store)
    for _ in range(runs):
        summary = await runtime.start("go")
        assert summary.status.value == "finished", summary
    db = sqlite3.connect(path)
    before = _pages(db)
    for _ in range(runs):
        await runtime.start("go")
    file_bytes = (_pages(db) - before) / runs
    count, size = db.execute(
        "SELECT count(*), sum(length(run_id) + length(CAST(ts AS BLOB)) + length(type) "
        "+ length(stage) + length(CAST(data AS BLOB))) FROM corral_events"
    ).fetchone()
    count, size = count / 2, size / 2  # the rows of the second batch are alike
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    shared = 0
    if "corral_plans" in tables:
        shared = db.execute("SELECT coalesce(sum(length(body)), 0) FROM corral_plans").fetchone()[0]
    print(f"events per run: {count / runs:.1f}")
    print(f"stored event bytes per run: {size / runs:.0f}")
    print(f"database growth per run (pages, indexes, run rows): {file_bytes:.0f}")
    print(f"shared plan bytes (once per store): {shared}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(measure(parser.parse_args().runs))
