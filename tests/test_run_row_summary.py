"""The run row's summary is the run's summary as JSON, whatever state the run is in.

``summary_record`` writes the row's summary out by hand (a generic dump of every save
cost more than the summary itself); these tests hold it to the dump it replaces, value for
value and as JSON text, for runs that finish, pause, ask, hand off, and raise signals.

``summarize_run`` validates the summary whole from plain values (one pydantic call instead
of one per brief); the same runs hold it to the summary built brief by brief, as it was
built before: equal, with the same fields set, the same types and the same JSON.
"""

from __future__ import annotations

import json
from typing import Any

from corral import MemoryStore, Runtime
from corral.contracts import (
    IntentBrief,
    PendingAction,
    RunSummary,
    SignalBrief,
    StepBrief,
)
from corral.runtime.runtime import summarize_run, summary_record
from corral.runtime.state import RunState, fold

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


def _dumped(state: RunState) -> dict[str, Any]:
    return summarize_run(state).model_dump(mode="json", exclude={"handoff"})


def _brief_by_brief(state: RunState) -> RunSummary:
    """The summary as corral built it before: each brief a model of its own."""
    intent = state.intent
    return RunSummary(
        run_id=state.run_id,
        trace_id=state.trace_id,
        status=state.status,
        intent=IntentBrief(label=intent.label, confidence=intent.confidence, source=intent.source)
        if intent
        else None,
        steps=[
            StepBrief(
                id=s.id,
                tool=s.tool_used or s.tool,
                status=s.status,
                attempts=s.attempts,
                duration_ms=s.duration_ms,
                error_code=s.error_code,
            )
            for s in state.steps.values()
        ],
        reply=state.reply,
        handoff=state.handoff,
        pending=state.pending,
        outcome=state.outcome,
        error_code=state.error_code,
        signals=list(state.signals),
    )


def _same_summary(state: RunState) -> None:
    summary, before = summarize_run(state), _brief_by_brief(state)
    assert summary == before
    assert summary.model_fields_set == before.model_fields_set
    assert summary.model_dump_json() == before.model_dump_json()
    assert type(summary.status) is type(before.status)
    assert (summary.intent is None) == (before.intent is None)
    if summary.intent is not None and before.intent is not None:
        assert summary.intent.model_fields_set == before.intent.model_fields_set
        assert type(summary.intent.confidence) is type(before.intent.confidence)
    for step, was in zip(summary.steps, before.steps, strict=True):
        assert type(step) is StepBrief and step.model_fields_set == was.model_fields_set
        assert type(step.status) is type(was.status)
        assert type(step.duration_ms) is type(was.duration_ms)
    assert summary.handoff is before.handoff and summary.pending is before.pending
    assert all(a is b for a, b in zip(summary.signals, before.signals, strict=True))


def _same(state: RunState) -> None:
    record = summary_record(state)
    assert record == _dumped(state)
    assert json.dumps(record, ensure_ascii=False) == json.dumps(_dumped(state), ensure_ascii=False)
    _same_summary(state)


async def test_the_row_of_each_kind_of_run_holds_its_summary(runtime: Runtime) -> None:
    store = runtime.store
    assert isinstance(store, MemoryStore)
    paused = await runtime.start(EXCHANGE)  # steps ran, waits for a confirmation
    waiting = fold(paused.run_id, store.load_events(paused.run_id))
    _same(waiting)
    assert summarize_run(waiting) == paused  # what ``start`` returned
    done = await runtime.resume(paused.run_id, approve=True)  # a write, then finished
    asked = await runtime.start("我想申请换新")  # waits for an answer, no step
    handed = await runtime.start("你们这个打印机真是气死我了！")  # handed off, a packet
    chat = await runtime.start("Hello! Nice weather today, isn't it?")  # a canned reply
    for summary in (done, asked, handed, chat):
        state = fold(summary.run_id, store.load_events(summary.run_id))
        row = store.runs[summary.run_id].summary
        assert row == _dumped(state)
        assert row["status"] == summary.status.value
        _same(state)
        assert summarize_run(state) == summary
    steps = store.runs[done.run_id].summary["steps"]
    assert [step["id"] for step in steps] == ["s1", "s2", "s3", "s4", "s5"]
    assert all(isinstance(step["duration_ms"], float) for step in steps)
    assert store.runs[asked.run_id].summary["pending"]["kind"] == "answer"


def test_pending_actions_and_signals_are_written_as_the_dump_writes_them() -> None:
    state = RunState(run_id="run_1", trace_id="trace_1")
    _same(state)  # nothing understood yet: no intent, no steps
    state.pending = PendingAction(kind="confirm", prompt="确认吗？", step_id="s4")
    state.signals = [
        SignalBrief(kind="need_replan", outcome="replanned", reason="s2 failed", step_id="s2"),
        SignalBrief(kind="budget_low", outcome="continue"),
    ]
    state.outcome, state.error_code, state.reply = "handoff", "TOOL_FAILED", "转人工"
    _same(state)
