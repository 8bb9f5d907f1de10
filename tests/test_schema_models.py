"""JSON Schema -> pydantic models: the one helper every declared tool's schemas go through.

What a plan may reference, and how it is type-checked, comes from these models, so the
types they give are pinned here; and an output model keeps only the declared fields.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from corral.errors import ConfigInvalidError
from corral.tools.schema_models import model_from_schema, python_name
from corral.typecheck import field_type

FORECAST = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city"},
        "day": {"type": "string", "format": "date"},
        "rain_probability": {"type": "number"},
        "high_c": {"type": "integer"},
        "windy": {"type": "boolean"},
        "sky": {"type": "string", "enum": ["sun", "rain", "cloud"]},
        "hours": {"type": "array", "items": {"type": "number"}},
        "station": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "height_m": {"type": "number"}},
            "required": ["id"],
        },
        "extra": {"type": "object"},
        "note": {"type": ["string", "null"]},
        "anything": {},
    },
    "required": ["city", "day", "rain_probability"],
}


def types_of(model: type[BaseModel]) -> dict[str, Any]:
    return {name: field_type(model, (name,))[0] for name in model.model_fields}


def test_scalars_enums_arrays_and_nested_objects_get_their_python_types() -> None:
    model = model_from_schema("forecast", FORECAST)
    types = types_of(model)
    assert types["city"] is str
    assert types["day"] is str  # formats are kept as the service's text
    assert types["rain_probability"] is float
    assert types["high_c"] == int | None  # optional: may be missing
    assert types["sky"] == Literal["sun", "rain", "cloud"] | None
    assert types["hours"] == list[float] | None
    assert types["extra"] == dict[str, Any] | None
    assert types["note"] == str | None
    assert types["anything"] is Any
    nested, problem = field_type(model, ("station", "height_m"))
    assert problem is None and nested == float | None
    assert field_type(model, ("station", "id"))[0] is str
    assert model.model_fields["city"].description == "The city"


def test_an_output_keeps_only_declared_fields_and_an_input_refuses_others() -> None:
    out = model_from_schema("forecast", FORECAST)
    value = out.model_validate(
        {"city": "sh", "day": "2026-12-01", "rain_probability": 0.4, "secret": "x"}
    )
    assert "secret" not in value.model_dump()
    assert value.model_dump()["high_c"] is None
    inp = model_from_schema("forecast_in", FORECAST, extra="forbid")
    with pytest.raises(ValidationError, match="secret"):
        inp.model_validate({"city": "sh", "day": "d", "rain_probability": 1, "secret": "x"})
    with pytest.raises(ValidationError, match="rain_probability"):
        inp.model_validate({"city": "sh", "day": "d"})


def test_refs_into_the_document_are_followed_and_a_cycle_is_any() -> None:
    document = {
        "components": {
            "schemas": {
                "Sales": {
                    "type": "object",
                    "properties": {
                        "week": {"type": "string"},
                        "total": {"$ref": "#/components/schemas/Money"},
                        "previous": {"$ref": "#/components/schemas/Sales"},
                    },
                    "required": ["week", "total"],
                },
                "Money": {"type": "number"},
            }
        }
    }
    model = model_from_schema("sales", {"$ref": "#/components/schemas/Sales"}, document=document)
    assert field_type(model, ("total",))[0] is float
    assert field_type(model, ("previous",))[0] is Any  # Sales inside Sales: a cycle
    with pytest.raises(ConfigInvalidError, match="points to nothing"):
        model_from_schema("x", {"$ref": "#/components/schemas/Nope"}, document=document)


def test_a_non_object_schema_is_a_config_error() -> None:
    with pytest.raises(ConfigInvalidError, match="must be an object"):
        model_from_schema("bad", {"type": "array", "items": {"type": "string"}})


def test_awkward_field_names_get_safe_attributes_and_keep_their_json_names() -> None:
    model = model_from_schema(
        "odd",
        {
            "type": "object",
            "properties": {"high-c": {"type": "number"}, "json": {"type": "string"}},
            "required": ["high-c"],
        },
    )
    assert set(model.model_fields) == {"high_c", "json_"}
    value = model.model_validate({"high-c": 3, "json": "x"})
    assert value.model_dump(by_alias=True) == {"high-c": 3.0, "json": "x"}


JSON_SCALARS = st.sampled_from(["string", "number", "integer", "boolean"])
SAMPLE = {"string": "s", "number": 1.5, "integer": 2, "boolean": True}
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: python_name(n) == n)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(NAMES, JSON_SCALARS, min_size=1, max_size=6), st.data())
def test_any_flat_object_schema_validates_its_own_sample_and_drops_the_rest(
    properties: dict[str, str], data: st.DataObject
) -> None:
    required = data.draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    schema = {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": required,
    }
    model = model_from_schema("m", schema)
    sample = {name: SAMPLE[kind] for name, kind in properties.items() if name in required}
    dumped = model.model_validate({**sample, "zz_undeclared": 1}).model_dump()
    assert set(dumped) == set(properties)
    assert {k: dumped[k] for k in sample} == sample
    for name in required:
        with pytest.raises(ValidationError):
            model.model_validate({k: v for k, v in sample.items() if k != name})


async def test_a_declared_tool_with_an_array_output_keeps_it_as_value() -> None:
    from corral import FixedEffects, ToolContext, ToolPolicy
    from corral.tools.declared import CONTEXT_PARAM, declared_spec
    from corral.tools.invoke import invoke_tool, validate_args

    async def hours(**kwargs: Any) -> Any:
        assert isinstance(kwargs.pop(CONTEXT_PARAM), ToolContext)
        return [1, 2.5, "3"] if kwargs["city"] == "sh" else None

    spec = declared_spec(
        "hours",
        "Hourly rain.",
        hours,
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        output_schema={"type": "array", "items": {"type": "number"}},
        policy=ToolPolicy(),
    )
    assert spec.wrapped and field_type(spec.output_model, ("value",))[0] == list[float]
    context = ToolContext(run_id="r", step_id="s", idempotency_key="k")
    found = await invoke_tool(spec, validate_args(spec, {"city": "sh"}), context, FixedEffects())
    assert found.data == {"value": [1.0, 2.5, 3.0]}
    none = await invoke_tool(spec, validate_args(spec, {"city": "bj"}), context, FixedEffects())
    assert none.status.value == "no_result"
