"""Review of issue 10: the stored format 2 under a retried or repeated save."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, SqlStore, load_agent
from corral.contracts import EventType
from corral.errors import CorralError
from corral.store.base import RunRecord
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


async def _a_run(tmp_path: Path) -> tuple[RunRecord, list]:  # type: ignore[type-arg]
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    memory = MemoryStore()
    summary = await Runtime(agent, memory, effects=FixedEffects()).start(EXCHANGE)
    run = memory.runs[summary.run_id]
    return run, memory.events[summary.run_id]


async def test_a_repeated_save_that_adds_a_plan_keeps_the_plan_body(tmp_path: Path) -> None:
    """A retried flush (some rows stored, more appended) must not drop the plan's steps.

    ``_store_plans`` marks the body stored inside the transaction that an IntegrityError
    then rolls back; the repeat path skips the body and stores a dangling ``steps_ref``.
    """
    run, events = await _a_run(tmp_path)
    plan_at = next(i for i, e in enumerate(events) if e.type is EventType.PLAN_CREATED)
    store = SqlStore.open(tmp_path / "corral.db")
    store.save(run, events[:plan_at])  # the first flush made it
    store.save(run, events[: plan_at + 3])  # the retry repeats it and adds the plan
    fresh = SqlStore.open(tmp_path / "corral.db")
    loaded = fresh.load_events(run.run_id)  # STORE_CORRUPT: plan ... is not stored
    assert [e.type for e in loaded] == [e.type for e in events[: plan_at + 3]]


async def test_a_save_retried_after_a_failed_transaction_keeps_the_plan_body(
    tmp_path: Path,
) -> None:
    """A save that failed after the plan insert (rolled back) and is then retried."""
    run, events = await _a_run(tmp_path)
    store = SqlStore.open(tmp_path / "corral.db")
    calls = {"n": 0}
    upsert = store._upsert_run

    def failing_once(conn, run_, row):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            from sqlalchemy.exc import OperationalError

            raise OperationalError("UPDATE", {}, Exception("database is locked"))
        return upsert(conn, run_, row)

    store._upsert_run = failing_once  # type: ignore[method-assign]
    with pytest.raises(CorralError):  # the caller sees the store fail, retries the flush
        store.save(run, events)
    store.save(run, events)
    loaded = SqlStore.open(tmp_path / "corral.db").load_events(run.run_id)
    assert len(loaded) == len(events)


async def test_one_failed_save_does_not_poison_later_runs_of_the_same_plan(
    tmp_path: Path,
) -> None:
    """A save that rolls back (database locked) and a later, different run of the template.

    The store object remembers the body as stored though the transaction rolled back, so
    every later run of that plan in this process gets a ``steps_ref`` with no body.
    """
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    memory = MemoryStore()
    runtime = Runtime(agent, memory, effects=FixedEffects())
    first = await runtime.start(EXCHANGE)
    second = await runtime.start(EXCHANGE)
    store = SqlStore.open(tmp_path / "corral.db")
    upsert = store._upsert_run

    def locked(conn, run_, row):  # type: ignore[no-untyped-def]
        from sqlalchemy.exc import OperationalError

        raise OperationalError("UPDATE", {}, Exception("database is locked"))

    store._upsert_run = locked  # type: ignore[method-assign]
    with pytest.raises(CorralError):  # that run's flush failed; the process serves others
        store.save(memory.runs[first.run_id], memory.events[first.run_id])
    store._upsert_run = upsert  # type: ignore[method-assign]
    store.save(memory.runs[second.run_id], memory.events[second.run_id])
    loaded = SqlStore.open(tmp_path / "corral.db").load_events(second.run_id)
    assert len(loaded) == len(memory.events[second.run_id])


async def test_purge_leaves_no_data_of_a_purged_run_behind(tmp_path: Path) -> None:
    """``purge`` deletes ended runs past the TTL; their plan bodies stay (never purged).

    A plan with literal arguments (a model's plan, or ``run_plan(Plan(...))``) keeps the
    customer's values in ``corral_plans`` after the run that used them is gone.
    """
    import sqlite3
    from datetime import timedelta

    from corral import Plan, Step

    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store, effects=FixedEffects())
    secret = "HD20240501"
    plan = Plan(plan_id="mine", steps=[Step(id="a", tool="query_order", args={"order_id": secret})])
    summary = await runtime.run_plan(plan)
    assert summary.status.value == "finished"
    later = FixedEffects().now() + timedelta(days=400)
    _, purged = store.purge(later, timedelta(days=30))
    assert purged == [summary.run_id]
    with sqlite3.connect(tmp_path / "corral.db") as db:
        left = [body for (body,) in db.execute("SELECT body FROM corral_plans")]
    assert not any(secret in body for body in left), left


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("plan_created", '{"plan": null, "v": 2}'),
        (  # names an output attempt that is not stored: its data would silently be None
            "step_finished",
            '{"step_id": "s1", "status": "succeeded", "output_attempt": 1, "v": 2,'
            ' "result": {"tool": "t", "status": "success"}}',
        ),
        ("tool_attempt", "[]"),
    ],
)
def test_a_stored_row_that_does_not_fit_is_store_corrupt(
    tmp_path: Path, kind: str, data: str
) -> None:
    """The codec promises STORE_CORRUPT for any row that does not fit its record."""
    import sqlite3

    from corral.errors import StoreCorruptError

    store = SqlStore.open(tmp_path / "corral.db")
    with sqlite3.connect(tmp_path / "corral.db") as db:
        db.execute(
            "INSERT INTO corral_events (run_id, seq, ts, type, stage, data) "
            "VALUES ('r', 1, '2026-01-01 00:00:00', ?, 'plan', ?)",
            (kind, data),
        )
    with pytest.raises(StoreCorruptError):
        store.load_events("r")
