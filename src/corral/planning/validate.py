"""Static validation of a plan, before any tool runs.

Templates and model plans go through the same checks: unknown tools, tools outside the
intent's allow-list, unknown or cyclic dependencies, arguments that are not parameters,
required parameters left unbound, references to fields that the referenced tool does not
declare or whose type does not fit, literals of the wrong type, bad success criteria,
facts read before a step that no ancestor produces (``producers``), and step limits. Every
problem is collected, so one ``PlanInvalidError`` lists them all.

The result is a ``PlanGraph``: everything the scheduler needs, computed once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from corral.contracts import Plan, Step
from corral.errors import ExpressionInvalidError, PlanInvalidError
from corral.planning.producers import FactRead, check_producers, wait_cycle
from corral.planning.references import Reference, iter_references, literal, parse_reference
from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec
from corral.typecheck import describe, element_type, field_type, is_assignable, json_native
from corral.validation import validation_messages
from corral.verify.expressions import (
    Expression,
    comparison_problems,
    compile_expression,
    fact_names,
)


@dataclass(frozen=True)
class PlanContext:
    """What a plan is validated against."""

    registry: ToolRegistry
    entity_types: Mapping[str, Any] = field(default_factory=dict)
    """Declared entity names and their value types."""
    allowed_tools: frozenset[str] | None = None
    """The intent's allow-list; ``None`` allows every registered tool."""
    max_steps: int = 10
    rule_reads: Mapping[str, tuple[FactRead, ...]] = field(default_factory=dict)
    """Tool -> the facts each business rule gating it reads (``FactRead``)."""
    fact_origins: Mapping[str, frozenset[tuple[str, tuple[str, ...]]]] | None = None
    """For a model's plan: the facts it may publish only from where the agent's own plans
    do (fact -> the tools and result paths), ``reply`` and the facts rules read among them.
    ``None`` (a template, a caller's plan): any fact from any result."""


@dataclass(frozen=True)
class CompiledStep:
    """A validated step with its references parsed and its tool resolved."""

    step: Step
    spec: ToolSpec
    references: Mapping[str, Reference]
    """Reference text -> parsed reference."""
    success: Expression | None
    facts: tuple[tuple[str, tuple[str, ...]], ...]
    """Published facts: (fact name, path inside the result)."""
    ancestors: frozenset[str]
    waits_for: frozenset[str] = frozenset()
    """Steps that publish a fact read before this one (by a rule or ``success``) and are
    not its descendants: it starts only once they have settled."""
    needed: bool = False
    """A required step (not ``on_failure: continue``) depends on it, directly or through
    others: it is not optional in practice, so ``budget_low`` never skips it (that would
    block the required step, and the answer with it)."""
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What the layers above work out once for this step instead of on every run (the
    gates it asks, its argument binding), by layer name. An agent's template graphs live
    as long as the agent, so this is computed once per step, not once per run; each entry
    says what it was computed for and is worked out again when that differs."""


@dataclass(frozen=True)
class PlanGraph:
    """A plan that passed validation, ready to schedule."""

    plan: Plan
    steps: Mapping[str, CompiledStep]
    order: tuple[str, ...]
    """A topological order; ties keep plan order."""
    dependents: Mapping[str, tuple[str, ...]]
    position: Mapping[str, int]
    """Step id -> its place in ``order``."""
    depends: Mapping[str, tuple[str, ...]]
    """Step id -> its dependencies, each once (``depends_on`` may name one twice)."""
    waited_by: Mapping[str, tuple[str, ...]]
    """Step id -> the steps that wait for it (``CompiledStep.waits_for``), in ``order``.

    These three are what every run's step bookkeeping starts from: worked out here, once
    per graph, instead of at the start of every run."""

    def writes_conflict(self, a: str, b: str) -> bool:
        """True when two steps publish the same fact and so must not run together."""
        facts_a = {name for name, _ in self.steps[a].facts}
        return any(name in facts_a for name, _ in self.steps[b].facts)


def _topological(steps: list[Step], problems: list[str]) -> tuple[str, ...]:
    """Kahn's algorithm in plan order; reports the steps left on a cycle."""
    ids = [s.id for s in steps]
    indegree = {s.id: len(set(s.depends_on) & set(ids)) for s in steps}
    order: list[str] = []
    ready = [i for i in ids if indegree[i] == 0]
    while ready:
        current = ready.pop(0)
        order.append(current)
        for step in steps:
            if current in step.depends_on:
                indegree[step.id] -= 1
                if indegree[step.id] == 0:
                    ready.append(step.id)
    if len(order) < len(ids):
        cyclic = [i for i in ids if i not in order]
        problems.append(f"dependency cycle among steps {', '.join(cyclic)}")
    return tuple(order)


def _ancestors(step_id: str, by_id: Mapping[str, Step]) -> frozenset[str]:
    seen: set[str] = set()
    stack = list(by_id[step_id].depends_on)
    while stack:
        current = stack.pop()
        if current in seen or current not in by_id:
            continue
        seen.add(current)
        stack.extend(by_id[current].depends_on)
    return frozenset(seen)


def _reference_type(
    ref: Reference,
    step: Step,
    ancestors: frozenset[str],
    by_id: Mapping[str, Step],
    context: PlanContext,
    fact_sources: Mapping[str, list[tuple[str, tuple[str, ...]]]],
) -> tuple[Any, str | None]:
    """The static type a reference yields, or a problem."""
    if ref.scope == "message":
        return str, None
    if ref.scope == "entities":
        if ref.name not in context.entity_types:
            known = ", ".join(sorted(context.entity_types)) or "none"
            return None, f"{ref.text}: no entity {ref.name!r} is declared (entities: {known})"
        return (context.entity_types[ref.name] if not ref.path else Any), None
    if ref.scope == "facts":
        producers = [
            (sid, path) for sid, path in fact_sources.get(ref.name, []) if sid in ancestors
        ]
        if not producers:
            if ref.name in context.entity_types:
                return (context.entity_types[ref.name] if not ref.path else Any), None
            return None, (
                f"{ref.text}: no step that {step.id} depends on publishes fact {ref.name!r}"
            )
        sid, path = producers[-1]
        spec = context.registry.get(by_id[sid].tool)
        return field_type(spec.output_model, path + ref.path)
    if ref.name not in by_id:
        return None, f"{ref.text}: there is no step {ref.name!r}"
    if ref.name not in ancestors:
        return None, f"{ref.text}: step {step.id} does not depend on {ref.name}"
    producer = by_id[ref.name]
    if producer.tool not in context.registry:
        return None, None  # reported as an unknown tool already
    spec = context.registry.get(producer.tool)
    kind, problem = field_type(spec.output_model, ref.path)
    if problem:
        return None, f"{ref.text}: {spec.name} output {problem}"
    return kind, None


def _check_step(
    step: Step,
    spec: ToolSpec,
    ancestors: frozenset[str],
    by_id: Mapping[str, Step],
    context: PlanContext,
    fact_sources: Mapping[str, list[tuple[str, tuple[str, ...]]]],
    problems: list[str],
) -> dict[str, Reference]:
    references: dict[str, Reference] = {}
    params = spec.input_model.model_fields
    for name in step.args:
        if name not in params:
            problems.append(
                f"{step.id}: {spec.name} has no parameter {name!r} "
                f"(parameters: {', '.join(params) or 'none'})"
            )
    for name, info in params.items():
        if info.is_required() and name not in step.args:
            problems.append(f"{step.id}: required parameter {name!r} of {spec.name} is not bound")
    for name, value in step.args.items():
        if name not in params:
            continue
        if not any(True for _ in iter_references(value)):
            problem = _literal_problem(literal(value), params[name])
            if problem:
                problems.append(
                    f"{step.id}.{name}: literal {value!r} does not fit {spec.name}.{name}, "
                    f"which expects {describe(params[name].annotation)} ({problem})"
                )
            continue
        for position, text in iter_references(value):
            try:
                ref = parse_reference(text)
            except ValueError as exc:
                problems.append(f"{step.id}.{name}: {exc}")
                continue
            assert ref is not None
            references[text] = ref
            kind, problem = _reference_type(ref, step, ancestors, by_id, context, fact_sources)
            if problem:
                problems.append(f"{step.id}.{name}: {problem}")
            elif kind is not None:
                # nested in a list, a dict or a model: the type its place there must have
                target = element_type(params[name].annotation, position)
                where = f"{spec.name}.{name}" + "".join(f"[{part}]" for part in position)
                if target is None:
                    continue
                if ref.optional and not is_assignable(type(None), target):
                    problems.append(
                        f"{step.id}.{name}: {ref.text} may be missing, but {where} "
                        f"does not accept None"
                    )
                elif not is_assignable(kind, target):
                    problems.append(
                        f"{step.id}.{name}: {ref.text} is {describe(kind)}, "
                        f"but {where} expects {describe(target)}"
                    )
    return references


def _literal_problem(value: Any, info: Any) -> str | None:
    """Why a literal argument fails the parameter's validation (as the call would), if it does."""
    # the parameter's type and constraints, not its FieldInfo: an alias (a JSON field
    # such as ``max-amount``) means nothing to a TypeAdapter, which warns about it
    annotated: Any = info.annotation
    if info.metadata:
        annotated = Annotated[(annotated, *info.metadata)]
    try:
        TypeAdapter(annotated).validate_python(value)
    except ValidationError as exc:
        return validation_messages(exc, 3)
    return None


def validate_plan(plan: Plan, context: PlanContext) -> PlanGraph:
    """Validate ``plan`` completely; raises ``PlanInvalidError`` listing every problem.

    A plan over the step limit is refused for that alone, before its steps are read.
    """
    problems: list[str] = []
    steps = list(plan.steps)
    if not steps:
        raise PlanInvalidError(["the plan has no steps: it means the agent cannot do this"])
    if len(steps) > context.max_steps:  # alone: checking 10 000 steps one by one took 11 s
        raise PlanInvalidError(
            [f"the plan has {len(steps)} steps; the limit is {context.max_steps}"]
        )
    by_id: dict[str, Step] = {}
    for step in steps:
        if step.id in by_id:
            problems.append(f"step id {step.id!r} is used twice")
        by_id[step.id] = step
    for step in steps:
        if step.tool not in context.registry:
            known = ", ".join(context.registry.names()) or "none"
            problems.append(f"{step.id}: unknown tool {step.tool!r} (known tools: {known})")
        elif context.allowed_tools is not None and step.tool not in context.allowed_tools:
            problems.append(f"{step.id}: tool {step.tool!r} is not allowed for this intent")
        for dep in step.depends_on:
            if dep == step.id:
                problems.append(f"{step.id}: depends on itself")
            elif dep not in by_id:
                problems.append(f"{step.id}: depends on unknown step {dep!r}")
    order = _topological(steps, problems)
    fact_sources: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for step in steps:
        for fact, path_text in step.facts.items():
            path = tuple(p for p in path_text.split(".") if p)
            if not path or path[0] != "result":
                problems.append(f"{step.id}: fact {fact!r} must come from 'result.<field>'")
                continue
            fact_sources.setdefault(fact, []).append((step.id, path[1:]))
    compiled: dict[str, CompiledStep] = {}
    published_by = published_facts(steps, context.registry)  # what success criteria read
    ancestry = {step.id: _ancestors(step.id, by_id) for step in by_id.values()}
    writers = _fact_writers(steps)
    needed = {
        ancestor
        for step in steps
        if step.on_failure != "continue"
        for ancestor in ancestry[step.id]
    }
    for step in steps:
        if step.tool not in context.registry:
            continue
        spec = context.registry.get(step.tool)
        ancestors = ancestry[step.id]
        references = _check_step(step, spec, ancestors, by_id, context, fact_sources, problems)
        success = None
        if step.success:
            try:
                success = compile_expression(step.success, spec.output_model)
            except ExpressionInvalidError as exc:
                problems.append(f"{step.id}.success: {exc.message}")
            else:
                types = path_types(spec, published_by, context.entity_types)
                problems += [f"{step.id}.success: {p}" for p in comparison_problems(success, types)]
        published: list[tuple[str, tuple[str, ...]]] = []
        for fact, path_text in step.facts.items():
            path = tuple(p for p in path_text.split(".") if p)[1:]
            _, problem = field_type(spec.output_model, path)
            if problem:
                problems.append(f"{step.id}: fact {fact!r}: {spec.name} output {problem}")
            problems.extend(_origin_problems(step, fact, path, context.fact_origins))
            published.append((fact, path))
        reads = context.rule_reads.get(step.tool, ())
        if success is not None:
            reads = (*reads, FactRead("success", fact_names(success)))
        found, waits = check_producers(
            step, reads, ancestry, writers, frozenset(context.entity_types)
        )
        problems.extend(found)
        compiled[step.id] = CompiledStep(
            step, spec, references, success, tuple(published), ancestors, waits, step.id in needed
        )
    if len(order) == len(by_id) and (cycle := wait_cycle(steps, _waits(compiled))):
        problems.append(
            f"steps {', '.join(cycle)} wait for each other: each publishes a fact that a "
            "rule before another reads; order them with depends_on"
        )
    if problems:
        raise PlanInvalidError(list(dict.fromkeys(problems)))
    waited_by: dict[str, list[str]] = {}
    for sid in order:
        for producer in compiled[sid].waits_for:
            waited_by.setdefault(producer, []).append(sid)
    return PlanGraph(
        plan=plan,
        steps={sid: compiled[sid] for sid in by_id},
        order=order,
        dependents={sid: tuple(s.id for s in steps if sid in s.depends_on) for sid in by_id},
        position={sid: position for position, sid in enumerate(order)},
        depends={sid: tuple(dict.fromkeys(by_id[sid].depends_on)) for sid in by_id},
        waited_by={producer: tuple(waiters) for producer, waiters in waited_by.items()},
    )


def _origin_problems(
    step: Step,
    fact: str,
    path: tuple[str, ...],
    origins: Mapping[str, frozenset[tuple[str, tuple[str, ...]]]] | None,
) -> list[str]:
    """A model's plan publishing a guarded fact from anywhere but where the agent does.

    ``reply`` is what the customer is told, and the facts rules read are what they judge:
    published from another tool's field (``reply: result.product_name``, ``in_warranty:
    result.has_evidence``), the model would choose the answer, or pass a rule. A guarded
    fact that no plan of the agent publishes (a model-planned agent's) comes from a field
    of its own name (``order_status: result.order_status``).
    """
    if origins is None or fact not in origins or (step.tool, path) in origins[fact]:
        return []
    if not origins[fact]:  # no plan of the agent publishes it: a field of its own name
        if path and path[-1] == fact:
            return []
        return [f"{step.id}: fact {fact!r} is published only from a result field {fact!r}"]
    allowed = sorted(f"{tool} result.{'.'.join(p)}" for tool, p in origins[fact])
    return [
        f"{step.id}: fact {fact!r} is published only from {', '.join(allowed)} "
        "(where the agent's own plans take it)"
    ]


def _waits(compiled: Mapping[str, CompiledStep]) -> dict[str, frozenset[str]]:
    return {sid: c.waits_for for sid, c in compiled.items()}


def _fact_writers(steps: Iterable[Step]) -> dict[str, tuple[str, ...]]:
    writers: dict[str, list[str]] = {}
    for step in steps:
        for fact in step.facts:
            writers.setdefault(fact, []).append(step.id)
    return {fact: tuple(ids) for fact, ids in writers.items()}


PublishedFacts = Mapping[str, list[tuple[ToolSpec, tuple[str, ...]]]]
"""Fact name -> each publishing step's tool and the path in its result (``published_facts``)."""


def published_facts(
    steps: Iterable[Step], registry: ToolRegistry
) -> dict[str, list[tuple[ToolSpec, tuple[str, ...]]]]:
    """Fact name -> each step's tool that publishes it, and the path in its result."""
    found: dict[str, list[tuple[ToolSpec, tuple[str, ...]]]] = {}
    for step in steps:
        if step.tool not in registry:
            continue
        for fact, path_text in step.facts.items():
            path = tuple(p for p in path_text.split(".") if p)
            if path and path[0] == "result":
                found.setdefault(fact, []).append((registry.get(step.tool), path[1:]))
    return found


def path_types(
    spec: ToolSpec,
    facts: PublishedFacts,
    entity_types: Mapping[str, Any],
) -> Callable[[tuple[str, ...]], Any]:
    """The declared type of a path an expression before or after ``spec`` reads.

    ``result.x`` (the tool's output), ``args.x`` (its parameters), ``facts.x`` (the field a
    steps publish it from, and a declared entity's of that name: unknown when they
    differ), ``entities.x``; ``None`` when the type is not known statically.
    """

    def type_of(chain: tuple[str, ...]) -> Any:
        head, rest = chain[0], chain[1:]
        if head == "result":
            kind, problem = field_type(spec.output_model, rest)
            return None if problem else kind
        if not rest:
            return None
        name = rest[0]
        if head == "args":  # bound values: JSON from a plan, a Python default left out
            field_info = spec.input_model.model_fields.get(name)
            if field_info is None or len(rest) != 1 or not json_native(field_info.annotation):
                return None
            return field_info.annotation
        if head == "facts" and name in facts:
            kinds = []
            for producer, path in facts[name]:
                kind, problem = field_type(producer.output_model, path + rest[1:])
                if problem:
                    return None
                kinds.append(kind)
            if name in entity_types and not rest[1:]:
                kinds.append(entity_types[name])  # stands in until a step publishes
            # steps (or the entity) that give it different types: whichever ran last holds
            return kinds[0] if all(kind == kinds[0] for kind in kinds) else None
        if head in ("facts", "entities") and name in entity_types and len(rest) == 1:
            return entity_types[name]
        return None

    return type_of
