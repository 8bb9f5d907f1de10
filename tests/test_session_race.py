"""Two processes ending runs of one session keep both runs' turns.

Each run adds its turn to the session when it ends: it reads the session, merges its turn
and writes it back. One ``Runtime`` serializes that with a lock, but two processes (two
servers, two workers) on one store cannot share it: both read the session before either
writes, and the later write drops the earlier turn. Review finding ("a cross-process
session race"); the store now reads, merges and writes in one transaction
(``SessionUpdater``).

The two processes are two threads here, each with its own store, engine and connections
on one database, as two processes would have. Their reads of the session are made to meet
(a barrier in ``get_session``), which is what the race needs; a store that updates the
session in one transaction does not read it through ``get_session`` at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, Runtime, tool
from corral.store.base import SessionRecord, SessionUpdater
from corral.store.sql import SqlStore
from tests.extras import postgres_url
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


@tool
def lookup(n: int) -> Value:
    return Value(value=n)


def _agent() -> Any:
    return build_agent([lookup], [{"id": "s1", "tool": "lookup", "args": {"n": 1}}])


def _meeting_reads(store: SqlStore, barrier: threading.Barrier) -> SqlStore:
    """``store`` whose reads of a session wait for the other process's read (2 s at most)."""
    read = store.get_session

    def get_session(session_id: str, now: datetime) -> SessionRecord | None:
        found = read(session_id, now)
        # when the other process does not read it here, there is nothing to meet
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        return found

    store.get_session = get_session  # type: ignore[method-assign]
    return store


def _run_both(target: str | Path, session_id: str) -> list[str]:
    """Two 'processes' each run a message of ``session_id``; the run ids, in no order."""
    barrier = threading.Barrier(2, timeout=2)
    run_ids: list[str] = []
    failures: list[BaseException] = []

    def process() -> None:
        store = _meeting_reads(SqlStore.open(target), barrier)
        try:
            summary = asyncio.run(Runtime(_agent(), store).start("go", session_id=session_id))
            run_ids.append(summary.run_id)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
        finally:
            store.engine.dispose()

    threads = [threading.Thread(target=process) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert len(run_ids) == 2
    return run_ids


def _turns(target: str | Path, session_id: str) -> list[str]:
    store = SqlStore.open(target)
    try:
        session = store.get_session(session_id, datetime.now(UTC))
    finally:
        store.engine.dispose()
    assert session is not None
    return [turn["run_id"] for turn in session.turns]


def test_two_processes_ending_runs_of_one_session_on_sqlite_keep_both_turns(
    tmp_path: Path,
) -> None:
    target = tmp_path / "corral.db"
    SqlStore.open(target).engine.dispose()  # made once, before the two open it
    run_ids = _run_both(target, "sess_sqlite")
    assert sorted(_turns(target, "sess_sqlite")) == sorted(run_ids)


def test_two_processes_ending_runs_of_one_session_on_postgresql_keep_both_turns() -> None:
    url = postgres_url()
    session_id = f"sess_pg_{datetime.now(UTC).timestamp()}"
    run_ids = _run_both(url, session_id)
    assert sorted(_turns(url, session_id)) == sorted(run_ids)


@pytest.mark.parametrize("make", ["memory", "sqlite"])
def test_every_store_of_corral_updates_a_session_in_one_step(make: str, tmp_path: Path) -> None:
    store = MemoryStore() if make == "memory" else SqlStore.open(tmp_path / "c.db")
    assert isinstance(store, SessionUpdater)
    now = datetime.now(UTC)

    def add(turn: str) -> Any:
        def merge(existing: SessionRecord | None) -> SessionRecord:
            turns = [*(existing.turns if existing else []), {"run_id": turn}]
            return SessionRecord("s", "a", turns, {}, None, now, now.replace(year=now.year + 1))

        return merge

    store.update_session("s", now, add("r1"))
    store.update_session("s", now, add("r2"))
    found = store.get_session("s", now)
    assert found is not None and [t["run_id"] for t in found.turns] == ["r1", "r2"]


def test_two_first_writers_of_a_new_session_on_postgresql_both_land() -> None:
    """Both find no session (a row lock cannot hold a row that is not there) and both
    insert: the second insert fails on the key, and that writer merges again, into the
    first's row."""
    url = postgres_url()
    session_id = f"sess_new_{datetime.now(UTC).timestamp()}"
    barrier = threading.Barrier(2, timeout=10)
    now = datetime.now(UTC)
    merged: list[tuple[str, int]] = []
    failures: list[BaseException] = []

    def writer(turn: str) -> None:
        def merge(existing: SessionRecord | None) -> SessionRecord:
            merged.append((turn, len(existing.turns) if existing else 0))
            if len(merged) <= 2:
                barrier.wait()  # both read before either writes
            turns = [*(existing.turns if existing else []), {"run_id": turn}]
            return SessionRecord(session_id, "a", turns, {}, None, now, now.replace(year=3000))

        store = SqlStore.open(url)
        try:
            store.update_session(session_id, now, merge)
        except BaseException as exc:
            failures.append(exc)
        finally:
            store.engine.dispose()

    threads = [threading.Thread(target=writer, args=(turn,)) for turn in ("r1", "r2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert sorted(_turns(url, session_id)) == ["r1", "r2"]
    assert len(merged) == 3 and merged[2][1] == 1  # one merged again, over the first's turn
