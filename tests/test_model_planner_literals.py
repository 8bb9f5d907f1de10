"""Which literal values a model plan may contain, through a real run.

A literal the user never said is an invented value and is sent back as a re-ask; one of
the parameter's declared ``Literal`` values is a choice, not an invention, and runs.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.models import ScriptedModel
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[dict[str, Any]] = []


class Temperature(BaseModel):
    value: float


@tool
def forecast(
    order_id: str, city: str | None = None, unit: Literal["metric", "imperial"] = "metric"
) -> Temperature:
    """Tomorrow's temperature where an order goes, in metric or imperial units."""
    CALLS.append({"order_id": order_id, "city": city, "unit": unit})
    return Temperature(value=20.0)


CONFIG = one_intent("weather", tools=["forecast"])


def plan(**args: str) -> str:
    return json.dumps(
        {
            "steps": [
                {
                    "id": "s1",
                    "tool": "forecast",
                    "args": {"order_id": "$entities.order_id", **args},
                }
            ]
        }
    )


async def test_an_invented_literal_is_re_asked_and_a_declared_choice_runs() -> None:
    CALLS.clear()
    model = ScriptedModel([plan(city="Paris", unit="imperial"), plan(unit="imperial")])
    agent = Agent.build(parse_config(CONFIG), [forecast], model=model)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("weather for A1?")
    assert summary.status is RunStatus.FINISHED
    assert CALLS == [{"order_id": "A1", "city": None, "unit": "imperial"}]  # never said
    calls = [e.data for e in await runtime.events(summary.run_id) if e.type is EventType.MODEL_CALL]
    assert [c["accepted"] for c in calls] == [False, True]
    assert calls[0]["reason"] == (
        "s1.city: 'Paris' was not given by the user; use a $entities or $sN.result "
        "reference instead of inventing it"
    )  # and nothing about unit: "imperial" is a declared value
    model.assert_complete()
