"""Schema revision 0003: a store at 0002 keeps its events and its figures when upgraded.

Revision 0003 moves each run's stage rows (of corral's own stages) into columns of its
run facts, and on SQLite rewrites the text timestamps of events and facts as integer
microseconds. A store written at 0002 (format-3 events, stage rows, text times) is built
here with the migrations up to 0002 and rows as that corral wrote them, then upgraded:
the same events, the same ``corral stats`` figures, and the new stored form.
PostgreSQL runs with CORRAL_TEST_PG_URL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from corral.runtime.state import fold
from corral.store import migrate, schema
from corral.store.sql import SqlStore
from tests.store.test_migrations import engine_of, two_databases

__all__ = ["two_databases"]  # the fixture, used by name below

PAUSED_V3 = Path(__file__).parents[1] / "fixtures" / "events_v3_paused.json"
RUN = "run_000001"
STAGE_ROWS = {"intent": 20.0, "execute": 100.0, "plan": 0.0, "custom": 7.5}
"""The stage rows stored at 0002; ``custom`` is no stage of corral's: it keeps its row."""


def _when(value: str, sqlite: bool) -> Any:
    """A time as the 0002 corral bound it: SQLAlchemy's SQLite text, or a datetime."""
    return value if sqlite else datetime.fromisoformat(value).replace(tzinfo=UTC)


def revision(engine: Engine) -> str | None:
    """The schema revision, read on a connection given back at once.

    A connection left checked out keeps its transaction (and its lock on the version
    table) open, and the fixture's ``DROP SCHEMA`` then waits for it forever.
    """
    with engine.connect() as conn:
        return schema.state(conn).revision


def _store_at_0002(target: str) -> None:
    """The schema at revision 0002, holding the fixture's run as that corral stored it."""
    engine = engine_of(target)
    sqlite = engine.dialect.name == "sqlite"
    recorded = json.loads(PAUSED_V3.read_text(encoding="utf-8"))
    created = recorded["runs"][0]["created_at"]
    if sqlite:  # as corral made it: a read-only open needs no mode change
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    with engine.begin() as conn:
        migrate.upgrade(conn, "0002")
        for row in recorded["rows"]:
            conn.execute(
                text(
                    "INSERT INTO corral_events (run_id, seq, ts, type, stage, data) "
                    "VALUES (:run_id, :seq, :ts, :type, :stage, :data)"
                ),
                {**row, "ts": _when(row["ts"], sqlite)},
            )
        for run in recorded["runs"]:
            times = {k: _when(run[k], sqlite) for k in ("created_at", "updated_at")}
            names = ", ".join(run)
            marks = ", ".join(f":{name}" for name in run)
            insert = f"INSERT INTO corral_runs ({names}) VALUES ({marks})"
            conn.execute(text(insert), {**run, **times})
        for plan in recorded["plans"]:
            conn.execute(text("INSERT INTO corral_plans (hash, body) VALUES (:hash, :body)"), plan)
        conn.execute(
            text(
                "INSERT INTO corral_run_facts (run_id, agent, status, intent, outcome, "
                "error_code, steps, tool_calls, model_calls, input_tokens, output_tokens, "
                "cost, created_at, updated_at) VALUES (:r, 'aftersales', 'awaiting_confirm', "
                "'申请换新', NULL, NULL, 5, 1, 0, 0, 0, 0.0, :at, :at)"
            ),
            {"r": RUN, "at": _when(created, sqlite)},
        )
        step = (
            "INSERT INTO corral_step_facts (run_id, kind, name, seq, status, error_code, "
            "duration_ms, agent, created_at) VALUES (:r, :kind, :name, :seq, :status, NULL, "
            ":ms, 'aftersales', :at)"
        )
        rows = [
            {"kind": "stage", "name": name, "seq": 0, "status": None, "ms": ms}
            for name, ms in STAGE_ROWS.items()
        ]
        tool = {"kind": "tool", "name": "lookup_order", "seq": 9, "status": "success", "ms": 3}
        rows.append(tool)
        conn.execute(text(step), [{"r": RUN, "at": _when(created, sqlite), **r} for r in rows])
    engine.dispose()


def test_a_0002_store_upgrades_to_stage_columns_and_keeps_its_figures(
    two_databases: tuple[str, str],
) -> None:
    target, _ = two_databases
    _store_at_0002(target)
    engine = engine_of(target)
    sqlite = engine.dialect.name == "sqlite"
    assert revision(engine) == "0002"
    store = SqlStore.open(target, upgrade=True)
    assert revision(engine) == schema.HEAD
    events = store.load_events(RUN)
    assert len(events) == 27 and fold(RUN, events).status.value == "awaiting_confirm"
    recorded = json.loads(PAUSED_V3.read_text(encoding="utf-8"))["rows"]
    assert [e.ts for e in events] == [_when(row["ts"], sqlite=False) for row in recorded]
    assert events[0].ts == datetime(2026, 11, 29, 10, 0, 0, 2000, tzinfo=UTC)
    figures = store.figures()
    assert figures.runs == 1 and figures.tool_calls == 1 and figures.steps == 5
    assert figures.stage_ms[50] == STAGE_ROWS == figures.stage_ms[95]
    assert figures.tool_ms[50] == {"lookup_order": 3.0}
    with engine.connect() as conn:
        left = conn.execute(text("SELECT name FROM corral_step_facts WHERE kind = 'stage'"))
        assert [row[0] for row in left] == ["custom"]  # corral's own stages: columns now
        moved = conn.execute(
            text(
                "SELECT stage_intent_ms, stage_execute_ms, stage_plan_ms, stage_run_ms "
                "FROM corral_run_facts"
            )
        ).one()
        assert tuple(moved) == (20.0, 100.0, 0.0, None)
        if sqlite:
            kinds = conn.execute(
                text(
                    "SELECT DISTINCT typeof(ts) FROM corral_events UNION "
                    "SELECT DISTINCT typeof(created_at) FROM corral_step_facts UNION "
                    "SELECT DISTINCT typeof(updated_at) FROM corral_run_facts"
                )
            )
            assert [row[0] for row in kinds] == ["integer"]
    engine.dispose()
    store.engine.dispose()


def test_stage_columns_and_rows_over_two_saves_give_the_memory_stores_figures(
    two_databases: tuple[str, str],
) -> None:
    """A stage of corral's in a column, another in a row: both added to by a later save."""
    from datetime import timedelta

    from corral.contracts import EventType
    from corral.events import Event
    from corral.observe.stats import run_stats
    from corral.store.base import RunRecord
    from corral.store.memory import MemoryStore

    target, _ = two_databases
    sql, memory = SqlStore.open(target), MemoryStore()
    start = datetime(2026, 11, 30, 9, tzinfo=UTC)
    for n in (1, 2, 3):
        rid = f"run_two_saves_{n}"

        def reply(seq: int, ms: int, stage: str, rid: str = rid) -> Event:
            at = start + timedelta(milliseconds=ms)
            return Event(rid, seq, at, EventType.REPLY, stage, data={"text": "x", "template": "t"})

        first = [reply(1, 0, "run"), reply(2, 3 * n, "decide"), reply(3, 5 * n, "mine")]
        second = [reply(4, 11 * n, "mine"), reply(5, 17 * n, "decide"), reply(6, 19 * n, "run")]
        for batch in (first, second):
            record = RunRecord(rid, "t", "two", None, "executing", start, batch[-1].ts, {})
            sql.save(record, batch)
            memory.save(record, batch)
    found, folded = run_stats(sql), run_stats(memory)
    assert (found.stage_p50_ms, found.stage_p95_ms) == (folded.stage_p50_ms, folded.stage_p95_ms)
    assert found.stage_p50_ms == {"decide": 18.0, "mine": 16.0, "run": 4.0}
    with sql.engine.connect() as conn:
        stages = "SELECT DISTINCT name FROM corral_step_facts WHERE kind = 'stage'"
        rows = conn.execute(text(stages))
        assert [row[0] for row in rows] == ["mine"]  # "decide" and "run": columns
    sql.engine.dispose()


def test_a_read_only_0002_store_answers_stats_from_its_events(tmp_path: Path) -> None:
    """Not migrated (it cannot be written), its facts have the older shape: stats fold."""
    from corral.observe.stats import run_stats
    from corral.store.memory import MemoryStore

    path = tmp_path / "old.db"
    _store_at_0002(str(path))
    store = SqlStore.open(path, read_only=True)
    record = store.get_run(RUN)
    assert record is not None and revision(store.engine) == "0002"
    memory = MemoryStore()
    memory.save(record, store.load_events(RUN))
    found = run_stats(store)
    assert found == run_stats(memory) and found.runs == 1
    assert set(found.stage_p50_ms) >= {"intent", "plan", "execute"}
    assert run_stats(store, since=datetime(2100, 1, 1, tzinfo=UTC)).runs == 0
    store.engine.dispose()
