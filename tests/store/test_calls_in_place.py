"""A chat turn's reads and lease calls on SQLite are made on the caller's thread.

They went to a store thread each: on a 2-core machine the hops cost more than the reads,
about half of what SQLite added to a turn over ``MemoryStore``. Inside
``SqlStore.in_place()`` they are made at once on the connection kept for saves, or raise
``SaveWouldWait`` having done nothing, and the runtime makes them in a thread as before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from corral import Agent, Runtime, SqlStore, load_agent
from corral.effects import FixedEffects
from corral.store.base import Lease, SaveWouldWait
from tests.conftest import AFTERSALES
from tests.store.test_conformance import events, record, run_id
from tests.store.test_saves_in_place import ready

TURNS = ("我的打印机坏了，能换新吗", "订单号 HD20240501", "好的")
READS = (
    "get_session",
    "load_events",
    "get_run",
    "tool_latency",
    "acquire_lease",
    "run_of_message",
)


def _threads_of(store: SqlStore, names: tuple[str, ...]) -> dict[str, list[int]]:
    """The threads each of ``names`` answers on from now on (a call that would wait does not)."""
    found: dict[str, list[int]] = {name: [] for name in names}

    def noted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            answer = method(*args, **kwargs)
            found[name].append(threading.get_ident())
            return answer

        return call

    for name in names:
        setattr(store, name, noted(name, getattr(store, name)))
    return found


async def _talk(runtime: Runtime, session: str) -> list[str]:
    """The turns of one conversation, each with a client's message id (as a server's are)."""
    said = []
    for n, text in enumerate(TURNS):
        summary = await runtime.start(text, session_id=session, message_id=f"{session}-{n}")
        said.append(summary.status.value)
    return said


async def test_a_conversations_reads_are_made_on_the_loops_thread(
    aftersales: Agent, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    await runtime.start(TURNS[0], session_id="warm")  # its save opens the kept connection
    threads = _threads_of(store, READS)
    here = threading.get_ident()
    checkouts: list[int] = []  # of the pool's connections, on this thread: each may wait

    @event.listens_for(store.engine, "checkout")
    def _checked_out(*_: Any) -> None:
        if threading.get_ident() == here:
            checkouts.append(here)

    statuses = await _talk(runtime, "s1")
    assert statuses[-1] in {"finished", "handed_off"}, statuses
    # every one of them was asked, and only on this thread, on the kept connection
    assert {name: set(ids) for name, ids in threads.items()} == {name: {here} for name in READS}
    assert checkouts == []
    await runtime.aclose()


async def test_with_the_kept_connection_in_use_they_go_to_a_thread(tmp_path: Path) -> None:
    """Another thread holds the kept connection (a save in a store thread): nothing waits."""
    expected = []
    for name in ("twin", "corral"):  # the same turns, in place, then with it held
        agent = load_agent(AFTERSALES, data_dir=tmp_path / name)  # business data of its own
        store = SqlStore.open(tmp_path / f"{name}.db")
        runtime = Runtime(agent, store, effects=FixedEffects())
        await runtime.start(TURNS[0], session_id="warm")
        if not expected:
            expected = await _talk(runtime, "s2")
            await runtime.aclose()
    here = threading.get_ident()
    threads = _threads_of(store, ("get_session", "load_events"))
    kept = store._in_place
    assert kept is not None
    with kept._lock:  # what a store thread's save holds while it writes
        statuses = await _talk(runtime, "s2")
    assert statuses == expected
    assert threads["get_session"] and here not in threads["get_session"]
    assert threads["load_events"] and here not in threads["load_events"]
    await runtime.aclose()


def test_a_write_lock_elsewhere_leaves_reads_in_place_and_refuses_lease_calls(
    tmp_path: Path,
) -> None:
    store = ready(SqlStore.open(tmp_path / "corral.db"))
    rid = run_id()
    store.save(record(rid), events(rid, 1, 3))
    other = sqlite3.connect(tmp_path / "corral.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        with store.in_place():
            assert [e.seq for e in store.load_events(rid)] == [1, 2, 3]  # WAL: no waiting
            assert store.get_run(rid) is not None
            with pytest.raises(SaveWouldWait):
                store.acquire_lease(Lease(rid, "me", 30.0))
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.lease_holder(rid) is None  # the refused call wrote nothing
    with store.in_place():  # the lock gone: made here
        assert store.acquire_lease(Lease(rid, "me", 30.0)) is None
    holder = store.lease_holder(rid)
    assert holder is not None and holder.owner == "me"


def test_before_the_kept_connection_is_open_every_call_would_wait(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    rid = run_id()
    with store.in_place(), pytest.raises(SaveWouldWait):
        store.get_run(rid)
    assert store.get_run(rid) is None  # outside the block, as ever


def test_a_subclass_that_overrides_a_call_makes_none_in_place(tmp_path: Path) -> None:
    """Its own code may wait (another database, a lock): the runtime sends it to a thread."""
    from corral.store.sql import IN_PLACE_CALLS

    class Cached(SqlStore):
        def get_run(self, run_id: str) -> Any:
            return super().get_run(run_id)

    assert ready(SqlStore.open(tmp_path / "a.db")).calls_in_place
    assert not ready(Cached.open(tmp_path / "b.db")).calls_in_place
    off = ready(SqlStore.open(tmp_path / "c.db"))
    off.saves_in_place = False  # the switch for saves turns these off too
    assert not off.calls_in_place
    assert set(READS) <= set(IN_PLACE_CALLS)
