"""A save's fast paths store exactly what the slow ones did.

``corral.store.driver`` runs the statements every save runs without SQLAlchemy's
per-execute work, and ``json_values.dumps`` encodes rows with one prebuilt C encoder. These
tests pin what must not change with them: the stored text of times and of JSON, the
store errors a driver failure becomes, and that a listener on the engine's cursor events
(a tracer, a fault injector) still sees every statement.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.sqlite import DATETIME

from corral import Event, EventType
from corral.errors import StoreCorruptError
from corral.json_values import dumps
from corral.store.base import Lease, RunRecord
from corral.store.sql import SqlStore
from tests.extras import postgres_url

TIMES = [
    datetime(2026, 11, 30, 22, 10, 24, 123456, tzinfo=UTC),
    datetime(2026, 11, 30, 22, 10, 25, tzinfo=UTC),  # no microseconds: still six digits
    datetime(2026, 12, 1, 0, 0, 0, 7, tzinfo=UTC),
]


def _run(rid: str, at: datetime = TIMES[0]) -> RunRecord:
    return RunRecord(rid, "trace_1", "test", None, "finished", at, at, {"status": "finished"})


ATTEMPT = {"step_id": "s1", "tool": "t", "attempt": 1, "status": "success", "duration_ms": 1.0}


def _events(rid: str) -> list[Event]:
    """Two replies and a tool attempt (so that a save writes a tool fact as well)."""
    made = [
        Event(rid, seq, ts, EventType.REPLY, "reply", data={"text": f"r{seq}", "template": "t"})
        for seq, ts in enumerate(TIMES[:-1], start=1)
    ]
    return [*made, Event(rid, len(TIMES), TIMES[-1], EventType.TOOL_ATTEMPT, "execute", ATTEMPT)]


def test_times_are_stored_as_integer_microseconds_and_run_rows_as_sqlalchemy_text(
    tmp_path: Path,
) -> None:
    """Event and fact times: microseconds since the epoch (UTC); a run row's: SQLAlchemy's."""
    store = SqlStore.open(tmp_path / "corral.db")
    store.save(_run("run_t"), _events("run_t"), lease=Lease("run_t", "me", new_run=True))
    sqlalchemy_text = DATETIME().bind_processor(sqlite.dialect())
    assert sqlalchemy_text is not None
    with sqlite3.connect(tmp_path / "corral.db") as raw:
        stored = [ts for (ts,) in raw.execute("SELECT ts FROM corral_events ORDER BY seq")]
        created = raw.execute("SELECT created_at FROM corral_runs").fetchone()[0]
        facts = raw.execute("SELECT created_at, updated_at FROM corral_run_facts").fetchone()
        tool = raw.execute("SELECT created_at FROM corral_step_facts").fetchone()[0]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert stored == [(ts - epoch) // timedelta(microseconds=1) for ts in TIMES]
    assert stored[1] == 1796076625_000000 and stored[2] == 1796083200_000007
    assert facts == (stored[0], stored[0]) and tool == stored[0]
    assert created == sqlalchemy_text(TIMES[0])
    assert [e.ts for e in store.load_events("run_t")] == TIMES
    # SQLAlchemy's own queries compare against that text: a filter by time finds the run
    assert store.find_runs(since=TIMES[0], until=TIMES[0] + timedelta(seconds=1)) == ["run_t"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_cursor_listener_sees_every_statement_of_a_save(tmp_path: Path, backend: str) -> None:
    store = SqlStore.open(tmp_path / "corral.db" if backend == "sqlite" else postgres_url())
    rid = f"run_{uuid.uuid4().hex[:12]}"
    seen: list[tuple[str, bool]] = []

    def listen(_c: Any, _cur: Any, statement: str, _p: Any, _ctx: Any, many: bool) -> None:
        seen.append((" ".join(statement.split()[:3]), many))

    event.listen(store.engine, "before_cursor_execute", listen)
    store.save(_run(rid), _events(rid), lease=Lease(rid, "me", new_run=True))
    if backend == "sqlite":
        assert seen.pop(0) == ("BEGIN IMMEDIATE", False)
    else:  # the write's bound on lock waits
        assert seen.pop(0) == ("SELECT set_config('lock_timeout', '10000',", False)
    assert seen[0][0] == "SELECT corral_leases.run_id, corral_leases.owner,"
    assert ("INSERT INTO corral_events", True) in seen  # three rows, one executemany
    for table in ("corral_runs", "corral_run_facts", "corral_step_facts"):
        assert any(statement == f"INSERT INTO {table}" for statement, _ in seen)
    assert [e.ts for e in store.load_events(rid)] == TIMES
    store.engine.dispose()


def test_only_writes_begin_immediate_even_after_a_write_failed_to_begin(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    begins: list[str] = []
    refuse = [False, True]  # popped: the first write fails to begin, the second does not

    def listen(_c: Any, _cur: Any, statement: str, _p: Any, _ctx: Any, _many: bool) -> None:
        if statement.startswith("BEGIN"):
            begins.append(statement)
            if statement == "BEGIN IMMEDIATE" and refuse.pop():
                raise sqlite3.OperationalError("database is locked")

    event.listen(store.engine, "before_cursor_execute", listen)
    with pytest.raises(Exception, match="locked"):
        store.save(_run("run_b"), _events("run_b"), lease=Lease("run_b", "me", new_run=True))
    assert store.load_events("run_b") == []  # its connection's next user only reads
    store.save(_run("run_b"), _events("run_b"), lease=Lease("run_b", "me", new_run=True))
    assert len(store.load_events("run_b")) == len(TIMES)
    assert begins == ["BEGIN IMMEDIATE", "BEGIN", "BEGIN IMMEDIATE", "BEGIN"]
    store.engine.dispose()


def test_a_driver_failure_in_a_save_is_a_store_error_with_the_run(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    with sqlite3.connect(tmp_path / "corral.db") as raw:
        raw.execute("DROP TABLE corral_step_facts")
    store.engine.dispose()
    with pytest.raises(StoreCorruptError) as caught:
        store.save(_run("run_f"), _events("run_f"), lease=Lease("run_f", "me", new_run=True))
    assert caught.value.run_id == "run_f" and "no such table" in caught.value.message
    assert store.load_events("run_f") == [] and store.get_run("run_f") is None  # rolled back


def test_rows_are_json_as_json_dumps_writes_it() -> None:
    values: list[Any] = [
        {"text": '第1条 «é»\n"q"', "n": [1, 2.5, 1e-07, -0.0, True, None], "nested": {"a": {}}},
        "a top-level string",
        [float("inf"), float("nan")],
        {"when": TIMES[0], "path": Path("/x")},  # not JSON: their str, as the store did
        {1: "int key", 2.5: "float key"},
    ]
    for value in values:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        assert dumps(value) == expected


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_session_reads_back_as_written_and_older_rows_still_read(
    tmp_path: Path, backend: str
) -> None:
    """Sessions go through the driver too: the row SQLAlchemy itself wrote (a session
    stored by an older corral), and one this corral writes, read back the same, aware."""
    from sqlalchemy import insert

    from corral.store.base import SessionRecord
    from corral.store.sql import sessions

    store = SqlStore.open(tmp_path / "corral.db" if backend == "sqlite" else postgres_url())
    now = TIMES[0]
    later = now + timedelta(days=1)
    older = f"s_{uuid.uuid4().hex[:8]}"
    data = {"turns": [{"intent": "查订单"}], "entities": {"order_id": "HD1"}, "open_run_id": None}
    with store.engine.begin() as conn:  # SQLAlchemy's own statement and bind processing
        row = {"session_id": older, "agent": "a", "data": json.dumps(data), "updated_at": now}
        conn.execute(insert(sessions).values(**row, expires_at=later))
    found = store.get_session(older, now)
    assert found is not None and found.entities == {"order_id": "HD1"}
    assert (found.updated_at, found.expires_at) == (now, later)
    assert found.updated_at.tzinfo is not None
    assert store.get_session(older, later) is None  # expired

    def merge(existing: SessionRecord | None) -> SessionRecord:
        assert existing == found
        return SessionRecord(older, "a", [], {"order_id": "HD2"}, "run_x", TIMES[1], later)

    store.update_session(older, now, merge)
    again = store.get_session(older, now)
    assert again == SessionRecord(older, "a", [], {"order_id": "HD2"}, "run_x", TIMES[1], later)
    if backend == "sqlite":  # the text SQLAlchemy writes, whoever wrote it
        sqlalchemy_text = DATETIME().bind_processor(sqlite.dialect())
        assert sqlalchemy_text is not None
        with sqlite3.connect(tmp_path / "corral.db") as raw:
            stored = raw.execute("SELECT updated_at, expires_at FROM corral_sessions").fetchone()
        assert stored == (sqlalchemy_text(TIMES[1]), sqlalchemy_text(later))
    store.engine.dispose()


def test_a_stored_instant_reads_back_aware_whatever_wrote_it() -> None:
    """Event times as the driver returns them: SQLite's microseconds, an older row's text,
    PostgreSQL's datetime (aware, or naive from a driver that drops the zone)."""
    from corral.store.instant import read_instant, to_micros

    at = TIMES[0]
    assert read_instant(to_micros(at)) == at
    assert read_instant("2026-11-30 22:10:24.123456") == at
    assert read_instant(at) is at
    naive = read_instant(at.replace(tzinfo=None))
    assert naive == at and naive.tzinfo is UTC


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_save_rolled_back_leaves_no_plan_body_known_that_is_not_stored(
    tmp_path: Path, backend: str
) -> None:
    """A run from before the stats projection is folded inside its next save, plan body
    included: a body that save had just inserted, read back there and remembered, made
    the retry after a rollback skip it, and the run unreadable (a reviewer's case)."""
    from corral.contracts import Plan, Step
    from corral.events import PlanCreated
    from corral.store import projection

    store = SqlStore.open(tmp_path / "corral.db" if backend == "sqlite" else postgres_url())
    rid, template = f"run_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:8]}"

    def planned(seq: int, tool: str) -> Event:
        plan = Plan(
            plan_id=f"p{seq}", intent="x", steps=[Step(id="s1", tool=tool)], template=template
        )
        at = TIMES[0] + timedelta(seconds=seq)
        return Event(rid, seq, at, EventType.PLAN_CREATED, "plan", payload=PlanCreated(plan))

    run = RunRecord(rid, "trace_1", "test", None, "running", TIMES[0], TIMES[0])
    lookup, other = f"lookup_{template}", f"other_{template}"  # bodies new to a shared database
    store.save(run, [planned(1, lookup)])
    with store.engine.begin() as conn:  # its stats rows gone: stored before the projection
        projection.forget(conn, [rid])
    failing = [True]

    def full_disk(_c: Any, _cur: Any, statement: str, _p: Any, _ctx: Any, _many: bool) -> None:
        if failing and statement.startswith("INSERT INTO corral_run_facts"):
            failing.clear()
            raise sqlite3.OperationalError("database or disk is full (injected)")

    event.listen(store.engine, "before_cursor_execute", full_disk)
    with pytest.raises(Exception, match="injected"):
        store.save(run, [planned(2, other)])  # a new body, then the rollback
    event.remove(store.engine, "before_cursor_execute", full_disk)
    store.save(run, [planned(2, other)])  # the retry
    fresh = SqlStore.open(tmp_path / "corral.db" if backend == "sqlite" else postgres_url())
    tools = [e.payload.plan.steps[0].tool for e in fresh.load_events(rid)]  # type: ignore[attr-defined]
    assert tools == [lookup, other]
    store.engine.dispose()
    fresh.engine.dispose()
