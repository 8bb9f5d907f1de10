"""Runs that end badly, driven whole: a run that ends ``failed``, a judge that cannot be
asked, a planner that cannot be asked, an extraction model that is down.

Each asserts what a user or operator sees (status, error code, reply, stored packet) and
that nothing ran that should not have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.errors import ModelUnavailableError
from corral.models import ModelRequest, ScriptedModel
from corral.testing import FixedEffects
from tests.helpers import corral_cli, write_agent
from tests.one_intent import ORDER_ID, one_intent

CALLS: list[str] = []


class Order(BaseModel):
    order_id: str
    city: str


@tool
def lookup(order_id: str) -> Order:
    """Find an order and the city it ships to."""
    CALLS.append(f"lookup {order_id}")
    return Order(order_id=order_id, city="Shanghai")


def down(request: ModelRequest) -> str:
    """A model endpoint that is down for every request."""
    raise ModelUnavailableError(f"endpoint down ({request.purpose})")


async def start(agent: Agent, message: str) -> tuple[Runtime, Any]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    return runtime, await runtime.start(message)


# ------------------------------------------------------------------ a run that ends failed

ROUTED_BY_RULE = {
    "name": "rules-only",
    "default_language": "en",
    "entities": {"order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"]}},
    "intents": [
        {
            "name": "track",
            "rules": [{"keywords": ["track"], "confidence": 0.95}],
            "route": "plan",
            # no default plan: a message matching no rule has no template to run
            "plan_rules": [{"when": "entities.order_id", "plan": "p"}],
            "reply": "done",
        }
    ],
    "plans": {
        "p": {"steps": [{"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}}]}
    },
    "templates": {"done": {"zh": "好了", "en": "done"}},
}


async def test_a_run_with_no_template_to_run_ends_failed_with_a_packet() -> None:
    CALLS.clear()
    agent = Agent.build(parse_config(ROUTED_BY_RULE), [lookup])
    runtime, summary = await start(agent, "track my parcel please")
    assert summary.status is RunStatus.FAILED
    assert summary.error_code == "PLAN_INVALID"
    assert summary.reply == "Sorry, I could not complete this; a colleague will follow up."
    assert summary.handoff is not None and summary.handoff.reason_code == "PLAN_INVALID"
    assert "no plan template" in summary.handoff.reason
    assert CALLS == []  # nothing was planned, so nothing ran
    events = await runtime.events(summary.run_id)
    finished = [e.data for e in events if e.type is EventType.RUN_FINISHED]
    assert finished == [
        {
            "status": "failed",
            "outcome": "failed",
            "error_code": "PLAN_INVALID",
            "active_s": finished[0]["active_s"],
        }
    ]
    assert not any(e.type is EventType.PLAN_CREATED for e in events)
    # the rule that does hold still runs the plan: the failure is specific to the gap
    _, ok = await start(agent, "track order A7")
    assert ok.status is RunStatus.FINISHED and CALLS == ["lookup A7"]


TOOLS_PY = """
    from pydantic import BaseModel
    from corral import tool


    class Order(BaseModel):
        order_id: str
        city: str


    @tool
    def lookup(order_id: str) -> Order:
        \"\"\"Find an order.\"\"\"
        raise AssertionError("no step may run")
"""


def test_cli_shows_a_failed_run_and_its_packet(tmp_path: Path) -> None:
    import yaml

    folder = write_agent(tmp_path / "agent", yaml.safe_dump(ROUTED_BY_RULE), TOOLS_PY)
    home = tmp_path / "home"
    done = corral_cli(home, "run", str(folder), "track my parcel", "--json")
    shown = json.loads(done.stdout)
    assert shown["status"] == "failed" and shown["error_code"] == "PLAN_INVALID"
    assert shown["outcome"] == "failed" and shown["steps"] == []
    packet = json.loads(corral_cli(home, "handoff", shown["run_id"], "--json").stdout)
    assert packet["reason_code"] == "PLAN_INVALID"
    assert packet["user_messages"] == ["track my parcel"]
    listed = corral_cli(home, "show", shown["run_id"]).stdout
    assert "failed" in listed


# ------------------------------------------------------------------ models that are down

WITH_CITY = {**ORDER_ID, "city": {"kind": "pattern"}}
MODEL_CONFIG = one_intent(
    "weather", tools=["lookup"], entities=WITH_CITY, model={"intent_fallback": False}
)


async def test_planner_down_hands_off_with_the_model_code_and_runs_nothing() -> None:
    CALLS.clear()
    model = ScriptedModel(function=down)
    agent = Agent.build(parse_config(MODEL_CONFIG), [lookup], model=model)
    runtime, summary = await start(agent, "weather for A1?")
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.error_code == "MODEL_UNAVAILABLE"
    assert summary.handoff is not None and summary.handoff.reason_code == "MODEL_UNAVAILABLE"
    assert summary.handoff.reason.startswith("the planner could not be asked")
    assert CALLS == [] and summary.steps == []
    # Retried by corral's policy (model.max_retries: 2), never re-asked; each an event.
    assert [r.purpose for r in model.requests] == ["plan"] * 3
    events = await runtime.events(summary.run_id)
    assert not any(e.type is EventType.PLAN_CREATED for e in events)
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert [(c["try"], c["error_code"]) for c in calls] == [
        (n, "MODEL_UNAVAILABLE") for n in (1, 2, 3)
    ]


async def test_extraction_model_down_keeps_the_rules_entities() -> None:
    CALLS.clear()
    plan = json.dumps(
        {"steps": [{"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}}]}
    )

    def answer(request: ModelRequest) -> str:
        if request.purpose == "extract":
            raise ModelUnavailableError("extraction endpoint down")
        return plan

    model = ScriptedModel(function=answer)
    model_settings = {"extract_entities": True, "intent_fallback": False, "max_retries": 0}
    config = {**MODEL_CONFIG, "model": model_settings}
    agent = Agent.build(parse_config(config), [lookup], model=model)
    runtime, summary = await start(agent, "weather in Lyon for order A3?")
    assert summary.status is RunStatus.FINISHED and summary.reply == "done"
    assert [r.purpose for r in model.requests] == ["extract", "plan"]
    state = await runtime.load_state(summary.run_id)
    assert state.entities == {"order_id": "A3"}  # the rules' entity; no guessed city
    assert CALLS == ["lookup A3"]
    events = await runtime.events(summary.run_id)
    assert not any(e.type is EventType.ENTITY_REJECTED for e in events)


JUDGED = one_intent(
    "weather",
    steps=[
        {
            "id": "s1",
            "tool": "lookup",
            "args": {"order_id": "$entities.order_id"},
            "judge": "the city is a real place",
        }
    ],
    entities=WITH_CITY,
    model={"intent_fallback": False},
)


async def test_an_unavailable_judge_fails_the_step_and_hands_off() -> None:
    CALLS.clear()
    model = ScriptedModel(function=down)
    agent = Agent.build(parse_config(JUDGED), [lookup], model=model)
    runtime, summary = await start(agent, "weather for A5?")
    assert CALLS == ["lookup A5"]  # the tool ran once; the judge's outage is not retried
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.steps[0].error_code == "MODEL_UNAVAILABLE"
    assert summary.reply != "done"
    verdicts = [  # the step's own verdict is part of its step_finished (format 2)
        e.data["verdict"]
        for e in await runtime.events(summary.run_id)
        if e.type is EventType.STEP_FINISHED
    ]
    assert verdicts[-1]["passed"] is False
    assert verdicts[-1]["code"] == "MODEL_UNAVAILABLE"
    assert verdicts[-1]["reason"].startswith("judge unavailable: ")
