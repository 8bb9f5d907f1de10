"""The thin tools every framework calls, and the SQLite helpers the durable workload shares."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

RESULT = 6
"""What s5 returns: s1 = 1, s2 = s1 + 1, s3 = 3, s4 = s2 + s3, s5 = s4 + 1.

No two steps call a tool with the same arguments: corral's loop guard would stop a run
that comes back to a state it was already in."""


def checked_chain(value: int, steps: int) -> int:
    """``RESULT`` for a chain of ``steps`` calls that ended at ``value`` (s1 = 1, each
    next adds 1), which the harness checks as it checks the DAG's."""
    if value != steps:
        raise RuntimeError(f"a chain of {steps} steps ended at {value}")
    return RESULT


async def fetch(n: int, latency_s: float) -> dict[str, int]:
    """Stands for a lookup; ``latency_s`` of asyncio.sleep stands for its I/O."""
    if latency_s:
        await asyncio.sleep(latency_s)
    return {"value": n}


async def combine(a: int, b: int, latency_s: float) -> dict[str, int]:
    """Stands for a computation over two results."""
    if latency_s:
        await asyncio.sleep(latency_s)
    return {"value": a + b}


def fetch_sync(n: int) -> dict[str, int]:
    return {"value": n}


def combine_sync(a: int, b: int) -> dict[str, int]:
    return {"value": a + b}


def sync_off(connection: sqlite3.Connection) -> None:
    """WAL and ``synchronous=OFF``: what workload C runs every framework's store with."""
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=OFF")


def stored_bytes(db: Path) -> int:
    """Bytes of every value in every table of ``db`` (the same measure for each framework)."""
    with sqlite3.connect(db) as connection:
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        total = 0
        for table in tables:
            columns = [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]
            if not columns:
                continue
            summed = " + ".join(f'COALESCE(LENGTH(CAST("{c}" AS BLOB)), 0)' for c in columns)
            total += connection.execute(f'SELECT SUM({summed}) FROM "{table}"').fetchone()[0] or 0
        return int(total)
