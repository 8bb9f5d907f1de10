"""Review of issue 10: the stored format 2 under a retried or repeated save."""

from __future__ import annotations

from pathlib import Path

from corral import MemoryStore, Runtime, SqlStore, load_agent
from corral.contracts import EventType
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
    try:
        store.save(run, events)
    except Exception:
        pass  # the caller sees the store unavailable and retries the same flush
    store.save(run, events)
    loaded = SqlStore.open(tmp_path / "corral.db").load_events(run.run_id)
    assert len(loaded) == len(events)
