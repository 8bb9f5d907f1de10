"""OpenAPI import: chosen operations become the same tools a person would declare by hand.

The document is the loopback service's own (FastAPI writes it), so the import is read
against a real OpenAPI 3.1 document with ``$ref`` and ``anyOf`` in it, and then called.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from tests.extras import REQUIRE_ALL, import_extra

import_extra("fastapi", REQUIRE_ALL)

from corral import Agent, FixedEffects, MemoryStore, Runtime, parse_config  # noqa: E402
from corral.errors import ConfigInvalidError  # noqa: E402
from corral.events import tool_attempts  # noqa: E402
from corral.typecheck import describe  # noqa: E402
from tests.http_service import Ledger, make_app  # noqa: E402
from tests.one_intent import one_intent  # noqa: E402
from tests.serving import serve_app  # noqa: E402
from tests.test_http_tools import DAY, post_tool, weather_tool  # noqa: E402

OPERATIONS = {"getForecast": "get_forecast", "createPost": "post_to_group"}
STEPS = [
    {"id": "s1", "tool": "get_forecast", "args": {"city": "shanghai", "date": DAY}},
    {
        "id": "s2",
        "tool": "post_to_group",
        "args": {"channel": "ops", "text": "$s1.result.sky"},
        "depends_on": ["s1"],
    },
]


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[str, Ledger, dict[str, Any]]]:
    app, ledger = make_app()
    with serve_app(app) as base:
        yield base, ledger, app.openapi()


def imported(folder: Path, document: dict[str, Any], **source: Any) -> Agent:
    """An agent whose tools are ``OPERATIONS`` imported from ``document``."""
    (folder / "openapi.json").write_text(json.dumps(document), encoding="utf-8")
    spec = {"document": "openapi.json", "operations": OPERATIONS, **source}
    config = parse_config(one_intent("go", steps=STEPS, openapi=[spec]))
    return Agent.build(config, [], root=folder, deps={"SERVICE_URL": "http://127.0.0.1:9"})


def shape(model: type[BaseModel]) -> dict[str, tuple[str, bool]]:
    """Each field's type and whether it is required: what plans are checked against."""
    return {n: (describe(f.annotation), f.is_required()) for n, f in model.model_fields.items()}


def test_an_import_gives_the_schemas_of_the_hand_declared_tools(
    service: tuple[str, Ledger, dict[str, Any]], tmp_path: Path
) -> None:
    agent = imported(tmp_path, service[2], base_url="${SERVICE_URL}")
    config = parse_config(one_intent("go", steps=STEPS, http_tools=[weather_tool(), post_tool()]))
    by_hand = Agent.build(config, [], deps={"SERVICE_URL": "http://127.0.0.1:9"})
    for name in OPERATIONS.values():
        mine, theirs = agent.tools.get(name), by_hand.tools.get(name)
        assert shape(mine.input_model) == shape(theirs.input_model), name
        assert shape(mine.output_model) == shape(theirs.output_model), name
    forecast = shape(agent.tools.get("get_forecast").output_model)
    assert forecast["sky"] == ("Literal['sun', 'rain', 'cloud']", True)  # a $ref'd enum
    assert forecast["date"] == ("str", True)
    post = shape(agent.tools.get("post_to_group").output_model)
    assert post["idempotency_key"] == ("str | None", True)  # anyOf with null


async def test_imported_tools_are_called_like_declared_ones(
    service: tuple[str, Ledger, dict[str, Any]], tmp_path: Path
) -> None:
    base, ledger, document = service
    ledger.reset()
    policies = {"post_to_group": {"kind": "write"}}
    agent = imported(tmp_path, document, base_url=base, policies=policies)
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
        events = await runtime.events(summary.run_id)
    assert summary.status.value == "finished"
    attempts = {a.tool: a for a in tool_attempts(e.payload for e in events)}
    assert attempts["get_forecast"].data == {
        "city": "shanghai",
        "date": DAY,
        "rain_probability": 0.8,
        "high_c": 12,
        "sky": "rain",
    }
    posted = attempts["post_to_group"].data
    assert posted is not None and posted["idempotency_key"] == ledger.keys[0] is not None
    assert ledger.calls == {"/weather/shanghai": 1, "/posts": 1}


async def test_a_mistyped_base_url_is_a_failure_when_404_is_declared_an_error(
    service: tuple[str, Ledger, dict[str, Any]], tmp_path: Path
) -> None:
    """Every path under a wrong base URL answers 404: read as "nothing found" by default,
    as the failed call it is with ``not_found: error``."""
    base, ledger, document = service
    outcomes = []
    for not_found in ("no_result", "error"):
        ledger.reset()
        agent = imported(tmp_path, document, base_url=base + "/v9", not_found=not_found)
        async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
            summary = await runtime.start("go")
            events = await runtime.events(summary.run_id)
        first = next(tool_attempts(e.payload for e in events))
        outcomes.append((first.tool, first.status, first.error_code))
        assert ledger.calls == {"/v9/weather/shanghai": 1}  # the service has no /v9: 404
    assert outcomes == [
        ("get_forecast", "no_result", None),
        ("get_forecast", "error", "TOOL_FAILED"),
    ]


REFS_DOCUMENT = """
openapi: 3.0.3
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /orders/{order_id}:
    parameters: [{$ref: "#/components/parameters/OrderId"}]
    get:
      operationId: getOrder
      summary: One order by id.
      responses:
        "200": {$ref: "#/components/responses/Order"}
    patch:
      operationId: renameOrder
      parameters:
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
      requestBody: {$ref: "#/components/requestBodies/Rename"}
      responses:
        "204": {description: renamed}
components:
  parameters:
    OrderId: {name: order_id, in: path, required: true, schema: {type: string}}
  requestBodies:
    Rename:
      content:
        application/json:
          schema:
            type: object
            properties: {title: {type: string, nullable: true}}
            required: [title]
  responses:
    Order:
      description: the order
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Order"}
  schemas:
    Order:
      type: object
      required: [id, lines]
      properties:
        id: {type: string}
        lines: {type: array, items: {$ref: "#/components/schemas/Line"}}
        parent: {$ref: "#/components/schemas/Order"}
    Line:
      type: object
      properties: {sku: {type: string}, qty: {type: integer}}
"""


def yaml_agent(tmp_path: Path, operations: dict[str, str]) -> Agent:
    (tmp_path / "api.yaml").write_text(REFS_DOCUMENT, encoding="utf-8")
    spec = {"document": "api.yaml", "operations": operations}
    steps = [{"id": "s1", "tool": next(iter(operations.values())), "args": {"order_id": "A1"}}]
    config = parse_config(one_intent("go", steps=steps, openapi=[spec]))
    return Agent.build(config, [], root=tmp_path)


def test_refs_to_parameters_bodies_and_responses_are_followed(tmp_path: Path) -> None:
    agent = yaml_agent(tmp_path, {"getOrder": "get_order", "renameOrder": "rename_order"})
    get_order = agent.tools.get("get_order")
    assert get_order.description == "One order by id."
    assert shape(get_order.input_model) == {"order_id": ("str", True)}
    output = shape(get_order.output_model)
    assert output["id"] == ("str", True)
    assert output["parent"] == ("Any", False)  # an Order inside an Order: left open
    assert output["lines"][1] is True and output["lines"][0].startswith("list[")
    rename = agent.tools.get("rename_order")
    assert shape(rename.input_model) == {
        "order_id": ("str", True),
        "X_Trace": ("str | None", False),  # the header, named as an attribute can be
        "title": ("str | None", True),  # nullable
    }
    assert shape(rename.output_model) == {}  # a 204 answers nothing


def test_an_operation_missing_from_the_document_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalidError, match=r"no operation deleteOrder.*") as caught:
        yaml_agent(tmp_path, {"deleteOrder": "delete_order"})
    assert "getOrder" in (caught.value.hint or "")


def test_policies_must_name_imported_tools(tmp_path: Path) -> None:
    spec = {"document": "x.json", "operations": {"a": "tool_a"}, "policies": {"tool_b": {}}}
    with pytest.raises(ConfigInvalidError, match="tool_b"):
        parse_config(one_intent("go", steps=[], openapi=[spec]))


def test_the_document_is_read_from_the_agent_folder_only(tmp_path: Path) -> None:
    spec = {"document": "absent.yaml", "operations": {"a": "tool_a"}}
    config = parse_config(one_intent("go", steps=[], openapi=[spec]))
    with pytest.raises(ConfigInvalidError, match="no OpenAPI document"):
        Agent.build(config, [], root=tmp_path)
    (tmp_path / "absent.yaml").write_text(yaml.safe_dump({"swagger": "2.0"}), encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="not an OpenAPI 3 document"):
        Agent.build(config, [], root=tmp_path)


def test_a_relative_server_url_needs_a_base_url(tmp_path: Path) -> None:
    (tmp_path / "api.yaml").write_text(
        REFS_DOCUMENT.replace("http://127.0.0.1:9/api", "/api"), encoding="utf-8"
    )
    spec = {"document": "api.yaml", "operations": {"getOrder": "get_order"}}
    steps = [{"id": "s1", "tool": "get_order", "args": {"order_id": "A1"}}]
    config = parse_config(one_intent("go", steps=steps, openapi=[spec]))
    with pytest.raises(ConfigInvalidError, match=r"getOrder.*url"):
        Agent.build(config, [], root=tmp_path)


def test_an_operation_id_that_names_two_operations_is_refused(tmp_path: Path) -> None:
    """Found by a hostile review: a GET and a DELETE sharing an operationId imported the
    last one silently, so `get_order` sent DELETE (and, a read by default, retried it)."""
    document = REFS_DOCUMENT.replace("operationId: renameOrder", "operationId: getOrder")
    (tmp_path / "api.yaml").write_text(document, encoding="utf-8")
    spec = {"document": "api.yaml", "operations": {"getOrder": "get_order"}}
    steps = [{"id": "s1", "tool": "get_order", "args": {"order_id": "A1"}}]
    config = parse_config(one_intent("go", steps=steps, openapi=[spec]))
    with pytest.raises(ConfigInvalidError) as refused:
        Agent.build(config, [], root=tmp_path)
    assert "getOrder names GET /orders/{order_id} and PATCH" in refused.value.message


@pytest.mark.parametrize("header", ["Transfer-Encoding", "Host", "Content-Length", "Authorization"])
def test_a_header_parameter_that_frames_the_request_is_no_argument(
    tmp_path: Path, header: str
) -> None:
    """Found by a hostile review: header parameters named Transfer-Encoding, Host or
    Content-Length took their values from plan arguments (a user's words could split the
    request or send it elsewhere); OpenAPI itself says Authorization is ignored."""
    document = REFS_DOCUMENT.replace("name: X-Trace", f"name: {header}")
    (tmp_path / "api.yaml").write_text(document, encoding="utf-8")
    spec = {"document": "api.yaml", "operations": {"renameOrder": "rename_order"}}
    steps = [{"id": "s1", "tool": "rename_order", "args": {"order_id": "A1", "title": "x"}}]
    agent = Agent.build(
        parse_config(one_intent("go", steps=steps, openapi=[spec])), [], root=tmp_path
    )
    assert set(shape(agent.tools.get("rename_order").input_model)) == {"order_id", "title"}
    declared = {
        "name": "post_it",
        "method": "POST",
        "url": "http://127.0.0.1:9/p",
        "input": {"type": "object", "properties": {header: {"type": "string"}}},
        "params_in": {header: "header"},
    }
    with pytest.raises(ConfigInvalidError, match=f"corral sends the {header} header itself"):
        parse_config(one_intent("go", steps=[], http_tools=[declared]))
