"""The run row's summary is the run's summary as JSON, whatever state the run is in.

``summary_record`` writes the row's summary out by hand (a generic dump of every save
cost more than the summary itself); these tests hold it to the dump it replaces, value for
value and as JSON text, for runs that finish, pause, ask, hand off, and raise signals.
"""

from __future__ import annotations

import json
from typing import Any

from corral import MemoryStore, Runtime
from corral.contracts import PendingAction, SignalBrief
from corral.runtime.runtime import summarize_run, summary_record
from corral.runtime.state import RunState, fold

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


def _dumped(state: RunState) -> dict[str, Any]:
    return summarize_run(state).model_dump(mode="json", exclude={"handoff"})


def _same(state: RunState) -> None:
    record = summary_record(state)
    assert record == _dumped(state)
    assert json.dumps(record, ensure_ascii=False) == json.dumps(_dumped(state), ensure_ascii=False)


async def test_the_row_of_each_kind_of_run_holds_its_summary(runtime: Runtime) -> None:
    store = runtime.store
    assert isinstance(store, MemoryStore)
    paused = await runtime.start(EXCHANGE)  # steps ran, waits for a confirmation
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
