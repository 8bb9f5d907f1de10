"""Review 10b: format 3 across saves, stores and processes.

A format-3 row leaves out what an earlier row *of the same save* says. A run's rows reach
the store in several saves (a write persists before it is entered; a resumed run is saved
by another process), so every split of one run's log into saves must read back the same.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import (
    Agent,
    MemoryStore,
    Runtime,
    SqlStore,
    ToolPolicy,
    TransientToolError,
    parse_config,
    tool,
)
from corral.effects import LiveEffects
from corral.events import Event, tool_attempts
from corral.store.base import RunRecord
from corral.testing import FixedEffects
from tests.extras import postgres_url
from tests.one_intent import one_intent

FLAKY: list[int] = []


class Found(BaseModel):
    total: float


class Paid(BaseModel):
    paid: float


@tool
async def look(order_id: str) -> Found:
    """Fails once (transient), then answers: two attempts, the output in the second."""
    FLAKY.append(1)
    if len(FLAKY) == 1:
        raise TransientToolError("busy")
    return Found(total=12.5)


@tool(policy=ToolPolicy(kind="write"))
async def pay(amount: float) -> Paid:
    """A write: the run is persisted before it is entered (a save boundary)."""
    return Paid(paid=amount)


async def one_run() -> tuple[RunRecord, list[Event]]:
    FLAKY.clear()
    steps = [
        {"id": "s1", "tool": "look", "args": {"order_id": "$entities.order_id"}},
        {"id": "s2", "tool": "pay", "args": {"amount": "$s1.result.total"}, "depends_on": ["s1"]},
    ]
    agent = Agent.build(parse_config(one_intent("go", steps=steps)), [look, pay])
    store = MemoryStore(max_ended_runs=None)
    runtime = Runtime(agent, store, effects=FixedEffects())
    summary = await runtime.start("go A123")
    assert summary.outcome == "success", summary
    record = store.get_run(summary.run_id)
    assert record is not None
    return record, list(store.load_events(summary.run_id))


def renamed(record: RunRecord, events: list[Event], run_id: str) -> tuple[RunRecord, list[Event]]:
    moved = [Event(run_id, e.seq, e.ts, e.type, e.stage, payload=e.payload) for e in events]
    return replace(record, run_id=run_id), moved


def shape(events: list[Event]) -> list[Any]:
    return [(e.seq, e.type, e.stage, e.payload) for e in events]


def check_splits(
    store: SqlStore, record: RunRecord, events: list[Event], cuts: list[list[int]]
) -> None:
    for cut in cuts:
        run_id = f"r10b-{uuid.uuid4().hex[:10]}"
        rec, moved = renamed(record, events, run_id)
        bounds = [0, *cut, len(moved)]
        for start, end in pairwise(bounds):
            if end > start:
                store.save(rec, moved[start:end])
        assert shape(store.load_events(run_id)) == shape(moved), f"saves split at {cut}"


async def test_every_split_into_two_saves_reads_back_the_same_on_sqlite(tmp_path: Path) -> None:
    record, events = await one_run()
    store = SqlStore.open(tmp_path / "r.db")
    check_splits(store, record, events, [[k] for k in range(1, len(events))])
    # and read by a fresh store object (another process: no per-process state)
    again = SqlStore.open(tmp_path / "r.db")
    for run in again.list_runs(limit=1000):
        assert [e.seq for e in again.load_events(run.run_id)] == [e.seq for e in events]


async def test_random_three_way_splits_on_sqlite(tmp_path: Path) -> None:
    record, events = await one_run()
    rng = random.Random(10)
    cuts = [sorted(rng.sample(range(1, len(events)), 2)) for _ in range(30)]
    check_splits(SqlStore.open(tmp_path / "r.db"), record, events, cuts)


async def test_every_split_into_two_saves_reads_back_the_same_on_postgres() -> None:
    record, events = await one_run()
    store = SqlStore.open(postgres_url())
    check_splits(store, record, events, [[k] for k in range(1, len(events))])


CONFIRMED: list[float] = []


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True))
async def refund(amount: float) -> Paid:
    """A write that waits for the person: the run is saved, paused, and resumed elsewhere."""
    CONFIRMED.append(amount)
    return Paid(paid=amount)


async def paused_then_resumed(target: str) -> None:
    FLAKY.clear()
    CONFIRMED.clear()
    steps = [
        {"id": "s1", "tool": "look", "args": {"order_id": "$entities.order_id"}},
        {
            "id": "s2",
            "tool": "refund",
            "args": {"amount": "$s1.result.total"},
            "depends_on": ["s1"],
        },
    ]
    agent = Agent.build(parse_config(one_intent("go", steps=steps)), [look, refund])
    first = Runtime(agent, SqlStore.open(target), effects=LiveEffects())
    asked = await first.start("go A123")
    assert asked.status.value == "awaiting_confirm"
    # another process (a fresh store object, a fresh runtime) approves
    second = Runtime(agent, SqlStore.open(target), effects=LiveEffects())
    done = await second.resume(asked.run_id, approve=True)
    assert (done.outcome, CONFIRMED) == ("success", [12.5])
    # a third reads the whole log back: the same as what the second folded
    events = SqlStore.open(target).load_events(asked.run_id)
    state = await second.load_state(asked.run_id)
    assert [s.status.value for s in state.steps.values()] == ["succeeded", "succeeded"]
    # look's first attempt failed and was retried; refund's only attempt is its step_finished
    attempts = tool_attempts(e.payload for e in events)
    assert [(a.tool, a.attempt) for a in attempts] == [
        ("look", 1),
        ("look", 2),
        ("refund", 1),
    ]
    finished = [e.payload for e in events if e.type.value == "step_finished"]
    assert [f.result.data for f in finished] == [{"total": 12.5}, {"paid": 12.5}]


async def test_a_run_paused_and_resumed_by_another_store_object_on_sqlite(tmp_path: Path) -> None:
    await paused_then_resumed(str(tmp_path / "r.db"))


async def test_a_run_paused_and_resumed_by_another_store_object_on_postgres() -> None:
    await paused_then_resumed(postgres_url())
