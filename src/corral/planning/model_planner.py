"""The model planner, for long-tail intents without a template.

It may use only the intent's allowed tools, each with its own arguments (the schema is a
union over the tools, so a grammar enforces it), at most the step limit (``maxItems``), and
its plan goes through the same static validation as a template:
the validator's problems are sent back as the re-ask. An empty plan means "cannot do".
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model
from pydantic_core import PydanticUndefined

from corral.contracts import Plan, Step
from corral.errors import PlanInvalidError
from corral.intent.grounding import Evidence, declared_choices, ground_argument
from corral.intent.model_fallback import literal_of
from corral.models.base import Message, ModelRequest
from corral.models.schema import GrammarModel, raw_checked
from corral.planning.producers import FactRead
from corral.planning.references import literal
from corral.planning.validate import PlanContext, validate_plan
from corral.tools.spec import ToolSpec
from corral.typecheck import describe

PLAN_MAX_TOKENS = 600
"""Enough for a 10-step plan; a small model that loops is cut off (and repaired) here."""


_NAME = "[A-Za-z_][A-Za-z0-9_]*"
_PATH = "([.][A-Za-z0-9_]+)*"
STEP_ID_PATTERN = r"^[a-z][0-9]{0,3}$"
"""A model plan's step ids: a letter and up to 3 digits, ``s1``, ``s2`` (the prompt's
form; a replan may use ``r1``).

Narrower than what templates may use, on purpose: a small model otherwise names steps
after entity values and then depends on ids that do not exist."""
StepId = Annotated[str, StringConstraints(pattern=STEP_ID_PATTERN)]


def _one_of(names: Iterable[str]) -> str:
    """A regex alternation of identifiers (any identifier when there are none)."""
    return "(" + "|".join(sorted(set(names))) + ")" if names else _NAME


def reference_pattern(result_fields: Iterable[str]) -> str:
    """``$entities.x``, ``$facts.x``, ``$s1.result.FIELD.sub``, ``$message`` (``?``: optional).

    The reference forms ``references.parse_reference`` reads, with a step result's first
    field one of the allowed tools' output fields. Written for grammars: anchored, no
    lookarounds, and no backslash escapes (llama.cpp's converter copies an escaped ``$`` into the
    grammar, whose parser refuses it and the server crashes), so ``[$]`` and ``[.]``.
    """
    fields = _one_of(tuple(result_fields))
    return (
        f"^[$]((entities|facts)[.]{_NAME}{_PATH}|message|{_NAME}[.]result([.]{fields}{_PATH})?)"
        "[?]?$"
    )


def _fact_source(spec: ToolSpec) -> Any:
    """A published fact's source: ``result`` or ``result.FIELD...`` of this tool's output."""
    fields = _one_of(tuple(spec.output_model.model_fields))
    return Annotated[str, StringConstraints(pattern=f"^result([.]{fields}{_PATH})?$")]


class _Args(GrammarModel):
    """A tool's arguments: only its own parameters (an unknown name is an error)."""

    model_config = ConfigDict(extra="forbid")


def _argument_type(annotation: Any, reference: Any) -> Any:
    """The parameter's own type, or a reference (a ``str`` parameter takes both already)."""
    takes_text = annotation is str or str in typing.get_args(annotation)
    return annotation if takes_text else Union[annotation, reference]  # noqa: UP007


def _args_model(spec: ToolSpec, reference: Any) -> type[BaseModel]:
    fields: dict[str, Any] = {
        name: (
            _argument_type(info.annotation, reference),
            ... if info.is_required() else Field(default=None),
        )
        for name, info in spec.input_model.model_fields.items()
    }
    model: type[BaseModel] = create_model(f"{spec.name}_args", __base__=_Args, **fields)
    return model


def _step_model(spec: ToolSpec, max_steps: int, reference: Any) -> type[BaseModel]:
    """One variant of the step union: ``tool`` fixed to ``spec``, ``args`` its parameters."""
    args_model = _args_model(spec, reference)
    required = any(info.is_required() for info in spec.input_model.model_fields.values())
    facts: Any = dict[str, _fact_source(spec)]  # type: ignore[misc]
    model: type[BaseModel] = create_model(
        f"{spec.name}_step",
        __base__=GrammarModel,
        id=(StepId, ...),
        tool=(literal_of((spec.name,)), ...),
        args=(raw_checked(args_model), ... if required else Field(default_factory=dict)),
        depends_on=(list[StepId], Field(default_factory=list, max_length=max_steps)),
        facts=(facts, Field(default_factory=dict)),
        success=(str | None, None),
    )
    return model


def draft_model(tools: Sequence[ToolSpec], max_steps: int) -> type[BaseModel]:
    """The output schema: at most ``max_steps`` steps, each a call of one of ``tools``.

    A step is a union over the tools (tagged by ``tool``): each variant's ``args`` has that
    tool's parameters, required ones required, no others, each of its own type or a
    reference. A grammar built from it cannot write a missing or unknown argument. Without
    tools only the empty plan ("cannot do") fits. The validated ``args`` stay the plain
    mapping the model wrote, so ``draft_to_plan`` and the checks read it as before.
    """
    fields = [name for spec in tools for name in spec.output_model.model_fields]
    reference = Annotated[str, StringConstraints(pattern=reference_pattern(fields))]
    variants = [_step_model(spec, max_steps, reference) for spec in tools]
    step: Any
    if not variants:
        step = dict[str, Any]
        max_steps = 0
    elif len(variants) == 1:
        step = variants[0]
    else:
        step = Annotated[Union[tuple(variants)], Field(discriminator="tool")]  # noqa: UP007
    draft: type[BaseModel] = create_model(
        "PlanDraft",
        __base__=GrammarModel,
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
        "depends on, $facts.NAME for a fact that an earlier step publishes, $message for the "
        "user's whole message as written (for a free-text parameter such as a description). "
        "Never invent ids or values that are not given. If the tools cannot do "
        'it, reply {"steps": []}. Reply with JSON only: {"steps": [...]}.'
        + _rule_lines(tools, rule_reads or {})
    )
    known = json.dumps(dict(entities), ensure_ascii=False, default=str)
    user = f"Intent: {intent}\nRequest: {goal}\nKnown entities: {known}"
    if failure:
        user += f"\nThe previous plan failed while running: {failure}. Plan again."
    schema = draft_model(tools, max_steps).model_json_schema()
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
    must use a reference. Each literal is coerced with its parameter's type first, as the
    tool will receive it (``"200"`` for an ``int`` is grounded as the number 200).
    ``draft`` has passed ``validate_plan``, so every tool is registered.
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
            literal_part = _literal_part(value)
            if ground_argument(literal_part, info.annotation, evidence, declared, key=name):
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
