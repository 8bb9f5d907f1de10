"""A malformed JSON Schema (a config's, an OpenAPI document's, an MCP listing's) is
``CONFIG_INVALID`` naming the tool, not a traceback.

Found by a hostile review: ``properties: 5`` or ``required: [[city]]`` in an HTTP tool's
schema, an output schema or an OpenAPI document's component raised ``AttributeError`` or
``TypeError`` at load, and an MCP server listing such a schema did too (its importer
caught only corral's own errors).
"""

from __future__ import annotations

from typing import Any

import pytest

from corral import parse_config
from corral.errors import ConfigInvalidError
from corral.tools.schema_models import model_from_schema
from tests.extras import REQUIRE_ALL, import_extra
from tests.one_intent import one_intent
from tests.test_http_tools import weather_tool


@pytest.mark.parametrize(
    ("where", "schema", "problem"),
    [
        ("input", {"type": "object", "properties": 5}, "'properties' must map field names"),
        (
            "input",
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": [["city"]]},
            "'required' must be a list of field names",
        ),
        ("output", {"type": "object", "properties": 5}, "'properties' must map field names"),
        ("output", {"type": "object", "required": 5}, "'required' must be a list of field names"),
    ],
)
def test_an_http_tool_schema_of_the_wrong_shape_is_config_invalid(
    where: str, schema: dict[str, Any], problem: str
) -> None:
    tool = {**weather_tool(), where: schema}
    with pytest.raises(ConfigInvalidError, match=problem):
        parse_config(one_intent("go", steps=[], http_tools=[tool]))


def test_a_nested_schema_of_the_wrong_shape_is_config_invalid() -> None:
    nested = {"type": "object", "properties": {"order": {"type": "object", "properties": 5}}}
    with pytest.raises(ConfigInvalidError, match="get_order_order: 'properties' must map"):
        model_from_schema("get_order", nested)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"order": {"type": "object", "required": 5}}},
        {"type": "object", "properties": {"order": {"type": "array", "items": 5}}},
        {"type": "object", "allOf": [{"properties": 7}]},
        {"type": "object", "properties": {"a": {"$ref": 5}}},
        {"type": "object", "properties": {"a": {"anyOf": 5}}},
        {"type": "object", "properties": {"a": {"enum": 5}}},
    ],
)
def test_other_odd_shapes_build_or_are_config_invalid(schema: dict[str, Any]) -> None:
    """Read leniently (an unknown shape is ``Any``) or refused, never a traceback."""
    try:
        model_from_schema("get_order", schema)
    except ConfigInvalidError as exc:
        assert "get_order" in exc.message


def test_an_mcp_listing_of_the_wrong_shape_is_config_invalid() -> None:
    import_extra("mcp", REQUIRE_ALL)
    from mcp.types import Tool

    from corral.tools.mcp.declared import McpToolConfig
    from corral.tools.mcp.importer import mcp_tool_spec

    nested = {"type": "object", "properties": {"order": {"type": "object", "properties": 5}}}
    for schema in (nested, {"type": "object", "properties": 5}):
        listed = Tool(name="lookup", inputSchema=schema)
        with pytest.raises(ConfigInvalidError):
            mcp_tool_spec(None, listed, McpToolConfig())  # type: ignore[arg-type]
