"""The stored event format: typed payloads, format 2, and logs written before it.

``fixtures/events_v1_aftersales.json`` holds the rows corral 8a5b4af (format 1, no ``v``)
stored for an aftersales exchange: paused for confirmation, approved, finished;
``events_v1_paused.json`` the same exchange still paused. This corral must still read,
fold, show, log, replay and resume them.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from corral import (
    Agent,
    EventType,
    MemoryStore,
    RunStatus,
    RunSummary,
    Runtime,
    SqlStore,
    StepStatus,
    load_agent,
)
from corral.errors import ErrorCode, StoreCorruptError
from corral.events import Event, PlanCreated, StepFinished, ToolAttempt, stamped, tool_attempts
from corral.observe.logs import log_records
from corral.observe.trace_ids import otel_trace_id
from corral.observe.tree import run_tree
from corral.runtime.replay import replay_run
from corral.runtime.state import fold
from corral.store.codec import FORMAT, TYPE_CODES, event_type
from corral.testing import FixedEffects
from tests.helpers import aftersales_as_the_fixtures_were_written, corral_cli, exchange_count

FIXTURE = Path(__file__).parent / "fixtures" / "events_v1_aftersales.json"
PAUSED = Path(__file__).parent / "fixtures" / "events_v1_paused.json"
"""The same exchange, as it stood paused for confirmation (events and the run row)."""
PAUSED_V2 = Path(__file__).parent / "fixtures" / "events_v2_paused.json"
"""The same exchange paused, as corral 902e70a stored it (format 2: rows, run row, plan)."""
PAUSED_V3 = Path(__file__).parent / "fixtures" / "events_v3_paused.json"
"""The same exchange paused, as corral c6c1a75 stored it (format 3, ``v`` in every row)."""
PAUSED_V4 = Path(__file__).parent / "fixtures" / "events_v4_paused.json"
"""The same exchange paused, as corral 6c961a9 stored it (format 4, ``v`` once per save,
a step's and an attempt's usual status left out), the last commit before format 5."""
EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


def as_written(tmp_path: Path) -> Path:
    """The aftersales example as the fixtures' runs met it (a copy under ``tmp_path``)."""
    return aftersales_as_the_fixtures_were_written(tmp_path / "aftersales")


def old_home(home: Path, fixture: Path = FIXTURE) -> tuple[SqlStore, str]:
    """A home whose database holds the fixture's rows exactly as the old corral wrote them."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqlStore.open(home / "corral.db")
    recorded = json.loads(fixture.read_text(encoding="utf-8"))
    with sqlite3.connect(home / "corral.db") as db:
        db.executemany(
            "INSERT INTO corral_events (run_id, seq, ts, type, stage, data) "
            "VALUES (:run_id, :seq, :ts, :type, :stage, :data)",
            recorded["rows"],
        )
        for run in recorded.get("runs", []):
            names = ", ".join(run)
            marks = ", ".join(f":{name}" for name in run)
            db.execute(f"INSERT INTO corral_runs ({names}) VALUES ({marks})", run)
        db.executemany(
            "INSERT INTO corral_plans (hash, body) VALUES (:hash, :body)",
            recorded.get("plans", []),
        )
    return store, recorded["rows"][0]["run_id"]


def rows_of(path: Path, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Each stored row's type (its name, whether stored by code or by name) and data."""
    with sqlite3.connect(path) as db:
        query = "SELECT type, data FROM corral_events WHERE run_id = ? ORDER BY seq"
        rows = db.execute(query, (run_id,))
        return [(event_type(kind).value, json.loads(data)) for kind, data in rows]


def test_a_log_written_before_format_2_still_folds_to_the_same_run(tmp_path: Path) -> None:
    store, run_id = old_home(tmp_path / "home")
    events = store.load_events(run_id)
    assert len(events) == 53 and all(e.payload.kind is e.type for e in events)
    state = fold(run_id, events)
    assert state.status is RunStatus.FINISHED and state.outcome == "success"
    assert state.intent is not None and state.intent.label == "申请换新"
    assert state.plan is not None and [s.id for s in state.plan.steps] == [
        "s1",
        "s2",
        "s3",
        "s4",
        "s5",
    ]
    assert all(step.status is StepStatus.SUCCEEDED for step in state.steps.values())
    assert state.steps["s1"].data is not None and state.steps["s1"].data["order_id"] == "HD20240501"
    assert state.confirmations == {"s4": True} and state.reply and "换新单 EX" in state.reply
    # The old shape is still what ``data`` shows: every key the old rows had is there.
    old = json.loads(FIXTURE.read_text(encoding="utf-8"))["rows"]
    for event, row in zip(events, old, strict=True):
        assert json.loads(row["data"]).items() <= event.data.items(), event.type


def test_a_log_written_before_format_2_renders_logs_and_replays(tmp_path: Path) -> None:
    store, run_id = old_home(tmp_path / "home")
    events = store.load_events(run_id)
    lines = log_records(events)
    assert [line["event"] for line in lines] == [e.type.value for e in events]
    assert {line["trace_id"] for line in lines} == {otel_trace_id("trace_000002")}  # OTel form
    finished = [line for line in lines if line["event"] == "step_finished"]
    assert [line["level"] for line in finished] == ["info"] * 5
    tree = run_tree(fold(run_id, events), events=events)
    assert tree.label is not None and "finished" in str(tree.label)
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    report = asyncio_run(replay_run(agent, events))
    assert report.same_path, report


async def test_a_run_paused_by_an_older_corral_resumes_and_writes_once(tmp_path: Path) -> None:
    """A run left awaiting confirmation before an upgrade is approved after it."""
    store, run_id = old_home(tmp_path / "home", PAUSED)
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    runtime = Runtime(agent, store, effects=FixedEffects())
    waiting = await runtime.summary(run_id)
    assert waiting.status is RunStatus.AWAITING_CONFIRM and waiting.pending is not None
    done = await runtime.resume(run_id, approve=True, step_id=waiting.pending.step_id)
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    assert exchange_count(agent) == 1 and "换新单 EX" in (done.reply or "")
    rows = rows_of(tmp_path / "home" / "corral.db", run_id)
    assert [data.get("v") for _, data in rows[:33]] == [None] * 33  # the old rows, untouched
    # the new ones: this format, stated by the first row of each save
    assert rows[33][1]["v"] == FORMAT and {d.get("v") for _, d in rows[33:]} <= {FORMAT, None}
    assert (await replay_run(agent, store.load_events(run_id))).same_path


def test_corral_show_and_traces_read_an_old_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _, run_id = old_home(home)
    shown = corral_cli(home, "show", run_id).stdout
    assert "query_order" in shown and "create_exchange_order" in shown and "finished" in shown
    traces = corral_cli(home, "traces", run_id).stdout
    assert "step_finished" in traces and "run_finished" in traces


async def test_format_2_stores_a_plan_once_and_a_tools_output_once(tmp_path: Path) -> None:
    path = tmp_path / "corral.db"
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    runtime = Runtime(agent, SqlStore.open(path), effects=FixedEffects())
    first = await runtime.start(EXCHANGE)
    second = await runtime.start(EXCHANGE)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM corral_plans").fetchone() == (1,)
    rows = rows_of(path, first.run_id)
    assert rows[0][1]["v"] == FORMAT and {d.get("v") for _, d in rows} <= {FORMAT, None}
    [(_, plan_row)] = [(k, d) for k, d in rows if k == "plan_created"]
    assert "steps" not in plan_row["plan"] and plan_row["plan"]["steps_ref"]
    # format 4: a step's usual status ("succeeded") is left out of its row
    finished = [d for k, d in rows if k == "step_finished" and "status" not in d]
    # every step's tool answered at its first attempt: no tool_attempt row, and the
    # step_finished that stands for it (sole_attempt) holds the output, once
    assert not [d for k, d in rows if k == "tool_attempt"]
    assert finished and all("data" in d["result"] for d in finished)
    assert all(d["sole_attempt"] is True and "output_attempt" not in d for d in finished)
    plans = []
    for run_id in (first.run_id, second.run_id):
        events = runtime.store.load_events(run_id)
        [plan] = [e.payload for e in events if isinstance(e.payload, PlanCreated)]
        plans.append(plan.plan)
        outputs = {
            attempt.step_id: attempt.data
            for attempt in tool_attempts(e.payload for e in events)
            if attempt.status == "success"
        }
        for event in events:
            if isinstance(event.payload, StepFinished) and event.payload.result is not None:
                assert event.payload.result.data == outputs[event.payload.step_id]
    assert plans[0].steps == plans[1].steps and len(plans[0].steps) == 5
    assert plans[0].steps[0].tool == "query_order" and plans[0].plan_id != plans[1].plan_id
    state = await runtime.load_state(first.run_id)
    assert state.status is RunStatus.AWAITING_CONFIRM and state.steps["s1"].data is not None
    done = await runtime.resume(first.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and done.outcome == "success"


async def test_a_stored_run_folds_to_the_state_the_live_run_had(tmp_path: Path) -> None:
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store, effects=FixedEffects())
    paused = await runtime.start(EXCHANGE)
    done = await runtime.resume(paused.run_id, approve=True)
    events = store.load_events(done.run_id)
    again = Runtime(agent, SqlStore.open(tmp_path / "corral.db"), effects=FixedEffects())
    assert (await again.summary(done.run_id)) == done
    assert (await replay_run(agent, events)).same_path


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ('{"v": 2}', "text"),
        ('{"v": 99, "text": "hi"}', "format 99"),
        ("[1, 2]", "holds no object"),
    ],
)
def test_a_stored_row_that_does_not_fit_is_store_corrupt(
    tmp_path: Path, data: str, says: str
) -> None:
    store, run_id = old_home(tmp_path / "home")
    with sqlite3.connect(tmp_path / "home" / "corral.db") as db:
        db.execute(
            "UPDATE corral_events SET data = ? WHERE run_id = ? AND type = 'user_message'",
            (data, run_id),
        )
    with pytest.raises(StoreCorruptError) as caught:
        store.load_events(run_id)
    assert caught.value.code is ErrorCode.STORE_CORRUPT and says in caught.value.message


def test_a_deprecated_event_type_still_folds(tmp_path: Path) -> None:
    store, run_id = old_home(tmp_path / "home")
    with sqlite3.connect(tmp_path / "home" / "corral.db") as db:
        (last,) = db.execute(
            "SELECT max(seq) FROM corral_events WHERE run_id = ?", (run_id,)
        ).fetchone()
        db.execute(  # the next event, as a corral that still wrote the type would have
            "INSERT INTO corral_events VALUES (?, ?, '2026-11-29 10:00:01', "
            "'stage_started', 'plan', '{\"stage\": \"plan\"}')",
            (run_id, last + 1),
        )
    events = store.load_events(run_id)
    assert events[-1].type is EventType.STAGE_STARTED
    assert events[-1].data == {"stage": "plan"}
    assert fold(run_id, events).status is RunStatus.FINISHED


def test_events_built_from_data_as_before_still_work() -> None:
    """Outside code that builds ``Event(..., data={...})`` gets the typed payload."""
    from datetime import UTC, datetime

    event = Event("run_1", 1, datetime.now(UTC), EventType.USER_MESSAGE, "intent", {"text": "hi"})
    assert event.payload.kind is EventType.USER_MESSAGE and event.data == {"text": "hi"}
    status = Event("run_1", 2, event.ts, EventType.STATUS_CHANGED, "run", {"from": "a", "to": "b"})
    assert status.data == {"from": "a", "to": "b", "reason": "", "active_s": 0.0}
    with pytest.raises(ValueError, match="text"):  # data that does not fit its record
        Event("run_1", 3, event.ts, EventType.USER_MESSAGE, "intent", {"txt": "hi"})
    agent_type: type[Agent] = Agent  # the public names still import
    assert agent_type.__name__ == "Agent"


def asyncio_run(coroutine: Any) -> Any:
    import asyncio

    return asyncio.run(coroutine)


async def test_the_live_path_passes_typed_values_without_revalidating_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between corral's own layers nothing is dumped to a dict and validated again: the
    fold takes the ``IntentResult``, ``RouteDecision``, ``Plan`` and ``ToolResult`` as made."""
    from corral.contracts import IntentResult, Plan, RouteDecision, ToolResult

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("validated again on the live path")

    for model in (IntentResult, RouteDecision, Plan, ToolResult):
        monkeypatch.setattr(model, "model_validate", classmethod(refuse))
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE)
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    events = await runtime.events(done.run_id)
    [plan] = [e.payload for e in events if isinstance(e.payload, PlanCreated)]
    assert (
        plan.plan.steps is agent.template_graphs[("申请换新", plan.plan.template or "")].plan.steps
    )


def paused_home(
    tmp_path: Path, fixture: Path
) -> tuple[SqlStore, str, list[dict[str, Any]], Agent, Runtime]:
    """A home holding the fixture's paused exchange, and a runtime of aftersales on it."""
    store, run_id = old_home(tmp_path / "home", fixture)
    old_rows = json.loads(fixture.read_text(encoding="utf-8"))["rows"]
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    return store, run_id, old_rows, agent, Runtime(agent, store, effects=FixedEffects())


async def approved(
    tmp_path: Path, runtime: Runtime, run_id: str
) -> tuple[RunSummary, list[tuple[str, dict[str, Any]]]]:
    """Approve the paused exchange: its summary (finished, one exchange) and every row."""
    waiting = await runtime.summary(run_id)
    assert waiting.status is RunStatus.AWAITING_CONFIRM and waiting.pending is not None
    done = await runtime.resume(run_id, approve=True, step_id=waiting.pending.step_id)
    assert done.status is RunStatus.FINISHED and exchange_count(runtime.agent) == 1
    return done, rows_of(tmp_path / "home" / "corral.db", run_id)


async def test_a_run_paused_in_format_2_resumes_and_appends_format_4(tmp_path: Path) -> None:
    """A store written by the previous corral (format 2) opens, resumes and replays."""
    store, run_id, old_rows, agent, runtime = paused_home(tmp_path, PAUSED_V2)
    record = store.get_run(run_id)
    assert record is not None and record.summary["status"] == "awaiting_confirm"
    assert [s["id"] for s in record.summary["steps"]] == ["s1", "s2", "s3", "s4", "s5"]
    events = store.load_events(run_id)
    assert [e.stage for e in events] == [row["stage"] for row in old_rows]
    for event, row in zip(events, old_rows, strict=True):
        stored = json.loads(row["data"])
        plain = {k: v for k, v in stored.items() if k != "v" and not isinstance(v, dict)}
        assert all(event.data[k] == v for k, v in plain.items()), event.type
    done, rows = await approved(tmp_path, runtime, run_id)
    count = len(old_rows)
    assert {data.get("v") for _, data in rows[:count]} == {2}
    assert rows[count][1]["v"] == FORMAT == 5
    assert {data.get("v") for _, data in rows[count:]} <= {FORMAT, None}
    assert (await replay_run(agent, store.load_events(run_id))).same_path
    assert store.get_run(run_id) is not None and (await runtime.summary(run_id)) == done


async def test_a_run_paused_in_format_3_resumes_and_appends_format_4(tmp_path: Path) -> None:
    """A store written by format-3 corral folds, resumes, and its new rows state 4 once."""
    store, run_id, old_rows, agent, runtime = paused_home(tmp_path, PAUSED_V3)
    events = store.load_events(run_id)
    state = fold(run_id, events)
    assert state.status is RunStatus.AWAITING_CONFIRM and state.plan is not None
    assert [e.type.value for e in events] == [row["type"] for row in old_rows]
    attempts = [e.payload for e in events if isinstance(e.payload, ToolAttempt)]
    assert attempts and {a.status for a in attempts} == {"success"}  # stated in format 3
    done, rows = await approved(tmp_path, runtime, run_id)
    count = len(old_rows)
    assert {data.get("v") for _, data in rows[:count]} == {3}
    stated = [data.get("v") for _, data in rows[count:]]
    assert stated[0] == FORMAT == 5 and set(stated) == {FORMAT, None}  # once per save
    assert stated.count(None) > len(stated) // 2
    new_finished = [d for k, d in rows[count:] if k == "step_finished"]
    assert new_finished and all("status" not in d for d in new_finished)  # "succeeded": usual
    assert all(d["sole_attempt"] for d in new_finished)  # no tool_attempt row of their own
    reread = store.load_events(run_id)
    assert [e.payload for e in reread[:count]] == [e.payload for e in events]
    assert {e.payload.status for e in reread if isinstance(e.payload, ToolAttempt)} == {"success"}
    assert (await replay_run(agent, reread)).same_path
    assert (await runtime.summary(run_id)) == done


async def test_a_run_paused_in_format_4_resumes_and_appends_format_5(tmp_path: Path) -> None:
    """A store written by format-4 corral folds as it was, resumes, and replays.

    Format 5 reads a step's end back whole from less (a sole attempt's status, tool and
    duration): the rows format 4 wrote must still say everything they said.
    """
    store, run_id, old_rows, agent, runtime = paused_home(tmp_path, PAUSED_V4)
    events = store.load_events(run_id)
    state = fold(run_id, events)
    assert state.status is RunStatus.AWAITING_CONFIRM and state.plan is not None
    assert [e.type.value for e in events] == [event_type(row["type"]).value for row in old_rows]
    assert {json.loads(row["data"]).get("v") for row in old_rows} == {4, None}
    done_steps = [e.payload for e in events if isinstance(e.payload, StepFinished)]
    assert done_steps and all(p.status == "succeeded" for p in done_steps)
    for step in done_steps:  # what format 4 left out (the usual status) is read back
        assert step.result is not None and step.result.tool and step.result.status == "success"
    finished_before = {s.id for s in state.steps.values() if s.status is StepStatus.SUCCEEDED}
    assert finished_before == {p.step_id for p in done_steps}
    done, rows = await approved(tmp_path, runtime, run_id)
    count = len(old_rows)
    assert rows[count][1]["v"] == FORMAT == 5
    reread = store.load_events(run_id)
    assert [e.payload for e in reread[:count]] == [e.payload for e in events]
    assert (await replay_run(agent, reread)).same_path
    assert (await runtime.summary(run_id)) == done


def test_a_row_without_a_version_has_the_format_of_the_row_before_it(tmp_path: Path) -> None:
    """Format 4 states ``v`` once per save; format 1 rows (none stated) keep reading as 1."""
    from datetime import UTC, datetime

    from corral.store.base import RunRecord

    at = datetime(2026, 11, 30, tzinfo=UTC)
    record = RunRecord("run_v", "t", "agent", None, "executing", at, at, {"status": "executing"})
    step = {"step_id": "s1", "tool": "lookup", "args": {}}
    attempt = {"step_id": "s1", "tool": "lookup", "attempt": 1, "status": "success"}
    attempt |= {"duration_ms": 1.5, "data": {"n": 1}}
    made = [
        Event("run_v", 1, at, EventType.STEP_STARTED, "execute", data=step),
        Event("run_v", 2, at, EventType.TOOL_ATTEMPT, "execute", data=attempt),
    ]
    again = {**attempt, "attempt": 2}
    later = [Event("run_v", 3, at, EventType.TOOL_ATTEMPT, "execute", data=again)]
    store = SqlStore.open(tmp_path / "corral.db")
    store.save(record, made)
    store.save(record, later)
    rows = rows_of(tmp_path / "corral.db", "run_v")
    assert [data.get("v") for _, data in rows] == [FORMAT, None, FORMAT]  # once per save
    with sqlite3.connect(tmp_path / "corral.db") as db:
        types = [kind for (kind,) in db.execute("SELECT type FROM corral_events ORDER BY seq")]
    assert types == ["1", "2", "2"]  # by code: step_started, tool_attempt (a name before 4)
    assert {event_type(str(code)) for code in TYPE_CODES.values()} == set(TYPE_CODES)
    assert all("status" not in data for _, data in rows[1:])
    assert store.load_events("run_v") == made + later
    # a format-1 row (every field stated, no ``v``) is not read as the format before it
    with sqlite3.connect(tmp_path / "corral.db") as db:
        db.execute("DELETE FROM corral_events")
        row = ("run_v", 1, "2026-11-30 00:00:00.000000", "tool_attempt", "execute")
        insert = "INSERT INTO corral_events VALUES (?, ?, ?, ?, ?, ?)"
        db.execute(insert, (*row, json.dumps(attempt)))
    [old] = store.load_events("run_v")
    assert isinstance(old.payload, ToolAttempt) and old.payload.status == "success"


async def test_format_3_rows_read_back_as_the_events_that_were_saved(tmp_path: Path) -> None:
    """What a format-3 row leaves out (repeats of earlier rows, usual stages) comes back."""
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    memory = MemoryStore()
    paused = await Runtime(agent, memory, effects=FixedEffects()).start(EXCHANGE)
    await Runtime(agent, memory, effects=FixedEffects()).resume(paused.run_id, approve=True)
    live = memory.load_events(paused.run_id)
    path = tmp_path / "corral.db"
    store = SqlStore.open(path)
    batches = [live[:10], live[10:25], live[25:]]  # saves split where they split
    for batch in batches:
        record = memory.get_run(paused.run_id)
        assert record is not None
        store.save(record, batch)
    assert store.load_events(paused.run_id) == live
    with sqlite3.connect(path) as db:
        stages = [row[0] for row in db.execute("SELECT stage FROM corral_events")]
        summary = db.execute("SELECT summary FROM corral_runs").fetchone()[0]
    assert stages.count("") > len(stages) // 2  # the usual stages are not repeated
    assert json.loads(summary)["~v"] == 1 and store.get_run(paused.run_id) == memory.get_run(
        paused.run_id
    )


def test_format_3_keeps_an_unusual_or_empty_stage_and_a_first_transition(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from corral.events import Reply, StatusChanged
    from corral.store.base import RunRecord

    at = datetime(2026, 11, 30, tzinfo=UTC)
    made = [
        Event("run_x", 1, at, EventType.REPLY, "", payload=Reply("a")),
        Event("run_x", 2, at, EventType.REPLY, "handoff", payload=Reply("b")),
        Event("run_x", 3, at, EventType.REPLY, "reply", payload=Reply("c")),
        Event("run_x", 4, at, EventType.STATUS_CHANGED, "run", payload=StatusChanged("a", "b")),
    ]
    moved = StatusChanged("x", "y")
    later = [Event("run_x", 5, at, EventType.STATUS_CHANGED, "run", payload=moved)]
    store = SqlStore.open(tmp_path / "corral.db")
    record = RunRecord("run_x", "t", "agent", None, "parsing", at, at, {"status": "parsing"})
    store.save(record, made)
    store.save(record, later)  # its ``from`` is not the previous ``to``: a new save keeps it
    assert store.load_events("run_x") == made + later
    assert store.get_run("run_x") == record
    rows = rows_of(tmp_path / "corral.db", "run_x")
    assert [data.get("from") for _, data in rows[3:]] == ["a", "x"]


async def test_an_event_stamped_by_the_journal_is_the_event_the_constructor_makes(
    tmp_path: Path,
) -> None:
    """``stamped`` sets the slots directly: the same event, field for field, and frozen."""
    agent = load_agent(as_written(tmp_path), data_dir=tmp_path / "business")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE)
    await runtime.resume(paused.run_id, approve=True)
    events = await runtime.events(paused.run_id)
    assert len({e.type for e in events}) > 8
    for event in events:
        fields = (event.run_id, event.seq, event.ts, event.type, event.stage)
        made, built = stamped(*fields, event.payload), Event(*fields, payload=event.payload)
        assert type(made) is Event and made == built
        assert made.payload is event.payload and made.as_json() == built.as_json()
        assert [getattr(made, f.name) for f in dataclasses.fields(Event)] == [
            getattr(built, f.name) for f in dataclasses.fields(Event)
        ]
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.seq = 0  # type: ignore[misc]


async def test_a_run_paused_before_the_exchange_once_rule_resumes_under_it(
    tmp_path: Path,
) -> None:
    """A deploy that adds a rule over a fact the paused run never wrote: it goes on."""
    from tests.conftest import AFTERSALES

    store, run_id, _, _, _ = paused_home(tmp_path, PAUSED_V3)
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    runtime = Runtime(agent, store, effects=FixedEffects())
    done = await runtime.resume(run_id, approve=True)
    assert done.status is RunStatus.FINISHED and exchange_count(agent) == 1
