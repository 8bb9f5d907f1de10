"""A SQLite save is made on the caller's thread when nothing would make it wait.

Otherwise it raises ``SaveWouldWait`` having written nothing, and the runtime tries again
in place for a moment, or makes it in a store thread (``corral.store.in_place``).
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import create_engine, event
from sqlalchemy.pool import StaticPool

from corral import Agent, Runtime, SqlStore, tool
from corral.observe.logs import JsonlLog
from corral.store.base import SaveWouldWait
from corral.store.in_place import CHECKPOINT_EVERY
from corral.store.sql import sqlite_url
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


def ready(store: SqlStore) -> SqlStore:
    """``store`` after one save made where waiting is allowed: its kept connection is open."""
    rid = run_id()
    store.save(record(rid), events(rid, 1, 1))
    return store


def event_inserts(store: SqlStore) -> list[int]:
    """The threads that insert events into ``store`` from now on, in order."""
    threads: list[int] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO CORRAL_EVENTS"):
            threads.append(threading.get_ident())

    return threads


async def test_a_run_on_sqlite_is_saved_on_the_event_loops_thread(tmp_path: Path) -> None:
    """Before, every save went to a store thread: ~0.7x the CPU of a 5-step run in place."""
    store = SqlStore.open(tmp_path / "corral.db")
    inserts = event_inserts(store)
    runtime = Runtime(two_steps(), store, effects=FixedEffects())
    first = await runtime.start("go")  # the store's first save opens the kept connection
    assert first.status.value == "finished"
    assert inserts[0] != threading.get_ident()
    second = await runtime.start("go")
    assert second.status.value == "finished"
    assert inserts[1:] == [threading.get_ident()]
    stored = store.load_events(second.run_id)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))


async def test_a_save_that_finds_the_write_lock_taken_waits_in_a_thread(tmp_path: Path) -> None:
    """Another process's long write: the loop goes on meanwhile, and the save lands after it."""
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    inserts = event_inserts(store)
    other = sqlite3.connect(tmp_path / "corral.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    run = asyncio.create_task(Runtime(two_steps(), store, effects=FixedEffects()).start("go"))
    began = time.monotonic()
    for _ in range(60):  # 0.3 s of the loop's turns while the save waits for the lock
        await asyncio.sleep(0.005)
    # a save waiting on the loop (SQLite's 10 s busy timeout) would hold these turns up
    assert time.monotonic() - began < 5
    assert not run.done() and not inserts
    other.execute("COMMIT")
    summary = await asyncio.wait_for(run, 30)
    assert summary.status.value == "finished"
    assert inserts and all(thread != threading.get_ident() for thread in inserts)
    assert len(store.load_events(summary.run_id)) > 3
    other.close()


async def test_a_lock_held_for_a_moment_is_waited_out_in_place(tmp_path: Path) -> None:
    """A write of this process (a session's update, in a thread) holds it ~1 ms: no hop."""
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    inserts = event_inserts(store)
    other = sqlite3.connect(tmp_path / "corral.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    asyncio.get_running_loop().call_later(0.01, other.execute, "COMMIT")
    summary = await Runtime(two_steps(), store, effects=FixedEffects()).start("go")
    assert summary.status.value == "finished"
    assert inserts == [threading.get_ident()]
    other.close()


def test_a_save_asked_not_to_wait_writes_nothing_while_the_lock_is_taken(
    tmp_path: Path,
) -> None:
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    rid = run_id()
    other = sqlite3.connect(tmp_path / "corral.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(SaveWouldWait) as refused:
        store.save(record(rid), events(rid, 1, 2), wait=False)
    assert refused.value.locked
    other.execute("COMMIT")
    assert store.load_events(rid) == [] and store.get_run(rid) is None
    store.save(record(rid), events(rid, 1, 2), wait=False)  # free now: made at once
    assert [e.seq for e in store.load_events(rid)] == [1, 2]
    other.close()


def test_a_repeated_save_is_left_to_a_save_that_may_wait(tmp_path: Path) -> None:
    """An identical repeat (a retry after an unknown outcome) takes the careful path."""
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    rid = run_id()
    store.save(record(rid), events(rid, 1, 2))
    with pytest.raises(SaveWouldWait) as refused:
        store.save(record(rid), events(rid, 1, 3), wait=False)
    assert not refused.value.locked
    assert [e.seq for e in store.load_events(rid)] == [1, 2]
    store.save(record(rid), events(rid, 1, 3))
    assert [e.seq for e in store.load_events(rid)] == [1, 2, 3]


def test_saves_in_place_leave_the_wals_checkpoint_to_a_thread(tmp_path: Path) -> None:
    """The kept connection never checkpoints (a checkpoint syncs the file, on the loop);
    a passive one runs in a thread of its own after every ``CHECKPOINT_EVERY`` saves."""
    database = tmp_path / "corral.db"
    store = ready(SqlStore.open(database))
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
    assert len(store.list_runs(limit=100)) == CHECKPOINT_EVERY + 1
    kept = store._in_place._connection
    assert kept is not None
    assert kept.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    assert kept.exec_driver_sql("PRAGMA busy_timeout").scalar() == 0
    kept.rollback()


def test_a_second_thread_does_not_wait_for_the_kept_connection(tmp_path: Path) -> None:
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    assert store._in_place is not None
    outcome: list[bool] = []
    with store._in_place.transaction():  # one thread writes in place

        def other() -> None:
            rid = run_id()
            try:
                store.save(record(rid), events(rid, 1, 1), wait=False)
            except SaveWouldWait as refused:
                outcome.append(refused.locked)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
    assert outcome == [True]


def test_the_kept_connection_holds_no_pool_slot_and_goes_with_dispose(tmp_path: Path) -> None:
    """A pool of one still serves the store's threads; ``dispose`` closes the kept one."""
    engine = create_engine(sqlite_url(tmp_path / "corral.db"), pool_size=1, max_overflow=0)
    store = ready(SqlStore(engine, path=tmp_path / "corral.db"))
    assert store._in_place is not None and store._in_place._connection is not None
    engine.pool._timeout = 2  # type: ignore[attr-defined]  # a slot held would time out
    assert store.get_run("run_nothing") is None  # a checkout while the kept one is open
    rid = run_id()
    store.save(record(rid), events(rid, 1, 1), wait=False)
    store.engine.dispose()
    assert store._in_place._connection is None
    with pytest.raises(SaveWouldWait):  # until a save that may wait opens another
        store.save(record(run_id()), events(rid, 1, 1), wait=False)
    ready(store)
    store.save(record(rid := run_id()), events(rid, 1, 1), wait=False)
    assert [e.seq for e in store.load_events(rid)] == [1]


def test_a_file_that_syncs_every_commit_is_saved_in_threads(tmp_path: Path) -> None:
    """``synchronous=FULL`` (a listener of the user's): each commit waits for the disk."""
    store = SqlStore.open(tmp_path / "corral.db")
    store.engine.dispose()

    @event.listens_for(store.engine, "connect")
    def _full(connection: Any, _record: Any) -> None:
        connection.execute("PRAGMA synchronous=FULL")

    assert store.saves_in_place
    ready(store)
    assert not store.saves_in_place
    with pytest.raises(SaveWouldWait):
        store.save(record(rid := run_id()), events(rid, 1, 1), wait=False)


def test_stores_that_cannot_save_in_place_say_so(tmp_path: Path) -> None:
    writable = ready(SqlStore.open(tmp_path / "corral.db"))
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


async def test_a_runtimes_first_log_export_is_in_a_thread_then_beside_the_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first export learns, in a thread, that the log is on the store's file system.

    The loop never looks at another file system; once the log is known to be beside the
    store, it is written where the save was made (``tests/test_log_export.py``).
    """
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    inserts = event_inserts(store)
    exported: list[int] = []
    export = JsonlLog.export

    def noted(self: JsonlLog, *args: Any, **kwargs: Any) -> Path | None:
        exported.append(threading.get_ident())
        return export(self, *args, **kwargs)

    monkeypatch.setattr(JsonlLog, "export", noted)
    runtime = Runtime(two_steps(), store, effects=FixedEffects(), log_dir=tmp_path / "logs")
    summary = await runtime.start("go")
    assert summary.status.value == "finished"
    assert inserts == [threading.get_ident()]
    assert exported and threading.get_ident() not in exported
    lines = (tmp_path / "logs" / f"{summary.run_id}.jsonl").read_text().splitlines()
    assert len(lines) == len(store.load_events(summary.run_id))
    exported.clear()
    assert (await runtime.start("go")).status.value == "finished"
    assert exported == [threading.get_ident()]


class Wrapped:
    """A user's wrapper: unknown attributes are the wrapped store's; its save takes no ``wait``."""

    blocking = True

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.saves: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def save(self, run: Any, events: Any, handoff: Any = None, **fencing: Any) -> None:
        self.saves.append(threading.get_ident())
        self.inner.save(run, events, handoff, **fencing)


class Audited(SqlStore):
    """A user's subclass whose ``save`` predates ``wait``."""

    def save(  # type: ignore[override]
        self,
        run: Any,
        events: Any,
        handoff: Any = None,
        *,
        lease: Any = None,
        release: bool = False,
    ) -> None:
        super().save(run, events, handoff, lease=lease, release=release)


async def test_stores_whose_save_does_not_name_wait_save_in_a_thread(tmp_path: Path) -> None:
    """A wrapper's ``__getattr__`` answers ``saves_in_place`` for the store it wraps, and a
    subclass's ``save`` may not take ``wait``: neither is a store that saves in place."""
    wrapped = Wrapped(ready(SqlStore.open(tmp_path / "wrapped.db")))
    assert wrapped.saves_in_place is True  # the wrapped store's answer
    summary = await Runtime(two_steps(), wrapped, effects=FixedEffects()).start("go")  # type: ignore[arg-type]
    assert summary.status.value == "finished"
    assert wrapped.saves and threading.get_ident() not in wrapped.saves
    audited = ready(Audited.open(tmp_path / "audited.db"))
    inserts = event_inserts(audited)
    summary = await Runtime(two_steps(), audited, effects=FixedEffects()).start("go")
    assert summary.status.value == "finished"  # before: TypeError, the run failed
    assert inserts and threading.get_ident() not in inserts


def test_a_save_never_fails_after_its_commit_for_the_kept_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the kept connection comes after the commit: a failure there is not the save's."""
    store = SqlStore.open(tmp_path / "corral.db")
    assert store._in_place is not None

    def no_more_files(self: Any) -> None:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(type(store._in_place), "_open", no_more_files)
    rid = run_id()
    store.save(record(rid), events(rid, 1, 2))  # before: the save raised, though stored
    assert [e.seq for e in store.load_events(rid)] == [1, 2]
    with pytest.raises(SaveWouldWait) as refused:  # in threads until a later try opens it
        store.save(record(rid), events(rid, 3, 1), wait=False)
    assert not refused.value.locked
    monkeypatch.undo()
    ready(store)
    store.save(record(rid), events(rid, 3, 1), wait=False)
    assert [e.seq for e in store.load_events(rid)] == [1, 2, 3]


def test_stores_on_a_shared_engine_leave_nothing_behind_on_it(tmp_path: Path) -> None:
    """A store made per request on one engine: its kept connection goes with it."""
    engine = create_engine(sqlite_url(tmp_path / "corral.db"))
    SqlStore(engine, path=tmp_path / "corral.db")  # creates the schema
    gc.collect()
    listeners = len(engine.dispatch.engine_disposed)
    kept = []
    for _ in range(5):
        store = ready(SqlStore(engine, path=tmp_path / "corral.db"))
        assert store._in_place is not None and store._in_place._connection is not None
        kept.append(weakref.ref(store._in_place))
        del store
    gc.collect()
    assert all(ref() is None for ref in kept)
    assert len(engine.dispatch.engine_disposed) == listeners
    engine.dispose()
