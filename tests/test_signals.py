"""Signals: raised by code at defined points, each handled by its layer and logged.

``need_replan`` (verify), ``need_clarification`` (planning), ``tool_timeout`` (the
executor) and ``budget_low`` (decision) are events of their own type whose payload is the
typed signal and its handler's outcome; the run summary lists them. A model's output is
never a signal. A plan longer than ``limits.max_plan_steps_without_confirmation`` waits
for a person before its first step.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, StepStatus, parse_config, tool
from corral.contracts import BudgetLow, NeedClarification, NeedReplan, ToolTimeout
from corral.events import (
    BudgetLowSignal,
    Event,
    NeedClarificationSignal,
    NeedReplanSignal,
    ToolTimeoutSignal,
)
from corral.models import ModelRequest, ScriptedModel
from corral.testing import FixedEffects
from corral.tools.policy import RetryPolicy, ToolPolicy
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent, corral_cli, write_agent
from tests.one_intent import one_intent

SIGNAL_TYPES = {
    EventType.NEED_REPLAN,
    EventType.NEED_CLARIFICATION,
    EventType.TOOL_TIMEOUT,
    EventType.BUDGET_LOW,
}


class Value(BaseModel):
    value: int


@tool
def ok(n: int) -> Value:
    return Value(value=n)


def runtime_for(agent: Agent) -> Runtime:
    return Runtime(agent, MemoryStore(), effects=FixedEffects())


async def events_of(runtime: Runtime, run_id: str) -> list[Event]:
    return await runtime.events(run_id)


def signals(events: list[Event]) -> list[Any]:
    return [e.payload for e in events if e.type in SIGNAL_TYPES]


# --------------------------------------------------------------------------- tool_timeout


def timing_out(name: str, group: str | None, retries: int) -> ToolSpec:
    """A read that never answers within its 0.05 s timeout (it waits on an unset event)."""

    async def never(n: int) -> Value:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    never.__name__ = name
    policy = ToolPolicy(
        timeout_s=0.05,
        retry=RetryPolicy(max_retries=retries, backoff_s=(0.01,)),
        equivalent_group=group,
        latency_ms=10,
    )
    return tool(policy=policy)(never)


async def test_tool_timeout_is_retried_by_policy_then_switches_to_the_equivalent_tool() -> None:
    slow = timing_out("fast_search", "search", retries=1)

    @tool(policy=ToolPolicy(equivalent_group="search", latency_ms=500))
    def cheap_search(n: int) -> Value:
        return Value(value=n * 10)

    agent = build_agent(
        [slow, cheap_search],
        [{"id": "s1", "tool": "fast_search", "args": {"n": 4}}],
        intent_tools=["fast_search", "cheap_search"],
    )
    runtime = runtime_for(agent)
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED
    assert [(s.tool, s.status) for s in summary.steps] == [("cheap_search", StepStatus.SUCCEEDED)]
    raised = signals(await events_of(runtime, summary.run_id))
    assert raised == [
        ToolTimeoutSignal(
            ToolTimeout(step_id="s1", tool="fast_search", attempt=1, timeout_s=0.05), "retry"
        ),
        ToolTimeoutSignal(
            ToolTimeout(step_id="s1", tool="fast_search", attempt=2, timeout_s=0.05),
            "switch",
            "cheap_search",
        ),
    ]
    assert [(s.kind, s.outcome, s.step_id) for s in summary.signals] == [
        ("tool_timeout", "retry", "s1"),
        ("tool_timeout", "switch:cheap_search", "s1"),
    ]


async def test_a_tool_timeout_with_nothing_to_switch_to_fails_the_step() -> None:
    slow = timing_out("only_search", None, retries=0)
    runtime = runtime_for(
        build_agent([slow], [{"id": "s1", "tool": "only_search", "args": {"n": 1}}])
    )
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "TOOL_TIMEOUT"
    assert [(s.kind, s.outcome) for s in summary.signals] == [("tool_timeout", "fail")]


async def test_a_write_that_times_out_is_reconciled_never_retried_blindly() -> None:
    @tool(policy=ToolPolicy(kind="write", timeout_s=0.05, retry=RetryPolicy(max_retries=0)))
    async def post(n: int) -> Value:
        await asyncio.Event().wait()  # it may have acted: nobody can tell
        raise AssertionError("unreachable")

    runtime = runtime_for(build_agent([post], [{"id": "w", "tool": "post", "args": {"n": 1}}]))
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "OUTCOME_UNKNOWN"
    assert [(s.kind, s.outcome) for s in summary.signals] == [("tool_timeout", "reconcile")]
    assert summary.steps[0].attempts == 1


# --------------------------------------------------------------------------- need_replan


async def test_a_failed_check_in_a_template_plan_raises_need_replan_answered_by_the_plan() -> None:
    """A template is never rewritten by a model: its declared answer for the step replies."""
    agent = build_agent(
        [ok],
        [{"id": "s1", "tool": "ok", "args": {"n": 0}, "success": "result.value > 0"}],
        templates={"none_left": {"zh": "没有了", "en": "nothing left"}},
        plan_extra={"on_failure": {"s1": "none_left"}},
    )
    runtime = runtime_for(agent)
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED and summary.outcome == "unmet"
    raised = signals(await events_of(runtime, summary.run_id))
    assert raised == [
        NeedReplanSignal(
            NeedReplan(
                step_id="s1",
                tool="ok",
                code="SUCCESS_CRITERIA_FAILED",
                reason="result.value > 0 is false",
            ),
            "reply",
        )
    ]
    assert [(s.kind, s.outcome, s.step_id) for s in summary.signals] == [
        ("need_replan", "reply", "s1")
    ]


async def test_need_replan_without_an_answer_goes_to_a_person() -> None:
    agent = build_agent(
        [ok], [{"id": "s1", "tool": "ok", "args": {"n": 0}, "success": "result.value > 0"}]
    )
    summary = await runtime_for(agent).start("go")
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.error_code == "SUCCESS_CRITERIA_FAILED"
    assert [(s.kind, s.outcome) for s in summary.signals] == [("need_replan", "handoff")]


def model_agent(model: ScriptedModel, **settings: Any) -> Agent:
    config = parse_config(one_intent("go", tools=["ok"], model={"name": "scripted"}, **settings))
    return Agent.build(config, [ok], model=model)


async def test_need_replan_replans_a_model_plan_at_most_max_replans_times() -> None:
    """Each plan's step fails its check; ``limits.max_replans: 1`` allows one replan."""

    def plan(request: ModelRequest) -> str:
        n = len(model.requests)  # new step ids and arguments each time
        step = {"id": f"r{n}", "tool": "ok", "args": {"n": n}, "success": "result.value > 5"}
        return json.dumps({"steps": [step]})

    model = ScriptedModel(function=plan)
    runtime = runtime_for(model_agent(model, limits={"max_replans": 1}))
    summary = await runtime.start("go with 1 or 2")
    assert summary.status is RunStatus.HANDED_OFF
    assert len(model.requests) == 2  # the plan, one replan
    outcomes = [(s.kind, s.outcome, s.step_id) for s in summary.signals]
    assert outcomes == [("need_replan", "replan", "r1"), ("need_replan", "handoff", "r2")]
    events = await events_of(runtime, summary.run_id)
    replans = [e.payload.replan for e in events if e.type is EventType.PLAN_CREATED]
    assert replans == [None, 1]
    assert (
        "step r1 (ok) failed with SUCCESS_CRITERIA_FAILED" in model.requests[1].messages[-1].content
    )


# --------------------------------------------------------------------------- need_clarification

CITY_AGENT = {
    "name": "trips",
    "default_language": "en",
    "entities": {
        "city": {"kind": "vocabulary", "vocabulary": {"shanghai": "Shanghai", "beijing": "Beijing"}}
    },
    "intents": [
        {
            "name": "weather",
            "rules": [{"keywords": ["weather"], "confidence": 0.95}],
            "route": "plan",
            "plan": "p",
            "reply": "done",
            "requires": ["city"],
            "tools": ["forecast"],
        }
    ],
    "plans": {
        "p": {
            "steps": [
                {
                    "id": "f",
                    "tool": "forecast",
                    "args": {"city": "$entities.city"},
                    "facts": {"rain": "result.rain"},
                }
            ]
        }
    },
    "questions": {"city": "which_city"},
    "templates": {
        "done": {"zh": "好了", "en": "rain in {city}: {rain}"},
        "which_city": {"zh": "哪个城市？", "en": "Which city?"},
    },
}


class Forecast(BaseModel):
    rain: int


def forecast_tool(calls: list[str]) -> ToolSpec:
    @tool
    def forecast(city: str) -> Forecast:
        calls.append(city)
        return Forecast(rain=70)

    return forecast


def city_agent(calls: list[str], **limits: Any) -> Agent:
    config = parse_config({**CITY_AGENT, "limits": limits})
    return Agent.build(config, [forecast_tool(calls)])


async def test_an_ambiguous_entity_raises_need_clarification_and_the_answer_settles_it() -> None:
    calls: list[str] = []
    runtime = runtime_for(city_agent(calls))
    summary = await runtime.start("weather in shanghai or beijing tomorrow?")
    assert summary.status is RunStatus.AWAITING_USER and calls == []
    assert summary.pending is not None and summary.pending.slot == "city"
    assert summary.reply == "Which city do you mean: shanghai, beijing?"  # as written
    raised = signals(await events_of(runtime, summary.run_id))
    assert raised == [
        NeedClarificationSignal(
            NeedClarification(
                entity="city", problem="ambiguous", candidates=["Shanghai", "Beijing"]
            ),
            "ask",
        )
    ]
    done = await runtime.resume(summary.run_id, answer="beijing")
    assert done.status is RunStatus.FINISHED and calls == ["Beijing"]
    assert done.reply == "rain in Beijing: 70"
    assert [(s.kind, s.outcome) for s in done.signals] == [("need_clarification", "ask")]


async def test_which_one_is_asked_with_the_entitys_label_and_the_words_the_user_used() -> None:
    """Not "您说的city是哪一个：Shanghai、Beijing？": the name and values are corral's own."""
    city = {
        "kind": "vocabulary",
        "vocabulary": {
            "上海": "Shanghai",
            "北京": "Beijing",
            "shanghai": "Shanghai",
            "beijing": "Beijing",
        },
        "label": {"zh": "城市", "en": "city"},
    }
    config = parse_config({**CITY_AGENT, "entities": {"city": city}})
    calls: list[str] = []
    runtime = runtime_for(Agent.build(config, [forecast_tool(calls)]))
    asked = await runtime.start("明天上海还是北京下雨？weather")
    assert asked.reply == "您说的城市是哪一个：上海、北京？"
    assert [s.reason for s in asked.signals] == ["city is ambiguous: Shanghai, Beijing"]
    done = await runtime.resume(asked.run_id, answer="北京")
    assert done.status is RunStatus.FINISHED and calls == ["Beijing"]
    english = await runtime.start("weather in SHANGHAI or Beijing?")
    assert english.reply == "Which city do you mean: SHANGHAI, Beijing?"  # as written


async def test_a_missing_entity_raises_need_clarification_with_the_configured_question() -> None:
    calls: list[str] = []
    runtime = runtime_for(city_agent(calls, max_questions=1))
    summary = await runtime.start("what's the weather tomorrow?")
    assert summary.status is RunStatus.AWAITING_USER and summary.reply == "Which city?"
    assert [(s.kind, s.outcome, s.reason) for s in summary.signals] == [
        ("need_clarification", "ask", "city is missing")
    ]
    again = await runtime.resume(summary.run_id, answer="no idea")
    assert again.status is RunStatus.HANDED_OFF and again.error_code == "MISSING_ARGUMENT"
    assert [s.outcome for s in again.signals] == ["ask", "handoff"]
    assert calls == []


async def test_one_value_said_twice_is_not_ambiguous() -> None:
    calls: list[str] = []
    summary = await runtime_for(city_agent(calls)).start("weather in Shanghai? shanghai!")
    assert summary.status is RunStatus.FINISHED and calls == ["Shanghai"]
    assert summary.signals == []


# --------------------------------------------------------------------------- budget_low


async def test_budget_low_skips_optional_steps_and_the_run_ends_partial() -> None:
    """Four steps, a budget of four: after three (over half used) the optional one waits."""
    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "ok", "args": {"n": 1}, "description": "step a"},
        {"id": "b", "tool": "ok", "args": {"n": 2}, "depends_on": ["a"], "description": "step b"},
        {"id": "c", "tool": "ok", "args": {"n": 3}, "depends_on": ["b"], "description": "step c"},
        {
            "id": "d",
            "tool": "ok",
            "args": {"n": 4},
            "depends_on": ["c"],
            "on_failure": "continue",
            "description": "the extra chart",
        },
    ]
    agent = build_agent([ok], steps, budget={"max_steps": 4, "low_fraction": 0.5})
    runtime = runtime_for(agent)
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED and summary.outcome == "partial"
    statuses = [(s.id, s.status, s.error_code) for s in summary.steps]
    assert statuses[-1] == ("d", StepStatus.FAILED, "BUDGET_LOW")
    assert all(status is StepStatus.SUCCEEDED for _, status, _ in statuses[:3])
    assert "the extra chart" in (summary.reply or "")
    raised = signals(await events_of(runtime, summary.run_id))
    assert raised == [
        BudgetLowSignal(BudgetLow(resource="steps", used=3, limit=4), "skip_optional")
    ]
    assert [(s.kind, s.outcome) for s in summary.signals] == [("budget_low", "skip_optional")]


async def test_budget_low_never_skips_a_required_step_and_is_off_at_zero() -> None:
    steps = [{"id": f"s{k}", "tool": "ok", "args": {"n": k}} for k in range(4)]
    low = await runtime_for(
        build_agent([ok], steps, budget={"max_steps": 4, "low_fraction": 0.5})
    ).start("go")
    assert low.status is RunStatus.FINISHED and low.outcome == "success"
    assert [s.kind for s in low.signals] == ["budget_low"]
    off = await runtime_for(
        build_agent([ok], steps, budget={"max_steps": 4, "low_fraction": 0})
    ).start("go")
    assert off.status is RunStatus.FINISHED and off.signals == []


# --------------------------------------------------------------------------- long plans


def chain(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"s{k}", "tool": "counted", "args": {"n": k}, "description": f"count {k}"}
        for k in range(1, n + 1)
    ]


def counting(calls: list[int]) -> ToolSpec:
    @tool
    def counted(n: int) -> Value:
        calls.append(n)
        return Value(value=n)

    return counted


async def test_a_long_template_plan_waits_for_confirmation_showing_its_steps() -> None:
    calls: list[int] = []
    agent = build_agent([counting(calls)], chain(12), limits={"max_plan_steps": 20})
    runtime = runtime_for(agent)
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM and calls == []
    assert paused.pending is not None and paused.pending.kind == "confirm"
    prompt = paused.pending.prompt
    assert prompt.startswith("This takes 12 steps: 1. count 1, 2. count 2, 3. count 3")
    assert prompt.endswith("12. count 12. Shall I go ahead?")
    assert all(s.status is StepStatus.PENDING for s in paused.steps)
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and calls == list(range(1, 13))


async def test_rejecting_a_long_plan_ends_the_run_cleanly_without_running_a_step() -> None:
    calls: list[int] = []
    runtime = runtime_for(build_agent([counting(calls)], chain(11), limits={"max_plan_steps": 20}))
    paused = await runtime.start("go")
    done = await runtime.resume(paused.run_id, approve=False)
    assert done.status is RunStatus.FINISHED and done.outcome == "cancelled"
    assert calls == [] and done.handoff is None
    assert all(s.status is StepStatus.PENDING for s in done.steps)


async def test_a_plan_at_the_limit_runs_without_asking() -> None:
    calls: list[int] = []
    summary = await runtime_for(build_agent([counting(calls)], chain(10))).start("go")
    assert summary.status is RunStatus.FINISHED and len(calls) == 10


async def test_a_long_model_plan_waits_for_confirmation_too() -> None:
    calls: list[int] = []
    steps = [{"id": f"s{k}", "tool": "counted", "args": {"n": k}} for k in range(1, 12)]
    model = ScriptedModel([json.dumps({"steps": steps})])
    config = parse_config(
        one_intent(
            "go",
            tools=["counted"],
            model={"name": "scripted"},
            limits={"max_plan_steps": 15, "max_identical_calls": 2},
        )
    )
    runtime = runtime_for(Agent.build(config, [counting(calls)], model=model))
    message = "go " + " ".join(str(k) for k in range(1, 12))  # the plan's numbers are said
    paused = await runtime.start(message)
    assert paused.status is RunStatus.AWAITING_CONFIRM and calls == []
    assert paused.pending is not None and "11. counted" in paused.pending.prompt
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and calls == list(range(1, 12))


# --------------------------------------------------------------------------- the model cannot


async def test_a_model_answer_naming_a_signal_is_never_a_signal() -> None:
    """A planner answering with a signal is an invalid plan; a reply saying one is text."""
    refused = ScriptedModel(['{"signal": "need_replan"}'] * 3)
    runtime = runtime_for(model_agent(refused))
    summary = await runtime.start("go with 1")
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "PLAN_INVALID"
    refused.assert_complete()  # asked, re-asked twice, never believed
    assert signals(await events_of(runtime, summary.run_id)) == [] and summary.signals == []

    said = "need_replan"
    talker = ScriptedModel(
        [
            json.dumps({"steps": [{"id": "s1", "tool": "ok", "args": {"n": 1}}]}),
            json.dumps({"text": said}),
        ]
    )
    config = parse_config(
        one_intent("go", tools=["ok"], model={"name": "scripted", "replies": True})
    )
    runtime = runtime_for(Agent.build(config, [ok], model=talker))
    summary = await runtime.start("go with 1")
    assert summary.status is RunStatus.FINISHED and summary.reply == said
    assert signals(await events_of(runtime, summary.run_id)) == [] and summary.signals == []


async def test_a_model_intent_naming_a_signal_is_invalid_data() -> None:
    model = ScriptedModel(['{"signal": "need_clarification"}'] * 3)
    config = parse_config(
        one_intent("go", tools=["ok"], model={"name": "scripted", "intent_fallback": True})
    )
    runtime = runtime_for(Agent.build(config, [ok], model=model))
    summary = await runtime.start("something else entirely")
    assert [r.purpose for r in model.requests][:1] == ["intent"]  # it was asked, and answered
    assert summary.status in (RunStatus.AWAITING_USER, RunStatus.HANDED_OFF)
    assert signals(await events_of(runtime, summary.run_id)) == [] and summary.signals == []


# --------------------------------------------------------------------------- the CLI

CLI_AGENT = """
    name: trips
    default_language: en
    entities:
      city: {kind: vocabulary, vocabulary: {shanghai: Shanghai, beijing: Beijing}}
    intents:
      - name: weather
        rules: [{keywords: [weather], confidence: 0.95}]
        route: plan
        plan: p
        reply: done
        requires: [city]
        tools: [forecast]
    plans:
      p:
        steps: [{id: f, tool: forecast, args: {city: $entities.city}}]
    templates:
      done: {zh: 好了, en: "rain in {city}"}
"""

CLI_TOOLS = """
    from pydantic import BaseModel
    from corral import tool

    class Forecast(BaseModel):
        rain: int

    @tool
    def forecast(city: str) -> Forecast:
        return Forecast(rain=70)
"""


def test_cli_run_json_shows_need_clarification_and_show_reads_it_back(tmp_path: Path) -> None:
    folder = write_agent(tmp_path / "trips", CLI_AGENT, CLI_TOOLS)
    home = tmp_path / "home"
    done = corral_cli(home, "run", str(folder), "weather in Shanghai or Beijing?", "--json")
    summary = json.loads(done.stdout)
    assert summary["status"] == "awaiting_user"
    assert summary["signals"] == [
        {
            "kind": "need_clarification",
            "outcome": "ask",
            "reason": "city is ambiguous: Shanghai, Beijing",
            "step_id": None,
        }
    ]
    shown = json.loads(corral_cli(home, "show", summary["run_id"], "--json").stdout)
    assert shown["signals"] == summary["signals"]
    traces = corral_cli(home, "traces", "--run", summary["run_id"], "--json").stdout
    lines = [json.loads(line) for line in traces.splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("event") == "need_clarification"]
    assert [line["level"] for line in logged] == ["warn"], traces


LONG_AGENT = """
    name: long
    default_language: en
    limits: {max_plan_steps: 20}
    intents:
      - name: go
        rules: [{keywords: [go], confidence: 0.95}]
        route: plan
        plan: p
        reply: done
    plans:
      p:
        steps:
__STEPS__
    templates:
      done: {zh: 好了, en: all done}
"""

LONG_TOOLS = """
    from pydantic import BaseModel
    from corral import tool

    class Value(BaseModel):
        value: int

    @tool
    def counted(n: int) -> Value:
        return Value(value=n)
"""


def test_cli_a_long_plan_waits_for_approval_in_another_process(tmp_path: Path) -> None:
    steps = "\n".join(
        f"          - {{id: s{k}, tool: counted, args: {{n: {k}}}, description: count {k}}}"
        for k in range(1, 12)
    )
    folder = write_agent(tmp_path / "long", LONG_AGENT.replace("__STEPS__", steps), LONG_TOOLS)
    home = tmp_path / "home"
    paused = json.loads(corral_cli(home, "run", str(folder), "go", "--json").stdout)
    assert paused["status"] == "awaiting_confirm"
    assert paused["pending"]["step_id"] == "#plan"
    assert "1. count 1, 2. count 2" in paused["pending"]["prompt"]
    assert {s["status"] for s in paused["steps"]} == {"pending"}
    done = corral_cli(
        home, "resume", paused["run_id"], "--approve", "--step", "#plan", "--agent", str(folder)
    )
    shown = json.loads(corral_cli(home, "show", paused["run_id"], "--json").stdout)
    assert shown["status"] == "finished" and shown["reply"] == "all done", done.stdout
    assert {s["status"] for s in shown["steps"]} == {"succeeded"}
    corral_cli(home, "replay", paused["run_id"], "--agent", str(folder))  # exit 0: same path
