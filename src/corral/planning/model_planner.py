"""The model planner, for long-tail intents without a template.

It may use only the intent's allowed tools (the schema's ``enum``), at most the step
limit (``maxItems``), and its plan goes through the same static validation as a template:
the validator's problems are sent back as the re-ask. An empty plan means "cannot do".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic_core import PydanticUndefined

from corral.contracts import Plan, Step
from corral.errors import PlanInvalidError
from corral.intent.grounding import Evidence, declared_choices, grounded
from corral.intent.model_fallback import literal_of
from corral.models.base import Message, ModelRequest
from corral.planning.producers import FactRead
from corral.planning.references import literal
from corral.planning.typecheck import describe
from corral.planning.validate import PlanContext, validate_plan
from corral.tools.spec import ToolSpec

PLAN_MAX_TOKENS = 600
"""Enough for a 10-step plan; a small model that loops is cut off (and repaired) here."""


def draft_model(tools: list[str], max_steps: int) -> type[BaseModel]:
    """The output schema: steps whose ``tool`` is one of ``tools``, at most ``max_steps``."""
    step: type[BaseModel] = create_model(
        "PlannedStep",
        __config__=ConfigDict(extra="ignore"),
        id=(str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")),
        tool=(literal_of(tuple(tools)), ...),
        args=(dict[str, Any], Field(default_factory=dict)),
        depends_on=(list[str], Field(default_factory=list, max_length=max_steps)),
        facts=(dict[str, str], Field(default_factory=dict)),
        success=(str | None, None),
    )
    draft: type[BaseModel] = create_model(
        "PlanDraft",
        __config__=ConfigDict(extra="ignore"),
        steps=(list[step], Field(max_length=max_steps)),
    )
    return draft


def _tool_line(spec: ToolSpec) -> str:
    params = ", ".join(
        f"{name}: {describe(info.annotation)}{'' if info.is_required() else ' (optional)'}"
        for name, info in spec.input_model.model_fields.items()
    )
    outputs = ", ".join(
        f"{name}: {describe(info.annotation)}"
        for name, info in spec.output_model.model_fields.items()
    )
    return f"- {spec.name}({params}) -> {{{outputs}}}: {spec.description}"


def _rule_lines(tools: list[ToolSpec], rule_reads: Mapping[str, tuple[FactRead, ...]]) -> str:
    lines = [
        f"\n- before {spec.name}: {read.reader} reads facts {', '.join(sorted(read.facts))}"
        for spec in tools
        for read in rule_reads.get(spec.name, ())
        if read.facts
    ]
    if not lines:
        return ""
    return (
        "\nChecks before some tools read facts. A step publishes a fact with "
        '"facts": {"NAME": "result.FIELD"}, and the checked step must depend on it:'
        + "".join(lines)
    )


def plan_request(
    goal: str,
    intent: str,
    tools: list[ToolSpec],
    entities: Mapping[str, Any],
    max_steps: int,
    temperature: float,
    failure: str | None = None,
    rule_reads: Mapping[str, tuple[FactRead, ...]] | None = None,
) -> ModelRequest:
    """The planning prompt: the goal, the allowed tools with their schemas, what is known.

    ``rule_reads`` (the business rules gating the tools) become lines telling the model
    which facts a step must publish before a gated tool: the validator demands it.
    """
    system = (
        "You plan tool calls for one customer request. Use only these tools:\n"
        + "\n".join(_tool_line(t) for t in tools)
        + f"\nRules: at most {max_steps} steps; each step has id (s1, s2, ...), tool, args, "
        "depends_on. An argument is a literal or a reference: $entities.NAME for what the user "
        "said, $sN.result.FIELD for an output field of an earlier step that this step "
        "depends on. Never invent ids or values that are not given. If the tools cannot do "
        'it, reply {"steps": []}. Reply with JSON only: {"steps": [...]}.'
        + _rule_lines(tools, rule_reads or {})
    )
    known = json.dumps(dict(entities), ensure_ascii=False, default=str)
    user = f"Intent: {intent}\nRequest: {goal}\nKnown entities: {known}"
    if failure:
        user += f"\nThe previous plan failed while running: {failure}. Plan again."
    schema = draft_model([t.name for t in tools], max_steps).model_json_schema()
    return ModelRequest(
        "plan",
        (Message("system", system), Message("user", user[:4000])),
        schema,
        "plan",
        temperature,
        PLAN_MAX_TOKENS,
    )


def draft_to_plan(draft: Any, plan_id: str, intent: str) -> Plan:
    """A validated-shape draft as a ``Plan`` (static validation is the caller's next step)."""
    steps = [
        Step(
            id=s.id,
            tool=s.tool,
            args=s.args,
            depends_on=s.depends_on,
            facts=s.facts,
            success=s.success,
        )
        for s in draft.steps
    ]
    return Plan(plan_id=plan_id, intent=intent, steps=steps, source="model")


def _literal_part(value: Any) -> Any:
    """The argument with its references blanked (``None``): only literals need grounding."""
    if isinstance(value, list):
        return [_literal_part(item) for item in value]
    if isinstance(value, dict):
        return {key: _literal_part(item) for key, item in value.items()}
    if isinstance(value, str) and value.startswith("$") and not value.startswith("$$"):
        return None
    return literal(value)


def ungrounded_literals(draft: Any, context: PlanContext, evidence: Evidence) -> list[str]:
    """Literal values the model put in arguments that nobody gave it: invented values.

    Strings, numbers, dates and booleans alike (``corral.intent.grounding`` has the
    rules): a literal must be in what the user said, a known entity or tool-result value,
    or one the parameter declares (enum, ``Literal``, its default); otherwise the planner
    must use a reference. ``draft`` has passed ``validate_plan``, so every tool is registered.
    """
    problems = []
    for step in draft.steps:
        fields = context.registry.get(step.tool).input_model.model_fields
        for name, value in step.args.items():
            if name not in fields:
                continue
            info = fields[name]
            declared = [*declared_choices(info.annotation)]
            if info.default is not PydanticUndefined:
                declared.append(info.default)  # may be unhashable: a list, not a set
            if grounded(_literal_part(value), evidence, declared):
                continue
            problems.append(
                f"{step.id}.{name}: {value!r} was not given by the user; use a "
                "$entities or $sN.result reference instead of inventing it"
            )
    return problems


def plan_problems(
    draft: Any,
    intent: str,
    context: PlanContext,
    said: str = "",
    entities: Mapping[str, Any] | None = None,
    *,
    evidence: Evidence | None = None,
) -> list[str]:
    """The static validator's and the grounding check's problems (empty: it may run).

    Literals are grounded in ``evidence`` when given (the run passes the user's words,
    entities, finished steps' results and its clock), else in ``said`` and ``entities``.
    """
    if not draft.steps:
        return []
    try:
        validate_plan(draft_to_plan(draft, "draft", intent), context)
    except PlanInvalidError as exc:
        return exc.problems
    if evidence is None:
        evidence = Evidence.of(said, (entities or {}).values())
    return ungrounded_literals(draft, context, evidence)
