"""The grounding checks of model entity extraction, through real runs.

A model's value is kept only when it is a requested entity, appears in the message (or,
for a vocabulary, is the canonical value of a catalogue word in it), and matches the
entity's patterns. Everything else is dropped with an ``entity_rejected`` event saying
why, and never reaches a tool.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.config import EntitySpec
from corral.intent.model_extraction import ground
from corral.models import ModelRequest, ScriptedModel
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[dict[str, Any]] = []


class Weather(BaseModel):
    rain: bool


@tool
def forecast(order_id: str, city: str | None = None, colour: str | None = None) -> Weather:
    """Weather where an order goes."""
    CALLS.append({"order_id": order_id, "city": city, "colour": colour})
    return Weather(rain=True)


CONFIG = one_intent(
    "weather",
    steps=[
        {
            "id": "s1",
            "tool": "forecast",
            "args": {
                "order_id": "$entities.order_id",
                "city": "$entities.city?",
                "colour": "$entities.colour?",
            },
        }
    ],
    entities={
        "order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"], "upper": True},
        "city": {"kind": "pattern"},
        "colour": {"kind": "vocabulary", "vocabulary": {"crimson": "red", "navy": "blue"}},
    },
    requires=["order_id"],
    model={"extract_entities": True},
)


def extracting(answer: dict[str, str]) -> ScriptedModel:
    def reply(request: ModelRequest) -> str:
        assert request.purpose == "extract"
        return json.dumps({"entities": answer})

    return ScriptedModel([reply])


async def run(model: ScriptedModel, message: str) -> tuple[Any, Any, dict[str, str]]:
    agent = Agent.build(parse_config(CONFIG), [forecast], model=model)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start(message)
    state = await runtime.load_state(summary.run_id)
    rejected = {
        e.data["name"]: e.data["reason"]
        for e in await runtime.events(summary.run_id)
        if e.type is EventType.ENTITY_REJECTED
    }
    return summary, state, rejected


async def test_grounded_values_are_kept_and_the_rest_dropped_with_reasons() -> None:
    CALLS.clear()
    # the rules miss "a12" (no word boundary before it); the model finds it
    model = extracting({"order_id": "a12", "city": "Lyon", "colour": "red", "email": "a@b.c"})
    summary, state, rejected = await run(model, "weather for ordera12 in Lyon tomorrow")
    assert [r.purpose for r in model.requests] == ["extract"]
    assert "message: order_id, city, colour. " in model.requests[0].messages[0].content
    assert state.entities == {"order_id": "A12", "city": "Lyon"}  # pattern kept, upper-cased
    assert rejected == {
        "colour": "'red' is not a catalogue word in the message",
        "email": "not a requested entity",
    }
    assert summary.status is RunStatus.FINISHED
    assert CALLS == [{"order_id": "A12", "city": "Lyon", "colour": None}]


async def test_values_not_in_the_message_or_off_pattern_never_reach_a_tool() -> None:
    CALLS.clear()
    model = extracting({"order_id": "12", "city": "Paris", "colour": "navy"})
    summary, state, rejected = await run(model, "weather for order 12 please")
    assert rejected == {
        "order_id": "'12' does not match the entity's pattern",
        "city": "'Paris' does not appear in the message",
        "colour": "'navy' is not a catalogue word in the message",
    }
    assert state.entities == {}
    assert summary.status is RunStatus.AWAITING_USER  # asks for the order id instead
    assert CALLS == []


async def test_an_entity_the_rules_found_is_not_overridden_by_the_model() -> None:
    CALLS.clear()
    model = extracting({"order_id": "A99", "city": "Lyon"})
    summary, state, rejected = await run(model, "weather for A7 in Lyon")
    assert summary.status is RunStatus.FINISHED
    assert "message: city, colour. " in model.requests[0].messages[0].content  # not order_id
    assert rejected == {"order_id": "not a requested entity"}
    assert state.entities == {"order_id": "A7", "city": "Lyon"}
    assert CALLS == [{"order_id": "A7", "city": "Lyon", "colour": None}]


def test_a_vocabulary_value_is_kept_as_its_canonical_form() -> None:
    """The rules find catalogue words themselves, so this branch is checked directly."""
    spec = EntitySpec(kind="vocabulary", vocabulary={"Crimson": "red", "navy": "blue"})
    wanted = {"colour": spec}
    for proposed in ("red", "Crimson"):
        kept, dropped = ground("a CRIMSON scarf", {"colour": proposed}, wanted)
        assert (kept, dropped) == ({"colour": "red"}, {}), proposed
    kept, dropped = ground("a crimson scarf", {"colour": "blue"}, wanted)
    assert kept == {} and dropped == {"colour": "'blue' is not a catalogue word in the message"}
    kept, dropped = ground("a scarf", {"colour": " "}, {"c": EntitySpec()} | wanted)
    assert kept == {} and "colour" in dropped
    kept, dropped = ground("anything", {"c": "  "}, {"c": EntitySpec()})
    assert kept == {} and dropped == {"c": "'' does not appear in the message"}
