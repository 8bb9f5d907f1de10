"""A SQLite save is made on the caller's thread when nothing would make it wait.

Otherwise it raises ``SaveWouldWait`` having written nothing, and the runtime makes it in a
store thread, which waits for the lock as before (``corral.store.in_place``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import create_engine, event
from sqlalchemy.pool import StaticPool

from corral import Agent, Runtime, SqlStore, tool
from corral.store.base import SaveWouldWait
from corral.store.in_place import CHECKPOINT_EVERY
from corral.testing import FixedEffects
from tests.extras import postgres_url
from tests.helpers import build_agent
from tests.store.test_conformance import events, record, run_id


class Out(BaseModel):
    value: int


def two_steps() -> Agent:
    @tool
    def lookup(n: int) -> Out:
        """Stands for a read."""
        return Out(value=n)

    plan = [
        {"id": "s1", "tool": "lookup", "args": {"n": 1}},
        {"id": "s2", "tool": "lookup", "args": {"n": 2}, "depends_on": ["s1"]},
    ]
    return build_agent([lookup], plan)


def event_inserts(store: SqlStore) -> list[int]:
    """The threads that insert events into ``store``, in order (a cursor listener)."""
    threads: list[int] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO CORRAL_EVENTS"):
            threads.append(threading.get_ident())

    return threads


async def test_a_run_on_sqlite_is_saved_on_the_event_loops_thread(tmp_path: Path) -> None:
    """Before, every save went to a store thread: ~600 µs more CPU a 5-step run."""
    store = SqlStore.open(tmp_path / "corral.db")
    inserts = event_inserts(store)
    summary = await Runtime(two_steps(), store, effects=FixedEffects()).start("go")
    assert summary.status.value == "finished"
    assert inserts == [threading.get_ident()]
    assert [e.seq for e in store.load_events(summary.run_id)][-1] == len(
        store.load_events(summary.run_id)
    )


async def test_a_save_that_finds_the_write_lock_taken_waits_in_a_thread(tmp_path: Path) -> None:
    """Another process's write: the loop goes on meanwhile, and the save lands after it."""
    store = SqlStore.open(tmp_path / "corral.db")
    inserts = event_inserts(store)
    other = sqlite3.connect(tmp_path / "corral.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    run = asyncio.create_task(Runtime(two_steps(), store, effects=FixedEffects()).start("go"))
    for _ in range(60):  # 0.3 s: the loop is free while the save waits for the lock
        await asyncio.sleep(0.005)
    assert not run.done() and not inserts
    other.execute("COMMIT")
    summary = await asyncio.wait_for(run, 30)
    assert summary.status.value == "finished"
    assert inserts and all(thread != threading.get_ident() for thread in inserts)
    assert len(store.load_events(summary.run_id)) > 3
    other.close()


def test_a_save_asked_not_to_wait_writes_nothing_while_the_lock_is_taken(
    tmp_path: Path,
) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    rid = run_id()
    other = sqlite3.connect(tmp_path / "corral.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(SaveWouldWait):
        store.save(record(rid), events(rid, 1, 2), wait=False)
    other.execute("COMMIT")
    assert store.load_events(rid) == [] and store.get_run(rid) is None
    store.save(record(rid), events(rid, 1, 2), wait=False)  # free now: made at once
    assert [e.seq for e in store.load_events(rid)] == [1, 2]
    other.close()


def test_a_repeated_save_is_left_to_a_save_that_may_wait(tmp_path: Path) -> None:
    """An identical repeat (a retry after an unknown outcome) takes the careful path."""
    store = SqlStore.open(tmp_path / "corral.db")
    rid = run_id()
    store.save(record(rid), events(rid, 1, 2))
    with pytest.raises(SaveWouldWait):
        store.save(record(rid), events(rid, 1, 3), wait=False)
    assert [e.seq for e in store.load_events(rid)] == [1, 2]
    store.save(record(rid), events(rid, 1, 3))
    assert [e.seq for e in store.load_events(rid)] == [1, 2, 3]


def test_saves_in_place_leave_the_wals_checkpoint_to_a_thread(tmp_path: Path) -> None:
    """The kept connection never checkpoints (a checkpoint syncs the file, on the loop);
    a passive one runs in a thread of its own after every ``CHECKPOINT_EVERY`` saves."""
    store = SqlStore.open(tmp_path / "corral.db")
    database = tmp_path / "corral.db"
    assert store._in_place is not None
    with sqlite3.connect(database) as plain:  # start from a checkpointed file
        plain.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = database.stat().st_size
    for _ in range(CHECKPOINT_EVERY - 1):
        rid = run_id()
        store.save(record(rid), events(rid, 1, 3), wait=False)
    assert store._in_place._checkpointing is None
    assert database.stat().st_size == before  # everything is still in the WAL
    rid = run_id()
    store.save(record(rid), events(rid, 1, 3), wait=False)
    checkpointing = store._in_place._checkpointing
    assert checkpointing is not None
    checkpointing.join(30)
    assert database.stat().st_size > before  # the WAL's pages copied into the file
    assert len(store.list_runs(limit=100)) == CHECKPOINT_EVERY
    kept = store._in_place._connection
    assert kept is not None
    assert kept.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    assert kept.exec_driver_sql("PRAGMA busy_timeout").scalar() == 0
    kept.rollback()


def test_a_second_thread_does_not_wait_for_the_kept_connection(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    assert store._in_place is not None
    outcome: list[str] = []
    with store._in_place.transaction():

        def other() -> None:
            rid = run_id()
            try:
                store.save(record(rid), events(rid, 1, 1), wait=False)
            except SaveWouldWait:
                outcome.append("declined")

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
    assert outcome == ["declined"]


def test_stores_that_cannot_save_in_place_say_so(tmp_path: Path) -> None:
    writable = SqlStore.open(tmp_path / "corral.db")
    assert writable.saves_in_place
    writable.saves_in_place = False
    rid = run_id()
    with pytest.raises(SaveWouldWait):
        writable.save(record(rid), events(rid, 1, 1), wait=False)
    assert not SqlStore.open(tmp_path / "corral.db", read_only=True).saves_in_place
    in_memory = SqlStore(create_engine("sqlite://", poolclass=StaticPool))  # one connection
    assert not in_memory.saves_in_place


def test_a_postgresql_store_saves_in_a_thread() -> None:
    """Its save goes over the network: always in a thread."""
    postgres = SqlStore(create_engine(postgres_url()))
    assert not postgres.saves_in_place
    rid = run_id()
    with pytest.raises(SaveWouldWait):
        postgres.save(record(rid), events(rid, 1, 1), wait=False)
    assert postgres.get_run(rid) is None
    postgres.engine.dispose()


async def test_a_runtime_that_logs_saves_in_a_thread(tmp_path: Path) -> None:
    """A log reads the run back after each save and writes a file: not on the loop."""
    store = SqlStore.open(tmp_path / "corral.db")
    inserts = event_inserts(store)
    runtime = Runtime(two_steps(), store, effects=FixedEffects(), log_dir=tmp_path / "logs")
    summary = await runtime.start("go")
    assert summary.status.value == "finished"
    assert inserts and threading.get_ident() not in inserts
