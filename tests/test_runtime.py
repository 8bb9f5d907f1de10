"""The after-sales agent end to end, in process: pauses, resumes, crashes, sessions, log."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, StepStatus
from corral.errors import RunNotFoundError, RunNotResumableError
from corral.events import unfolded
from corral.runtime.machine import check_transition
from corral.runtime.runtime import summarize_run
from corral.runtime.state import fold
from corral.testing import FixedEffects
from corral.tools.context import ToolContext
from corral.tools.spec import ToolSpec
from tests.helpers import exchange_count

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


async def test_exchange_in_warranty_pauses_then_creates_exactly_one_order(
    runtime: Runtime, aftersales: Agent
) -> None:
    paused = await runtime.start(EXCHANGE)
    assert paused.status is RunStatus.AWAITING_CONFIRM
    assert paused.intent is not None and paused.intent.label == "申请换新"
    assert paused.pending is not None and paused.pending.step_id == "s4"
    assert "HD20240501" in (paused.reply or "") and "2029-05-01" in (paused.reply or "")
    assert exchange_count(aftersales) == 0
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    assert "换新单 EX" in (done.reply or "")
    assert exchange_count(aftersales) == 1
    again = await runtime.resume(paused.run_id, approve=True)  # a double click
    assert again.status is RunStatus.FINISHED and again.reply == done.reply
    with pytest.raises(RunNotResumableError):
        await runtime.resume(paused.run_id, approve=False)
    with pytest.raises(RunNotResumableError):
        await runtime.resume(paused.run_id)
    assert exchange_count(aftersales) == 1


async def test_rejection_cancels_without_a_write(runtime: Runtime, aftersales: Agent) -> None:
    paused = await runtime.start(EXCHANGE)
    done = await runtime.resume(paused.run_id, approve=False)
    assert done.outcome == "cancelled" and exchange_count(aftersales) == 0
    assert {s.id: s.status for s in done.steps}["s4"] is StepStatus.SKIPPED


async def test_out_of_warranty_is_refused_with_the_reason(runtime: Runtime) -> None:
    summary = await runtime.start("Can I get a replacement for my scanner? Order HD20230315.")
    assert summary.status is RunStatus.FINISHED and summary.outcome == "refused"
    assert "2024-03-15" in (summary.reply or "") and "cannot be exchanged" in (summary.reply or "")


async def test_missing_order_id_is_asked_for_then_the_answer_continues(runtime: Runtime) -> None:
    asked = await runtime.start("我想申请换新，显示器突然黑屏了")
    assert asked.status is RunStatus.AWAITING_USER
    assert asked.pending is not None and asked.pending.slot == "order_id"
    assert asked.steps == []  # nothing ran
    answered = await runtime.resume(asked.run_id, answer="订单号是 HD20250920")
    assert answered.status is RunStatus.AWAITING_CONFIRM


async def test_an_answer_without_the_value_is_asked_again_then_handed_off(
    runtime: Runtime,
) -> None:
    asked = await runtime.start("我想申请换新")
    again = await runtime.resume(asked.run_id, answer="我不记得了")
    assert again.status is RunStatus.AWAITING_USER
    final = await runtime.resume(again.run_id, answer="真的不知道")
    assert final.status is RunStatus.HANDED_OFF
    assert final.handoff is not None and final.handoff.reason_code == "MISSING_ARGUMENT"
    assert final.handoff.user_messages == ["我想申请换新", "我不记得了", "真的不知道"]


async def test_complaint_is_handed_off_and_no_tool_runs(runtime: Runtime) -> None:
    summary = await runtime.start("你们这个打印机真是气死我了！")
    assert summary.status is RunStatus.HANDED_OFF and summary.steps == []
    events = runtime.store.load_events(summary.run_id)
    assert not any(e.type is EventType.TOOL_ATTEMPT for e in events)
    assert summary.handoff is not None and summary.handoff.reason_code == "POLICY_HANDOFF"


async def test_chitchat_and_gibberish(runtime: Runtime) -> None:
    chat = await runtime.start("Hello! Nice weather today, isn't it?")
    assert chat.status is RunStatus.FINISHED and chat.outcome == "reply"
    assert (chat.reply or "").startswith("Hi!")
    unclear = await runtime.start("asdfgh 啊啊啊 ？？？")
    assert unclear.status is RunStatus.AWAITING_USER
    assert unclear.intent is not None and unclear.intent.label is None
    assert "没太明白" in (unclear.reply or "")


async def test_clarification_answer_is_classified_afresh(runtime: Runtime) -> None:
    unclear = await runtime.start("嗯嗯嗯")
    clarified = await runtime.resume(unclear.run_id, answer="打印机保修多久")
    assert clarified.status is RunStatus.FINISHED
    assert clarified.intent is not None and clarified.intent.label == "咨询"
    assert "60 个月" in (clarified.reply or "")


async def test_unknown_order_gets_an_answer_not_a_guess(runtime: Runtime) -> None:
    summary = await runtime.start("换新，订单 HD99999999")
    assert summary.outcome == "not_found" and "HD99999999" in (summary.reply or "")


async def test_resume_errors_are_specific(runtime: Runtime) -> None:
    with pytest.raises(RunNotFoundError):
        await runtime.resume("run_nope", approve=True)
    paused = await runtime.start(EXCHANGE)
    with pytest.raises(RunNotResumableError, match="confirmation"):
        await runtime.resume(paused.run_id, answer="yes")
    asked = await runtime.start("我想申请换新")
    with pytest.raises(RunNotResumableError, match="answer"):
        await runtime.resume(asked.run_id, approve=True)


class Crash(BaseException):
    """Stands for the process dying (kill -9) right after a tool's side effect."""


class CrashAfterWrite(FixedEffects):
    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        result = await super().call_tool(spec, args, context, timeout_s)
        if spec.policy.kind == "write":
            raise Crash("process killed after the write, before it was recorded")
        return result


async def test_crash_after_a_write_then_resume_never_writes_twice(aftersales: Agent) -> None:
    store = MemoryStore()
    first = Runtime(aftersales, store, effects=FixedEffects())
    paused = await first.start(EXCHANGE)
    crashing = Runtime(aftersales, store, effects=CrashAfterWrite())
    with pytest.raises(Crash):
        await crashing.resume(paused.run_id, approve=True)
    assert exchange_count(aftersales) == 1
    state = fold(paused.run_id, store.load_events(paused.run_id))
    assert state.steps["s4"].status is StepStatus.RUNNING  # the log knows it was in flight
    recovered = await Runtime(aftersales, store, effects=FixedEffects()).resume(paused.run_id)
    assert recovered.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1
    assert (recovered.reply or "").count("EX") == 1


async def test_an_approval_retried_after_its_drive_died_picks_the_run_up(
    aftersales: Agent,
) -> None:
    """Found by a walkthrough: the retried approval answered the run as it was left
    (``executing``, the old confirmation prompt as its reply) and did not recover it."""
    store = MemoryStore()
    paused = await Runtime(aftersales, store, effects=FixedEffects()).start(EXCHANGE)
    step = paused.pending.step_id if paused.pending else None
    crashing = Runtime(aftersales, store, effects=CrashAfterWrite())
    with pytest.raises(Crash):
        await crashing.resume(paused.run_id, approve=True, step_id=step)
    retried = await Runtime(aftersales, store, effects=FixedEffects()).resume(
        paused.run_id, approve=True, step_id=step
    )
    assert retried.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1  # entered once, counted by the tool
    assert (retried.reply or "").count("EX") == 1
    with pytest.raises(RunNotResumableError):  # a reject now conflicts, as before
        await Runtime(aftersales, store, effects=FixedEffects()).resume(
            paused.run_id, approve=False, step_id=step
        )


async def test_sessions_carry_an_open_question_to_the_next_message(aftersales: Agent) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("I want a replacement for my monitor", session_id="chat-1")
    assert asked.status is RunStatus.AWAITING_USER
    follow = await runtime.start("It's HD20250920", session_id="chat-1")
    assert follow.run_id == asked.run_id
    assert follow.status is RunStatus.AWAITING_CONFIRM
    session = runtime.store.get_session("chat-1", FixedEffects().now())
    assert session is not None and session.entities["order_id"] == "HD20250920"
    # the run now waits for a yes or no: the next message still reaches it
    assert session.open_run_id == asked.run_id and len(session.turns) == 1


async def test_the_log_alone_rebuilds_the_run(runtime: Runtime) -> None:
    paused = await runtime.start(EXCHANGE)
    done = await runtime.resume(paused.run_id, approve=True)
    events = runtime.store.load_events(done.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert summarize_run(fold(done.run_id, events)) == done
    status = RunStatus.PARSING
    for event in events:
        if event.type is EventType.STATUS_CHANGED:
            check_transition(status, RunStatus(event.data["to"]))
            status = RunStatus(event.data["to"])
    # What a timeline needs: start and end of every step, every attempt.
    kinds = [e.type for e in events]
    assert kinds.count(EventType.STEP_STARTED) == kinds.count(EventType.STEP_FINISHED) == 5
    # each step's tool answered at once: its step_finished stands for its one attempt
    assert kinds.count(EventType.TOOL_ATTEMPT) == 0
    assert [e.type for e in unfolded(events)].count(EventType.TOOL_ATTEMPT) == 5
    assert [s.attempts for s in done.steps] == [1] * 5


TIMINGS = frozenset({"duration_ms", "active_s"})
"""The only event fields measured from the machine rather than decided by the run."""


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _lane(event: Any) -> str:
    """The step an event belongs to (a tool's fact belongs to its step), else ``run``."""
    if event.type is EventType.FACT_WRITTEN and event.data.get("source") == "tool":
        return str(event.data["origin"])
    return str(event.data.get("step_id") or "run")


def ordered_path(events: list[Any]) -> tuple[list[Any], list[list[str]]]:
    """The run's events in log order, with timings dropped, and the concurrent windows.

    What the runtime guarantees: everything is in one fixed order, except that steps
    running at the same time (their tools run in worker threads) may interleave. Within
    a step its events keep their order, and steps start in plan order. So each stretch
    of log during which two or more steps overlap is regrouped step by step, in the
    order they started; every other event stays exactly where it was logged.
    """
    path: list[Any] = []
    windows: list[list[str]] = []
    stretch: list[tuple[str, Any]] = []
    open_steps: set[str] = set()
    started: list[str] = []

    def flush() -> None:
        if len(started) > 1:
            windows.append(list(started))
        path.extend(item for lane in started for got, item in stretch if got == lane)
        stretch.clear()
        started.clear()

    for event in events:
        lane = _lane(event)
        item = (event.type.value, event.stage, _without_timings(event.data))
        if event.type is EventType.STEP_STARTED:
            if not open_steps:
                flush()
            open_steps.add(lane)
            started.append(lane)
        if lane in started:
            stretch.append((lane, item))
            if event.type in (EventType.STEP_FINISHED, EventType.STEP_SKIPPED):
                open_steps.discard(lane)
            continue
        flush()
        path.append(item)
    flush()
    return path, windows


async def test_same_message_same_path(aftersales: Agent) -> None:
    """Two runs of one message log the same events, in the same order, as far as the
    runtime orders them (see ``ordered_path``): s2 and s3 run at the same time."""
    runs = []
    for _ in range(2):
        runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
        summary = await runtime.start("Can I get a replacement for my scanner? Order HD20230315.")
        runs.append(ordered_path(runtime.store.load_events(summary.run_id)))
    (first, windows), (second, _) = runs
    assert windows == [["s2", "s3"]]
    assert first == second
    started = [data["step_id"] for kind, _, data in first if kind == "step_started"]
    assert started == ["s1", "s2", "s3"]


async def test_allow_list_is_enforced_again_at_execution(aftersales: Agent) -> None:
    """Defence in depth: even a log whose route was tampered with cannot run the write."""
    from dataclasses import replace

    store = MemoryStore()
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    paused = await runtime.start(EXCHANGE)
    forged = []
    for event in store.events[paused.run_id]:
        if event.type is EventType.ROUTED:
            decision = dict(event.data["decision"])
            decision["allowed_tools"] = [
                t for t in decision["allowed_tools"] if t != "create_exchange_order"
            ]
            event = replace(event, data={"decision": decision})
        forged.append(event)
    store.events[paused.run_id] = forged
    done = await runtime.resume(paused.run_id, approve=True)
    assert {s.id: s.error_code for s in done.steps}["s4"] == "TOOL_NOT_ALLOWED"
    assert done.status is RunStatus.HANDED_OFF
    assert exchange_count(aftersales) == 0
