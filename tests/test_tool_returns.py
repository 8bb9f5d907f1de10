"""A tool may return a plain value, a dict, a TypedDict, a dataclass or a pydantic model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import pytest
from pydantic import BaseModel

from corral import Agent, MemoryStore, Plan, RunStatus, Runtime, ToolPolicy, parse_config, tool
from corral.errors import ErrorCode, PlanInvalidError


@dataclass
class Parcel:
    parcel_id: str
    weight_kg: float


class Rate(TypedDict):
    carrier: str
    price: float


class Label(BaseModel):
    text: str


@tool
def find_parcel(order_id: str) -> Parcel:
    """The parcel of an order."""
    return Parcel(parcel_id=f"P-{order_id}", weight_kg=2.5)


@tool
def best_rate(weight_kg: float) -> Rate:
    """The cheapest carrier for a weight."""
    return {"carrier": "post", "price": 4.0 + weight_kg}


@tool
def greeting(name: str) -> str:
    """A greeting."""
    return f"hello {name}"


@tool
def count_items(order_id: str) -> int:
    """How many items an order has."""
    return 3


@tool
def options(order_id: str) -> dict[str, Any]:
    """Free-form shipping options."""
    return {"express": True}


@tool
def make_label(parcel_id: str, carrier: str, greeting: str, items: int, express: bool) -> Label:
    """A shipping label."""
    return Label(text=f"{parcel_id} via {carrier} x{items} {greeting} express={express}")


@tool
def broken_count(order_id: str) -> int:
    """Returns what it does not declare."""
    return "many"  # type: ignore[return-value]


TOOLS = [find_parcel, best_rate, greeting, count_items, options, make_label, broken_count]


def _agent(steps: list[dict[str, Any]]) -> Agent:
    config = parse_config(
        {
            "name": "ship",
            "intents": [],
            "plans": {"ship": {"steps": steps}},
            "templates": {"done": {"zh": "好", "en": "done {price}"}},
            "default_language": "en",
        }
    )
    return Agent.build(config, TOOLS)


SHIP = [
    {"id": "p", "tool": "find_parcel", "args": {"order_id": "A1"}},
    {
        "id": "r",
        "tool": "best_rate",
        "args": {"weight_kg": "$p.result.weight_kg"},
        "depends_on": ["p"],
        "facts": {"price": "result.price"},
    },
    {"id": "g", "tool": "greeting", "args": {"name": "Ada"}, "success": "result.value != ''"},
    {
        "id": "n",
        "tool": "count_items",
        "args": {"order_id": "A1"},
        "facts": {"items": "result.value"},
    },
    {"id": "o", "tool": "options", "args": {"order_id": "A1"}},
    {
        "id": "l",
        "tool": "make_label",
        "args": {
            "parcel_id": "$p.result.parcel_id",
            "carrier": "$r.result.carrier",
            "greeting": "$g.result.value",
            "items": "$facts.items",
            "express": "$o.result.value.express",
        },
        "depends_on": ["r", "g", "n", "o"],
    },
]


async def test_every_kind_of_result_feeds_references_facts_and_checks() -> None:
    runtime = Runtime(_agent(SHIP), MemoryStore())
    summary = await runtime.run_plan("ship")
    assert summary.status is RunStatus.FINISHED, summary
    state = await runtime.load_state(summary.run_id)
    assert state.steps["p"].data == {"parcel_id": "P-A1", "weight_kg": 2.5}
    assert state.steps["g"].data == {"value": "hello Ada"}
    assert state.steps["l"].data == {"text": "P-A1 via post x3 hello Ada express=True"}
    assert state.memory.values()["price"] == 6.5


async def test_references_to_missing_fields_are_refused_at_validation() -> None:
    steps = [
        {"id": "p", "tool": "find_parcel", "args": {"order_id": "A1"}},
        {
            "id": "r",
            "tool": "best_rate",
            "args": {"weight_kg": "$p.result.weight"},
            "depends_on": ["p"],
        },
    ]
    with pytest.raises(PlanInvalidError, match="has no field 'weight'"):
        await Runtime(_agent(steps), MemoryStore()).run_plan("ship")
    plain = [
        {"id": "g", "tool": "greeting", "args": {"name": "Ada"}, "facts": {"x": "result.text"}}
    ]
    with pytest.raises(PlanInvalidError, match="has no field 'text'"):
        await Runtime(_agent(plain), MemoryStore()).run_plan("ship")


async def test_a_result_of_the_wrong_type_fails_at_the_boundary() -> None:
    steps = [{"id": "b", "tool": "broken_count", "args": {"order_id": "A1"}}]
    runtime = Runtime(_agent(steps), MemoryStore())
    summary = await runtime.run_plan("ship")
    assert summary.steps[0].error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    assert summary.status is not RunStatus.FINISHED or summary.outcome != "success"


async def test_a_caller_plan_is_type_checked_against_the_derived_model() -> None:
    runtime = Runtime(_agent(SHIP), MemoryStore())
    nope = {"id": "x", "tool": "greeting", "args": {"name": "$p.result.nope"}, "depends_on": ["p"]}
    bad = [SHIP[0], nope]

    with pytest.raises(PlanInvalidError, match="has no field 'nope'"):
        await runtime.run_plan(Plan.model_validate({"plan_id": "mine", "steps": bad}))


@dataclass
class PrivateParcel(Parcel):
    owner_phone: str = ""


class Note(TypedDict):
    text: str
    author: NotRequired[str]


@tool
def leaky_parcel(order_id: str) -> Parcel:
    """Returns a subclass that carries more than it declares."""
    return PrivateParcel(parcel_id="P1", weight_kg=1.0, owner_phone="555-0100")


@tool
def note(order_id: str) -> Note:
    """A note without its optional author."""
    return {"text": "fragile"}


async def test_only_declared_fields_are_kept_and_optional_keys_may_be_missing() -> None:
    config = parse_config(
        {
            "name": "ship",
            "intents": [],
            "plans": {
                "ship": {
                    "steps": [
                        {"id": "p", "tool": "leaky_parcel", "args": {"order_id": "A1"}},
                        {"id": "n", "tool": "note", "args": {"order_id": "A1"}},
                    ]
                }
            },
        }
    )
    runtime = Runtime(Agent.build(config, [leaky_parcel, note]), MemoryStore())
    summary = await runtime.run_plan("ship")
    assert summary.status is RunStatus.FINISHED
    state = await runtime.load_state(summary.run_id)
    assert state.steps["p"].data == {"parcel_id": "P1", "weight_kg": 1.0}
    assert state.steps["n"].data == {"text": "fragile", "author": None}


def _one_step(tool_name: str) -> Any:
    """A config whose plan ``ship`` is one step: ``tool_name`` for order A."""
    step = {"id": "q", "tool": tool_name, "args": {"order_id": "A"}}
    return parse_config(
        {
            "name": "ship",
            "intents": [],
            "plans": {"ship": {"steps": [step]}},
            "templates": {"done": {"zh": "好", "en": "done"}},
            "default_language": "en",
        }
    )


@tool
def not_a_number(order_id: str) -> float:
    """Returns NaN."""
    return float("nan")


class Quote(BaseModel):
    price: float
    extras: list[float] = []


@tool
def infinite_quote(order_id: str) -> Quote:
    """An exact model instance (not validated again) holding an infinity, deep down."""
    return Quote(price=1.0, extras=[2.0, float("-inf")])


class Gauge(BaseModel):
    reading: float | None
    unit: str


@tool
def missing_reading(order_id: str) -> Gauge:
    """A data frame's "missing" (NaN) where the type allows None."""
    return Gauge(reading=float("nan"), unit="kg")


async def test_nan_where_none_is_allowed_is_none_live_and_stored(tmp_path: Any) -> None:
    """Review of e323c7d: refusing it turned tools that return a data frame's missing
    value into failures (and a write that acted into OUTCOME_UNKNOWN). The live run now
    gets what the store keeps: None."""
    from corral import SqlStore

    config = _one_step("missing_reading")
    store = SqlStore.open(tmp_path / "runs.db")
    runtime = Runtime(Agent.build(config, [missing_reading]), store)
    summary = await runtime.run_plan("ship")
    assert summary.steps[0].error_code is None, summary
    live = (await runtime.load_state(summary.run_id)).steps["q"].data
    assert live == {"reading": None, "unit": "kg"}
    store.engine.dispose()


@pytest.mark.parametrize("tool_name", ["not_a_number", "infinite_quote"])
async def test_a_result_holding_nan_or_an_infinity_fails_at_the_boundary(
    tool_name: str, tmp_path: Any
) -> None:
    """Found by a walkthrough: the live run used NaN (``value=nan``) while the store kept
    ``null``, so ``corral replay`` of the run diverged (TOOL_OUTPUT_INVALID)."""
    from corral import SqlStore

    config = _one_step(tool_name)
    agent = Agent.build(config, [not_a_number, infinite_quote])
    store = SqlStore.open(tmp_path / "runs.db")
    runtime = Runtime(agent, store)
    summary = await runtime.run_plan("ship")
    assert summary.steps[0].error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    state = await runtime.load_state(summary.run_id)
    assert "not finite" in state.steps["q"].reason
    assert summary.status is not RunStatus.FINISHED or summary.outcome != "success"
    store.engine.dispose()


@tool
def exits(order_id: str) -> str:
    """A library that calls sys.exit (a CLI's main, say)."""
    raise SystemExit(3)


@tool
async def exits_async(order_id: str) -> str:
    """The same, async."""
    raise SystemExit(4)


@pytest.mark.parametrize("tool_name", ["exits", "exits_async"])
async def test_a_tool_that_calls_sys_exit_fails_as_a_tool_does(tool_name: str) -> None:
    """Found by a walkthrough: ``run_plan`` raised a bare CancelledError (or SystemExit)
    and the run stayed ``executing``; ``corral resume`` of it exited 3, saying nothing."""
    config = _one_step(tool_name)
    store = MemoryStore()
    summary = await Runtime(Agent.build(config, [exits, exits_async]), store).run_plan("ship")
    assert summary.steps[0].error_code == ErrorCode.TOOL_FAILED.value
    assert summary.status is RunStatus.HANDED_OFF
    assert store.get_run(summary.run_id).status == "handed_off"  # type: ignore[union-attr]


class Product(BaseModel):
    name: str


@tool
def endless_name(order_id: str) -> Product:
    """Returns a 2 MB product name (a hostile or broken backend)."""
    return Product(name="P" * 2_000_000)


@tool(policy=ToolPolicy(max_output_chars=3_000_000))
def long_but_allowed(order_id: str) -> Product:
    """The same, under a policy that allows it."""
    return Product(name="P" * 2_000_000)


async def test_a_result_longer_than_the_policy_allows_fails_at_the_boundary(
    tmp_path: Any,
) -> None:
    """Found by a hostile walkthrough: a 30 MB result went into the log (a 180 MB home,
    `corral show` took 28 s) and into the reply shown to the customer."""
    from corral import SqlStore

    tools = [endless_name, long_but_allowed]
    store = SqlStore.open(tmp_path / "runs.db")
    refused = await Runtime(Agent.build(_one_step("endless_name"), tools), store).run_plan("ship")
    assert refused.steps[0].error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    assert refused.status is not RunStatus.FINISHED or refused.outcome != "success"
    kept = sum(len(json.dumps(e.data, default=str)) for e in store.load_events(refused.run_id))
    assert kept < 100_000  # the result was not stored
    allowed = Agent.build(_one_step("long_but_allowed"), tools)
    summary = await Runtime(allowed, store).run_plan("ship")
    assert summary.steps[0].error_code is None
    store.engine.dispose()


def test_only_results_that_may_be_long_are_measured() -> None:
    from datetime import date
    from enum import Enum
    from typing import Literal

    from corral.typecheck import may_be_long

    class Colour(Enum):
        RED = "red"

    class Small(BaseModel):
        n: int
        ok: bool
        at: date
        kind: Literal["a", "b"]
        colour: Colour
        rate: float | None = None

    class Nested(BaseModel):
        inner: Small
        tags: list[int]

    assert not may_be_long(Small) and not may_be_long(int)
    assert may_be_long(Nested) and may_be_long(str) and may_be_long(Quote)
    assert may_be_long(dict[str, int]) and may_be_long(Any)


@tool
def nested_answer(order_id: str) -> dict[str, Any]:
    """A service's answer nested a few hundred levels deep (1.3 KB of JSON)."""
    answer: dict[str, Any] = {}
    for _ in range(300):
        answer = {"a": answer}
    return answer


async def test_a_result_nested_past_the_serializer_is_invalid_output_not_a_failure() -> None:
    """Found by a hostile review: JSON nested 260 deep, under an untyped field, was
    ``TOOL_FAILED`` ("ValueError: Maximum serialization depth exceeded"), an error of
    the tool, where deeper nesting was ``TOOL_OUTPUT_INVALID`` ("nests too deep")."""
    summary = await Runtime(
        Agent.build(_one_step("nested_answer"), [nested_answer]), MemoryStore()
    ).run_plan("ship")
    assert summary.steps[0].error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
