"""A rule or success criterion comparing a typed value with a literal it can never match is
refused at load, by the types the tools declare.

The defects (reproduced through ``corral run``): ``require: facts.fines < "10"`` loaded,
could not be judged at run time, and the rule's refusal told the customer that 2.5 in
fines blocked the renewal; ``success: result.fines >= "0"`` failed a step that had
found the member, and the plan's answer said "member not found".
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from corral import Agent, ToolPolicy, parse_config, tool
from corral.errors import ConfigInvalidError
from corral.typecheck import scalar_kind
from corral.verify.expressions import comparison_problems, compile_expression


class Member(BaseModel):
    fines: float
    status: Literal["active", "suspended"]
    vip: bool
    name: str


@tool
def get_member(member_id: str) -> Member:
    """Look up a member."""
    return Member(fines=2.5, status="active", vip=False, name="Ann")


class Renewal(BaseModel):
    renewal: str


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def renew(loan_id: str, days: int = 14) -> Renewal:
    """Renew a loan."""
    return Renewal(renewal=f"R-{loan_id}")


def agent(require: str = "true", success: str | None = None) -> Agent:
    first: dict[str, Any] = {
        "id": "s1",
        "tool": "get_member",
        "args": {"member_id": "$entities.member_id"},
        "facts": {"fines": "result.fines", "status": "result.status", "vip": "result.vip"},
    }
    if success is not None:
        first["success"] = success
    data = {
        "name": "loans",
        "entities": {
            "member_id": {"patterns": [r"(M\d+)"]},
            "loan_id": {"patterns": [r"(L\d+)"]},
            "amount": {"kind": "amount"},
        },
        "intents": [
            {
                "name": "renew",
                "rules": [{"keywords": ["renew"], "confidence": 0.95}],
                "route": "plan",
                "plan": "renew",
                "reply": "done",
            }
        ],
        "plans": {
            "renew": {
                "steps": [
                    first,
                    {
                        "id": "s2",
                        "tool": "renew",
                        "args": {"loan_id": "$entities.loan_id"},
                        "depends_on": ["s1"],
                    },
                ]
            }
        },
        "business_rules": [
            {"name": "no_fines", "before_tool": "renew", "require": require, "refusal": "done"}
        ],
        "templates": {"done": {"zh": "好", "en": "ok"}},
    }
    return Agent.build(parse_config(data), [get_member, renew])


@pytest.mark.parametrize(
    "require",
    [
        "facts.fines < 10",
        "facts.fines == 0 or facts.vip == true",
        "facts.vip",
        'facts.status == "active"',
        'facts.status != "suspended" and args.days <= 30',
        "facts.amount > 5",  # an amount entity is a number
        "facts.vip == 1",  # a bool is a number to Python
        "facts.fines != null",
        "-1 < facts.fines",
        'lower(facts.status) == "active"',  # a call: its type is not known, not checked
    ],
)
def test_comparisons_that_may_hold_load(require: str) -> None:
    agent(require=require)


@pytest.mark.parametrize(
    ("require", "says"),
    [
        ('facts.fines < "10"', "facts.fines is float, so comparing it with '10' cannot be"),
        ('"10" > facts.fines', "facts.fines is float, so comparing it with '10' cannot be"),
        ('facts.fines == "0"', "facts.fines is float, so comparing it with '0' is never equal"),
        ('facts.status == "shiped"', "is never equal (it is one of 'active', 'suspended')"),
        ("facts.status == 3", "facts.status is Literal['active', 'suspended']"),
        ('args.days < "30"', "args.days is int, so comparing it with '30' cannot be judged"),
        ('facts.vip == "yes"', "facts.vip is bool, so comparing it with 'yes' is never equal"),
        ("facts.member_id > 3", "facts.member_id is str"),
    ],
)
def test_a_comparison_that_can_never_hold_is_refused_at_load(require: str, says: str) -> None:
    with pytest.raises(ConfigInvalidError) as info:
        agent(require=require)
    assert "business rule no_fines: " in info.value.message
    assert says in info.value.message


def test_a_success_criterion_is_checked_against_the_tools_output_and_facts() -> None:
    with pytest.raises(ConfigInvalidError) as info:
        agent(success='result.fines >= "0"')
    assert "plan renew: s1.success: 'result.fines >= \"0\"': result.fines is float" in (
        info.value.message
    )
    agent(success="result.fines >= 0 and result.name != ''")


def test_the_kinds_a_comparison_can_check() -> None:
    from datetime import date
    from enum import Enum

    class Colour(Enum):
        RED = "red"

    assert scalar_kind(float | None) == ("number", None)
    assert scalar_kind(bool) == ("bool", None)
    assert scalar_kind(date) == ("date", None)
    assert scalar_kind(Literal["a", "b"]) == ("text", ("a", "b"))
    assert scalar_kind(Colour)[0] == "text"
    assert scalar_kind(list[int]) == (None, None)
    assert scalar_kind(int | str) == (None, None)
    expression = compile_expression('facts.when < "2026-01-01"')
    assert comparison_problems(expression, lambda path: date) == [
        "'facts.when < \"2026-01-01\"': facts.when is date, so comparing it with '2026-01-01' "
        "cannot be judged: the two are not ordered"
    ]


def test_a_fact_that_is_also_an_entity_of_another_type_is_not_checked() -> None:
    """Until a step publishes ``x``, the entity's text stands in for it: either type."""
    from corral.planning.validate import path_types

    facts = {"x": (get_member, ("fines",))}
    assert path_types(renew, facts, {})(("facts", "x")) is float
    assert path_types(renew, facts, {"x": str})(("facts", "x")) is None
    assert path_types(renew, facts, {"x": float})(("facts", "x")) is float
    assert path_types(renew, {}, {"x": str})(("entities", "x")) is str
    assert path_types(renew, {}, {})(("args", "days")) is int
    assert path_types(renew, {}, {})(("args", "nope")) is None
