"""Review of signals, the long-plan confirmation and priorities: the cases users hit.

Each test here failed before its fix: a negation softened by a degree word read as
urgent, a guessed value after an unhelpful answer to "which one?", a replan repeating a
finished write, ``budget_low`` skipping a step a required step needs, and a replan
growing past the confirmation limit without a person seeing it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import (
    Agent,
    EventType,
    MemoryStore,
    RunStatus,
    Runtime,
    StepStatus,
    ToolPolicy,
    parse_config,
    tool,
)
from corral.config import PriorityWords
from corral.decision.priority import detect_priority
from corral.effects import FixedEffects
from corral.errors import InputTooLargeError, TransientToolError
from corral.models import ModelRequest, ScriptedModel
from corral.runtime.replay import replay_run
from corral.tools.policy import RetryPolicy
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent, write_agent
from tests.one_intent import one_intent
from tests.test_priority import CHEAP, Flights, flights_agent
from tests.test_signals import (
    CITY_AGENT,
    Value,
    city_agent,
    counting,
    forecast_tool,
    ok,
    runtime_for,
)

WORDS = PriorityWords()


@pytest.mark.parametrize(
    ("message", "priority"),
    [
        ("不是很急但要便宜", "budget"),
        ("不是很着急", "normal"),
        ("没有那么急", "normal"),
        ("不是太急，便宜点", "budget"),
        ("也不算急", "normal"),
        ("不怎么急", "normal"),
        ("not very urgent, the cheapest please", "budget"),
        ("not that urgent", "normal"),
        ("not so urgent", "normal"),
        ("not the cheapest one, I need it fast", "normal"),
        ("不一定要最便宜的", "normal"),
        ("我不是要便宜的", "normal"),
        ("要最便宜的", "budget"),
        ("is it the cheapest?", "budget"),
        ("no, the cheapest", "budget"),
        # full-width letters from a Chinese input method
        ("ＡＳＡＰ！", "urgent"),
        ("Ｃｈｅａｐｅｓｔ please", "budget"),
        # a degree word alone is no negation
        ("这是急事", "urgent"),
        ("very urgent", "urgent"),
        ("really cheap", "budget"),
        ("it's also urgent", "urgent"),
    ],
)
def test_a_softened_negation_is_still_a_negation(message: str, priority: str) -> None:
    assert detect_priority(message, WORDS).priority == priority


# --------------------------------------------------------------------------- need_clarification


async def test_an_answer_naming_no_value_leaves_the_ambiguity_open_never_a_guess() -> None:
    """ "Which city: Shanghai, Beijing?" answered "the second one" is asked again, then a
    person takes over; the forecast is never run for the first city found."""
    calls: list[str] = []
    runtime = runtime_for(city_agent(calls))
    summary = await runtime.start("weather in shanghai or beijing tomorrow?")
    assert summary.status is RunStatus.AWAITING_USER
    again = await runtime.resume(summary.run_id, answer="the second one")
    assert again.status is RunStatus.AWAITING_USER and calls == []
    # asked again in other words: one at a time (a "both" met the same question twice)
    assert again.reply == (
        "I can only take one city at a time: shanghai, beijing. Please reply with one of "
        "them; you can send me another after it."
    )
    last = await runtime.resume(summary.run_id, answer="whichever")
    assert last.status is RunStatus.HANDED_OFF and last.error_code == "MISSING_ARGUMENT"
    assert calls == []
    assert [(s.kind, s.outcome) for s in last.signals] == [("need_clarification", "ask")] * 2 + [
        ("need_clarification", "handoff")
    ]


async def test_an_answer_naming_one_value_settles_it_and_one_city_in_two_scripts_is_one() -> None:
    calls: list[str] = []
    runtime = runtime_for(city_agent(calls))
    summary = await runtime.start("weather in shanghai or beijing tomorrow?")
    done = await runtime.resume(summary.run_id, answer="the second: Beijing")
    assert done.status is RunStatus.FINISHED and calls == ["Beijing"]
    city = {"kind": "vocabulary", "vocabulary": {"上海": "Shanghai", "shanghai": "Shanghai"}}
    config = parse_config({**CITY_AGENT, "entities": {"city": city}})
    agent = Agent.build(config, [forecast_tool(calls)])
    both = await runtime_for(agent).start("weather in 上海 (Shanghai) tomorrow?")
    assert both.status is RunStatus.FINISHED and both.signals == []
    assert calls == ["Beijing", "Shanghai"]


# --------------------------------------------------------------------------- need_replan


class Posted(BaseModel):
    ok: bool


def group_post(posts: list[str]) -> ToolSpec:
    @tool(policy=ToolPolicy(kind="write"))
    def post(text: str) -> Posted:
        posts.append(text)
        return Posted(ok=True)

    return post


@pytest.mark.parametrize("text", ["hello", "$message"])
async def test_a_replan_never_repeats_a_finished_write(text: str) -> None:
    """The post succeeded, the check after it failed: a replan that posts the same text
    again under a new step id is refused and the model asked again; the group gets one
    post. Also when the text is the message (``$message``: the check once skipped it)."""
    post_then_check = [
        {"id": "w1", "tool": "post", "args": {"text": text}},
        {
            "id": "c1",
            "tool": "ok",
            "args": {"n": 1},
            "depends_on": ["w1"],
            "success": "result.value > 5",
        },
    ]
    repeat = [
        {"id": "w2", "tool": "post", "args": {"text": text}},
        {"id": "c2", "tool": "ok", "args": {"n": 7}, "depends_on": ["w2"]},
    ]
    model = ScriptedModel(
        [
            json.dumps({"steps": post_then_check}),
            json.dumps({"steps": repeat}),
            json.dumps({"steps": [{"id": "c2", "tool": "ok", "args": {"n": 7}}]}),
        ]
    )
    posts: list[str] = []
    config = parse_config(one_intent("go", tools=["ok", "post"], model={"name": "scripted"}))
    runtime = runtime_for(Agent.build(config, [ok, group_post(posts)], model=model))
    summary = await runtime.start("go post hello, 1 then 7")
    assert posts == ["hello" if text == "hello" else "go post hello, 1 then 7"]
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"
    assert [s.id for s in summary.steps] == ["w1", "c2"]
    reasked = model.requests[2].messages[-1].content
    assert "step w2 repeats step w1 (post with the same arguments)" in reasked


# --------------------------------------------------------------------------- budget_low


@tool
def double(n: int) -> Value:
    return Value(value=2 * n)


async def test_budget_low_never_skips_an_optional_step_that_a_required_step_needs() -> None:
    """``c`` is optional, but required ``d`` reads its result: skipping ``c`` on the
    cheaper path would block ``d``, in a run whose four steps fit its budget of four."""
    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "ok", "args": {"n": 1}},
        {"id": "b", "tool": "ok", "args": {"n": 2}, "depends_on": ["a"]},
        {"id": "c", "tool": "ok", "args": {"n": 3}, "depends_on": ["b"], "on_failure": "continue"},
        {"id": "d", "tool": "double", "args": {"n": "$c.result.value"}, "depends_on": ["c"]},
        {"id": "e", "tool": "ok", "args": {"n": 5}, "depends_on": ["b"], "on_failure": "continue"},
    ]
    agent = build_agent([ok, double], steps, budget={"max_steps": 5, "low_fraction": 0.7})
    summary = await runtime_for(agent).start("go")
    statuses = {s.id: (s.status, s.error_code) for s in summary.steps}
    assert statuses["d"] == (StepStatus.SUCCEEDED, None)
    assert statuses["c"] == (StepStatus.SUCCEEDED, None)
    assert statuses["e"] == (StepStatus.FAILED, "BUDGET_LOW")  # optional, and nobody needs it
    assert summary.outcome == "partial"
    assert [(s.kind, s.outcome) for s in summary.signals] == [("budget_low", "skip_optional")]


# --------------------------------------------------------------------------- long plans


def growing_replan(calls: list[int]) -> tuple[Runtime, str]:
    """A model plan of one step that fails its check, replanned into twelve steps."""

    def plan(request: ModelRequest) -> str:
        if len(model.requests) == 1:
            first = {"id": "a1", "tool": "counted", "args": {"n": 1}, "success": "result.value > 5"}
            return json.dumps({"steps": [first]})
        steps = [{"id": f"b{k}", "tool": "counted", "args": {"n": k}} for k in range(2, 14)]
        return json.dumps({"steps": steps})

    model = ScriptedModel(function=plan)
    config = parse_config(one_intent("go", tools=["counted"], model={"name": "scripted"}))
    runtime = runtime_for(Agent.build(config, [counting(calls)], model=model))
    return runtime, "go " + " ".join(str(k) for k in range(1, 14))


async def test_a_replan_that_grows_the_plan_past_the_limit_waits_for_a_person() -> None:
    calls: list[int] = []
    runtime, message = growing_replan(calls)
    paused = await runtime.start(message)
    assert paused.status is RunStatus.AWAITING_CONFIRM and calls == [1]  # only the first plan
    assert paused.pending is not None and paused.pending.step_id == "#plan"
    assert paused.pending.prompt.startswith("This takes 12 steps: 1. counted")
    done = await runtime.resume(paused.run_id, approve=True, step_id="#plan")
    assert done.status is RunStatus.FINISHED and calls == list(range(1, 14))
    report = await replay_run(runtime.agent, await runtime.events(paused.run_id))
    assert report.divergence_index is None, report


async def test_rejecting_a_grown_replan_runs_none_of_it() -> None:
    calls: list[int] = []
    runtime, message = growing_replan(calls)
    paused = await runtime.start(message)
    done = await runtime.resume(paused.run_id, approve=False)
    assert done.status is RunStatus.FINISHED and done.outcome == "cancelled"
    assert calls == [1]


# --------------------------------------------------------------------------- priority


async def test_a_replay_picks_the_same_tool_when_one_was_degraded_as_the_run_began() -> None:
    """Two failed runs degrade the fast search; the third, urgent, uses the cheap one. Its
    replay (a fresh process, healthy tools) starts from the recorded health: same pick."""

    @tool(name="search_fast", policy=ToolPolicy(equivalent_group="flights", latency_ms=80, cost=5))
    def failing() -> Flights:
        raise ConnectionError("503")

    runtime = Runtime(flights_agent([failing, CHEAP]), MemoryStore(), effects=FixedEffects())
    await runtime.start("go 急")
    await runtime.start("go 急")
    third = await runtime.start("go 急")
    assert [s.tool for s in third.steps] == ["search_cheap"]
    events = await runtime.events(third.run_id)
    assert events[0].data["degraded"] == ["search_fast"]
    report = await replay_run(runtime.agent, events)
    assert report.same_path and report.error is None, report


async def test_a_write_that_acted_but_failed_its_check_is_not_made_again_by_a_replan() -> None:
    """The post went out, then its result failed the step's check: it acted all the same,
    so a replan posting the same text again is refused and the run goes to a person."""
    checked = {
        "id": "w1",
        "tool": "post",
        "args": {"text": "hello"},
        "success": "result.ok == false",
    }
    again = {"id": "w2", "tool": "post", "args": {"text": "hello"}}
    model = ScriptedModel(
        function=lambda request: json.dumps(
            {"steps": [checked if len(model.requests) == 1 else again]}
        )
    )
    posts: list[str] = []
    config = parse_config(one_intent("go", tools=["post"], model={"name": "scripted"}))
    runtime = runtime_for(Agent.build(config, [group_post(posts)], model=model))
    summary = await runtime.start("go post hello")
    assert posts == ["hello"]
    assert summary.status is RunStatus.HANDED_OFF


async def test_an_oversized_message_is_refused_before_its_priority_words_are_read() -> None:
    """The size limit comes first: a huge message (a megabyte of "不急") was scanned for
    priority words, in time growing with its square, before it was refused."""
    runtime = runtime_for(flights_agent())
    with pytest.raises(InputTooLargeError):
        await runtime.start("不急" * 3000, priority="soon")
    assert detect_priority("不急" * 50_000 + "，越便宜越好", WORDS).priority == "budget"


# --------------------------------------------------------------------------- declining


@tool(policy=ToolPolicy(kind="write"))
def charge(n: int) -> Value:
    return Value(value=n)


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True))
def send_receipt(n: int) -> Value:
    return Value(value=n)


async def test_declining_after_a_write_acted_never_says_nothing_was_changed() -> None:
    steps: list[dict[str, Any]] = [
        {"id": "c", "tool": "charge", "args": {"n": 1}, "description": "charge the card"},
        {"id": "r", "tool": "send_receipt", "args": {"n": 2}, "depends_on": ["c"]},
    ]
    runtime = runtime_for(build_agent([charge, send_receipt], steps))
    paused = await runtime.start("go")
    done = await runtime.resume(paused.run_id, approve=False)
    assert done.status is RunStatus.FINISHED and done.outcome == "cancelled"
    assert done.reply == (
        "OK, I stopped there. Already done: charge the card. Not done: send_receipt."
    )
    assert "Nothing was changed" not in (done.reply or "")
    # nothing written before the declined step: the plain answer stands
    first = runtime_for(build_agent([send_receipt], [steps[1] | {"depends_on": []}]))
    paused = await first.start("go")
    assert (await first.resume(paused.run_id, approve=False)).reply == (
        "OK, I have left it as it was. Nothing was changed."
    )


async def test_rejecting_a_grown_replan_after_a_write_says_what_was_done() -> None:
    """The first plan posted; its check failed; the replan grew to twelve steps and the
    person said no: the post is reported, not denied."""

    def plan(request: ModelRequest) -> str:
        if len(model.requests) == 1:
            post = {"id": "p1", "tool": "post", "args": {"text": "hello"}}
            check = {"id": "a1", "tool": "ok", "args": {"n": 1}, "success": "result.value > 5"}
            return json.dumps({"steps": [post, {**check, "depends_on": ["p1"]}]})
        steps = [{"id": f"b{k}", "tool": "ok", "args": {"n": k}} for k in range(2, 13)]
        return json.dumps({"steps": steps})

    model = ScriptedModel(function=plan)
    posts: list[str] = []
    config = parse_config(one_intent("go", tools=["ok", "post"], model={"name": "scripted"}))
    runtime = runtime_for(Agent.build(config, [ok, group_post(posts)], model=model))
    paused = await runtime.start("go post hello " + " ".join(str(k) for k in range(1, 13)))
    assert paused.status is RunStatus.AWAITING_CONFIRM and posts == ["hello"]
    done = await runtime.resume(paused.run_id, approve=False)
    assert done.outcome == "cancelled" and posts == ["hello"]
    assert (done.reply or "").startswith("OK, I stopped there. Already done: ")


async def test_steps_of_a_replaced_plan_still_count_against_the_step_budget() -> None:
    """``budget.max_steps: 4``: three steps ran, the third failed its check and the replan
    dropped it; only one more step may start, not two."""

    def plan(request: ModelRequest) -> str:
        n = len(model.requests)
        letter = "ab"[n - 1]
        steps: list[dict[str, Any]] = [
            {"id": f"{letter}{k}", "tool": "ok", "args": {"n": 10 * n + k}} for k in range(3)
        ]
        steps[2]["success"] = "result.value > 1000"
        for k in (1, 2):
            steps[k]["depends_on"] = [steps[k - 1]["id"]]
        return json.dumps({"steps": steps})

    model = ScriptedModel(function=plan)
    config = parse_config(
        one_intent("go", tools=["ok"], model={"name": "scripted"}, budget={"max_steps": 4})
    )
    runtime = runtime_for(Agent.build(config, [ok], model=model))
    summary = await runtime.start("go " + " ".join(str(k) for k in range(30)))
    events = await runtime.events(summary.run_id)
    started = [e.data["step_id"] for e in events if e.type is EventType.STEP_STARTED]
    assert started == ["a0", "a1", "a2", "b0"]
    assert summary.error_code == "BUDGET_EXCEEDED"


# --------------------------------------------------------------------------- over HTTP

LONG_YAML = (
    """\
name: long
default_language: en
intents:
  - name: report
    rules: [{keywords: [report], confidence: 0.95}]
    route: plan
    plan: eleven
    reply: done
plans:
  eleven:
    steps:
"""
    + "".join(
        f"      - {{id: s{k}, tool: step, args: {{n: {k}}}, description: part {k}}}\n"
        for k in range(1, 12)
    )
    + """\
templates:
  done: {zh: 好了, en: all done}
"""
)

LONG_TOOLS = """\
from pydantic import BaseModel

from corral import tool


class Part(BaseModel):
    n: int


@tool
def step(n: int) -> Part:
    \"\"\"One part of the report.\"\"\"
    return Part(n=n)
"""


def test_a_long_plan_is_approved_over_http_by_its_pending_step_id(tmp_path: Path) -> None:
    from tests.serving import client, load, serving

    folder = write_agent(tmp_path / "long", LONG_YAML, LONG_TOOLS)
    home = tmp_path / "home"
    with serving(load(folder, home), home=home) as base, client(base) as http:
        paused = http.post("/agents/long/runs", json={"message": "the report"}).json()
        assert paused["status"] == "awaiting_confirm"
        assert paused["pending"]["step_id"] == "#plan"
        assert paused["reply"].startswith("This takes 11 steps: 1. part 1, 2. part 2")
        run = paused["run_id"]
        wrong = http.post(f"/runs/{run}/resume", json={"approve": True, "step_id": "s1"})
        assert wrong.status_code == 409 and "#plan" in wrong.text
        done = http.post(f"/runs/{run}/resume", json={"approve": True, "step_id": "#plan"})
        assert done.json()["status"] == "finished" and len(done.json()["steps"]) == 11
        again = http.post(f"/runs/{run}/resume", json={"approve": True, "step_id": "#plan"})
        assert again.status_code == 200 and again.json()["status"] == "finished"


async def test_a_replan_cannot_repeat_a_write_through_the_equivalent_that_ran_it() -> None:
    """The plan named ``post``; it was down, so its equivalent ``post_backup`` posted. A
    replan naming ``post_backup`` with the same text is refused too."""
    posts: list[str] = []
    group = ToolPolicy(kind="write", equivalent_group="posting", retry=RetryPolicy(max_retries=0))

    @tool(policy=group)
    def post(text: str) -> Posted:
        raise TransientToolError("connection refused", applied=False)

    @tool(policy=dataclasses.replace(group, latency_ms=500))
    def post_backup(text: str) -> Posted:
        posts.append(text)
        return Posted(ok=True)

    checked = {"id": "w1", "tool": "post", "args": {"text": "hi"}, "success": "result.ok == false"}
    again = {"id": "w2", "tool": "post_backup", "args": {"text": "hi"}}
    model = ScriptedModel(
        function=lambda request: json.dumps(
            {"steps": [checked if len(model.requests) == 1 else again]}
        )
    )
    config = parse_config(
        one_intent("go", tools=["post", "post_backup"], model={"name": "scripted"})
    )
    runtime = runtime_for(Agent.build(config, [post, post_backup], model=model))
    summary = await runtime.start("go post hi")
    assert posts == ["hi"]
    assert summary.status is RunStatus.HANDED_OFF
