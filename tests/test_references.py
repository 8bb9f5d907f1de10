"""References and ``$$`` escapes inside list and dict arguments, through real runs.

A reference nested in a list or a dict is bound like a top-level one; a ``$$`` literal at
any depth reaches the tool with one ``$`` less; a bad nested reference is a plan problem
found at load, and a nested reference without a value stops the step before its tool.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from corral import Agent, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.errors import ConfigInvalidError
from corral.planning.references import iter_references, literal, parse_reference
from corral.testing import FixedEffects
from tests.one_intent import ORDER_ID, one_intent

SEEN: list[dict[str, Any]] = []


class Sent(BaseModel):
    count: int


class Found(BaseModel):
    city: str


@tool
def find(order_id: str) -> Found:
    """Where an order goes."""
    return Found(city="Lyon")


@tool
def notify(ids: list[str], fields: dict[str, Any], note: str) -> Sent:
    """Send a note about some orders."""
    SEEN.append({"ids": ids, "fields": fields, "note": note})
    return Sent(count=len(ids))


def agent(args: dict[str, Any]) -> Agent:
    steps = [
        {
            "id": "s1",
            "tool": "find",
            "args": {"order_id": "$entities.order_id"},
            "facts": {"city": "result.city"},
        },
        {"id": "s2", "tool": "notify", "args": args, "depends_on": ["s1"]},
    ]
    coupon = {"coupon": {"kind": "pattern", "patterns": [r"\b(C\d+)\b"]}}
    config = one_intent("tell", steps=steps, entities={**ORDER_ID, **coupon})
    return Agent.build(parse_config(config), [find, notify])


async def run(chosen: Agent, message: str) -> Any:
    runtime = Runtime(chosen, MemoryStore(), effects=FixedEffects())
    return await runtime.start(message)


NESTED = {
    "ids": ["$entities.order_id", "$$A0", "B7"],
    "fields": {
        "where": "$s1.result.city",
        "price": "$$9.99",
        "deep": {"list": ["$facts.city", {"order": "$entities.order_id", "tag": "$$vip"}]},
    },
    "note": "$$ off",
}


async def test_nested_references_are_bound_and_escapes_undone() -> None:
    SEEN.clear()
    summary = await run(agent(NESTED), "tell me about A42")
    assert summary.status is RunStatus.FINISHED, summary
    assert SEEN == [
        {
            "ids": ["A42", "$A0", "B7"],
            "fields": {
                "where": "Lyon",
                "price": "$9.99",
                "deep": {"list": ["Lyon", {"order": "A42", "tag": "$vip"}]},
            },
            "note": "$ off",
        }
    ]


async def test_a_literal_only_list_keeps_its_escapes_undone() -> None:
    SEEN.clear()
    args = {"ids": ["$$1", "$$$2"], "fields": {"a": ["$$x"]}, "note": "plain"}
    summary = await run(agent(args), "tell me about A1")
    assert summary.status is RunStatus.FINISHED
    assert SEEN == [{"ids": ["$1", "$$2"], "fields": {"a": ["$x"]}, "note": "plain"}]


async def test_a_nested_reference_with_no_value_stops_before_the_tool() -> None:
    SEEN.clear()
    args = {"ids": ["$entities.order_id", "$entities.coupon"], "fields": {}, "note": "n"}
    summary = await run(agent(args), "tell me about A1")  # no coupon given
    assert SEEN == []
    assert summary.status is not RunStatus.FINISHED
    assert [s.error_code for s in summary.steps if s.id == "s2"] == ["MISSING_ARGUMENT"]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"ids": ["$nowhere.x"], "fields": {}, "note": "n"}, "s2.ids: '$nowhere.x' is not"),
        ({"ids": [], "fields": {"k": ["$s9.result.city"]}, "note": "n"}, "s9"),
    ],
    ids=["malformed", "unknown-step"],
)
def test_a_bad_nested_reference_is_refused_at_load(args: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigInvalidError) as info:
        agent(args)
    assert problem in info.value.message


def test_iter_references_reports_positions_and_skips_escapes() -> None:
    value = {"a": ["$entities.x", "$$y", {"b": "$s1.result.z"}], "c": "$$d", "e": 3}
    assert list(iter_references(value)) == [
        (("a", "0"), "$entities.x"),
        (("a", "2", "b"), "$s1.result.z"),
    ]
    assert list(iter_references("$facts.k")) == [((), "$facts.k")]
    assert list(iter_references("$$facts.k")) == []


text = st.text(max_size=8)


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists and dicts of ``inner`` (a def: hypothesis cannot read a lambda under coverage)."""
    return st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4)


values = st.recursive(
    st.one_of(text, st.integers(), st.none(), text.map(lambda t: "$$" + t)),
    containers,
    max_leaves=20,
)


def escaped(value: Any) -> Any:
    """What a plan author writes for a literal: every ``$`` string escaped once more."""
    if isinstance(value, str) and value.startswith("$"):
        return "$" + value
    if isinstance(value, list):
        return [escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: escaped(v) for k, v in value.items()}
    return value


@given(values)
def test_escaping_then_undoing_is_the_identity(value: Any) -> None:
    written = escaped(value)
    assert literal(written) == value
    assert list(iter_references(written)) == []  # an escaped literal is never a reference


@given(text.filter(lambda t: not t.startswith("$")))
def test_a_dollar_string_is_a_reference_or_an_error(tail: str) -> None:
    candidate = "$" + tail
    try:
        ref = parse_reference(candidate)
    except ValueError as exc:
        assert "is not a reference" in str(exc)
    else:
        assert ref is not None and ref.text == candidate
