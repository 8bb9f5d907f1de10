"""Names that point at a step or an entity are checked when the agent loads.

Found by a walkthrough: ``requires: [booking_reff]`` loaded and asked for ``booking_reff``
forever; ``confirm: {s55: ...}``, ``on_failure: {s11: ...}`` and ``questions: {roomtype:
...}`` loaded and were silently never used (the generic prompt, a handoff instead of the
declared answer, the generic question). The triage example itself carried an
``on_failure`` for a step three of its plans do not have.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, ToolPolicy, parse_config, tool
from corral.errors import ConfigInvalidError
from tests.conftest import ROOT
from tests.one_intent import one_intent


class Found(BaseModel):
    value: int


@tool
def lookup(order_id: str) -> Found:
    """Looks an order up."""
    return Found(value=1)


STEP = {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}}
TEMPLATES = {"done": {"zh": "好了", "en": "done"}, "ask_it": {"zh": "哪个?", "en": "which?"}}


def build(config: dict[str, Any]) -> Agent:
    return Agent.build(parse_config(config), [lookup])


def test_a_well_named_agent_loads() -> None:
    asked = {**STEP, "requires_confirmation": True}  # its prompt is shown
    config = one_intent("go", steps=[asked], requires=["order_id"], templates=TEMPLATES)
    config["plans"]["p"].update(confirm={"s1": "ask_it"}, on_failure={"s1": "done"})
    config["questions"] = {"order_id": "ask_it"}
    assert build(config).config.plans["p"].confirm == {"s1": "ask_it"}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"confirm": {"s55": "ask_it"}}, "confirm names step 's55'"),
        ({"on_failure": {"s11": "done"}}, "on_failure names step 's11'"),
    ],
)
def test_a_plan_s_prompt_or_answer_for_a_step_it_lacks_is_refused(
    change: dict[str, Any], said: str
) -> None:
    config = one_intent("go", steps=[STEP], templates=TEMPLATES)
    config["plans"]["p"].update(change)
    with pytest.raises(ConfigInvalidError, match=said) as raised:
        build(config)
    assert "steps: s1" in raised.value.message


def test_a_question_for_an_undeclared_entity_is_refused() -> None:
    config = one_intent("go", steps=[STEP], templates=TEMPLATES)
    config["questions"] = {"orderid": "ask_it"}
    with pytest.raises(ConfigInvalidError, match="no entity 'orderid' is declared"):
        build(config)


def test_requiring_an_undeclared_entity_is_refused() -> None:
    config = one_intent("go", steps=[STEP], requires=["order_idd"], templates=TEMPLATES)
    with pytest.raises(ConfigInvalidError) as raised:
        build(config)
    assert "requires 'order_idd', which is no declared entity" in raised.value.message
    assert "entities: order_id" in raised.value.message


def test_a_plan_template_requiring_an_undeclared_entity_is_refused() -> None:
    config = one_intent("go", steps=[STEP], templates=TEMPLATES)
    config["plans"]["p"]["requires"] = ["order_idd"]
    with pytest.raises(ConfigInvalidError) as raised:
        build(config)
    assert "plan p: requires 'order_idd', which is no declared entity" in raised.value.message


def test_the_examples_name_only_steps_and_entities_they_have() -> None:
    from corral import load_agent

    for name in ("aftersales", "orders", "triage", "ops"):
        load_agent(ROOT / "examples" / name)  # raises on any of the above


class Priced(BaseModel):
    price: float


class Room(BaseModel):
    room_type: str


@tool
def quote(order_id: str) -> Priced:
    """Quotes a price."""
    return Priced(price=120.0)


@tool
def features(order_id: str) -> Room:
    """Describes a room."""
    return Room(room_type="deluxe")


@tool(policy=ToolPolicy(kind="write"))
def upgrade(order_id: str) -> Found:
    """Upgrades a booking."""
    return Found(value=1)


def priced_plan(second_fact: str) -> dict[str, Any]:
    bound = {"order_id": "$entities.order_id"}
    steps = [
        {"id": "s1", "tool": "quote", "args": bound, "facts": {"price": "result.price"}},
        {"id": "s2", "tool": "features", "args": bound, "facts": {second_fact: "result.room_type"}},
        {"id": "s3", "tool": "upgrade", "args": bound, "depends_on": ["s1", "s2"]},
    ]
    config = one_intent("go", steps=steps, templates={**TEMPLATES, "no": {"zh": "不", "en": "no"}})
    config["business_rules"] = [
        {"name": "dear", "before_tool": "upgrade", "require": "facts.price > 100", "refusal": "no"}
    ]
    return config


def test_a_fact_a_rule_reads_published_as_two_kinds_is_refused() -> None:
    """Found by a walkthrough: the rule's type check was skipped (the type was unknown), and
    the run was refused with a reason that was not true."""
    with pytest.raises(ConfigInvalidError) as raised:
        Agent.build(parse_config(priced_plan("price")), [quote, features, upgrade])
    assert "fact 'price', which a rule reads, is published as number by s1" in str(raised.value)
    assert "text by s2" in str(raised.value)


def test_two_facts_of_their_own_kinds_load() -> None:
    agent = Agent.build(parse_config(priced_plan("room")), [quote, features, upgrade])
    assert agent.config.business_rules[0].name == "dear"


def test_a_fact_published_as_two_kinds_by_steps_in_order_loads() -> None:
    """The later step's value is the one the rule reads: no chance in it (the order
    agent of test_expression_types publishes ``amount`` so)."""
    config = priced_plan("price")
    config["plans"]["p"]["steps"][1]["depends_on"] = ["s1"]
    agent = Agent.build(parse_config(config), [quote, features, upgrade])
    assert agent.config.plans["p"].steps[1].depends_on == ["s1"]


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def renew(order_id: str) -> Found:
    """A write whose policy asks no one."""
    return Found(value=2)


@tool(policy=ToolPolicy(kind="write", idempotent=True, requires_confirmation=True))
def renew_asked(order_id: str) -> Found:
    """A write that asks."""
    return Found(value=3)


@pytest.mark.parametrize(
    ("step", "tools", "loads"),
    [
        ({"tool": "renew"}, [renew], False),
        ({"tool": "renew", "requires_confirmation": True}, [renew], True),
        ({"tool": "renew_asked"}, [renew_asked], True),
    ],
)
def test_a_confirmation_prompt_for_a_step_never_asked_is_refused(
    step: dict[str, Any], tools: list[Any], loads: bool
) -> None:
    """Found by a walkthrough: ``confirm: {s2: confirm_renew}`` for a write whose step and
    tool both lacked ``requires_confirmation`` loaded, and the write ran unconfirmed; the
    prompt, written for a person to approve it, was never shown."""
    config = one_intent("go", steps=[{**STEP, **step}], templates=TEMPLATES)
    config["plans"]["p"]["confirm"] = {"s1": "ask_it"}
    if loads:
        Agent.build(parse_config(config), tools)
        return
    with pytest.raises(ConfigInvalidError, match="neither the step nor renew requires confirm"):
        Agent.build(parse_config(config), tools)
