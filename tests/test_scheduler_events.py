"""The exact log a run leaves behind: what each step recorded, in order, with what payload.

The run log is what ``corral logs``, replay, handoff packets and audits read, so its
entries are pinned here value by value on small runs: step ids, statuses, reasons, error
codes and durations. The clock is deterministic (``StepClock``): every reading of the
monotonic clock advances it by the same odd amount, so each tool call lasts exactly
0.1234567 ms and is recorded rounded to the microsecond, 0.123 ms.
"""

from __future__ import annotations

import asyncio
import json
from datetime import date
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, StepStatus, ToolContext, tool
from corral.errors import TransientToolError
from corral.models import ModelRequest, ScriptedModel
from corral.runtime.scheduler import idempotency_key
from corral.testing import FixedEffects
from corral.tools.policy import RetryPolicy, ToolPolicy
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent
from tests.test_runtime import Crash

HANG_S = 5.0
"""How long a tool waits for a partner step that a right schedule runs alongside it."""

TICK_S = 0.0001234567
"""How far the monotonic clock moves on each reading: one call lasts 0.1234567 ms."""

STEP_EVENTS = {
    EventType.STEP_STARTED,
    EventType.TOOL_SELECTED,
    EventType.TOOL_ATTEMPT,
    EventType.OUTCOME_RECONCILED,
    EventType.VERIFIED,
    EventType.STEP_FINISHED,
    EventType.FACT_WRITTEN,
    EventType.STEP_BLOCKED,
    EventType.LOOP_DETECTED,
}


class Value(BaseModel):
    value: int


class StepClock(FixedEffects):
    """FixedEffects whose monotonic clock advances by ``TICK_S`` on every reading."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = 100.0

    def monotonic(self) -> float:
        self.clock += TICK_S
        return self.clock


def assert_plain_json(value: Any, where: str) -> None:
    """Event data holds JSON values only (contracts.Event): no enums, models or tuples."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str, where
            assert_plain_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_plain_json(item, f"{where}[{index}]")
    else:
        assert type(value) in (str, int, float, bool, type(None)), (where, type(value))


async def trail(
    tools: list[ToolSpec], steps: list[dict[str, Any]], message: str = "go", **kwargs: Any
) -> Any:
    """Run ``message`` on a one-intent agent; the summary and the step events as tuples."""
    agent = build_agent(tools, steps, **kwargs)
    runtime = Runtime(agent, MemoryStore(), effects=StepClock())
    summary = await runtime.start(message)
    events = runtime.store.load_events(summary.run_id)
    for event in events:
        assert_plain_json(event.data, f"{event.type.value}#{event.seq}")
    assert json.loads(json.dumps([e.data for e in events])) == [e.data for e in events]
    return summary, [(e.type.value, e.stage, e.data) for e in events if e.type in STEP_EVENTS]


def started(step: str, tool_name: str, args: dict[str, Any] | None = None) -> tuple[Any, ...]:
    return ("step_started", "execute", {"step_id": step, "tool": tool_name, "args": args or {}})


def selected(
    step: str, tool_name: str, candidates: list[str], reason: str = "best ranked"
) -> tuple[Any, ...]:
    data = {
        "step_id": step,
        "tool": tool_name,
        "reason": reason,
        "degraded": False,
        "candidates": candidates,
        "excluded": {},
    }
    return ("tool_selected", "decide", data)


def attempt(step: str, tool_name: str, number: int, status: str, **fields: Any) -> tuple[Any, ...]:
    data = {
        "step_id": step,
        "tool": tool_name,
        "attempt": number,
        "status": status,
        "duration_ms": 0.123,
        "error_code": None,
        "error_message": None,
        "retryable": False,
        "backoff_s": None,
        "data": None,
        "applied": None,
        "in_flight": False,
    }
    return ("tool_attempt", "execute", {**data, **fields})


def verdict(passed: bool, reason: str, code: str | None = None) -> dict[str, Any]:
    """A success check's verdict, as ``step_finished`` carries it (format 2)."""
    return {"passed": passed, "check": "success", "reason": reason, "code": code}


def result(tool_name: str, status: str, summary: str, **fields: Any) -> dict[str, Any]:
    data = {
        "tool": tool_name,
        "status": status,
        "data": None,
        "summary": summary,
        "error_code": None,
        "error_message": None,
        "retryable": False,
        "attempts": 1,
        "duration_ms": 0.123,
    }
    return {**data, **fields}


def finished(
    step: str,
    status: str,
    outcome: dict[str, Any],
    code: str | None,
    reason: str,
    stage: str = "execute",
    verdict: dict[str, Any] | None = None,
    output_attempt: int | None = None,
    sole: bool = False,
) -> tuple[Any, ...]:
    """A ``step_finished``; a successful result's output is the step's attempt 1 unless
    ``output_attempt`` says which (format 2 stores it once, with that attempt). ``sole``:
    the step's tool succeeded at its first and only attempt, which has no ``tool_attempt``
    of its own: this event stands for it, and carries the output."""
    if output_attempt is None and outcome["status"] == "success" and not sole:
        output_attempt = 1
    data = {
        "step_id": step,
        "status": status,
        "result": outcome,
        "error_code": code,
        "reason": reason,
        "duration_ms": outcome["duration_ms"],
        "verdict": verdict,
        "output_attempt": output_attempt,
        "sole_attempt": sole,
    }
    return ("step_finished", stage, data)


@tool
def ok(n: int) -> Value:
    return Value(value=n)


async def test_a_success_and_a_failed_criterion_are_recorded_exactly() -> None:
    summary, events = await trail(
        [ok],
        [
            {"id": "a", "tool": "ok", "args": {"n": 1}, "facts": {"total": "result.value"}},
            {
                "id": "b",
                "tool": "ok",
                "args": {"n": 0},
                "depends_on": ["a"],
                "success": "result.value > 0",
            },
        ],
    )
    assert summary.status is RunStatus.HANDED_OFF
    assert events == [
        started("a", "ok", {"n": 1}),
        finished(
            "a",
            "succeeded",
            result("ok", "success", "ok: value=1", data={"value": 1}),
            None,
            "",
            sole=True,
        ),
        ("fact_written", "memory", {"name": "total", "value": 1, "source": "tool", "origin": "a"}),
        started("b", "ok", {"n": 0}),
        # a step that ends in the verify stage keeps its attempt's event (the tool's time
        # is the execute stage's: ``store.facts``)
        attempt("b", "ok", 1, "success", data={"value": 0}),
        finished(
            "b",
            "failed",
            result("ok", "success", "ok: value=0", data={"value": 0}),
            "SUCCESS_CRITERIA_FAILED",
            "result.value > 0 is false",
            stage="verify",
            verdict=verdict(False, "result.value > 0 is false", "SUCCESS_CRITERIA_FAILED"),
        ),
    ]


async def test_no_result_fails_the_step_with_its_own_code_and_blocks_what_depends_on_it() -> None:
    @tool
    def nothing() -> Value | None:
        return None

    summary, events = await trail(
        [nothing, ok],
        [
            {"id": "s1", "tool": "nothing"},
            {"id": "s2", "tool": "ok", "args": {"n": 1}, "depends_on": ["s1"]},
        ],
    )
    assert [(s.id, s.status, s.error_code) for s in summary.steps] == [
        ("s1", StepStatus.FAILED, "NO_RESULT"),
        ("s2", StepStatus.BLOCKED, "DEPENDENCY_FAILED"),
    ]
    assert events == [
        started("s1", "nothing"),
        attempt("s1", "nothing", 1, "no_result"),
        finished(
            "s1",
            "failed",
            result("nothing", "no_result", "no result"),
            "NO_RESULT",
            "the tool found nothing",
        ),
        (
            "step_blocked",
            "execute",
            {
                "step_id": "s2",
                "reason": "depends on s1, which did not succeed",
                "code": "DEPENDENCY_FAILED",
            },
        ),
    ]


async def test_a_failed_call_records_the_tools_error() -> None:
    @tool
    def broken() -> Value:
        raise ValueError("database is on fire")

    _, events = await trail([broken], [{"id": "s1", "tool": "broken"}])
    message = "ValueError: database is on fire"
    assert events == [
        started("s1", "broken"),
        attempt("s1", "broken", 1, "error", error_code="TOOL_FAILED", error_message=message),
        finished(
            "s1",
            "failed",
            result("broken", "error", message, error_code="TOOL_FAILED", error_message=message),
            "TOOL_FAILED",
            message,
        ),
    ]


async def test_a_fallback_tool_is_recorded_with_why_it_was_chosen() -> None:
    @tool(
        name="primary",
        policy=ToolPolicy(equivalent_group="lookup", latency_ms=10, retry=RetryPolicy(1, (1.0,))),
    )
    def primary() -> Value:
        raise TransientToolError("503", applied=False)

    @tool(name="replica", policy=ToolPolicy(equivalent_group="lookup", latency_ms=500))
    def replica() -> Value:
        return Value(value=42)

    summary, events = await trail([primary, replica], [{"id": "s1", "tool": "primary"}])
    assert summary.status is RunStatus.FINISHED
    both = ["primary", "replica"]
    failure = {
        "error_code": "TOOL_TRANSIENT",
        "error_message": "503",
        "retryable": True,
        "applied": False,
    }
    assert events == [
        started("s1", "primary"),
        attempt("s1", "primary", 1, "error", backoff_s=1.0, **failure),
        attempt("s1", "primary", 2, "error", **failure),
        selected("s1", "replica", both, reason="fallback after primary"),
        attempt("s1", "replica", 3, "success", data={"value": 42}),
        finished(
            "s1",
            "succeeded",
            result("replica", "success", "replica: value=42", data={"value": 42}),
            None,
            "",
            output_attempt=3,
        ),
    ]


async def test_a_write_that_may_have_happened_is_recorded_as_unknown() -> None:
    @tool(policy=ToolPolicy(kind="write"))
    def write() -> Value:
        raise ValueError("socket closed")

    summary, events = await trail([write], [{"id": "w", "tool": "write"}])
    assert summary.steps[0].status is StepStatus.UNKNOWN
    unknown = "TOOL_FAILED: ValueError: socket closed; the write may or may not have happened"
    assert events == [
        started("w", "write"),
        selected("w", "write", ["write"]),
        attempt(
            "w",
            "write",
            1,
            "error",
            error_code="TOOL_FAILED",
            error_message="ValueError: socket closed",
        ),
        finished(
            "w",
            "unknown",
            result("write", "error", unknown, error_code="OUTCOME_UNKNOWN", error_message=unknown),
            "OUTCOME_UNKNOWN",
            unknown,
        ),
    ]


class Ledger:
    """Writes that happened, by idempotency key; what ``cancel`` does depends on ``n``."""

    def __init__(self) -> None:
        self.effects: dict[str, int] = {}

    def find(self, ctx: ToolContext) -> Value | None:
        found = self.effects.get(ctx.idempotency_key)
        return Value(value=found) if found is not None else None


def reconciled_write(ledger: Ledger) -> ToolSpec:
    def find(ctx: ToolContext, n: int) -> Value | None:
        """n = 9: the reconciler itself fails."""
        if n == 9:
            raise ValueError("ledger offline")
        return ledger.find(ctx)

    @tool(policy=ToolPolicy(kind="write"), reconcile=find)
    def cancel(ctx: ToolContext, n: int) -> Value:
        """n = 7: the write happens, then the connection drops; n = 0: it answers; otherwise
        it never acts."""
        if n == 0:
            return Value(value=0)
        if n == 7:
            ledger.effects[ctx.idempotency_key] = n
        raise TransientToolError("connection reset")

    return cancel


RESET = {"error_code": "TOOL_TRANSIENT", "error_message": "connection reset", "retryable": True}


async def test_a_write_that_answered_is_not_reconciled() -> None:
    cancel = reconciled_write(Ledger())
    summary, events = await trail([cancel], [{"id": "w", "tool": "cancel", "args": {"n": 0}}])
    assert summary.status is RunStatus.FINISHED
    # one call, of the write itself (no finder): its step_finished stands for it
    assert [kind for kind, _, _ in events] == ["step_started", "tool_selected", "step_finished"]
    end = events[-1][2]
    assert end["sole_attempt"] is True and end["result"]["tool"] == "cancel"
    assert summary.steps[0].attempts == 1


async def test_a_reconciled_write_that_happened_is_recorded_as_applied() -> None:
    cancel = reconciled_write(Ledger())
    summary, events = await trail([cancel], [{"id": "w", "tool": "cancel", "args": {"n": 7}}])
    assert summary.status is RunStatus.FINISHED
    settled = {"step_id": "w", "tool": "find", "write": "cancel", "status": "applied"}
    assert events == [
        started("w", "cancel", {"n": 7}),
        selected("w", "cancel", ["cancel"]),
        attempt("w", "cancel", 1, "error", **RESET),
        attempt("w", "find", 2, "success", data={"value": 7}),
        ("outcome_reconciled", "verify", {**settled, "reason": "cancel: value=7"}),
        finished(
            "w",
            "succeeded",
            result(
                "cancel",
                "success",
                "cancel: value=7",
                data={"value": 7},
                attempts=2,
                duration_ms=0.246,
            ),
            None,
            "",
            output_attempt=2,
        ),
    ]


async def test_a_reconciled_write_that_never_acted_fails_with_its_own_cause() -> None:
    cancel = reconciled_write(Ledger())
    summary, events = await trail([cancel], [{"id": "w", "tool": "cancel", "args": {"n": 8}}])
    assert summary.steps[0].status is StepStatus.FAILED
    why = "cancel failed (TOOL_TRANSIENT) and find found no effect: not applied"
    settled = {"step_id": "w", "tool": "find", "write": "cancel", "status": "not_applied"}
    # Proven not to have acted, it is entered again (issue 11), within its two retries.
    rounds = [
        event
        for number in (1, 3, 5)
        for event in (
            attempt("w", "cancel", number, "error", **RESET),
            attempt("w", "find", number + 1, "no_result"),
            ("outcome_reconciled", "verify", {**settled, "reason": why}),
        )
    ]
    assert events == [
        started("w", "cancel", {"n": 8}),
        selected("w", "cancel", ["cancel"]),
        *rounds,
        finished(
            "w",
            "failed",
            result(
                "cancel",
                "error",
                why,
                error_code="TOOL_TRANSIENT",
                error_message=why,
                attempts=2,
                duration_ms=0.246,
            ),
            "TOOL_TRANSIENT",
            why,
        ),
    ]


async def test_a_reconciler_that_fails_leaves_the_write_unknown() -> None:
    cancel = reconciled_write(Ledger())
    summary, events = await trail([cancel], [{"id": "w", "tool": "cancel", "args": {"n": 9}}])
    assert summary.steps[0].status is StepStatus.UNKNOWN
    unknown = "TOOL_TRANSIENT: connection reset; the write may or may not have happened"
    settled = {"step_id": "w", "tool": "find", "write": "cancel", "status": "unknown"}
    offline = {"error_code": "TOOL_FAILED", "error_message": "ValueError: ledger offline"}
    assert events == [
        started("w", "cancel", {"n": 9}),
        selected("w", "cancel", ["cancel"]),
        attempt("w", "cancel", 1, "error", **RESET),
        attempt("w", "find", 2, "error", **offline),
        ("outcome_reconciled", "verify", {**settled, "reason": unknown}),
        finished(
            "w",
            "unknown",
            result(
                "cancel",
                "error",
                unknown,
                error_code="OUTCOME_UNKNOWN",
                error_message=unknown,
                attempts=2,
                duration_ms=0.246,
            ),
            "OUTCOME_UNKNOWN",
            unknown,
        ),
    ]


def with_model(
    tools: list[ToolSpec],
    steps: list[dict[str, Any]],
    model: ScriptedModel,
    *,
    planner: str = "template",
) -> Runtime:
    """A ``go`` agent (``build_agent``) that has a model; ``planner="model"`` lets it plan."""
    config = build_agent(tools, steps, intent_tools=[t.name for t in tools]).config
    if planner == "model":
        intent = config.intents[0].model_copy(update={"planner": "model", "plan": None})
        config = config.model_copy(update={"intents": [intent]})
    agent = Agent.build(config, tools, model=model)
    return Runtime(agent, MemoryStore(), effects=StepClock())


@tool
def flaky(n: int) -> Value:
    raise ValueError("provider is down")


def numbered_plans(tool_name: str) -> ScriptedModel:
    """A model whose n-th plan is one step ``r<n>`` calling ``tool_name(n=n)``."""

    def plan(request: ModelRequest) -> str:
        n = len(model.requests)  # new arguments each time: not a loop of identical calls
        return json.dumps({"steps": [{"id": f"r{n}", "tool": tool_name, "args": {"n": n}}]})

    model = ScriptedModel(function=plan)
    return model


async def test_model_plans_are_replanned_at_most_twice_with_the_failure() -> None:
    """Every plan fails; the model would go on planning, but two replans are the limit."""
    model = numbered_plans("flaky")
    runtime = with_model(
        [flaky], [{"id": "s1", "tool": "flaky", "args": {"n": 0}}], model, planner="model"
    )
    summary = await runtime.start("go with 1, 2 or 3")  # the plans' n are said, not invented
    assert summary.status is RunStatus.HANDED_OFF
    assert len(model.requests) == 3  # one plan, two replans
    events = runtime.store.load_events(summary.run_id)
    plans = [e.data for e in events if e.type is EventType.PLAN_CREATED]
    assert [p.get("replan") for p in plans] == [None, 1, 2]
    told = [r.messages[-1].content for r in model.requests]
    assert "failed while running" not in told[0]
    for n, text in enumerate(told[1:], start=1):
        failure = f"step r{n} (flaky) failed with TOOL_FAILED: ValueError: provider is down"
        assert f"The previous plan failed while running: {failure}." in text


async def test_a_plan_that_succeeded_is_not_replanned() -> None:
    model = numbered_plans("ok")
    runtime = with_model(
        [ok], [{"id": "s1", "tool": "ok", "args": {"n": 0}}], model, planner="model"
    )
    summary = await runtime.start("go with 1")
    assert summary.status is RunStatus.FINISHED
    assert len(model.requests) == 1


async def test_a_template_plan_is_never_replanned_by_the_model() -> None:
    model = ScriptedModel([])
    runtime = with_model([flaky], [{"id": "s1", "tool": "flaky", "args": {"n": 0}}], model)
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None and summary.handoff.reason_code == "TOOL_FAILED"
    assert model.requests == []


async def test_a_failed_model_plan_with_an_unknown_write_is_not_replanned() -> None:
    """A new plan could run the write again: a person settles it first."""

    @tool(policy=ToolPolicy(kind="write"))
    def write() -> Value:
        raise ValueError("socket closed")

    plan = {"steps": [{"id": "w", "tool": "write"}, {"id": "f", "tool": "flaky", "args": {"n": 1}}]}
    model = ScriptedModel([json.dumps(plan)])
    runtime = with_model([write, flaky], [{"id": "w", "tool": "write"}], model, planner="model")
    summary = await runtime.start("go with 1")
    statuses = {s.id: s.status for s in summary.steps}
    assert statuses == {"w": StepStatus.UNKNOWN, "f": StepStatus.FAILED}
    assert len(model.requests) == 1


async def test_the_judge_sees_the_criterion_the_tool_and_its_result() -> None:
    """Only a step with a judge asks the model, and a judge that says no fails the step."""
    model = ScriptedModel(['{"passed": false, "reason": "two is too many"}'])
    steps: list[dict[str, Any]] = [
        {"id": "s1", "tool": "ok", "args": {"n": 1}},
        {"id": "s2", "tool": "ok", "args": {"n": 2}, "depends_on": ["s1"], "judge": "small"},
    ]
    runtime = with_model([ok], steps, model)
    summary = await runtime.start("go")
    assert [(s.id, s.status, s.error_code) for s in summary.steps] == [
        ("s1", StepStatus.SUCCEEDED, None),
        ("s2", StepStatus.FAILED, "SUCCESS_CRITERIA_FAILED"),
    ]
    assert [r.purpose for r in model.requests] == ["judge"]
    assert model.requests[0].messages[-1].content == (
        'Criterion: small\nTool: ok\nResult: {"value": 2}'
    )
    events = runtime.store.load_events(summary.run_id)
    verdicts = [e.data["verdict"] for e in events if e.type is EventType.STEP_FINISHED]
    assert verdicts[-1] == {
        "passed": False,
        "check": "success",
        "reason": "judge: two is too many",
        "code": "SUCCESS_CRITERIA_FAILED",
    }


async def test_a_success_criterion_reads_the_arguments_the_facts_and_the_entities() -> None:
    summary, events = await trail(
        [ok],
        [
            {
                "id": "a",
                "tool": "ok",
                "args": {"n": 1},
                "facts": {"total": "result.value"},
                "success": "result.value == args.n",
            },
            {
                "id": "b",
                "tool": "ok",
                "args": {"n": 2},
                "depends_on": ["a"],
                "success": "facts.total == 1",
            },
            {
                "id": "c",
                "tool": "ok",
                "args": {"n": 3},
                "depends_on": ["b"],
                "success": "entities.order_id == 'A7'",
            },
        ],
        message="go A7",
    )
    assert summary.status is RunStatus.FINISHED
    assert [d["verdict"]["reason"] for kind, _, d in events if kind == "step_finished"] == [
        "result.value == args.n is true",
        "facts.total == 1 is true",
        "entities.order_id == 'A7' is true",
    ]


async def test_a_resumed_run_still_counts_the_identical_calls_made_before_the_pause() -> None:
    """Two steps made a call before the run paused; a third identical one after is a loop."""
    calls: list[int] = []

    @tool
    def search(q: str) -> Value:
        calls.append(len(calls))
        return Value(value=len(calls))  # a new answer each time: no repeated state

    agent = build_agent(
        [search],
        [
            {"id": "a", "tool": "search", "args": {"q": "same"}},
            {"id": "b", "tool": "search", "args": {"q": "same"}, "depends_on": ["a"]},
            {
                "id": "c",
                "tool": "search",
                "args": {"q": "same"},
                "depends_on": ["b"],
                "requires_confirmation": True,
            },
        ],
    )
    runtime = Runtime(agent, MemoryStore(), effects=StepClock())
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM and len(calls) == 2
    summary = await runtime.resume(paused.run_id, approve=True)
    assert len(calls) == 2
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"
    assert "by 3 steps (a, b, c)" in summary.handoff.reason


async def test_a_resumed_run_counts_calls_by_the_admitted_tool_not_its_fallback() -> None:
    """The loop guard keys a call by the tool the gate admitted, also for steps that ran
    on a fallback before the pause. Rebuilt from the log by the tool used instead, the two
    earlier calls of ``primary`` were forgotten and a third went through after a resume.
    """
    calls: list[str] = []

    @tool(name="primary", policy=ToolPolicy(equivalent_group="g", retry=RetryPolicy(0, ())))
    def primary(q: str) -> Value:
        calls.append("primary")
        raise TransientToolError("503")

    @tool(name="replica", policy=ToolPolicy(equivalent_group="g"))
    def replica(q: str) -> Value:
        calls.append("replica")
        return Value(value=len(calls))  # a new answer each time: no repeated state

    same = {"tool": "primary", "args": {"q": "same"}}
    steps: list[dict[str, Any]] = [
        {"id": "a", **same},
        {"id": "b", **same, "depends_on": ["a"]},
        {"id": "c", **same, "depends_on": ["b"], "requires_confirmation": True},
    ]
    runtime = Runtime(build_agent([primary, replica], steps), MemoryStore(), effects=StepClock())
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    assert [s.tool for s in paused.steps[:2]] == ["replica", "replica"]  # both fell back
    made = len(calls)
    summary = await runtime.resume(paused.run_id, approve=True)
    assert len(calls) == made  # c never ran
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"
    assert "primary was called with the same arguments by 3 steps (a, b, c)" in (
        summary.handoff.reason
    )


class HandClock(FixedEffects):
    """FixedEffects whose monotonic clock moves only when a tool moves it."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = 0.0

    def monotonic(self) -> float:
        return self.clock


@pytest.mark.parametrize(("spent_s", "second_runs"), [(10.0, True), (10.001, False)])
async def test_the_wall_clock_budget_counts_the_time_the_run_has_been_active(
    spent_s: float, second_runs: bool
) -> None:
    """A 10 s budget: a first step that took exactly 10 s leaves room for the next one;
    a millisecond more stops the run before it."""
    effects = HandClock()

    @tool
    def slow(n: int) -> Value:
        effects.clock += spent_s if n == 1 else 0.0
        return Value(value=n)

    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "slow", "args": {"n": 1}},
        {"id": "b", "tool": "slow", "args": {"n": 2}, "depends_on": ["a"]},
    ]
    agent = build_agent([slow], steps, budget={"max_wall_clock_s": 10})
    summary = await Runtime(agent, MemoryStore(), effects=effects).start("go")
    if second_runs:
        assert summary.status is RunStatus.FINISHED
        assert [s.status for s in summary.steps] == [StepStatus.SUCCEEDED] * 2
    else:
        assert summary.status is RunStatus.HANDED_OFF
        assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"
        assert summary.handoff.reason == "wall-clock budget of 10 s used up"
        assert summary.steps[1].status is StepStatus.PENDING


async def test_a_resumed_run_counts_calls_by_the_rewritten_tool_as_the_live_run_does() -> None:
    """An argument rewrite turns each ``search`` into a ``lookup``: the guard counts three
    identical ``lookup`` calls across the pause, as it would without one."""
    from corral import parse_config

    calls: list[str] = []

    @tool
    def search(q: str) -> Value:
        raise AssertionError("always rewritten")

    @tool
    def lookup(q: str) -> Value:
        calls.append(q)
        return Value(value=len(calls))  # a new answer each time: no repeated state

    same = {"tool": "search", "args": {"q": "same"}}
    steps: list[dict[str, Any]] = [
        {"id": "a", **same},
        {"id": "b", **same, "depends_on": ["a"]},
        {"id": "c", **same, "depends_on": ["b"], "requires_confirmation": True},
    ]
    plain = build_agent([search, lookup], steps, intent_tools=["search", "lookup"])
    rewrite = {"name": "r", "tool": "search", "when": 'args.q == "same"', "use_tool": "lookup"}
    config = parse_config({**plain.config.model_dump(), "argument_rewrites": [rewrite]})
    agent = Agent.build(config, [search, lookup])
    runtime = Runtime(agent, MemoryStore(), effects=StepClock())
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM and calls == ["same", "same"]
    summary = await runtime.resume(paused.run_id, approve=True)
    assert calls == ["same", "same"]  # c never ran
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"
    assert "lookup was called with the same arguments by 3 steps (a, b, c)" in (
        summary.handoff.reason
    )


async def test_a_write_is_entered_only_once_the_log_that_it_was_chosen_is_stored() -> None:
    """A process that dies inside a write must find, on resume, that the write was entered;
    a read is not worth a store round trip."""
    stored: dict[str, list[str]] = {}

    def seen(ctx: ToolContext) -> list[str]:
        events = runtime.store.load_events(ctx.run_id)
        return [e.type.value for e in events if e.data.get("step_id") == ctx.step_id]

    @tool
    def read(ctx: ToolContext) -> Value:
        stored["read"] = seen(ctx)
        return Value(value=1)

    @tool(policy=ToolPolicy(kind="write"))
    def write(ctx: ToolContext) -> Value:
        stored["write"] = seen(ctx)
        return Value(value=2)

    steps: list[dict[str, Any]] = [
        {"id": "r", "tool": "read"},
        {"id": "w", "tool": "write", "depends_on": ["r"]},
    ]
    runtime = Runtime(build_agent([read, write], steps), MemoryStore(), effects=StepClock())
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED
    assert stored == {"read": [], "write": ["step_started", "tool_selected"]}


async def test_the_run_moves_to_executing_once_and_says_why() -> None:
    agent = build_agent([ok], [{"id": "a", "tool": "ok", "args": {"n": 1}}])
    runtime = Runtime(agent, MemoryStore(), effects=StepClock())
    summary = await runtime.start("go")
    events = runtime.store.load_events(summary.run_id)
    moves = [
        (e.data["from"], e.data["to"], e.data["reason"])
        for e in events
        if e.type is EventType.STATUS_CHANGED
    ]
    assert moves[2:] == [
        ("deciding", "executing", "dispatching steps"),
        ("executing", "finished", moves[-1][2]),
    ]


async def test_a_step_awaiting_confirmation_holds_back_the_steps_after_it_in_the_plan() -> None:
    """Once a step pauses the run for a person, nothing else starts until they answer."""
    calls: list[int] = []

    @tool
    def work(n: int) -> Value:
        calls.append(n)
        return Value(value=n)

    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "work", "args": {"n": 1}, "requires_confirmation": True},
        {"id": "b", "tool": "work", "args": {"n": 2}},
    ]
    runtime = Runtime(build_agent([work], steps), MemoryStore(), effects=StepClock())
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    assert calls == []
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and sorted(calls) == [1, 2]


async def test_a_step_starts_as_soon_as_its_dependency_ends_not_when_all_running_do() -> None:
    """``b`` ends only once ``c`` (which needs ``a``) has started: waiting for every running
    step before scheduling more would never start ``c``."""
    c_started = asyncio.Event()

    @tool
    async def work(n: int) -> Value:
        if n == 2:
            await asyncio.wait_for(c_started.wait(), HANG_S)
        if n == 3:
            c_started.set()
        return Value(value=n)

    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "work", "args": {"n": 1}},
        {"id": "b", "tool": "work", "args": {"n": 2}},
        {"id": "c", "tool": "work", "args": {"n": 3}, "depends_on": ["a"]},
    ]
    runtime = Runtime(build_agent([work], steps), MemoryStore(), effects=StepClock())
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED
    assert [s.status for s in summary.steps] == [StepStatus.SUCCEEDED] * 3


async def test_a_run_that_comes_back_to_the_same_state_is_stopped_as_a_loop() -> None:
    """Same call, same answer, same facts: the second step brought the run back."""
    summary, events = await trail(
        [ok],
        [
            {"id": "a", "tool": "ok", "args": {"n": 1}, "facts": {"total": "result.value"}},
            {
                "id": "b",
                "tool": "ok",
                "args": {"n": 1},
                "facts": {"total": "result.value"},
                "depends_on": ["a"],
            },
            {"id": "c", "tool": "ok", "args": {"n": 3}, "depends_on": ["b"]},
        ],
    )
    again = "the run came back to a state it had already been in"
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"
    assert summary.handoff.reason == again
    assert events[-2:] == [
        ("fact_written", "memory", {"name": "total", "value": 1, "source": "tool", "origin": "b"}),
        ("loop_detected", "verify", {"step_id": "b", "reason": again}),
    ]
    assert summary.steps[2].status is StepStatus.PENDING


async def test_no_eligible_tool_fails_the_step_with_why_each_was_excluded() -> None:
    from corral import parse_config

    @tool(name="primary", policy=ToolPolicy(equivalent_group="g"))
    def primary() -> Value:
        raise AssertionError("excluded by its constraint")

    @tool(name="replica", policy=ToolPolicy(equivalent_group="g"))
    def replica() -> Value:
        raise AssertionError("excluded by its constraint")

    plain = build_agent(
        [primary, replica], [{"id": "s1", "tool": "primary"}], intent_tools=["primary"]
    )
    only_a1 = "entities.order_id == 'A1'"
    constraints = {"primary": only_a1, "replica": only_a1}
    config = parse_config({**plain.config.model_dump(), "tool_constraints": constraints})
    runtime = Runtime(Agent.build(config, [primary, replica]), MemoryStore(), effects=StepClock())
    summary = await runtime.start("go A2")
    assert summary.handoff is not None and summary.handoff.reason_code == "NO_ELIGIBLE_TOOL"
    events = runtime.store.load_events(summary.run_id)
    why = f"primary: {only_a1} is false; replica: {only_a1} is false"
    refused = result(
        "primary",
        "error",
        why,
        error_code="NO_ELIGIBLE_TOOL",
        error_message=why,
        attempts=0,
        duration_ms=0.0,
    )
    assert [(e.type.value, e.stage, e.data) for e in events if e.type in STEP_EVENTS] == [
        started("s1", "primary"),
        finished("s1", "failed", refused, "NO_ELIGIBLE_TOOL", why),
    ]


async def test_a_fallback_that_cannot_take_the_arguments_ends_the_step() -> None:
    """The arguments were valid for the planned tool; the fallback's own model refuses
    them, and a third tool would get the same arguments, so the step fails there."""
    called: list[str] = []

    @tool(
        name="primary",
        policy=ToolPolicy(equivalent_group="g", latency_ms=1, retry=RetryPolicy(0, ())),
    )
    def primary(n: int) -> Value:
        called.append("primary")
        raise TransientToolError("503")

    @tool(name="strict", policy=ToolPolicy(equivalent_group="g", latency_ms=2))
    def strict(n: Annotated[int, Field(ge=5)]) -> Value:
        called.append("strict")
        return Value(value=n)

    @tool(name="last", policy=ToolPolicy(equivalent_group="g", latency_ms=3))
    def last(n: int) -> Value:
        called.append("last")
        return Value(value=n)

    steps: list[dict[str, Any]] = [{"id": "s1", "tool": "primary", "args": {"n": 1}}]
    runtime = Runtime(
        build_agent([primary, strict, last], steps), MemoryStore(), effects=StepClock()
    )
    summary = await runtime.start("go")
    assert called == ["primary"]
    refusal = "tool 'strict': n: Input should be greater than or equal to 5"
    refused = result(
        "strict",
        "error",
        refusal,
        error_code="INVALID_ARGUMENT",
        error_message=refusal,
        attempts=0,
        duration_ms=0.0,
    )
    events = runtime.store.load_events(summary.run_id)
    assert [(e.type.value, e.stage, e.data) for e in events if e.type in STEP_EVENTS][-2:] == [
        selected("s1", "strict", ["primary", "strict", "last"], "fallback after primary"),
        finished("s1", "failed", refused, "INVALID_ARGUMENT", refusal),
    ]


async def test_tool_health_counts_failures_in_a_row_and_a_success_resets_it() -> None:
    """Two failures in a row degrade a tool; a success in between starts the count again.
    A write whose outcome is unknown counts as a failure."""
    fail = [True]

    @tool(policy=ToolPolicy(retry=RetryPolicy(0, ())))
    def sometimes() -> Value:
        if fail[0]:
            raise TransientToolError("503")
        return Value(value=1)

    @tool(policy=ToolPolicy(kind="write"))
    def write() -> Value:
        raise ValueError("socket closed")

    steps: list[dict[str, Any]] = [{"id": "s1", "tool": "sometimes"}]
    runtime = Runtime(build_agent([sometimes], steps), MemoryStore(), effects=StepClock())
    health = runtime.agent.health
    for outcome in (True, False, True):  # fail, succeed, fail
        fail[0] = outcome
        await runtime.start("go")
    assert not health.degraded("sometimes")
    await runtime.start("go")  # a second failure in a row
    assert health.degraded("sometimes")
    summary = await runtime.start("go")  # degraded, but the only tool: still chosen, and said
    events = runtime.store.load_events(summary.run_id)
    assert [e.data["degraded"] for e in events if e.type is EventType.TOOL_SELECTED] == [True]
    writes = Runtime(build_agent([write], [{"id": "w", "tool": "write"}]), MemoryStore())
    for _ in range(2):
        summary = await writes.start("go")
        assert summary.steps[0].status is StepStatus.UNKNOWN
    assert writes.agent.health.degraded("write")


def test_the_idempotency_key_is_pinned() -> None:
    """Business systems store this key to never act twice: it must stay the same for the
    same run, step and arguments, whatever their order, and across corral versions (a write
    resumed after an upgrade would otherwise run again)."""
    args = {"b": "é", "a": 1, "when": date(2026, 1, 2)}
    key = idempotency_key("run_1", "w", args)
    assert key == "18ddd041f4413a8d6489481ed791f967"
    assert idempotency_key("run_1", "w", dict(reversed(args.items()))) == key
    assert idempotency_key("run_2", "w", args) != key
    assert idempotency_key("run_1", "v", args) != key
    assert idempotency_key("run_1", "w", {**args, "a": 2}) != key


async def test_a_tool_sees_its_run_step_key_facts_language_clock_and_templates() -> None:
    seen: list[ToolContext] = []

    @tool
    def peek(ctx: ToolContext, who: str) -> Value:
        seen.append(ctx)
        return Value(value=2)

    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "ok", "args": {"n": 1}, "facts": {"total": "result.value"}},
        {"id": "b", "tool": "peek", "args": {"who": "é"}, "depends_on": ["a"]},
    ]
    templates = {"hi": {"zh": "你好 {who}", "en": "hi {who}"}}
    agent = build_agent([ok, peek], steps, templates=templates)
    runtime = Runtime(agent, MemoryStore(), effects=StepClock())
    summary = await runtime.start("go A7")
    state = await runtime.load_state(summary.run_id)
    [ctx] = seen
    assert (ctx.run_id, ctx.step_id) == (summary.run_id, "b")
    assert ctx.idempotency_key == idempotency_key(summary.run_id, "b", {"who": "é"})
    assert ctx.idempotency_key == "b68f7326833e1ae559e59adbb0734c60"
    assert dict(ctx.facts) == {"order_id": "A7", "total": 1}
    assert ctx.language == "en"
    assert ctx.received_at == state.received_at is not None
    assert ctx.render is not None and ctx.render("hi", {"who": "Ana"}) == "hi Ana"


class CrashAfterWrite(StepClock):
    """The process dies (``Crash``) right after a write acted, before its answer is logged."""

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        answer = await super().call_tool(spec, args, context, timeout_s)
        if spec.policy.kind == "write":
            raise Crash("killed after the write, before it was recorded")
        return answer


async def resumed_after_a_crash(write: ToolSpec, n: int) -> Any:
    """Start a run (a read, then a write) that dies inside the write; resume it in a new
    runtime. The read comes first in the plan, so the settling looks past finished steps."""
    store = MemoryStore()
    steps: list[dict[str, Any]] = [
        {"id": "r", "tool": "ok", "args": {"n": 0}},
        {"id": "w", "tool": write.name, "args": {"n": n}, "depends_on": ["r"]},
    ]
    agent = build_agent([ok, write], steps)
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=CrashAfterWrite()).start("go")
    [run] = store.list_runs()
    before = len(store.load_events(run.run_id))
    summary = await Runtime(agent, store, effects=StepClock()).resume(run.run_id)
    after = store.load_events(run.run_id)[before:]
    return summary, [(e.type.value, e.stage, e.data) for e in after if e.type in STEP_EVENTS]


def crashing_write(done: dict[str, int]) -> ToolSpec:
    def find(ctx: ToolContext, n: int) -> Value | None:
        return Value(value=done[ctx.idempotency_key]) if ctx.idempotency_key in done else None

    @tool(policy=ToolPolicy(kind="write"), reconcile=find)
    def pay(ctx: ToolContext, n: int) -> Value:
        """n = 1: the payment goes through; otherwise the process dies before it acts."""
        if n == 1:
            done[ctx.idempotency_key] = n
        return Value(value=n)

    return pay


def interrupted(tool_name: str) -> tuple[Any, ...]:
    """The attempt a resume records for the write call the process died in."""
    why = f"the run stopped while {tool_name} was running; the write may or may not have happened"
    return attempt(
        "w",
        tool_name,
        1,
        "error",
        duration_ms=0.0,
        error_code="OUTCOME_UNKNOWN",
        error_message=why,
        interrupted=True,
    )


async def test_a_write_interrupted_by_a_crash_is_settled_by_its_reconciler_on_resume() -> None:
    summary, events = await resumed_after_a_crash(crashing_write({}), 1)
    assert summary.status is RunStatus.FINISHED
    settled = {"step_id": "w", "tool": "find", "write": "pay", "status": "applied"}
    paid = result("pay", "success", "pay: value=1", data={"value": 1}, attempts=2)
    assert events == [
        interrupted("pay"),  # the call it died in: an attempt, numbered before the lookup's
        attempt("w", "find", 2, "success", data={"value": 1}),
        ("outcome_reconciled", "verify", {**settled, "reason": "pay: value=1"}),
        finished("w", "succeeded", paid, None, "", output_attempt=2),
    ]


async def test_a_write_interrupted_before_it_acted_fails_on_resume() -> None:
    summary, events = await resumed_after_a_crash(crashing_write({}), 2)
    assert summary.status is RunStatus.HANDED_OFF
    why = "pay failed (TOOL_FAILED) and find found no effect: not applied"
    settled = {"step_id": "w", "tool": "find", "write": "pay", "status": "not_applied"}
    failed = result("pay", "error", why, error_code="TOOL_FAILED", error_message=why, attempts=2)
    assert events == [
        interrupted("pay"),
        attempt("w", "find", 2, "no_result"),
        ("outcome_reconciled", "verify", {**settled, "reason": why}),
        finished("w", "failed", failed, "TOOL_FAILED", why),
    ]


async def test_a_write_interrupted_with_no_reconciler_is_unknown_on_resume() -> None:
    entered: list[int] = []

    @tool(policy=ToolPolicy(kind="write"))
    def blind(n: int) -> Value:
        entered.append(n)
        return Value(value=n)

    summary, events = await resumed_after_a_crash(blind, 1)
    assert entered == [1]  # never entered again
    assert summary.status is RunStatus.HANDED_OFF
    why = "the run stopped while blind was running; the write may or may not have happened"
    unknown = result(
        "blind",
        "error",
        why,
        error_code="OUTCOME_UNKNOWN",
        error_message=why,
        duration_ms=0.0,
    )
    assert events == [
        interrupted("blind"),
        finished("w", "unknown", unknown, "OUTCOME_UNKNOWN", why),
    ]


class Box(BaseModel):
    inner: dict[str, int] | None = None


async def test_a_fact_read_through_a_missing_object_is_recorded_as_null() -> None:
    @tool
    def box(n: int) -> Box:
        return Box(inner={"x": n} if n else None)

    fact = {"deep": "result.inner.x"}
    summary, events = await trail(
        [box],
        [
            {"id": "a", "tool": "box", "args": {"n": 0}, "facts": fact},
            {"id": "b", "tool": "box", "args": {"n": 5}, "facts": fact, "depends_on": ["a"]},
        ],
    )
    assert summary.status is RunStatus.FINISHED
    assert [d for kind, _, d in events if kind == "fact_written"] == [
        {"name": "deep", "value": None, "source": "tool", "origin": "a"},
        {"name": "deep", "value": 5, "source": "tool", "origin": "b"},
    ]
