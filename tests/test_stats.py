"""``run_stats`` and ``corral stats``: figures from SQL over the stats projection.

Runs with known outcomes (a success, a partial completion, a handoff after a failed tool,
a paused run and a resumed one) go through the runtime onto a SQLite file; the figures
must be exactly what those runs did, the memory store (aggregating in Python) must give
the same numbers for the same runs, and a store written before the projection existed
must be backfilled to the same numbers. Exact stage timings, on every backend, are in
``tests/store/test_stats_backends.py``.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from corral import Event, EventType, MemoryStore, Runtime
from corral.observe.stats import RunStats, run_stats
from corral.store.base import Store
from corral.store.facts import before, event_facts
from corral.store.sql import SqlStore
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.helpers import build_agent, corral_cli
from tests.test_partial import TOOLS, plan

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


async def known_runs(store: Store) -> dict[str, str]:
    """Five runs of known outcome; returns what each one is -> its run id."""
    effects = FixedEffects()

    def runtime(steps: list[dict[str, object]]) -> Runtime:
        return Runtime(build_agent(TOOLS, steps), store, effects=effects)

    one = [{"id": "s1", "tool": "order", "args": {"n": 1}}]
    confirm = [{"id": "s1", "tool": "order", "args": {"n": 1}, "requires_confirmation": True}]
    ids = {
        "success": (await runtime(one).start("go A1")).run_id,
        "partial": (await runtime(plan("continue")).start("go A1")).run_id,
        "handoff": (await runtime(plan("handoff")).start("go A1")).run_id,
        "paused": (await runtime(confirm).start("go A1")).run_id,
    }
    resumed = await runtime(confirm).start("go A1")
    await runtime(confirm).resume(resumed.run_id, approve=True)
    ids["resumed"] = resumed.run_id
    return ids


def copy_into_memory(store: SqlStore) -> MemoryStore:
    """The same runs (rows, events, packets) in a memory store."""
    memory = MemoryStore()
    for record in store.list_runs(1000):
        events = store.load_events(record.run_id)
        memory.save(record, events, store.get_handoff(record.run_id))
    return memory


async def test_stats_of_known_runs_are_exact(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    ids = await known_runs(store)
    statuses = {name: getattr(store.get_run(rid), "status", None) for name, rid in ids.items()}
    assert statuses == {
        "success": "finished",
        "partial": "finished",
        "handoff": "handed_off",
        "paused": "awaiting_confirm",
        "resumed": "finished",
    }
    report = run_stats(store).model_dump(mode="json")
    assert report["runs"] == 5 and report["ended"] == 4
    assert report["by_status"] == {"awaiting_confirm": 1, "finished": 3, "handed_off": 1}
    assert report["by_outcome"] == {"handoff": 1, "partial": 1, "success": 2}
    assert report["completion_rate"] == 0.5  # 2 successes of 4 ended runs (paused: neither)
    assert report["partial_completion_rate"] == 0.25
    assert report["handoff_rate"] == 0.25
    assert report["handoff_reasons"] == {"TOOL_FAILED": 1}
    assert report["avg_steps"] == round((1 + 3 + 3 + 1 + 1) / 5, 3)
    # order: once per run (the paused one's step waits); points: once in partial and handoff
    assert report["tool_calls"] == {"order": 4, "points": 2}
    assert report["avg_tool_calls"] == round(6 / 5, 3)
    assert report["tool_failures"] == {
        "total": 2,
        "by_tool": {"points": 2},
        "by_error_code": {"TOOL_FAILED": 2},
    }
    assert set(report["tool_p95_ms"]) == {"order", "points"}
    assert {"intent", "route", "plan", "execute", "run"} <= set(report["stage_p95_ms"])
    assert all(
        report["stage_p50_ms"][s] <= report["stage_p95_ms"][s] for s in report["stage_p50_ms"]
    )
    assert report["model_calls"] == 0 and report["tokens"] == {"input": 0, "output": 0}


async def test_the_memory_store_gives_the_same_numbers(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    await known_runs(store)
    memory = copy_into_memory(store)
    assert run_stats(memory) == run_stats(store)
    assert run_stats(memory, agent="test") == run_stats(store, agent="test")
    assert run_stats(memory, agent="other").runs == run_stats(store, agent="other").runs == 0


async def test_no_runs_give_zero_counts_and_null_rates(tmp_path: Path) -> None:
    report = run_stats(SqlStore.open(tmp_path / "corral.db"))
    assert report.runs == 0 and report.completion_rate is None and report.avg_steps is None
    assert report == run_stats(MemoryStore())


async def test_since_and_agent_select_runs(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    await known_runs(store)  # FixedEffects: created on 2026-11-29 just after 10:00
    assert run_stats(store, since=T0).runs == 5
    assert run_stats(store, since=T0 + timedelta(hours=1)).runs == 0
    assert run_stats(store, since=T0.replace(tzinfo=None)).runs == 5  # naive: UTC
    assert run_stats(store, agent="test").runs == 5
    assert run_stats(store, agent="nobody").runs == 0


async def test_figures_add_up_counts_past_int64_without_failing(tmp_path: Path) -> None:
    """Found by a hostile walkthrough: one run that stored a token count near int64 (a
    hostile endpoint's usage) made every later `corral stats` fail: SQLite's sum
    overflowed ("integer overflow", reported as STORE_UNAVAILABLE)."""
    path = tmp_path / "corral.db"
    store = SqlStore.open(path)
    await known_runs(store)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE corral_run_facts SET input_tokens = 9223372036854775000")
    figures = run_stats(store)
    assert figures.runs == 5 and figures.tokens.input > 9e18 * 4


# ---------------------------------------------------------------------- projection upkeep


def drop_projection(path: Path) -> None:
    """Make ``path`` a home written before the projection, so before schema migrations too."""
    with sqlite3.connect(path) as db:
        for table in ("corral_run_facts", "corral_step_facts", "alembic_version"):
            db.execute(f"DROP TABLE {table}")


async def test_a_store_written_before_the_projection_is_backfilled(tmp_path: Path) -> None:
    path = tmp_path / "corral.db"
    store = SqlStore.open(path)
    await known_runs(store)
    expected = run_stats(store)
    store.engine.dispose()
    drop_projection(path)
    reopened = SqlStore.open(path)  # the migrations bring the tables back, empty
    assert reopened.ensure_facts() == 5
    assert run_stats(reopened) == expected
    assert reopened.ensure_facts() == 0  # once


async def test_a_run_paused_before_the_projection_is_whole_after_resume(tmp_path: Path) -> None:
    """Resumed after an upgrade, its first save finds no facts: they are made from all events."""
    path = tmp_path / "corral.db"
    store = SqlStore.open(path)
    effects = FixedEffects()
    confirm = [{"id": "s1", "tool": "order", "args": {"n": 1}, "requires_confirmation": True}]
    paused = await Runtime(build_agent(TOOLS, confirm), store, effects=effects).start("go A1")
    store.engine.dispose()
    drop_projection(path)
    reopened = SqlStore.open(path)
    agent = build_agent(TOOLS, confirm)
    await Runtime(agent, reopened, effects=effects).resume(paused.run_id, approve=True)
    report = run_stats(reopened)
    assert report.runs == 1 and report.by_status == {"finished": 1}
    assert report == run_stats(copy_into_memory(reopened))


async def test_a_repeated_save_counts_once(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    ids = await known_runs(store)
    before = run_stats(store)
    rid = ids["handoff"]
    record = store.get_run(rid)
    assert record is not None
    store.save(record, store.load_events(rid))  # an identical repeat of every event
    assert run_stats(store) == before


async def test_purged_runs_leave_the_figures(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    await known_runs(store)
    _, purged = store.purge(T0 + timedelta(days=400), timedelta(days=30))
    assert len(purged) == 4  # every ended run; the paused one stays
    report = run_stats(store)
    assert report.runs == 1 and report.by_status == {"awaiting_confirm": 1}
    assert report.tool_failures.total == 0


# ---------------------------------------------------------------------- the command line


def test_corral_stats_json_in_a_subprocess(tmp_path: Path) -> None:
    home = tmp_path / "home"
    exchange = "我的打印机坏了，订单号 HD20240501，能换新吗"
    corral_cli(home, "run", str(AFTERSALES), exchange, "--json")
    corral_cli(home, "run", str(AFTERSALES), "你好", "--json")
    done = corral_cli(home, "stats", "--json")
    report = json.loads(done.stdout)  # one JSON object, nothing else
    assert RunStats.model_validate(report)
    assert report["runs"] == 2 and report["ended"] == 1
    assert report["by_status"] == {"awaiting_confirm": 1, "finished": 1}
    # the greeting was answered directly (outcome reply): complete; the exchange is paused
    assert report["completion_rate"] == 1.0 and report["handoff_rate"] == 0.0
    assert report["tool_failures"]["total"] == 0
    assert "execute" in report["stage_p95_ms"] and "query_order" in report["tool_p95_ms"]
    assert json.loads(corral_cli(home, "stats", "--json", "--agent", "nobody").stdout)["runs"] == 0
    future = json.loads(corral_cli(home, "stats", "--json", "--since", "2999-01-01").stdout)
    assert future["runs"] == 0 and future["completion_rate"] is None
    table = corral_cli(home, "stats", "--since", "7d").stdout
    assert "completion rate" in table and "query_order" in table


def test_corral_stats_on_an_empty_home_reads_zero_and_creates_nothing(tmp_path: Path) -> None:
    report = json.loads(corral_cli(tmp_path, "stats", "--json").stdout)
    assert report["runs"] == 0 and report["completion_rate"] is None
    assert not (tmp_path / "corral.db").exists()


def test_corral_stats_refuses_a_bad_since_with_a_code(tmp_path: Path) -> None:
    done = corral_cli(tmp_path, "stats", "--since", "yesterday", "--json", ok=False)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "INVALID_INPUT"


# ---------------------------------------------------------------------- saves in parts

STEP = st.tuples(
    st.integers(min_value=0, max_value=5_000),  # ms since the event before
    st.sampled_from(["intent", "route", "plan", "execute", "verify", "reply", "run"]),
    st.sampled_from(["reply", "pause", "go on", "attempt"]),
)


def made(steps: list[tuple[int, str, str]]) -> list[Event]:
    """Events at known times: replies, pauses, resumptions and tool attempts."""
    out, at = [], T0
    for seq, (gap, stage, kind) in enumerate(steps, 1):
        at += timedelta(milliseconds=gap)
        if kind == "reply":
            out.append(Event("run_p", seq, at, EventType.REPLY, stage, data={"text": "x"}))
        elif kind == "attempt":
            attempt = {"step_id": "s1", "tool": "t", "attempt": seq, "status": "error"}
            data = {**attempt, "duration_ms": float(gap), "error_code": "TOOL_FAILED"}
            out.append(Event("run_p", seq, at, EventType.TOOL_ATTEMPT, stage, data=data))
        else:
            to = "awaiting_user" if kind == "pause" else "executing"
            data = {"from": "executing", "to": to}
            out.append(Event("run_p", seq, at, EventType.STATUS_CHANGED, stage, data=data))
    return out


@given(st.lists(STEP, min_size=1, max_size=30), st.data())
def test_facts_added_save_by_save_equal_the_facts_of_the_whole_run(
    steps: list[tuple[int, str, str]], data: st.DataObject
) -> None:
    """What a store adds per save (each part after the event before it) is the whole's."""
    events = made(steps)
    cuts = sorted(
        data.draw(st.sets(st.integers(1, len(events) - 1), max_size=4)) if len(events) > 1 else []
    )
    whole = event_facts(events)
    stage_ms: dict[str, float] = {}
    tools = []
    for start, end in zip([0, *cuts], [*cuts, len(events)], strict=True):
        prior = before(events[start - 1]) if start else None
        part = event_facts(events[start:end], prior)
        for stage, value in part.stage_ms.items():
            stage_ms[stage] = stage_ms.get(stage, 0.0) + value
        tools += part.tools
    assert stage_ms == whole.stage_ms
    assert tools == whole.tools
    paused_gaps = sum(
        gap for (gap, _, _), (_, _, kind) in zip(steps[1:], steps, strict=False) if kind == "pause"
    )
    assert sum(whole.stage_ms.values()) == sum(gap for gap, _, _ in steps[1:]) - paused_gaps
