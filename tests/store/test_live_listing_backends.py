"""``GET /runs`` places unsaved live runs among stored ones by SQL counts: on both dialects.

The listing's count of stored rows before a live one (``queries._stored_before``) and the
check of which live runs are saved (``queries._unsaved``) were tested through the server
on SQLite only. PostgreSQL compares ``timestamptz`` and ``varchar`` run ids itself (its
collation, its time zone), so the same page is asked of both here, with runs created at
the same instant to exercise the tie on ``run_id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from corral.server.live_rows import LiveRow
from corral.server.queries import RunFilter, list_runs
from corral.store.base import RunRecord
from corral.store.sql import SqlStore
from tests.extras import postgres_url

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        yield SqlStore.open(tmp_path / "corral.db")
        return
    store = SqlStore.open(postgres_url())
    yield store
    store.engine.dispose()


def _stored(store: SqlStore, agent: str, run_id: str, at: datetime, status: str) -> None:
    record = RunRecord(
        run_id=run_id,
        trace_id=f"trace-{run_id}",
        agent=agent,
        session_id="s",
        status=status,
        created_at=at,
        updated_at=at,
        summary={"status": status},
    )
    store.save(record, [])


def _live(agent: str, run_id: str, at: datetime, status: str = "executing") -> LiveRow:
    return LiveRow(
        run_id=run_id,
        agent=agent,
        status=status,
        intent=None,
        session_id="s",
        trace_id=f"trace-{run_id}",
        created_at=at,
        updated_at=at,
    )


def _ids(store: SqlStore, wanted: RunFilter, live: list[LiveRow]) -> tuple[list[str], int | None]:
    rows, next_offset = list_runs(store, wanted, live)
    return [row["run_id"] for row in rows], next_offset


def test_live_runs_take_their_place_among_stored_ones_on_each_dialect(
    sql_store: SqlStore,
) -> None:
    agent = f"listing-{uuid.uuid4().hex[:12]}"  # the PostgreSQL database is shared
    _stored(sql_store, agent, "run_a", T0, "finished")
    _stored(sql_store, agent, "run_c", T0 + timedelta(seconds=2), "finished")
    _stored(sql_store, agent, "run_e", T0 + timedelta(seconds=2), "executing")
    live = [
        _live(agent, "run_d", T0 + timedelta(seconds=2)),  # the same instant: by id
        _live(agent, "run_b", T0 + timedelta(seconds=1)),
        _live(agent, "run_e", T0 + timedelta(seconds=2)),  # saved already: listed once
    ]
    whole = RunFilter(agent=agent)
    assert _ids(sql_store, whole, live) == (["run_e", "run_d", "run_c", "run_b", "run_a"], None)

    pages = [_ids(sql_store, RunFilter(agent=agent, limit=2, offset=n), live) for n in (0, 2, 4)]
    assert pages == [(["run_e", "run_d"], 2), (["run_c", "run_b"], 4), (["run_a"], None)]

    executing = RunFilter(agent=agent, status="executing")
    assert _ids(sql_store, executing, [r for r in live if r.matches(executing)]) == (
        ["run_e", "run_d", "run_b"],
        None,
    )
    since = RunFilter(agent=agent, since=T0 + timedelta(seconds=1))
    assert _ids(sql_store, since, [r for r in live if r.matches(since)])[0] == [
        "run_e",
        "run_d",
        "run_c",
        "run_b",
    ]
