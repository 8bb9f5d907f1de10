"""``Runtime.run_plan``: a plan given by the caller runs as a message-started run does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral import (
    Agent,
    EventType,
    Plan,
    RunStatus,
    Runtime,
    SqlStore,
    Step,
    StepStatus,
    load_agent,
)
from corral.errors import ErrorCode, InvalidArgumentError, PlanInvalidError
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli, exchange_count

ORDER = {"order_id": "HD20240501"}


def _agent(home: Path) -> Agent:
    return load_agent(AFTERSALES, data_dir=home / "data" / "aftersales")


async def test_a_plan_with_no_confirmation_runs_without_a_message_or_an_intent(
    tmp_path: Path,
) -> None:
    runtime = Runtime(_agent(tmp_path), SqlStore.open(tmp_path / "corral.db"))
    summary = await runtime.run_plan("repair", entities=ORDER)  # reads, then books the repair
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"
    assert [s.status for s in summary.steps] == [StepStatus.SUCCEEDED] * 4
    assert summary.intent is None and summary.reply
    events = await runtime.events(summary.run_id)
    kinds = [e.type for e in events]
    assert events[0].type is EventType.RUN_STARTED and events[0].data["entry"] == "plan"
    assert EventType.INTENT_CLASSIFIED not in kinds and EventType.USER_MESSAGE not in kinds
    routed = next(e for e in events if e.type is EventType.ROUTED).data["decision"]
    assert routed["intent"] == "报修" and routed["template"] == "repair"  # the one intent using it
    assert "given by the caller" in routed["reason"]


async def test_a_write_plan_pauses_and_resumes_in_a_new_runtime(tmp_path: Path) -> None:
    db = tmp_path / "corral.db"
    agent = _agent(tmp_path)
    first = Runtime(agent, SqlStore.open(db), effects=FixedEffects())
    paused = await first.run_plan("exchange", entities=ORDER)
    assert paused.status is RunStatus.AWAITING_CONFIRM
    assert paused.pending is not None and paused.pending.step_id == "s4"
    assert "HD20240501" in (paused.reply or "")  # the plan's own confirmation prompt
    assert exchange_count(agent) == 0
    second = Runtime(_agent(tmp_path), SqlStore.open(db))  # another process, same file
    done = await second.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    assert "换新单 EX" in (done.reply or "")  # the intent's reply, as a message run gets
    assert exchange_count(agent) == 1


async def test_a_sessions_yes_approves_a_plan_run_with_what_its_steps_found(
    tmp_path: Path,
) -> None:
    """The "yes" is the run's first message: it must not wipe the facts its reads wrote.

    It did: a message arriving at a run with no goal made a new memory, so the write's
    business rule could not be judged and the reply's template lost its facts (handoff).
    """
    agent = _agent(tmp_path)
    runtime = Runtime(agent, SqlStore.open(tmp_path / "corral.db"))
    paused = await runtime.run_plan("exchange", entities=ORDER, session_id="desk-1")
    assert paused.status is RunStatus.AWAITING_CONFIRM and exchange_count(agent) == 0
    done = await runtime.start("是的", session_id="desk-1")
    assert done.run_id == paused.run_id
    assert done.status is RunStatus.FINISHED and done.outcome == "success", done.error_code
    assert "换新单 EX" in (done.reply or "") and exchange_count(agent) == 1


def test_show_traces_and_replay_read_a_plan_run(tmp_path: Path) -> None:
    import asyncio

    runtime = Runtime(_agent(tmp_path), SqlStore.open(tmp_path / "corral.db"))
    summary = asyncio.run(runtime.run_plan("repair", entities=ORDER))
    shown = corral_cli(tmp_path, "show", summary.run_id).stdout
    assert "given by the caller" in shown and "query_policy" in shown
    traces = corral_cli(tmp_path, "traces", summary.run_id, "--json").stdout
    records = [json.loads(line) for line in traces.splitlines()]
    assert [r["event"] for r in records[:3]] == ["run_started", "entities_merged", "routed"]
    assert records[2]["input_summary"] == "报修" and records[2]["output_summary"] == "plan"
    replayed = corral_cli(tmp_path, "replay", summary.run_id, "--json").stdout
    assert json.loads(replayed)["same_path"] is True


async def test_an_invalid_plan_is_refused_before_any_run_or_tool(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store)
    looping = Plan(
        plan_id="mine",
        steps=[
            Step(
                id="a",
                tool="query_order",
                args={"order_id": "$b.result.order_id"},
                depends_on=["b"],
            ),
            Step(
                id="b",
                tool="create_exchange_order",
                args={"order_id": "$a.result.order_id", "reason": "x"},
                depends_on=["a"],
            ),
        ],
    )
    with pytest.raises(PlanInvalidError) as caught:
        await runtime.run_plan(looping, entities=ORDER)
    assert caught.value.code is ErrorCode.PLAN_INVALID and "cycle" in caught.value.message
    unbound = Plan(plan_id="mine", steps=[Step(id="a", tool="query_order", args={})])
    with pytest.raises(PlanInvalidError, match="order_id"):
        await runtime.run_plan(unbound)
    assert store.list_runs() == [] and exchange_count(agent) == 0


async def test_an_unknown_template_or_entity_has_a_stable_code(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(_agent(tmp_path), store)
    with pytest.raises(PlanInvalidError, match="no plan template named 'refund'") as caught:
        await runtime.run_plan("refund")
    assert caught.value.code is ErrorCode.PLAN_INVALID and "exchange" in caught.value.message
    with pytest.raises(InvalidArgumentError, match="unknown entity 'order'"):
        await runtime.run_plan("repair", entities={"order": "HD20240501"})
    with pytest.raises(PlanInvalidError, match="unknown intent"):
        await runtime.run_plan("repair", intent="nope")
    assert store.list_runs() == []


async def test_a_plan_value_runs_its_own_steps_even_when_it_names_a_template(
    tmp_path: Path,
) -> None:
    agent = _agent(tmp_path)
    runtime = Runtime(agent, SqlStore.open(tmp_path / "corral.db"))
    first_step_only = Plan(
        plan_id="mine",
        intent="exchange",
        template="exchange",
        steps=agent.config.plans["exchange"].steps[:1],
    )
    summary = await runtime.run_plan(first_step_only, entities=ORDER)
    assert [s.id for s in summary.steps] == ["s1"] and summary.status is RunStatus.FINISHED
    assert exchange_count(agent) == 0


def test_run_plan_from_the_shell_then_resume(tmp_path: Path) -> None:
    out = corral_cli(
        tmp_path,
        "run-plan",
        str(AFTERSALES),
        "exchange",
        "--entity",
        "order_id=HD20240501",
        "--json",
    ).stdout
    paused = json.loads(out)
    assert paused["status"] == "awaiting_confirm" and paused["intent"] is None
    done = corral_cli(tmp_path, "resume", paused["run_id"], "--approve", "--json").stdout
    assert json.loads(done)["status"] == "finished"
    unknown = corral_cli(tmp_path, "run-plan", str(AFTERSALES), "refund", ok=False)
    assert unknown.returncode == 2 and "PLAN_INVALID" in unknown.stderr
