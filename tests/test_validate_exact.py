"""Plan validation, pinned exactly: the problems users read, boundaries, and the graph.

``PlanInvalidError.problems`` is what a template author sees at build time and what a
model planner is shown to repair its plan, so each message is asserted word for word.
The compiled ``PlanGraph`` is what the scheduler runs: its ancestors, waits, success
expressions, fact writers and write conflicts are asserted on plans where a wrong value
would change what runs.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Plan, Step, tool
from corral.errors import PlanInvalidError
from corral.planning import PlanContext, validate_plan
from corral.planning.producers import FactRead
from corral.tools.registry import ToolRegistry
from corral.verify.expressions import fact_names

INT_MSG = "Input should be a valid integer, unable to parse string as an integer"


class Order(BaseModel):
    order_id: str
    purchase_date: date
    amount: int


class Nested(BaseModel):
    order: Order


class Done(BaseModel):
    ok: bool


@tool
def nested() -> Nested:
    return Nested(order=Order(order_id="A1", purchase_date=date(2024, 1, 1), amount=1))


@tool
def takes_int(x: int) -> Done:
    return Done(ok=True)


@tool
def takes_optional(x: int | None) -> Done:
    return Done(ok=True)


@tool
def takes_text(text: str) -> Done:
    return Done(ok=True)


@tool
def takes_list(xs: list[int]) -> Done:
    return Done(ok=True)


@tool
def two_params(first: str, second: int) -> Done:
    return Done(ok=True)


REGISTRY = ToolRegistry([nested, takes_int, takes_optional, takes_text, takes_list, two_params])
ENTITIES: dict[str, Any] = {"order_id": str, "customer": str, "order": Order}
CONTEXT = PlanContext(REGISTRY, ENTITIES)


def plan(*steps: dict[str, Any]) -> Plan:
    return Plan(plan_id="p", steps=[Step.model_validate(s) for s in steps])


def problems(p: Plan, context: PlanContext = CONTEXT) -> list[str]:
    with pytest.raises(PlanInvalidError) as info:
        validate_plan(p, context)
    return info.value.problems


# ------------------------------------------------------------------ messages users read


def test_an_empty_plan_says_the_agent_cannot_do_it() -> None:
    assert problems(plan()) == ["the plan has no steps: it means the agent cannot do this"]


def test_the_step_limit_allows_exactly_max_steps() -> None:
    context = PlanContext(REGISTRY, ENTITIES, max_steps=3)
    three = [{"id": f"s{i}", "tool": "nested"} for i in range(3)]
    assert list(validate_plan(plan(*three), context).order) == ["s0", "s1", "s2"]
    four = [*three, {"id": "s3", "tool": "nested"}]
    assert problems(plan(*four), context) == ["the plan has 4 steps; the limit is 3"]


def test_an_unknown_tool_lists_the_known_tools_sorted() -> None:
    assert problems(plan({"id": "s1", "tool": "wipe_disk"})) == [
        "s1: unknown tool 'wipe_disk' (known tools: nested, takes_int, takes_list, "
        "takes_optional, takes_text, two_params)"
    ]


def test_a_dependency_cycle_names_every_step_on_it() -> None:
    found = problems(
        plan(
            {"id": "a", "tool": "nested", "depends_on": ["b"]},
            {"id": "b", "tool": "nested", "depends_on": ["a"]},
        )
    )
    assert found == ["dependency cycle among steps a, b"]


def test_an_unknown_parameter_lists_the_parameters_or_none() -> None:
    found = problems(
        plan(
            {"id": "s1", "tool": "two_params", "args": {"first": "x", "second": 1, "third": 3}},
            {"id": "s2", "tool": "nested", "args": {"x": 1}},
        )
    )
    assert found == [
        "s1: two_params has no parameter 'third' (parameters: first, second)",
        "s2: nested has no parameter 'x' (parameters: none)",
    ]


def test_an_unknown_argument_does_not_hide_the_problems_of_the_next_ones() -> None:
    found = problems(plan({"id": "s1", "tool": "takes_int", "args": {"bogus": 1, "x": "many"}}))
    assert found == [
        "s1: takes_int has no parameter 'bogus' (parameters: x)",
        f"s1.x: literal 'many' does not fit takes_int.x, which expects int ({INT_MSG})",
    ]


def test_a_literal_problem_quotes_the_first_three_validation_errors() -> None:
    found = problems(plan({"id": "s1", "tool": "takes_list", "args": {"xs": list("abcd")}}))
    assert found == [
        "s1.xs: literal ['a', 'b', 'c', 'd'] does not fit takes_list.xs, which expects "
        f"list[int] ({INT_MSG}; {INT_MSG}; {INT_MSG})"
    ]


def test_a_malformed_reference_does_not_hide_the_references_after_it() -> None:
    found = problems(
        plan({"id": "s1", "tool": "takes_list", "args": {"xs": ["$not a ref", "$ghost.result.x"]}})
    )
    assert found == [
        "s1.xs: '$not a ref' is not a reference ($entities.x, $facts.x, $s1.result.x, $message)",
        "s1.xs: $ghost.result.x: there is no step 'ghost'",
    ]


class Filter(BaseModel):
    customer: str
    limit: int


@tool
def takes_nested(
    ids: list[int],
    by_name: dict[str, int],
    pair: tuple[str, int],
    where: Filter,
    either: list[int | str],
) -> Done:
    return Done(ok=True)


NESTED = PlanContext(ToolRegistry([nested, takes_nested]), ENTITIES)


def test_a_reference_nested_in_a_list_a_dict_a_tuple_or_a_model_is_type_checked_too() -> None:
    """The defect: only a reference that was the whole argument was type-checked; one inside
    a list, a dict or a model was not, so a plan passing a text where a number belongs was
    accepted and ran its earlier steps before the call refused it."""
    step = {
        "id": "s2",
        "tool": "takes_nested",
        "depends_on": ["s1"],
        "args": {
            "ids": [1, "$s1.result.order.order_id"],
            "by_name": {"a": "$s1.result.order.purchase_date"},
            "pair": ["$s1.result.order.amount", "$s1.result.order.order_id"],
            "where": {"customer": "$entities.customer", "limit": "$entities.order_id"},
            "either": ["$s1.result.order.order_id"],  # a union: the call's validator decides
        },
    }
    found = problems(plan({"id": "s1", "tool": "nested"}, step), NESTED)
    assert found == [
        "s2.ids: $s1.result.order.order_id is str, but takes_nested.ids[1] expects int",
        "s2.by_name: $s1.result.order.purchase_date is date, but takes_nested.by_name[a] "
        "expects int",
        "s2.pair: $s1.result.order.amount is int, but takes_nested.pair[0] expects str",
        "s2.pair: $s1.result.order.order_id is str, but takes_nested.pair[1] expects int",
        "s2.where: $entities.order_id is str, but takes_nested.where[limit] expects int",
    ]


def test_nested_references_of_the_right_type_pass() -> None:
    step = {
        "id": "s2",
        "tool": "takes_nested",
        "depends_on": ["s1"],
        "args": {
            "ids": ["$s1.result.order.amount", 2],
            "by_name": {"a": "$s1.result.order.amount"},
            "pair": ["$entities.customer", "$s1.result.order.amount"],
            "where": {"customer": "$s1.result.order.order_id", "limit": 3},
            "either": ["$s1.result.order.order_id", "$s1.result.order.amount"],
        },
    }
    validate_plan(plan({"id": "s1", "tool": "nested"}, step), NESTED)


def test_a_nested_optional_reference_needs_a_place_that_takes_none() -> None:
    step = {
        "id": "s2",
        "tool": "takes_nested",
        "depends_on": ["s1"],
        "args": {
            "ids": ["$s1.result.order.amount?"],
            "by_name": {},
            "pair": ["a", 1],
            "where": {"customer": "x", "limit": 1},
            "either": [],
        },
    }
    assert problems(plan({"id": "s1", "tool": "nested"}, step), NESTED) == [
        "s2.ids: $s1.result.order.amount? may be missing, but takes_nested.ids[0] "
        "does not accept None"
    ]


def test_an_unknown_entity_lists_the_declared_ones_sorted_or_none() -> None:
    step = {"id": "s1", "tool": "takes_text", "args": {"text": "$entities.phone"}}
    assert problems(plan(step)) == [
        "s1.text: $entities.phone: no entity 'phone' is declared "
        "(entities: customer, order, order_id)"
    ]
    assert problems(plan(step), PlanContext(REGISTRY)) == [
        "s1.text: $entities.phone: no entity 'phone' is declared (entities: none)"
    ]


def test_bad_fact_sources_are_each_reported() -> None:
    found = problems(
        plan(
            {
                "id": "s1",
                "tool": "nested",
                "facts": {"a": "data.order", "b": "order", "c": "result.nope"},
            }
        )
    )
    assert found == [
        "s1: fact 'a' must come from 'result.<field>'",
        "s1: fact 'b' must come from 'result.<field>'",
        "s1: fact 'c': nested output Nested has no field 'nope' (fields: order)",
    ]


# ------------------------------------------------------------------ types of references


def test_an_entity_or_entity_fact_is_its_declared_type_and_a_path_into_it_is_unchecked() -> None:
    valid = plan(
        {"id": "s1", "tool": "takes_int", "args": {"x": "$entities.order.amount"}},
        {"id": "s2", "tool": "takes_int", "args": {"x": "$facts.order.amount"}},
        {"id": "s3", "tool": "takes_text", "args": {"text": "$facts.customer"}},
    )
    assert set(validate_plan(valid, CONTEXT).steps) == {"s1", "s2", "s3"}
    found = problems(
        plan(
            {"id": "s1", "tool": "takes_int", "args": {"x": "$entities.customer"}},
            {"id": "s2", "tool": "takes_int", "args": {"x": "$facts.order"}},
        )
    )
    assert found == [
        "s1.x: $entities.customer is str, but takes_int.x expects int",
        "s2.x: $facts.order is Order, but takes_int.x expects int",
    ]


def test_a_published_fact_has_the_type_of_the_field_it_comes_from() -> None:
    graph = validate_plan(
        plan(
            {
                "id": "a",
                "tool": "nested",
                "facts": {"amount": "result.order.amount", "order": "result.order"},
            },
            {"id": "b", "tool": "takes_int", "args": {"x": "$facts.amount"}, "depends_on": ["a"]},
            {
                "id": "c",
                "tool": "takes_int",
                "args": {"x": "$facts.order.amount"},
                "depends_on": ["a"],
            },
        ),
        CONTEXT,
    )
    assert graph.steps["a"].facts == (
        ("amount", ("order", "amount")),
        ("order", ("order",)),
    )
    found = problems(
        plan(
            {"id": "a", "tool": "nested", "facts": {"order": "result.order"}},
            {
                "id": "b",
                "tool": "takes_text",
                "args": {"text": "$facts.order.amount"},
                "depends_on": ["a"],
            },
        )
    )
    assert found == ["b.text: $facts.order.amount is int, but takes_text.text expects str"]


def test_an_optional_reference_needs_a_parameter_that_accepts_none() -> None:
    first = {"id": "a", "tool": "nested"}
    ok = plan(
        first,
        {
            "id": "b",
            "tool": "takes_optional",
            "args": {"x": "$a.result.order.amount?"},
            "depends_on": ["a"],
        },
    )
    assert "b" in validate_plan(ok, CONTEXT).steps
    found = problems(
        plan(
            first,
            {
                "id": "b",
                "tool": "takes_int",
                "args": {"x": "$a.result.order.amount?"},
                "depends_on": ["a"],
            },
        )
    )
    assert found == [
        "b.x: $a.result.order.amount? may be missing, but takes_int.x does not accept None"
    ]


# ------------------------------------------------------------------ the compiled graph


def test_ancestors_are_every_step_reached_through_depends_on() -> None:
    """``d`` reaches ``b`` twice (directly and through ``c``) and ``a`` only directly."""
    graph = validate_plan(
        plan(
            {"id": "a", "tool": "nested"},
            {"id": "b", "tool": "nested"},
            {"id": "c", "tool": "nested", "depends_on": ["b"]},
            {
                "id": "d",
                "tool": "takes_int",
                "args": {"x": "$a.result.order.amount"},
                "depends_on": ["a", "b", "c"],
            },
        ),
        CONTEXT,
    )
    assert graph.steps["d"].ancestors == {"a", "b", "c"}
    assert graph.steps["c"].ancestors == {"b"}
    assert graph.dependents == {"a": ("d",), "b": ("c", "d"), "c": ("d",), "d": ()}


def test_steps_that_publish_the_same_fact_conflict_and_others_do_not() -> None:
    graph = validate_plan(
        plan(
            {"id": "a", "tool": "nested", "facts": {"amount": "result.order.amount"}},
            {"id": "b", "tool": "nested", "facts": {"amount": "result.order.amount"}},
            {"id": "c", "tool": "nested", "facts": {"when": "result.order.purchase_date"}},
        ),
        CONTEXT,
    )
    assert graph.writes_conflict("a", "b") and graph.writes_conflict("b", "a")
    assert not graph.writes_conflict("a", "c") and not graph.writes_conflict("c", "b")


def rules(**reads: set[str]) -> PlanContext:
    """A context whose business rules on each tool read the given facts."""
    return PlanContext(
        REGISTRY,
        ENTITIES,
        rule_reads={
            t: (FactRead(f"business rule on_{t}", frozenset(f)),) for t, f in reads.items()
        },
    )


def test_a_rule_reading_a_fact_no_ancestor_publishes_names_the_rule_and_the_fix() -> None:
    found = problems(
        plan(
            {"id": "a", "tool": "nested", "facts": {"amount": "result.order.amount"}},
            {"id": "b", "tool": "takes_int", "args": {"x": 1}},
        ),
        rules(takes_int={"amount"}),
    )
    assert found == [
        "b: business rule on_takes_int reads facts.amount, but no step that b depends on "
        "publishes it; a publishes it: add it to b.depends_on"
    ]


def test_a_success_criterion_reading_an_unpublished_fact_is_named_success() -> None:
    found = problems(
        plan(
            {"id": "a", "tool": "nested", "facts": {"amount": "result.order.amount"}},
            {"id": "b", "tool": "nested", "success": "facts.amount > 0"},
        )
    )
    assert found == [
        "b: success reads facts.amount, but no step that b depends on publishes it; "
        "a publishes it: add it to b.depends_on"
    ]
    graph = validate_plan(
        plan(
            {"id": "a", "tool": "nested", "facts": {"amount": "result.order.amount"}},
            {"id": "b", "tool": "nested", "success": "facts.amount > 0", "depends_on": ["a"]},
        ),
        CONTEXT,
    )
    success = graph.steps["b"].success
    assert success is not None and fact_names(success) == {"amount"}
    assert graph.steps["b"].ancestors == {"a"}


def test_a_rule_reading_an_entity_named_fact_waits_for_the_step_that_publishes_it() -> None:
    """The user may give ``order_id``; a step that also publishes it is waited for."""
    graph = validate_plan(
        plan(
            {"id": "a", "tool": "nested", "facts": {"order_id": "result.order.order_id"}},
            {"id": "b", "tool": "takes_int", "args": {"x": 1}},
        ),
        rules(takes_int={"order_id"}),
    )
    assert graph.steps["b"].waits_for == {"a"}
    assert graph.steps["a"].waits_for == frozenset()


def test_steps_that_wait_for_each_other_are_rejected_with_the_fix() -> None:
    found = problems(
        plan(
            {"id": "a", "tool": "takes_int", "args": {"x": 1}, "facts": {"customer": "result.ok"}},
            {
                "id": "b",
                "tool": "takes_text",
                "args": {"text": "t"},
                "facts": {"order_id": "result.ok"},
            },
        ),
        rules(takes_int={"order_id"}, takes_text={"customer"}),
    )
    assert found == [
        "steps a, b wait for each other: each publishes a fact that a rule before another "
        "reads; order them with depends_on"
    ]


def test_element_type_walks_containers_and_leaves_the_unknown_to_the_call() -> None:
    from collections.abc import Sequence
    from typing import TypedDict

    from corral.typecheck import element_type

    class Point(TypedDict):
        x: int

    assert element_type(list[int] | None, ("0",)) is int
    assert element_type(Sequence[str], ("3",)) is str
    assert element_type(tuple[int, ...], ("7",)) is int
    assert element_type(tuple[int, str], ("1",)) is str
    assert element_type(tuple[int, str], ("2",)) is None  # no such place
    assert element_type(dict[str, list[int]], ("k", "0")) is int
    assert element_type(Point, ("x",)) is int
    assert element_type(Point, ("y",)) is None
    assert element_type(Filter, ("nope",)) is None
    assert element_type(list, ("0",)) is None  # no type argument
    assert element_type(list[int] | list[str], ("0",)) is None  # the validator picks
    assert element_type(int, ("0",)) is None
    assert element_type(int, ()) is int
