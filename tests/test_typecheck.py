"""Static type checks of references against tool parameters (``planning/typecheck.py``).

``Annotated``, unions, ``Literal``, ``Enum`` and generic containers, both accepted and
rejected; then the same rules seen from a real agent load, where a mistyped reference is
a ``CONFIG_INVALID`` naming the step and both types.
"""

from __future__ import annotations

from enum import Enum, IntEnum, StrEnum
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from corral import Agent, parse_config, tool
from corral.errors import ConfigInvalidError
from corral.typecheck import describe, field_type, is_assignable
from tests.one_intent import one_intent


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Size(IntEnum):
    S = 1
    L = 2


class Plain(Enum):
    A = "a"


class Point(BaseModel):
    x: int
    tags: dict[str, Any] = Field(default_factory=dict)


class Shape(BaseModel):
    at: Point | None = None
    either: Point | Shape | None = None
    boxed: Annotated[Point, "meta"] | None = None
    n: int = 0


ACCEPT = [
    (int, Annotated[int, Field(ge=0)], "Annotated target is its base type"),
    (Annotated[int, "why"], int, "Annotated source too"),
    (int, int | None, "a value fits an optional parameter"),
    # a None at run time is refused by binding (MISSING_ARGUMENT), before the tool
    (int | None, int, "an optional output into a required parameter"),
    (type(None), int | None, "None fits an optional parameter"),
    (type(None), type(None), "None fits None"),
    (int | str, str | int | None, "every member fits"),
    (bool, bool | int, "some member fits"),
    (int, float, "int widens to float"),
    (Literal["a"], Literal["a", "b"], "a narrower Literal"),
    (Literal["a", "b"], str, "a str Literal is a str"),
    (str, Literal["a", "b"], "a str may fill a Literal (the tool checks the value)"),
    (Literal["a", 1], int, "a mixed Literal is not checked statically"),
    (Colour, Colour, "the Enum itself"),
    (str, Colour, "a str fills a str Enum"),
    (int, Size, "an int fills an IntEnum"),
    (list[int], list[int], "same container, same items"),
    (list[int], list[float], "items widen like values"),
    (list, list[str], "a bare container is not checked further"),
    (dict[str, list[int]], dict[str, list[float]], "nested containers"),
    (tuple[int, str], tuple[int, str], "tuples item by item"),
    (Any, list[int], "Any source"),
    (list[int], Any, "Any target"),
    (Point, Point, "a model"),
]

REJECT = [
    (str, Annotated[int, Field(ge=0)], "Annotated keeps its base type"),
    (type(None), int, "None into a required parameter"),
    (int | str, int, "one member does not fit"),
    (float, int, "float does not narrow to int"),
    (bool, int, "a bool is not a number here"),
    (Literal["a", "c"], Literal["a", "b"], "a Literal value outside the target"),
    (int, Colour, "an int into a str Enum"),
    (str, Size, "a str into an IntEnum"),
    (str, Plain, "a plain Enum takes only itself"),
    (Colour, Size, "another Enum"),
    (list[int], list[str], "other items"),
    (list[int], set[int], "another container"),
    (list[int], int, "a container into a scalar"),
    (int, list[int], "a scalar into a container"),
    (tuple[int, str], tuple[int], "tuples of other lengths"),
    (dict[str, int], dict[str, str], "other values"),
    (str, Point, "a str into a model"),
]


@pytest.mark.parametrize(("source", "target", "why"), ACCEPT, ids=[c[2] for c in ACCEPT])
def test_accepted(source: Any, target: Any, why: str) -> None:
    assert is_assignable(source, target), why


@pytest.mark.parametrize(("source", "target", "why"), REJECT, ids=[c[2] for c in REJECT])
def test_rejected(source: Any, target: Any, why: str) -> None:
    assert not is_assignable(source, target), why


def test_describe_reads_like_the_annotation() -> None:
    assert describe(Annotated[int, "x"]) == "int"
    assert describe(int | None) == "int | None"
    assert describe(type(None)) == "None"
    assert describe(list[int]) == "list[int]"
    assert describe(Colour) == "Colour"
    assert describe(Literal["a"]) == "Literal['a']"


def test_field_type_walks_models_optionals_and_dicts() -> None:
    assert field_type(Shape, ("n",)) == (int, None)
    assert field_type(Shape, ("at", "x")) == (int, None)  # through an Optional model
    assert field_type(Shape, ("boxed", "x")) == (int, None)  # and an annotated one
    assert field_type(Shape, ("at", "tags", "anything")) == (Any, None)  # dicts are open
    missing, problem = field_type(Shape, ("at", "y"))
    assert missing is None and problem == "at has no field 'y' (fields: x, tags)"
    scalar, problem = field_type(Shape, ("n", "digits"))
    assert scalar is None and problem == "n of type int has no fields"
    union, problem = field_type(Shape, ("either", "x"))
    assert union is None and problem is not None and "has no fields" in problem


# ------------------------------------------------------------------ properties

SCALARS = st.sampled_from(
    [int, str, float, bool, Colour, Size, Point, Literal["a", "b"], Annotated[int, "n"]]
)


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists and dicts of ``inner`` (a def: hypothesis cannot read a lambda under coverage)."""
    return st.one_of(
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
    )


TYPES = st.recursive(SCALARS, containers, max_leaves=4)


@given(TYPES)
def test_every_type_fits_itself_and_its_optional(tp: Any) -> None:
    assert is_assignable(tp, tp)
    assert is_assignable(tp, tp | None)
    assert is_assignable(type(None), tp | None)


@given(TYPES)
def test_none_never_fits_a_required_parameter(tp: Any) -> None:
    assert not is_assignable(type(None), tp)


@given(TYPES, TYPES)
def test_a_container_fits_only_when_its_items_do(a: Any, b: Any) -> None:
    assert is_assignable(list[a], list[b]) == is_assignable(a, b)  # type: ignore[valid-type]


# ------------------------------------------------------------------ through an agent load


class Reading(BaseModel):
    values: list[int]
    unit: Literal["c", "f"]
    level: Size


@tool
def read_sensor(sensor: str) -> Reading:
    """A sensor's readings."""
    return Reading(values=[1], unit="c", level=Size.S)


@tool
def store_text(lines: list[str], unit: Literal["c"], level: Colour) -> Reading:
    """Store lines of text."""
    return Reading(values=[], unit=unit, level=Size.S)


@tool
def store_numbers(values: list[float], unit: Literal["c", "f", "k"], level: Size) -> Reading:
    """Store numbers."""
    return Reading(values=[int(v) for v in values], unit="c", level=level)


SENSOR = {"sensor": {"kind": "pattern", "patterns": [r"\b(S\d+)\b"]}}


def two_steps(first: str, then: dict[str, Any]) -> dict[str, Any]:
    """A plan: ``first`` reads the sensor, then the step ``then`` (id s2) uses its result."""
    steps = [
        {"id": "s1", "tool": first, "args": {"sensor": "$entities.sensor"}},
        {**then, "id": "s2", "depends_on": ["s1"]},
    ]
    return one_intent("copy", steps=steps, entities=SENSOR)


def build(target: str, args: dict[str, str]) -> Agent:
    config = two_steps("read_sensor", {"tool": target, "args": args})
    return Agent.build(parse_config(config), [read_sensor, store_text, store_numbers])


REFS = {"values": "$s1.result.values", "unit": "$s1.result.unit", "level": "$s1.result.level"}


def test_a_well_typed_plan_loads() -> None:
    agent = build("store_numbers", REFS)
    assert ("ask", "p") in agent.template_graphs


def test_mistyped_references_are_all_named_at_load() -> None:
    refs = {"lines": REFS["values"], "unit": REFS["unit"], "level": REFS["level"]}
    with pytest.raises(ConfigInvalidError) as info:
        build("store_text", refs)
    message = info.value.message
    assert "s2.lines" in message and "list[int]" in message and "list[str]" in message
    assert "s2.unit" in message and "s2.level" in message


class Page(BaseModel):
    size: int


@tool
def page_size(sensor: str) -> Page:
    """The page size a sensor reports."""
    return Page(size=3)


@tool
def list_readings(limit: Annotated[int, Field(ge=1)] | None = None) -> Reading:
    """Readings, at most ``limit`` of them."""
    return Reading(values=list(range(limit or 1)), unit="c", level=Size.S)


def test_an_int_fits_an_optional_constrained_int_parameter() -> None:
    """``Annotated[int, ...] | None``: the annotation inside the union is its base type."""
    config = two_steps("page_size", {"tool": "list_readings", "args": {"limit": "$s1.result.size"}})
    agent = Agent.build(parse_config(config), [page_size, list_readings])
    assert ("ask", "p") in agent.template_graphs
    assert is_assignable(int, Annotated[int, Field(ge=1)] | None)
    assert not is_assignable(str, Annotated[int, Field(ge=1)] | None)


class Region(BaseModel):
    name: str
    total: int


class Week(BaseModel):
    week: str
    total: int
    regions: list[Region]
    note: str = ""


def test_a_model_fits_another_by_its_fields() -> None:
    """A declared tool's result (a model built from JSON Schema) flows into a function
    tool's own model when every field fits; a missing or mistyped field does not."""
    from corral.tools.schema_models import model_from_schema

    region = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "total": {"type": "integer"}},
        "required": ["name", "total"],
    }
    served = model_from_schema(
        "fetch_output",
        {
            "type": "object",
            "properties": {
                "week": {"type": "string"},
                "total": {"type": "integer"},
                "start": {"type": "string"},
                "regions": {"type": "array", "items": region},
            },
            "required": ["week", "total", "regions"],
        },
    )
    assert is_assignable(served, Week)  # extra `start` ignored, `note` has a default
    assert is_assignable(list[served], list[Week])  # type: ignore[valid-type]
    no_regions = model_from_schema(
        "short",
        {
            "type": "object",
            "properties": {"week": {"type": "string"}, "total": {"type": "integer"}},
        },
    )
    assert not is_assignable(no_regions, Week)  # a required field is missing
    text_total = model_from_schema(
        "text",
        {
            "type": "object",
            "properties": {
                "week": {"type": "string"},
                "total": {"type": "string"},
                "regions": {"type": "array", "items": region},
            },
        },
    )
    assert not is_assignable(text_total, Week)  # str does not fit int
    assert not is_assignable(Week, Region)


class Node(BaseModel):
    value: int
    children: list[Node] = Field(default_factory=list)


class Tree(BaseModel):
    value: int
    children: list[Tree] = Field(default_factory=list)


def test_models_that_refer_to_themselves_are_compared_once() -> None:
    assert is_assignable(Node, Tree) and is_assignable(Tree, Node)
