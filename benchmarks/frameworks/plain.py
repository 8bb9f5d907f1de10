"""The baseline: the task written by hand with asyncio (and sqlite3 for the durable rows)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from frameworks.common import checked_chain, combine, combine_sync, fetch, fetch_sync, sync_off


def make(latency_s: float, steps: int = 0) -> Callable[[int], Awaitable[int]]:
    """The 5-step DAG, or (``steps``) a chain of that many calls, each adding 1."""
    if steps:
        return _chain(latency_s, steps)

    async def one(_: int) -> int:
        s1 = await fetch(1, latency_s)
        s2, s3 = await asyncio.gather(combine(s1["value"], 1, latency_s), fetch(3, latency_s))
        s4 = await combine(s2["value"], s3["value"], latency_s)
        s5 = await combine(s4["value"], 1, latency_s)
        return s5["value"]

    return one


def _chain(latency_s: float, steps: int) -> Callable[[int], Awaitable[int]]:
    async def one(_: int) -> int:
        value = (await fetch(1, latency_s))["value"]
        for _step in range(1, steps):
            value = (await combine(value, 1, latency_s))["value"]
        return checked_chain(value, steps)

    return one


def durable(db: Path) -> Callable[[int], Awaitable[int]]:
    """A run row and a row per step's output, each committed as it is written."""
    connection = sqlite3.connect(db)
    sync_off(connection)
    connection.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, status TEXT)")
    connection.execute("CREATE TABLE steps (run INTEGER, step TEXT, output TEXT)")

    def record(run: int, step: str, output: dict[str, int]) -> dict[str, int]:
        connection.execute("INSERT INTO steps VALUES (?, ?, ?)", (run, step, json.dumps(output)))
        connection.commit()
        return output

    async def one(run: int) -> int:
        connection.execute("INSERT INTO runs VALUES (?, 'running')", (run,))
        connection.commit()
        s1 = record(run, "s1", fetch_sync(1))
        s2 = record(run, "s2", combine_sync(s1["value"], 1))
        s3 = record(run, "s3", fetch_sync(3))
        s4 = record(run, "s4", combine_sync(s2["value"], s3["value"]))
        s5 = record(run, "s5", combine_sync(s4["value"], 1))
        connection.execute("UPDATE runs SET status = 'finished' WHERE id = ?", (run,))
        connection.commit()
        return s5["value"]

    return one
