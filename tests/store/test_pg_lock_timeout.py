"""A write of corral's on PostgreSQL waits for a lock as long as SQLite's does, not for ever.

PostgreSQL's default ``lock_timeout`` is 0: a save behind a lock another session holds (a
console left in a transaction, a stuck process) waited for as long as that session
lived, holding its run, and a stopping ``corral serve``, with it. corral's write
transactions now wait at most the SQLite busy timeout (``_BUSY_MS``), then fail with
``STORE_UNAVAILABLE`` and a hint. The timeout is the transaction's own (``SET LOCAL``:
behind a pooler in transaction mode the server connection serves other clients next); a
timeout the session has (the URL's, the role's, 0 included) is kept, and opening a store
still waits for another process's migration however long it takes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import create_engine, text

from corral import Runtime, tool
from corral.errors import ErrorCode, StoreUnavailableError
from corral.store import sql
from corral.store.sql import SqlStore
from tests.extras import import_extra, postgres_url
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


@tool
def lookup(n: int) -> Value:
    return Value(value=n)


def _other_client(url: str) -> Any:
    """A session of another client (psql, another service): psycopg, not corral's store."""
    psycopg = import_extra("psycopg", "CORRAL_REQUIRE_PG")
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))


@pytest.fixture
def pg_url() -> str:
    return postgres_url()


@pytest.fixture
def store(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlStore]:
    monkeypatch.setattr(sql, "_LOCK_TIMEOUT", sql._lock_timeout_sql(300))
    opened = SqlStore.open(pg_url)
    yield opened
    opened.engine.dispose()


def _setting(store: SqlStore) -> str:
    """The lock timeout of a write transaction of ``store``."""
    with store._write() as conn:
        return str(conn.execute(text("SHOW lock_timeout")).scalar_one())


def test_a_run_behind_a_held_lock_fails_as_unavailable_instead_of_waiting_for_ever(
    store: SqlStore, pg_url: str
) -> None:
    other = _other_client(pg_url)
    other.execute("LOCK TABLE corral_runs IN ACCESS EXCLUSIVE MODE")  # held: no commit
    outcome: list[BaseException | str] = []

    def run() -> None:
        try:
            agent = build_agent([lookup], [{"id": "s1", "tool": "lookup", "args": {"n": 1}}])
            outcome.append(asyncio.run(Runtime(agent, store).start("go")).status.value)
        except BaseException as exc:  # reported by the test, not lost in the thread
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    try:
        thread.start()
        thread.join(8)
        waited = time.monotonic() - started
    finally:
        other.rollback()  # lets a run that waits for ever go on, so that the thread ends
        other.close()
        thread.join(10)
    assert not thread.is_alive()
    assert waited < 8, "the run waited for the lock until the other session let go"
    assert len(outcome) == 1, outcome
    error = outcome[0]
    assert isinstance(error, StoreUnavailableError), outcome
    assert error.code is ErrorCode.STORE_UNAVAILABLE
    assert "lock timeout" in error.message
    assert error.hint is not None and "lock_timeout" in error.hint and "pg_locks" in error.hint


def test_a_write_transaction_gets_the_sqlite_busy_timeout(store: SqlStore) -> None:
    assert _setting(store) == "300ms"


def test_the_timeout_is_the_transactions_not_the_sessions(store: SqlStore) -> None:
    """A pooler in transaction mode hands the server connection to other clients next."""
    with store.engine.connect() as conn:
        with conn.begin():
            sql._bound_lock_waits(conn)
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "300ms"
        with conn.begin():  # the same connection, its next transaction
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "0"


def test_a_timeout_set_on_the_connection_later_is_seen_by_the_next_write(store: SqlStore) -> None:
    """Looked at in each write, not once per connection (a pooler's server connection, an
    application's own ``SET``, may change what the session has)."""
    with store.engine.connect() as conn:
        with conn.begin():
            sql._bound_lock_waits(conn)
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "300ms"
        conn.execute(text("SET lock_timeout = 5000"))
        conn.commit()
        with conn.begin():
            sql._bound_lock_waits(conn)
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "5s"
        conn.execute(text("RESET lock_timeout"))
        conn.commit()


@pytest.mark.parametrize(("given", "shown"), [("1234", "1234ms"), ("0", "0")])
def test_a_timeout_the_session_has_is_kept(pg_url: str, given: str, shown: str) -> None:
    opened = SqlStore.open(pg_url + f"?options=-c%20lock_timeout%3D{given}")
    try:
        assert _setting(opened) == shown
    finally:
        opened.engine.dispose()


def test_an_engine_of_the_application_is_left_as_it_was(pg_url: str) -> None:
    """``SqlStore(engine)``: only corral's own write transactions are bounded."""
    engine = create_engine(pg_url)
    try:
        with engine.connect():  # pooled before the store is made
            pass
        bounded = SqlStore(engine)
        with engine.connect() as first, engine.connect() as second:
            settings = [c.execute(text("SHOW lock_timeout")).scalar_one() for c in (first, second)]
        assert settings == ["0", "0"]
        assert _setting(bounded) == "10s"  # on either connection
        assert _setting(bounded) == "10s"
    finally:
        engine.dispose()


def test_opening_a_store_waits_for_another_process_migrating_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the lock timeout: a migration of a large store takes what it takes."""
    monkeypatch.setattr(sql, "_LOCK_TIMEOUT", sql._lock_timeout_sql(200))
    migrating: list[str] = []
    prepare = sql.schema.prepare

    def prepare_seeing_the_timeout(conn: Any, *args: Any, **kwargs: Any) -> Any:
        migrating.append(conn.execute(text("SHOW lock_timeout")).scalar_one())
        return prepare(conn, *args, **kwargs)

    monkeypatch.setattr(sql.schema, "prepare", prepare_seeing_the_timeout)
    schema = f"corral_open_{time.time_ns()}"
    other = _other_client(pg_url)
    other.execute(f"CREATE SCHEMA {schema}")
    other.commit()
    other.execute("SELECT pg_advisory_xact_lock(7715021)")  # what a migrating process holds
    releaser = threading.Timer(1.0, other.rollback)
    releaser.start()
    started = time.monotonic()
    try:
        opened = SqlStore.open(pg_url + f"?options=-c%20search_path%3D{schema}")
        waited = time.monotonic() - started
        try:
            assert _setting(opened) == "200ms"  # the open waited past its own timeout
            assert opened.list_runs() == []  # and made the schema once it could
        finally:
            opened.engine.dispose()
    finally:
        releaser.join()
        other.execute(f"DROP SCHEMA {schema} CASCADE")
        other.commit()
        other.close()
    assert waited >= 0.9
    assert migrating == ["200ms"]  # past the lock, the migration's statements are bounded
