"""A rule or success criterion comparing a typed value with a literal it can never match is
refused at load, by the types the tools declare.

The defects (reproduced through ``corral run``): ``require: facts.fines < "10"`` loaded,
could not be judged at run time, and the rule's refusal told the customer that 2.5 in
fines blocked the renewal; ``success: result.fines >= "0"`` failed a step that had
found the member, and the plan's answer said "member not found".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

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
        # a constant key reads as an attribute: it loaded, then refused every renewal
        ("facts['fines'] == '2'", "facts.fines is float, so comparing it with '2' is never"),
        ('args["days"] < "30"', "args.days is int, so comparing it with '30' cannot be judged"),
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
    with pytest.raises(ConfigInvalidError) as info:
        agent(success="result['fines'] >= '0'")
    assert "result.fines is float" in info.value.message


def test_the_kinds_a_comparison_can_check() -> None:
    from enum import Enum

    class Colour(Enum):
        RED = "red"

    assert scalar_kind(float | None) == ("number", None)
    assert scalar_kind(bool) == ("bool", None)
    # expressions read JSON: a date, a Decimal, a UUID are text there (found by review)
    assert scalar_kind(date) == ("text", None)
    assert scalar_kind(Decimal) == ("text", None)
    assert scalar_kind(Literal["a", "b"]) == ("text", ("a", "b"))
    assert scalar_kind(Colour)[0] == "text"
    assert scalar_kind(list[int]) == (None, None)
    assert scalar_kind(int | str) == (None, None)
    assert (
        comparison_problems(compile_expression('facts.when < "2026-01-01"'), lambda _: date) == []
    )
    expression = compile_expression("facts.when < 20260101")
    assert comparison_problems(expression, lambda path: date) == [
        "'facts.when < 20260101': facts.when is date, so comparing it with 20260101 "
        "cannot be judged: the two are not ordered"
    ]


def test_a_fact_that_is_also_an_entity_of_another_type_is_not_checked() -> None:
    """Until a step publishes ``x``, the entity's text stands in for it: either type."""
    from corral.planning.validate import path_types

    facts = {"x": [(get_member, ("fines",))]}
    assert path_types(renew, facts, {})(("facts", "x")) is float
    assert path_types(renew, facts, {"x": str})(("facts", "x")) is None
    assert path_types(renew, facts, {"x": float})(("facts", "x")) is float
    assert path_types(renew, {}, {"x": str})(("entities", "x")) is str
    assert path_types(renew, {}, {})(("args", "days")) is int
    assert path_types(renew, {}, {})(("args", "nope")) is None


class Order(BaseModel):
    due: date
    price: Decimal
    amount: str


class Checked(BaseModel):
    amount: float


@tool
def order() -> Order:
    """An order whose date and price are text in JSON."""
    return Order(due=date(2024, 5, 1), price=Decimal("10.50"), amount="7")


@tool
def check() -> Checked:
    """The amount, as a number."""
    return Checked(amount=7.0)


def order_agent(success: str = "true", require: str = "true") -> Agent:
    data = {
        "name": "orders",
        "intents": [
            {
                "name": "go",
                "rules": [{"keywords": ["go"], "confidence": 0.95}],
                "route": "plan",
                "plan": "p",
                "reply": "done",
            }
        ],
        "plans": {
            "p": {
                "steps": [
                    {
                        "id": "s1",
                        "tool": "order",
                        "success": success,
                        "facts": {"amount": "result.amount"},
                    },
                    {
                        "id": "s2",
                        "tool": "check",
                        "depends_on": ["s1"],
                        "facts": {"amount": "result.amount"},
                    },
                    {"id": "s3", "tool": "renew", "depends_on": ["s2"], "args": {"loan_id": "L1"}},
                ]
            }
        },
        "business_rules": [
            {"name": "r", "before_tool": "renew", "require": require, "refusal": "done"}
        ],
        "templates": {"done": {"zh": "好", "en": "ok"}},
    }
    return Agent.build(parse_config(data), [order, check, renew])


@pytest.mark.parametrize(
    "success",
    ['result.due < "2024-06-01"', 'result.due == "2024-05-01"', 'result.price == "10.50"'],
)
async def test_dates_and_decimals_are_compared_as_the_text_they_are(success: str) -> None:
    """Found by review: the first version typed these as a date and a number, refused
    them at load, and let ``result.price > 5`` (never true of a string) through."""
    from corral import MemoryStore, Runtime
    from corral.testing import FixedEffects

    done = await Runtime(order_agent(success=success), MemoryStore(), effects=FixedEffects()).start(
        "go"
    )
    assert done.status.value == "finished", done
    with pytest.raises(ConfigInvalidError, match=r"result\.price is Decimal"):
        order_agent(success="result.price > 5")


async def test_a_fact_two_steps_publish_with_different_types_is_not_checked() -> None:
    """Found by review: ``amount`` is text from s1 and a number from s2 (which runs last,
    before the rule): typed by s1 alone, a working ``facts.amount > 5`` was refused."""
    from corral import MemoryStore, Runtime
    from corral.testing import FixedEffects

    agent = order_agent(require="facts.amount > 5")
    done = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("go")
    assert done.status.value == "finished", done


class Charged(BaseModel):
    ok: bool


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def charge(oid: str, amount: Decimal = Decimal("150"), due: date = date(2024, 5, 1)) -> Charged:
    """A charge whose arguments have Python defaults."""
    return Charged(ok=True)


def charge_agent(require: str, args: dict[str, Any]) -> Agent:
    data = {
        "name": "pay",
        "entities": {"oid": {"patterns": [r"(O\d+)"]}, "total": {"patterns": [r"t=(\d+)"]}},
        "intents": [
            {
                "name": "go",
                "rules": [{"keywords": ["go"], "confidence": 0.95}],
                "route": "plan",
                "plan": "p",
                "reply": "done",
            }
        ],
        "plans": {
            "p": {
                "steps": [
                    {"id": "s0", "tool": "check", "facts": {"total": "result.amount"}},
                    {
                        "id": "s1",
                        "tool": "charge",
                        "depends_on": ["s0"],
                        "args": {"oid": "$entities.oid", **args},
                    },
                ]
            }
        },
        "business_rules": [
            {"name": "r", "before_tool": "charge", "require": require, "refusal": "done"}
        ],
        "templates": {"done": {"zh": "好", "en": "ok"}},
    }
    return Agent.build(parse_config(data), [check, charge])


@pytest.mark.parametrize(
    ("require", "args", "outcome"),
    [
        ("args.amount > 100", {"amount": 150}, "success"),  # an int from the plan
        ("args.amount > 100", {}, "success"),  # the Decimal default
        ("args.amount > 100", {"amount": 50}, "refused"),
        ('args.due < "2024-06-01"', {"due": "2024-05-01"}, "success"),
        ("facts.total < 1000", {}, "success"),  # a float fact named like a text entity
    ],
)
async def test_arguments_bound_as_python_or_json_are_not_typed(
    require: str, args: dict[str, Any], outcome: str
) -> None:
    """Found by review: ``args.amount`` is an int from the plan and a ``Decimal`` when left
    at its default; typed as text, a working ``args.amount > 100`` did not load. And a
    fact named like an entity was typed as the entity wherever the tool could run."""
    from corral import MemoryStore, Runtime
    from corral.testing import FixedEffects

    runtime = Runtime(charge_agent(require, args), MemoryStore(), effects=FixedEffects())
    done = await runtime.start("go O1")
    assert (done.status.value, done.outcome) == ("finished", outcome), done


def test_a_rule_reading_an_entity_the_agent_does_not_declare_is_refused() -> None:
    """It loaded, and refused every call: the entity never has a value."""
    with pytest.raises(ConfigInvalidError) as info:
        agent(require="entities.nosuch == 'x'")
    assert (
        "business rule no_fines: reads entities.nosuch, which is no entity the agent declares "
        "(entities: amount, loan_id, member_id)"
    ) in info.value.message
    agent(require="entities.loan_id != null and entities['member_id'] != 'M0'")


@dataclass
class Addr:
    city: str


class Carrier(TypedDict):
    name: str


class Shipment(BaseModel):
    addr: Addr
    carrier: Carrier
    meta: Mapping[str, str]


@tool
def ship(order: str) -> Shipment:
    """Ship an order."""
    return Shipment(addr=Addr(city="Hangzhou"), carrier={"name": "SF"}, meta={"k": "v"})


def test_paths_into_typeddicts_dataclasses_and_mappings_load_and_typos_in_them_do_not() -> None:
    """Review of e2a3145: a success criterion reading a TypedDict, a dataclass or a
    Mapping inside a result by key (``result.addr['city']``) loaded before subscripts were
    checked, and was then refused ("has no fields"): the checker walks them now."""

    def build(success: str) -> Agent:
        step = {"id": "s1", "tool": "ship", "args": {"order": "A"}, "success": success}
        config = {
            "name": "ship",
            "intents": [
                {"name": "go", "rules": [{"keywords": ["go"]}], "route": "plan", "plan": "p"}
            ],
            "plans": {"p": {"steps": [step]}},
            "templates": {"done": {"zh": "好", "en": "ok"}},
        }
        return Agent.build(parse_config(config), [ship])

    build("result.addr['city'] != '' and result['meta']['k'] == 'v' and result.carrier.name != ''")
    build("result.addr.city == 'Hangzhou' and result['carrier']['name'] == 'SF'")
    for typo, says in [
        ("result.addr['town'] != ''", "addr has no field 'town' (fields: city)"),
        ("result.carrier.nmae != ''", "carrier has no field 'nmae' (fields: name)"),
        ("result.addr.city == 3", "result.addr.city is str"),
    ]:
        with pytest.raises(ConfigInvalidError) as info:
            build(typo)
        assert says in info.value.message, info.value.message
