"""The run start's observed-latency query walks an index, and older homes gain that index.

Every run start of an agent with equivalent tools asks the SQL store for each tool's
latest ``decision.latency_window`` successful attempts. Without the partial index of
successful attempts it read every past attempt (2.7 s at 400 000 rows); these tests pin
the plan (the index, no sort), not a speed, on SQLite and on PostgreSQL
(CORRAL_TEST_PG_URL), and that a home made before the index gains it (schema revision 0002).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, event, text

from corral import Event, EventType
from corral.store.base import RunRecord
from corral.store.figures import ToolLatency
from corral.store.sql import SqlStore
from tests.extras import postgres_url

INDEX = "ix_corral_step_facts_recent"
TIMEOUTS = "ix_corral_step_facts_timeouts"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store opens: a SQLite file, or the test PostgreSQL server."""
    yield str(tmp_path / "corral.db") if request.param == "sqlite" else postgres_url()


def save_calls(store: SqlStore, agent: str, millis: list[float], minute: int = 0) -> None:
    """One finished run of ``agent`` whose attempts of ``fast`` took ``millis``."""
    rid = f"run_{uuid.uuid4().hex[:12]}"
    at = T0 + timedelta(minutes=minute)
    run = RunRecord(rid, "trace", agent, None, "finished", at, at, {"status": "finished"})
    attempt = {"step_id": "s1", "tool": "fast", "attempt": 1, "status": "success"}
    store.save(
        run,
        [
            Event(rid, i + 1, at, EventType.TOOL_ATTEMPT, "execute", attempt | {"duration_ms": ms})
            for i, ms in enumerate(millis)
        ],
    )


def has_index(conn: Connection, name: str = INDEX) -> bool:
    if conn.dialect.name == "sqlite":
        found = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = :name"
    else:
        found = (
            "SELECT indexname FROM pg_indexes"
            " WHERE indexname = :name AND schemaname = current_schema()"
        )
    return conn.execute(text(found), {"name": name}).first() is not None


def latency_statement(
    store: SqlStore, agent: str, timeouts_ms: dict[str, float] | None = None
) -> tuple[str, Any]:
    """The SQL (and parameters) that ``tool_latency`` sends, caught on its way out."""
    sent: list[tuple[str, Any]] = []

    def catch(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        if "duration_ms" in statement:
            sent.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", catch)
    try:
        store.tool_latency(agent, ["fast", "slow"], 100, timeouts_ms)
    finally:
        event.remove(store.engine, "before_cursor_execute", catch)
    [found] = sent
    return found


def query_plan(store: SqlStore, statement: str, params: Any) -> str:
    """The plan of ``statement`` as the database would run it on a large table."""
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
            return "\n".join(str(row[3]) for row in rows)
        # a tiny table: make the planner show what it does with a large one
        conn.exec_driver_sql("SET enable_seqscan = off")
        conn.exec_driver_sql("SET enable_bitmapscan = off")
        # and what the query allows, whatever rows earlier tests left in the
        # database: another index plus a sort can look as cheap on a tiny table
        conn.exec_driver_sql("SET enable_sort = off")
        rows = conn.exec_driver_sql(f"EXPLAIN {statement}", params)
        return "\n".join(str(row[0]) for row in rows)


def test_the_latest_window_is_read_through_the_index_without_a_sort(home: str) -> None:
    store = SqlStore.open(home)
    agent = f"plan_{uuid.uuid4().hex[:8]}"
    try:
        save_calls(store, agent, [5.0, 6.0])
        plan = query_plan(store, *latency_statement(store, agent))
        assert plan.count(INDEX) == 2, plan  # each tool's window walks it
        assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
    finally:
        store.engine.dispose()


def test_the_latest_timeouts_are_read_through_their_own_index(home: str) -> None:
    """With timeouts counted, each tool walks both partial indexes, each for one window.

    The index of failures leads with the tool and has the agent last: walking it would
    read every other agent's timeouts of that tool (schema revision 0004 adds this one).
    """
    store = SqlStore.open(home)
    agent = f"plan_{uuid.uuid4().hex[:8]}"
    try:
        save_calls(store, agent, [5.0, 6.0])
        timeouts = {"fast": 1000.0, "slow": 1000.0}
        plan = query_plan(store, *latency_statement(store, agent, timeouts))
        assert plan.count(INDEX) == 2 and plan.count(TIMEOUTS) == 2, plan
        assert "ix_corral_step_facts_failed" not in plan, plan
    finally:
        store.engine.dispose()


def test_a_home_made_before_the_timeouts_index_gains_it_when_opened(home: str) -> None:
    store = SqlStore.open(home)
    agent = f"old_{uuid.uuid4().hex[:8]}"
    rid = f"run_{uuid.uuid4().hex[:12]}"
    run = RunRecord(rid, "trace", agent, None, "failed", T0, T0, {"status": "failed"})
    timed_out = {"step_id": "s1", "tool": "fast", "attempt": 1, "status": "error"}
    timed_out |= {"error_code": "TOOL_TIMEOUT", "duration_ms": 900.0}
    store.save(run, [Event(rid, 1, T0, EventType.TOOL_ATTEMPT, "execute", timed_out)])
    save_calls(store, agent, [10.0], minute=1)
    with store.engine.begin() as conn:  # as a home written at revision 0003
        conn.execute(text(f"DROP INDEX {TIMEOUTS}"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0003'"))
    before = store.tool_latency(agent, ["fast"], 3, {"fast": 900.0})
    store.engine.dispose()

    reopened = SqlStore.open(home, upgrade=True)
    try:
        with reopened.engine.connect() as conn:
            assert has_index(conn, TIMEOUTS)
        after = reopened.tool_latency(agent, ["fast"], 3, {"fast": 900.0})
        assert after == before == {"fast": ToolLatency(900.0, 2)}
    finally:
        reopened.engine.dispose()


def test_a_home_made_before_the_index_gains_it_when_opened(home: str) -> None:
    store = SqlStore.open(home)
    agent = f"old_{uuid.uuid4().hex[:8]}"
    save_calls(store, agent, [10.0, 20.0, 30.0])
    save_calls(store, agent, [40.0], minute=1)
    with store.engine.begin() as conn:  # as a home written before the index existed
        conn.execute(text(f"DROP INDEX {INDEX}"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
        assert not has_index(conn)
    before = store.tool_latency(agent, ["fast"], 3)  # still answered, by reading more
    store.engine.dispose()

    # revision 0002 adds it: on open for SQLite, by `corral db upgrade` for PostgreSQL
    reopened = SqlStore.open(home, upgrade=True)
    try:
        with reopened.engine.connect() as conn:
            assert has_index(conn)
        assert reopened.tool_latency(agent, ["fast"], 3) == before == {"fast": ToolLatency(40.0, 3)}
        save_calls(reopened, agent, [1.0, 2.0, 3.0], minute=2)  # saves keep it up to date
        assert reopened.tool_latency(agent, ["fast"], 3) == {"fast": ToolLatency(3.0, 3)}
    finally:
        reopened.engine.dispose()


def test_a_read_only_old_home_is_left_as_it_is_and_still_answers(tmp_path: Path) -> None:
    path = tmp_path / "corral.db"
    store = SqlStore.open(path)
    save_calls(store, "ops", [7.0, 8.0])
    with store.engine.begin() as conn:
        conn.execute(text(f"DROP INDEX {INDEX}"))
    store.engine.dispose()
    reader = SqlStore.open(path, read_only=True)
    try:
        assert reader.tool_latency("ops", ["fast"], 100) == {"fast": ToolLatency(8.0, 2)}
        with reader.engine.connect() as conn:
            assert not has_index(conn)
    finally:
        reader.engine.dispose()
