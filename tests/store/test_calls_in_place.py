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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from corral import Agent, Runtime, SqlStore, load_agent
from corral.effects import FixedEffects, LiveEffects, WrappedEffects
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


def _threads_of(
    store: SqlStore, names: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> dict[str, list[int]]:
    """The threads each of ``names`` answers on from now on (a call that would wait does not).

    Noted by ``SqlStore``'s own methods, replaced on the class for the test: a store with a
    method replaced on it, or a subclass's, makes no call in place.
    """
    found: dict[str, list[int]] = {name: [] for name in names}

    def noted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: SqlStore, *args: Any, **kwargs: Any) -> Any:
            answer = method(self, *args, **kwargs)
            if self is store:
                found[name].append(threading.get_ident())
            return answer

        return call

    for name in names:
        monkeypatch.setattr(SqlStore, name, noted(name, getattr(SqlStore, name)))
    return found


async def _talk(runtime: Runtime, session: str) -> list[str]:
    """The turns of one conversation, each with a client's message id (as a server's are)."""
    said = []
    for n, text in enumerate(TURNS):
        summary = await runtime.start(text, session_id=session, message_id=f"{session}-{n}")
        said.append(summary.status.value)
    return said


async def test_a_conversations_reads_are_made_on_the_loops_thread(
    aftersales: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    await runtime.start(TURNS[0], session_id="warm")  # its save opens the kept connection
    threads = _threads_of(store, READS, monkeypatch)
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


async def test_with_the_kept_connection_in_use_they_go_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    threads = _threads_of(store, ("get_session", "load_events"), monkeypatch)
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


def test_a_subclass_that_overrides_a_helper_makes_none_in_place(tmp_path: Path) -> None:
    """Review of ecf9a29: a call in place runs helpers too (``_faults``, ``_events``...)."""

    class Metered(SqlStore):
        def _faults(self, run_id: str | None = None, action: str = "store access") -> Any:
            return super()._faults(run_id, action)  # a metrics push here could block

    class Named(SqlStore):  # its own set-up and a method of its own: nothing overridden
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.label = "ours"

        def describe(self) -> str:
            return self.label

    class Proxied(SqlStore):  # every attribute looked up by code of its own
        def __getattribute__(self, name: str) -> Any:
            return super().__getattribute__(name)

    assert not ready(Metered.open(tmp_path / "a.db")).calls_in_place
    assert ready(Named.open(tmp_path / "b.db")).calls_in_place
    assert not ready(Proxied.open(tmp_path / "c.db")).calls_in_place


async def test_a_call_replaced_on_the_store_is_made_in_a_thread(
    aftersales: Agent, tmp_path: Path
) -> None:
    """Review of ecf9a29: a wrapper set on the store (a timer, a test's slow lease) ran on
    the loop's thread and held it for as long as it waited."""
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    await runtime.start(TURNS[0], session_id="warm")  # its save opens the kept connection
    assert store.calls_in_place
    here, seen = threading.get_ident(), []
    acquire = store.acquire_lease

    def slow_acquire(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.get_ident())
        return acquire(*args, **kwargs)

    store.acquire_lease = slow_acquire  # type: ignore[method-assign]
    assert not store.calls_in_place
    await _talk(runtime, "s3")
    assert seen and here not in seen
    del store.acquire_lease
    assert store.calls_in_place
    await runtime.aclose()


async def test_a_long_run_is_read_in_a_thread(aftersales: Agent, tmp_path: Path) -> None:
    """Review of ecf9a29: reading 20 000 events in place held the loop for 200 ms."""
    from corral.store.sql import IN_PLACE_MAX_EVENTS

    store = ready(SqlStore.open(tmp_path / "corral.db"))
    short, long = run_id(), run_id()
    store.save(record(short), events(short, 1, IN_PLACE_MAX_EVENTS))
    store.save(record(long), events(long, 1, IN_PLACE_MAX_EVENTS + 1))
    with store.in_place():
        assert len(store.load_events(short)) == IN_PLACE_MAX_EVENTS
        with pytest.raises(SaveWouldWait):
            store.load_events(long)
        assert store.get_run(long) is not None  # the kept connection is fine after it
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    assert len(await runtime.events(long)) == IN_PLACE_MAX_EVENTS + 1  # from a thread
    await runtime.aclose()


@dataclass
class Replaying(FixedEffects):
    """A durable engine executing a drive again: its session read answered from a record."""

    record: dict[str, Any] = field(default_factory=lambda: {"session": None})

    def recorded(self, name: str, read: Callable[[], Any], shape: Any) -> Any:
        return self.record[name] if name in self.record else read()


def test_effects_say_whether_a_recorded_read_is_only_a_read() -> None:
    assert FixedEffects().reads_now and LiveEffects().reads_now
    assert WrappedEffects(FixedEffects()).reads_now
    assert not Replaying().reads_now and not WrappedEffects(Replaying()).reads_now
    spied = FixedEffects()
    spied.recorded = lambda name, read, shape: read()  # type: ignore[method-assign]
    assert not spied.reads_now  # replaced on the effects themselves: asked for each read


@dataclass
class Noting(FixedEffects):
    """Effects that record their reads (a durable engine's): the thread of each."""

    threads: dict[str, set[int]] = field(default_factory=dict)

    def recorded(self, name: str, read: Callable[[], Any], shape: Any) -> Any:
        self.threads.setdefault(name, set()).add(threading.get_ident())
        return read()


async def test_effects_that_record_reads_make_every_one_in_a_store_thread(
    tmp_path: Path,
) -> None:
    """Review of 07619bb: a resumed run's log (``_recorded_state``) was still read, and
    recorded, on the loop's thread inside ``in_place``, whatever the effects record."""
    effects = Noting()
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store, effects=effects)
    await runtime.start(TURNS[0], session_id="warm")  # its save opens the kept connection
    assert store.calls_in_place
    await _talk(runtime, "s4")
    here = threading.get_ident()
    # the store's reads (``degraded`` is the tools' health in memory: read where it is)
    reads = {name: threads for name, threads in effects.threads.items() if name != "degraded"}
    assert {"session", "log"} <= set(reads)  # a start's and a resume's
    assert all(here not in threads for threads in reads.values()), reads
    await runtime.aclose()


async def test_a_read_the_effects_record_is_left_to_them(tmp_path: Path) -> None:
    """Review of ecf9a29: in place, the store was read before ``recorded`` was asked, so a
    replaying engine's answer came after a read it did not want (and its failure)."""
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "data")
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store, effects=Replaying())
    await runtime.start(TURNS[0], session_id="warm")  # its save opens the kept connection
    reads: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _noted(_c: Any, _cursor: Any, sql: str, *_: Any) -> None:
        if sql.lstrip().upper().startswith("SELECT") and "corral_sessions" in sql:
            reads.append(sql)

    made = {}
    for in_place in (True, False):
        store.saves_in_place = in_place
        reads.clear()
        await runtime.start(TURNS[0], session_id=f"s-{in_place}")
        made[in_place] = len(reads)
    assert made[True] == made[False]
    await runtime.aclose()
