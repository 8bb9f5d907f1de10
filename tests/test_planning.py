"""Planning layer: static validation rejects bad plans before any tool runs."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from corral import Plan, Step, tool
from corral.errors import ConfigInvalidError, MissingArgumentError, PlanInvalidError
from corral.planning import PlanContext, bind_arguments, parse_reference, validate_plan
from corral.tools.registry import ToolRegistry
from tests.helpers import build_agent

CALLS: list[str] = []


class Order(BaseModel):
    order_id: str
    purchase_date: date
    amount: int


class Policy(BaseModel):
    in_warranty: bool


class Nested(BaseModel):
    order: Order


@tool
def get_order(order_id: str) -> Order:
    CALLS.append("get_order")
    return Order(order_id=order_id, purchase_date=date(2024, 5, 1), amount=3)


@tool
def get_policy(purchase_date: date) -> Policy:
    CALLS.append("get_policy")
    return Policy(in_warranty=True)


@tool
def takes_text(text: str) -> Policy:
    CALLS.append("takes_text")
    return Policy(in_warranty=True)


@tool
def takes_float(x: float) -> Policy:
    return Policy(in_warranty=True)


@tool
def nested() -> Nested:
    return Nested(order=Order(order_id="A1", purchase_date=date(2024, 1, 1), amount=1))


REGISTRY = ToolRegistry([get_order, get_policy, takes_text, takes_float, nested])
CONTEXT = PlanContext(REGISTRY, {"order_id": str}, None, max_steps=10)


def plan(*steps: dict[str, Any]) -> Plan:
    return Plan(plan_id="p", steps=[Step.model_validate(s) for s in steps])


def problems(p: Plan, context: PlanContext = CONTEXT) -> list[str]:
    with pytest.raises(PlanInvalidError) as info:
        validate_plan(p, context)
    assert info.value.code.value == "PLAN_INVALID"
    return info.value.problems


def test_valid_plan_compiles_with_order_and_references() -> None:
    graph = validate_plan(
        plan(
            {"id": "s1", "tool": "get_order", "args": {"order_id": "$entities.order_id"}},
            {
                "id": "s2",
                "tool": "get_policy",
                "depends_on": ["s1"],
                "args": {"purchase_date": "$s1.result.purchase_date"},
                "facts": {"in_warranty": "result.in_warranty"},
                "success": "result.in_warranty",
            },
        ),
        CONTEXT,
    )
    assert graph.order == ("s1", "s2")
    assert graph.dependents["s1"] == ("s2",)
    assert graph.steps["s2"].facts == (("in_warranty", ("in_warranty",)),)


def test_unknown_tool_is_rejected_and_lists_known_tools() -> None:
    found = problems(plan({"id": "s1", "tool": "delete_everything"}))
    assert "unknown tool 'delete_everything'" in found[0]
    assert "get_order" in found[0]


def test_cycle_is_rejected() -> None:
    found = problems(
        plan(
            {"id": "a", "tool": "nested", "depends_on": ["b"]},
            {"id": "b", "tool": "nested", "depends_on": ["a"]},
        )
    )
    assert any("cycle" in p and "a" in p and "b" in p for p in found)


def test_self_and_unknown_dependencies_are_rejected() -> None:
    found = problems(
        plan(
            {"id": "a", "tool": "nested", "depends_on": ["a"]},
            {"id": "b", "tool": "nested", "depends_on": ["zzz"]},
        )
    )
    assert any("depends on itself" in p for p in found)
    assert any("unknown step 'zzz'" in p for p in found)


def test_reference_to_a_field_the_tool_does_not_declare() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "get_order", "args": {"order_id": "$entities.order_id"}},
            {
                "id": "s2",
                "tool": "takes_text",
                "depends_on": ["s1"],
                "args": {"text": "$s1.result.tracking_no"},
            },
        )
    )
    assert any("no field 'tracking_no'" in p for p in found)


def test_reference_whose_type_does_not_match_the_parameter() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "get_order", "args": {"order_id": "$entities.order_id"}},
            {
                "id": "s2",
                "tool": "takes_text",
                "depends_on": ["s1"],
                "args": {"text": "$s1.result.purchase_date"},
            },
        )
    )
    assert any("is date, but takes_text.text expects str" in p for p in found)


def test_int_flows_into_float_and_nested_paths_are_checked() -> None:
    validate_plan(
        plan(
            {"id": "s1", "tool": "nested"},
            {
                "id": "s2",
                "tool": "takes_float",
                "depends_on": ["s1"],
                "args": {"x": "$s1.result.order.amount"},
            },
        ),
        CONTEXT,
    )
    found = problems(
        plan(
            {"id": "s1", "tool": "nested"},
            {
                "id": "s2",
                "tool": "takes_float",
                "depends_on": ["s1"],
                "args": {"x": "$s1.result.order.missing"},
            },
        )
    )
    assert any("no field 'missing'" in p for p in found)


def test_reference_to_a_step_that_is_not_a_dependency() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "get_order", "args": {"order_id": "$entities.order_id"}},
            {
                "id": "s2",
                "tool": "get_policy",
                "args": {"purchase_date": "$s1.result.purchase_date"},
            },
        )
    )
    assert any("does not depend on s1" in p for p in found)


def test_unknown_entity_fact_and_malformed_references() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "get_order", "args": {"order_id": "$entities.phone"}},
            {"id": "s2", "tool": "takes_text", "args": {"text": "$facts.nobody_writes_this"}},
            {"id": "s3", "tool": "takes_text", "args": {"text": "$not a reference"}},
        )
    )
    assert any("no entity 'phone'" in p for p in found)
    assert any("publishes fact 'nobody_writes_this'" in p for p in found)
    assert any("is not a reference" in p for p in found)


def test_unknown_and_unbound_parameters() -> None:
    found = problems(plan({"id": "s1", "tool": "get_order", "args": {"id": "A1"}}))
    assert any("has no parameter 'id'" in p for p in found)
    assert any("required parameter 'order_id'" in p for p in found)


def test_step_limit_and_empty_plan() -> None:
    many = [{"id": f"s{i}", "tool": "nested"} for i in range(11)]
    assert any("limit is 10" in p for p in problems(plan(*many)))
    assert "no steps" in problems(plan())[0]


def test_allow_list_is_enforced_at_validation() -> None:
    context = PlanContext(REGISTRY, {"order_id": str}, frozenset({"get_order"}), 10)
    found = problems(plan({"id": "s1", "tool": "nested"}), context)
    assert "not allowed" in found[0]


def test_success_criteria_are_checked_statically() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "nested", "success": "result.nope == 1"},
            {"id": "s2", "tool": "nested", "success": "__import__('os')"},
        )
    )
    assert any("no field 'nope'" in p for p in found)
    assert any("s2.success" in p for p in found)


def test_every_problem_is_listed_at_once() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "nope"},
            {"id": "s2", "tool": "nested", "depends_on": ["s9"]},
            {"id": "s2", "tool": "nested"},
        )
    )
    assert len(found) >= 3


def test_invalid_templates_fail_at_agent_build_and_no_tool_is_called() -> None:
    CALLS.clear()
    with pytest.raises(ConfigInvalidError) as info:
        build_agent(
            [get_order, get_policy, takes_text],
            [
                {
                    "id": "s1",
                    "tool": "get_order",
                    "args": {"order_id": "$entities.order_id"},
                    "depends_on": ["s3"],
                },
                {"id": "s2", "tool": "wipe_disk"},
                {
                    "id": "s3",
                    "tool": "takes_text",
                    "depends_on": ["s1"],
                    "args": {"text": "$s1.result.purchase_date"},
                },
            ],
        )
    message = str(info.value)
    assert "cycle" in message and "wipe_disk" in message and "expects str" in message
    assert CALLS == []


def test_binding_resolves_references_and_never_guesses() -> None:
    graph = validate_plan(
        plan(
            {"id": "s1", "tool": "get_order", "args": {"order_id": "$entities.order_id"}},
        ),
        CONTEXT,
    )
    compiled = graph.steps["s1"]
    assert bind_arguments(compiled, {"order_id": "A1"}, {}, {}) == {"order_id": "A1"}
    with pytest.raises(MissingArgumentError):
        bind_arguments(compiled, {}, {}, {})


def test_dollar_escape_is_a_literal() -> None:
    graph = validate_plan(
        plan({"id": "s1", "tool": "takes_text", "args": {"text": "$$5"}}), CONTEXT
    )
    assert bind_arguments(graph.steps["s1"], {}, {}, {}) == {"text": "$5"}


@given(st.text(max_size=60))
def test_reference_parser_accepts_or_rejects_cleanly(text: str) -> None:
    try:
        ref = parse_reference(text)
    except ValueError:
        assert text.startswith("$")
        return
    if ref is not None:
        assert ref.text == text and ref.scope in ("entities", "facts", "step")


@given(st.from_regex(r"\$s[0-9]\.result(\.[a-z_]{1,8}){0,3}", fullmatch=True))
def test_step_references_round_trip(text: str) -> None:
    ref = parse_reference(text)
    assert ref is not None and ref.scope == "step"
    assert "$" + ref.name + ".result" + "".join("." + p for p in ref.path) == text
