"""Models inside the fence: the real OpenAI client on loopback, repair, re-ask, planner,
intent fallback, budgets and replay."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.errors import ModelOutputInvalidError, ModelTimeoutError, ModelUnavailableError
from corral.models import Message, ModelRequest, ScriptedModel
from corral.models.openai_compat import OpenAICompatibleModel
from corral.models.structured import Attempt, ask_structured
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.fake_openai import LLAMA_CPP_JSON_SCHEMA_500, Behaviour, FakeOpenAI

CALLS: list[str] = []


class Order(BaseModel):
    order_id: str
    city: str


class Weather(BaseModel):
    city: str
    rain: bool


@tool
def lookup(order_id: str) -> Order:
    """Find an order and the city it ships to."""
    CALLS.append("lookup")
    return Order(order_id=order_id, city="Shanghai")


@tool
def forecast(city: str) -> Weather:
    """Tomorrow's weather in a city."""
    CALLS.append("forecast")
    return Weather(city=city, rain=True)


CONFIG = {
    "name": "planner-test",
    "entities": {"order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]}},
    "intents": [
        {
            "name": "ask",
            "rules": [{"keywords": ["weather"], "confidence": 0.95}],
            "route": "plan",
            "planner": "model",
            "tools": ["lookup", "forecast"],
            "reply": "done",
        },
        {"name": "greet", "description": "greetings", "route": "reply", "reply": "hello"},
    ],
    "templates": {"done": {"zh": "好了", "en": "done"}, "hello": {"zh": "你好", "en": "hi"}},
    "model": {"intent_fallback": True},
}
GOOD_PLAN = json.dumps(
    {
        "steps": [
            {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}},
            {
                "id": "s2",
                "tool": "forecast",
                "args": {"city": "$s1.result.city"},
                "depends_on": ["s1"],
                "facts": {"rain": "result.rain"},
            },
        ]
    }
)
CYCLIC_PLAN = json.dumps(
    {
        "steps": [
            {
                "id": "s1",
                "tool": "lookup",
                "args": {"order_id": "$entities.order_id"},
                "depends_on": ["s2"],
            },
            {
                "id": "s2",
                "tool": "forecast",
                "args": {"city": "$s1.result.city"},
                "depends_on": ["s1"],
            },
        ]
    }
)
UNKNOWN_TOOL_PLAN = json.dumps({"steps": [{"id": "s1", "tool": "delete_all", "args": {}}]})
BAD_REF_PLAN = json.dumps(
    {
        "steps": [
            {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}},
            {
                "id": "s2",
                "tool": "forecast",
                "args": {"city": "$s1.result.town"},
                "depends_on": ["s1"],
            },
        ]
    }
)
INVENTED_ID_PLAN = json.dumps(
    {
        "steps": [
            {"id": "s1", "tool": "lookup", "args": {"order_id": "A999"}},
        ]
    }
)

LAYER_TEMPERATURES = {"intent": 0.11, "plan": 0.22, "judge": 0.33, "extract": 0.44, "reply": 0.55}
"""Distinct, and none the default 0.0 or 0.2: a layer given another's value, or none, shows."""


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def agent_with(model: Any, **model_settings: Any) -> Agent:
    config = parse_config({**CONFIG, "model": {**CONFIG["model"], **model_settings}})
    return Agent.build(config, [lookup, forecast], model=model)


def http_model(fake: FakeOpenAI, **kwargs: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        "fake-model",
        base_url=fake.base_url,
        api_key="test",
        **{"timeout_s": 5.0, **kwargs},
    )


async def run(agent: Agent, message: str) -> tuple[Runtime, Any]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    return runtime, await runtime.start(message)


# ------------------------------------------------------------------ the real client path


async def test_structured_output_uses_json_schema(fake: FakeOpenAI) -> None:
    fake.script(GOOD_PLAN)
    CALLS.clear()
    agent = agent_with(http_model(fake), temperatures=LAYER_TEMPERATURES)
    runtime, summary = await run(agent, "weather for A1 tomorrow?")
    assert summary.status is RunStatus.FINISHED and CALLS == ["lookup", "forecast"]
    body = fake.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["temperature"] == LAYER_TEMPERATURES["plan"]  # the layer's, sent on the wire
    enum = json.dumps(body["response_format"]["json_schema"]["schema"])
    assert '"lookup"' in enum and '"forecast"' in enum
    calls = [e.data for e in await runtime.events(summary.run_id) if e.type is EventType.MODEL_CALL]
    assert calls[0]["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "estimated": False}


async def test_endpoint_rejecting_json_schema_falls_back_to_json_object(fake: FakeOpenAI) -> None:
    fake.script(Behaviour(status=500, raw_body=LLAMA_CPP_JSON_SCHEMA_500), GOOD_PLAN)
    model = http_model(fake)
    _, summary = await run(agent_with(model), "weather for A1?")
    assert summary.status is RunStatus.FINISHED and len(fake.requests) == 2
    assert fake.requests[-1]["response_format"] == {
        "type": "json_object",
        "schema": fake.requests[0]["response_format"]["json_schema"]["schema"],
    }
    assert model.modes[0] == "json_object"


async def test_429_is_retried_by_corral(fake: FakeOpenAI) -> None:
    fake.script(Behaviour(status=429), GOOD_PLAN)
    _, summary = await run(agent_with(http_model(fake)), "weather for A1?")
    assert summary.status is RunStatus.FINISHED and len(fake.requests) == 2


async def test_timeout_becomes_a_handoff_not_a_crash(fake: FakeOpenAI) -> None:
    answer = threading.Event()  # set only after the test: every reply comes too late
    fake.script(Behaviour(text=GOOD_PLAN, until=answer))
    model = http_model(fake, timeout_s=0.3)
    try:
        with pytest.raises(ModelTimeoutError):
            await model.complete(ModelRequest("plan", (Message("user", "hi"),)))
        fake.script(Behaviour(text=GOOD_PLAN, until=answer))
        CALLS.clear()
        _, summary = await run(agent_with(model, max_retries=0), "weather for A1?")
    finally:
        answer.set()
    assert summary.status is RunStatus.HANDED_OFF and CALLS == []
    assert summary.handoff is not None and summary.handoff.reason_code == "MODEL_TIMEOUT"


async def test_malformed_http_body_is_unavailable(fake: FakeOpenAI) -> None:
    fake.script(*[Behaviour(raw_body="this is not json")] * 3)
    with pytest.raises(ModelUnavailableError):
        await http_model(fake).complete(ModelRequest("plan", (Message("user", "hi"),)))


async def test_missing_usage_is_estimated(fake: FakeOpenAI) -> None:
    fake.script(Behaviour(text='{"a": 1}', usage=False))
    response = await http_model(fake).complete(ModelRequest("x", (Message("user", "你好"),)))
    assert response.usage.estimated and response.usage.total > 0


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (CYCLIC_PLAN, "cycle"),
        (UNKNOWN_TOOL_PLAN, "tool"),
        (BAD_REF_PLAN, "town"),
        ('{"steps": [{"id": "s1", "args": {}}]}', "tool"),  # a missing field
        ("Sure! Here you go:\n```json\n" + GOOD_PLAN[:-1] + ",}\n```\nGood luck", ""),
    ],
)
async def test_bad_plans_are_re_asked_and_never_run(fake: FakeOpenAI, bad: str, why: str) -> None:
    fake.script(bad, GOOD_PLAN)
    CALLS.clear()
    runtime, summary = await run(agent_with(http_model(fake)), "weather for A1?")
    assert summary.status is RunStatus.FINISHED
    calls = [e.data for e in await runtime.events(summary.run_id) if e.type is EventType.MODEL_CALL]
    if why:
        assert [c["accepted"] for c in calls] == [False, True]
        assert why in calls[0]["reason"]
        assert "rejected" in fake.requests[1]["messages"][-1]["content"]  # the re-ask
    else:  # prose, fences and a trailing comma are repaired, not re-asked
        assert [c["accepted"] for c in calls] == [True] and calls[0]["repaired"]
    assert CALLS == ["lookup", "forecast"]


async def test_a_plan_still_invalid_after_two_re_asks_is_handed_off(fake: FakeOpenAI) -> None:
    fake.script(CYCLIC_PLAN, CYCLIC_PLAN, CYCLIC_PLAN)
    CALLS.clear()
    runtime, summary = await run(agent_with(http_model(fake)), "weather for A1?")
    assert summary.status is RunStatus.HANDED_OFF and CALLS == []
    assert summary.handoff is not None and summary.handoff.reason_code == "PLAN_INVALID"
    assert len(fake.requests) == 3
    kinds = [e.type for e in await runtime.events(summary.run_id)]
    assert EventType.PLAN_REJECTED in kinds and EventType.TOOL_ATTEMPT not in kinds


async def test_empty_plan_means_cannot_do(fake: FakeOpenAI) -> None:
    fake.script('{"steps": []}')
    CALLS.clear()
    _, summary = await run(agent_with(http_model(fake)), "weather for A1?")
    assert summary.status is RunStatus.HANDED_OFF and CALLS == []


async def test_an_invented_id_cannot_reach_a_tool_without_the_entity(fake: FakeOpenAI) -> None:
    fake.script(INVENTED_ID_PLAN, INVENTED_ID_PLAN, INVENTED_ID_PLAN)
    CALLS.clear()
    agent = agent_with(http_model(fake))
    _, summary = await run(agent, "weather for my order?")
    # A literal id the user never gave is a guess: the grounding check rejects it.
    assert CALLS == [] and summary.status is RunStatus.HANDED_OFF


# ------------------------------------------------------------------ pipeline and fallback


def _record() -> tuple[list[Attempt], Any]:
    attempts: list[Attempt] = []
    return attempts, attempts.append


class Pair(BaseModel):
    a: int
    b: str


async def _call(model: Any, request: ModelRequest) -> Any:
    return await model.complete(request)


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"a": 1, "b": "x",}\n```',
        'Here it is: {"a": 1, "b": "x"} thanks',
        '{"a": 1, "b": "x"',
    ],
)
async def test_repair_handles_fences_prose_and_truncation(text: str) -> None:
    attempts, record = _record()
    value = await ask_structured(ScriptedModel([text]), ModelRequest("t", ()), Pair, _call, record)
    assert value == Pair(a=1, b="x") and attempts[0].repaired


async def test_invalid_output_is_re_asked_with_errors_then_fails() -> None:
    attempts, record = _record()
    model = ScriptedModel(['{"a": "x"}', "no json", '{"a": 2, "b": "y"}'])
    value = await ask_structured(model, ModelRequest("t", ()), Pair, _call, record)
    assert value.a == 2 and [a.accepted for a in attempts] == [False, False, True]
    assert "a:" in attempts[0].reason and "b:" in attempts[0].reason
    assert "rejected" in model.requests[1].messages[-1].content
    with pytest.raises(ModelOutputInvalidError) as info:
        await ask_structured(ScriptedModel(["{}"] * 3), ModelRequest("t", ()), Pair, _call, record)
    assert info.value.code.value == "MODEL_OUTPUT_INVALID"


async def test_intent_fallback_is_constrained_to_the_enum() -> None:
    model = ScriptedModel(
        [
            '{"label": "refund_everything", "confidence": 0.99}',
            '{"label": "greet", "confidence": 0.93}',
        ]
    )
    _, summary = await run(agent_with(model), "good morning, friend")
    assert summary.intent is not None and summary.intent.source == "model"
    assert summary.intent.label == "greet" and summary.reply == "hi"
    model.assert_complete()


async def test_intent_fallback_none_or_down_means_clarify(fake: FakeOpenAI) -> None:
    _, summary = await run(
        agent_with(ScriptedModel(['{"label": "none", "confidence": 0.9}'])), "qwerty"
    )
    assert summary.status is RunStatus.AWAITING_USER
    fake.script(*[Behaviour(status=500)] * 12)
    _, summary = await run(agent_with(http_model(fake)), "qwerty")
    assert summary.status is RunStatus.AWAITING_USER


async def test_model_budget_degrades_to_a_handoff() -> None:
    model = ScriptedModel([CYCLIC_PLAN, GOOD_PLAN])
    config = parse_config({**CONFIG, "budget": {"max_model_calls": 1}})
    agent = Agent.build(config, [lookup, forecast], model=model)
    CALLS.clear()
    runtime, summary = await run(agent, "weather for A1?")
    assert summary.status is RunStatus.HANDED_OFF and CALLS == []
    assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"
    kinds = [e.type for e in await runtime.events(summary.run_id)]
    assert EventType.BUDGET_EXCEEDED in kinds


async def test_temperatures_follow_the_layer() -> None:
    intent = '{"label": "ask", "confidence": 0.9}'
    extract = '{"entities": {}}'
    reply = '{"text": "Your order A1 goes to Shanghai, and it will rain there."}'
    model = ScriptedModel([extract, intent, GOOD_PLAN, reply])
    config = {
        **CONFIG,
        "entities": {**CONFIG["entities"], "city": {"kind": "pattern"}},
        "model": {
            "intent_fallback": True,
            "extract_entities": True,
            "replies": True,
            "temperatures": LAYER_TEMPERATURES,
        },
    }
    agent = Agent.build(parse_config(config), [lookup, forecast], model=model)
    _, summary = await run(agent, "will it rain where A1 goes?")
    assert summary.status is RunStatus.FINISHED and summary.reply == json.loads(reply)["text"]
    asked = [(r.purpose, r.temperature) for r in model.requests]
    assert asked == [(p, LAYER_TEMPERATURES[p]) for p in ("extract", "intent", "plan", "reply")]


# ------------------------------------------------------------------ replay


async def test_replay_takes_the_same_path_and_detects_a_change() -> None:
    model = ScriptedModel([CYCLIC_PLAN, GOOD_PLAN])
    agent = agent_with(model)
    runtime, summary = await run(agent, "weather for A1?")
    events = await runtime.events(summary.run_id)
    CALLS.clear()
    report = await replay_run(agent, events)
    assert report.same_path, report
    assert CALLS == []  # tools answered from the log
    changed = Agent.build(
        parse_config(
            {
                **CONFIG,
                "templates": {**CONFIG["templates"], "done": {"zh": "完成了", "en": "all done"}},
            }
        ),
        [lookup, forecast],
        model=model,
    )
    report = await replay_run(changed, events)
    assert not report.same_path and report.original is not None
    assert report.original[0] == "reply"


def test_scripted_model_asserts_it_was_used_fully() -> None:
    model = ScriptedModel(["a", "b"])
    asyncio.run(model.complete(ModelRequest("t", ())))
    with pytest.raises(AssertionError):
        model.assert_complete()


async def test_a_literal_the_user_said_is_grounded() -> None:
    plan = json.dumps({"steps": [{"id": "s1", "tool": "forecast", "args": {"city": "Paris"}}]})
    CALLS.clear()
    _, summary = await run(agent_with(ScriptedModel([plan])), "weather in Paris tomorrow?")
    assert summary.status is RunStatus.FINISHED and CALLS == ["forecast"]


def test_cli_model_fallback_and_replay(fake: FakeOpenAI, tmp_path: Any) -> None:
    import os
    import shutil
    import subprocess
    import sys

    import yaml

    from tests.conftest import AFTERSALES, ROOT

    agent_dir = tmp_path / "agent"
    shutil.copytree(AFTERSALES, agent_dir)
    config = yaml.safe_load((agent_dir / "agent.yaml").read_text("utf-8"))
    config["model"] = {"intent_fallback": True}
    (agent_dir / "agent.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    fake.script('{"label": "无关闲聊", "confidence": 0.95}')
    env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}

    def corral(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "corral", *args, "--home", str(tmp_path / "home")],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )

    done = corral(
        "run", str(agent_dir), "早呀朋友，吃了吗", "--json", "--model", "openai:fake-model"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["intent"] == {"label": "无关闲聊", "confidence": 0.95, "source": "model"}
    assert data["status"] == "finished"
    replayed = corral("replay", data["run_id"], "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["same_path"] is True
    assert len(fake.requests) == 1  # the replay never called the model


# ------------------------------------------------------------------ judge, replies, extraction

JUDGED_PLAN = json.dumps(
    {
        "steps": [
            {
                "id": "s1",
                "tool": "lookup",
                "args": {"order_id": "$entities.order_id"},
                "success": "result.city != ''",
            },
        ]
    }
)


def judged_agent(model: Any, judge: str | None = "the city is a real place") -> Agent:
    steps = [
        {
            "id": "s1",
            "tool": "lookup",
            "args": {"order_id": "$entities.order_id"},
            "judge": judge,
            "facts": {"city": "result.city"},
        }
    ]
    config = parse_config(
        {
            **CONFIG,
            "intents": [
                {
                    "name": "ask",
                    "rules": [{"keywords": ["weather"], "confidence": 0.95}],
                    "route": "plan",
                    "plan": "p",
                    "reply": "done",
                }
            ],
            "plans": {"p": {"steps": steps}},
            "model": {**CONFIG["model"], "temperatures": LAYER_TEMPERATURES},
        }
    )
    return Agent.build(config, [lookup, forecast], model=model)


async def test_judge_runs_after_deterministic_checks_and_can_fail_a_step() -> None:
    model = ScriptedModel(['{"passed": false, "reason": "no such city", "risks": ["typo"]}'])
    runtime, summary = await run(judged_agent(model), "weather for A1?")
    assert summary.steps[0].error_code == "SUCCESS_CRITERIA_FAILED"
    assert summary.status is RunStatus.HANDED_OFF
    assert [(r.purpose, r.temperature) for r in model.requests] == [
        ("judge", LAYER_TEMPERATURES["judge"])
    ]
    verdicts = [  # the step's own verdict is part of its step_finished (format 2)
        e.data["verdict"]
        for e in await runtime.events(summary.run_id)
        if e.type is EventType.STEP_FINISHED
    ]
    assert "no such city" in verdicts[-1]["reason"] and "typo" in verdicts[-1]["reason"]
    ok = ScriptedModel(['{"passed": true, "reason": "Shanghai is real"}'])
    _, summary = await run(judged_agent(ok), "weather for A1?")
    assert summary.status is RunStatus.FINISHED


async def test_model_reply_is_checked_for_invented_values_and_falls_back() -> None:
    config = {**CONFIG, "model": {"replies": True}}
    invented = '{"text": "Your order A1 ships to Shanghai, arriving on 2026-12-24."}'
    grounded = '{"text": "Your order A1 goes to Shanghai, and it will rain there."}'
    model = ScriptedModel([GOOD_PLAN, invented, grounded])
    agent = Agent.build(parse_config(config), [lookup, forecast], model=model)
    runtime, summary = await run(agent, "weather for A1?")
    assert summary.reply == "Your order A1 goes to Shanghai, and it will rain there."
    calls = [
        e.data
        for e in await runtime.events(summary.run_id)
        if e.type is EventType.MODEL_CALL and e.data["purpose"] == "reply"
    ]
    assert [c["accepted"] for c in calls] == [False, True]
    assert "2026-12-24" in calls[0]["reason"]
    table = '{"text": "| order | city |\\n| A1 | Shanghai |"}'
    stubborn = ScriptedModel([GOOD_PLAN, invented, table, invented])
    agent = Agent.build(parse_config(config), [lookup, forecast], model=stubborn)
    _, summary = await run(agent, "weather for A1?")
    assert summary.reply == "done"  # the template, after the model's replies were rejected


async def test_model_extraction_is_grounded_in_the_text() -> None:
    config = {
        **CONFIG,
        "model": {"extract_entities": True, "intent_fallback": False},
        "entities": {
            "order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]},
            "city": {"kind": "pattern"},
        },
    }
    model = ScriptedModel(['{"entities": {"city": "Paris"}}', GOOD_PLAN])
    agent = Agent.build(parse_config(config), [lookup, forecast], model=model)
    runtime, summary = await run(agent, "weather for order A1?")
    state = await runtime.load_state(summary.run_id)
    assert "city" not in state.entities  # "Paris" was never said
    rejected = [
        e.data for e in await runtime.events(summary.run_id) if e.type is EventType.ENTITY_REJECTED
    ]
    assert rejected and rejected[0]["name"] == "city"
    model = ScriptedModel(['{"entities": {"city": "Lyon"}}', GOOD_PLAN])
    agent = Agent.build(parse_config(config), [lookup, forecast], model=model)
    runtime, summary = await run(agent, "weather in Lyon for order A1?")
    state = await runtime.load_state(summary.run_id)
    assert state.entities["city"] == "Lyon"


@tool
def flaky_forecast(city: str) -> Weather:
    """Tomorrow's weather from a provider that is down."""
    CALLS.append("flaky_forecast")
    from corral.errors import ToolFailedError

    raise ToolFailedError("provider is down")


async def test_replan_after_a_failure_keeps_finished_steps() -> None:
    first = json.dumps(
        {
            "steps": [
                {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}},
                {
                    "id": "s2",
                    "tool": "flaky_forecast",
                    "args": {"city": "$s1.result.city"},
                    "depends_on": ["s1"],
                },
            ]
        }
    )
    clash = json.dumps({"steps": [{"id": "s1", "tool": "forecast", "args": {"city": "Shanghai"}}]})
    second = json.dumps(
        {
            "steps": [
                {
                    "id": "r1",
                    "tool": "forecast",
                    "args": {"city": "$s1.result.city"},
                    "depends_on": ["s1"],
                    "facts": {"rain": "result.rain"},
                }
            ]
        }
    )
    model = ScriptedModel([first, clash, second])
    config = parse_config(
        {
            **CONFIG,
            "intents": [
                {**CONFIG["intents"][0], "tools": ["lookup", "forecast", "flaky_forecast"]},
                CONFIG["intents"][1],
            ],
        }
    )
    agent = Agent.build(config, [lookup, forecast, flaky_forecast], model=model)
    CALLS.clear()
    runtime, summary = await run(agent, "weather for A1?")
    assert summary.status is RunStatus.FINISHED
    assert CALLS == ["lookup", "flaky_forecast", "forecast"]  # s1 was not run again
    events = await runtime.events(summary.run_id)
    plans = [e.data for e in events if e.type is EventType.PLAN_CREATED]
    assert len(plans) == 2 and plans[1]["replan"] == 1 and plans[1]["kept"] == ["s1"]
    assert "provider is down" in plans[1]["failure"]
    assert "already used" in [e.data for e in events if e.type is EventType.MODEL_CALL][1]["reason"]
    model.assert_complete()


async def test_replans_are_bounded_then_handed_off() -> None:
    failing = json.dumps(
        {"steps": [{"id": "s1", "tool": "flaky_forecast", "args": {"city": "Paris"}}]}
    )
    again = json.dumps(
        {"steps": [{"id": "r1", "tool": "flaky_forecast", "args": {"city": "Paris"}}]}
    )
    more = json.dumps(
        {"steps": [{"id": "r2", "tool": "flaky_forecast", "args": {"city": "Paris"}}]}
    )
    model = ScriptedModel([failing, again, more])
    config = parse_config(
        {
            **CONFIG,
            "intents": [
                {**CONFIG["intents"][0], "tools": ["flaky_forecast"]},
                CONFIG["intents"][1],
            ],
        }
    )
    agent = Agent.build(config, [flaky_forecast], model=model)
    _, summary = await run(agent, "weather in Paris?")
    assert summary.status is RunStatus.HANDED_OFF
    model.assert_complete()  # one plan and two replans, no more


def test_context_budget_keeps_the_newest_summaries() -> None:
    from corral.models.context import clip, fit_summaries

    summaries = [f"s{i} lookup: order shipped to Shanghai, parcel moving" for i in range(50)]
    kept = fit_summaries(summaries, 60)
    assert kept[0].startswith("(") and "earlier steps done" in kept[0]
    assert kept[-1] == summaries[-1] and len(kept) < 10
    assert fit_summaries(summaries[:2], 1000) == summaries[:2]
    long = "很长的文本" * 500
    assert len(clip(long, 50)) < len(long) and clip("short", 50) == "short"


def test_model_strings() -> None:
    from corral.errors import ConfigInvalidError
    from corral.models.replay import ReplayModel
    from corral.models.resolve import resolve_model

    assert resolve_model("openai:deepseek-chat", base_url="http://127.0.0.1:9/v1").name == (
        "openai:deepseek-chat"
    )
    replay = resolve_model("replay:run_1", replay_loader=lambda run_id: ReplayModel())
    assert isinstance(replay, ReplayModel)
    with pytest.raises(ConfigInvalidError):
        resolve_model("gpt-4")
    with pytest.raises(ConfigInvalidError):
        resolve_model("replay:run_1")


async def test_replay_model_fails_loudly_on_an_unseen_request() -> None:
    from corral.errors import ReplayDivergedError
    from corral.models.replay import ReplayModel

    with pytest.raises(ReplayDivergedError):
        await ReplayModel().complete(ModelRequest("plan", (Message("user", "new"),)))


async def test_an_answer_longer_than_what_is_recorded_is_rejected_live_as_in_a_replay() -> None:
    """Found by a walkthrough: a plan after 25 000 spaces was accepted live, stored cut at
    20 000 characters, and ``corral replay`` of the run diverged (rejected there)."""
    from corral.models.structured import MAX_RECORDED_TEXT

    attempts, record = _record()
    padded = " " * MAX_RECORDED_TEXT + '{"a": 1, "b": "x"}'
    model = ScriptedModel([padded, '{"a": 2, "b": "y"}'])
    value = await ask_structured(model, ModelRequest("t", ()), Pair, _call, record)
    assert value.a == 2 and [a.accepted for a in attempts] == [False, True]
    assert "20,000 characters or more" in (attempts[0].reason or "")


async def test_a_cut_answer_that_json_repair_would_close_is_rejected_in_a_replay_too() -> None:
    """Review of 90eefb5: the record keeps the first 20 000 characters; a replay was handed
    exactly that, not over the limit, and json-repair closed the cut string: accepted
    there (a=1) where the live run had rejected it and taken the next answer (a=2)."""
    attempts, record = _record()
    long = '{"a": 1, "b": "' + "x" * 25_000 + '"}'
    live = ScriptedModel([long, '{"a": 2, "b": "y"}'])
    assert (await ask_structured(live, ModelRequest("t", ()), Pair, _call, record)).a == 2
    recorded = [str(a.as_event()["text"]) for a in attempts]
    replayed, record_again = _record()
    again = ScriptedModel(recorded)
    assert (await ask_structured(again, ModelRequest("t", ()), Pair, _call, record_again)).a == 2
    assert [a.accepted for a in replayed] == [False, True]
