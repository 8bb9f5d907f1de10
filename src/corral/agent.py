"""An agent: its config, its tools and its dependencies, checked once when it is built.

Everything static is validated here, before any run: plan templates, business rules,
template names. A broken agent fails at load with ``CONFIG_INVALID``, not at 3 a.m.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.config import AgentConfig, load_config
from corral.contracts import Plan, RouteAction
from corral.decision.selector import ToolHealth
from corral.errors import ConfigInvalidError, CorralError, PlanInvalidError
from corral.intent.pipeline import IntentClassifier, IntentLayer
from corral.planning.validate import PlanContext, PlanGraph, validate_plan
from corral.reply.render import ReplyRenderer
from corral.routing.router import allowed_tools
from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec
from corral.verify.rules import CompiledRule, compile_rules

ENTITY_TYPES: dict[str, Any] = {"pattern": str, "vocabulary": str, "date_range": dict[str, str]}


@dataclass
class Agent:
    """A ready-to-run agent. Build it with ``Agent.build`` or ``load_agent``."""

    config: AgentConfig
    tools: ToolRegistry
    intent: IntentLayer
    renderer: ReplyRenderer
    rules: list[CompiledRule]
    template_graphs: dict[str, PlanGraph]
    """Intent name -> its validated plan template, compiled once."""
    deps: Mapping[str, Any] = field(default_factory=dict)
    health: ToolHealth = field(default_factory=ToolHealth)
    root: Path | None = None

    @property
    def name(self) -> str:
        """The agent's declared name."""
        return self.config.name

    def plan_context(self, intent: str | None) -> PlanContext:
        """What plans for ``intent`` are validated against."""
        allowed = frozenset(allowed_tools(self.config, intent, self.tools)) if intent else None
        types = {name: ENTITY_TYPES[spec.kind] for name, spec in self.config.entities.items()}
        return PlanContext(self.tools, types, allowed, self.config.limits.max_plan_steps)

    @classmethod
    def build(
        cls,
        config: AgentConfig,
        tools: Iterable[ToolSpec],
        *,
        deps: Mapping[str, Any] | None = None,
        classifiers: list[IntentClassifier] | None = None,
        root: Path | None = None,
    ) -> Agent:
        """Assemble and validate an agent; raises ``ConfigInvalidError`` listing all problems."""
        registry = ToolRegistry(tools)
        problems: list[str] = []
        renderer = ReplyRenderer(config.templates)
        graphs: dict[str, PlanGraph] = {}
        agent = cls(
            config,
            registry,
            IntentLayer(config, classifiers),
            renderer,
            [],
            graphs,
            dict(deps or {}),
            root=root,
        )
        for spec in config.intents:
            if spec.route is RouteAction.REPLY and not renderer.has(spec.reply or ""):
                problems.append(f"intent {spec.name}: reply template {spec.reply!r} is missing")
            if spec.route is not RouteAction.PLAN:
                continue
            if spec.plan not in config.plans:
                problems.append(f"intent {spec.name}: plan template {spec.plan!r} is missing")
                continue
            declared = config.plans[spec.plan]
            plan = Plan(
                plan_id="template", intent=spec.name, steps=declared.steps, template=spec.plan
            )
            try:
                graphs[spec.name] = validate_plan(plan, agent.plan_context(spec.name))
            except PlanInvalidError as exc:
                problems.extend(f"plan {spec.plan}: {p}" for p in exc.problems)
            for template in [
                *declared.confirm.values(),
                *declared.on_failure.values(),
                *([spec.reply] if spec.reply else []),
            ]:
                if not renderer.has(template):
                    problems.append(f"plan {spec.plan}: template {template!r} is missing")
        problems.extend(_equivalence_problems(registry))
        for rule in config.business_rules:
            if rule.before_tool not in registry:
                problems.append(f"business rule {rule.name}: unknown tool {rule.before_tool!r}")
            if not renderer.has(rule.refusal):
                problems.append(f"business rule {rule.name}: template {rule.refusal!r} is missing")
        for entity, template in config.questions.items():
            if not renderer.has(template):
                problems.append(f"question for {entity}: template {template!r} is missing")
        try:
            agent.rules = compile_rules(config.business_rules)
        except CorralError as exc:
            problems.append(exc.message)
        if problems:
            raise ConfigInvalidError(f"agent {config.name!r}: " + "; ".join(problems))
        return agent


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
            if spec.output_model is not other.output_model:
                problems.append(
                    f"equivalent tools {spec.name} and {other.name} differ in output model"
                )
    return problems


def _import_tools(path: Path) -> Any:
    module_name = f"corral_agent_tools_{abs(hash(path.resolve()))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigInvalidError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def train_classifier(config: AgentConfig, cache_dir: Path | None) -> IntentClassifier:
    """Fit (or load from the cache) the classifier on the intents' examples."""
    from corral.intent.classifier import train_cached
    from corral.intent.datasets import OOS_LABEL, LabelledTexts

    texts: list[str] = []
    labels: list[str] = []
    for spec in config.intents:
        texts.extend(spec.examples)
        labels.extend([spec.name] * len(spec.examples))
    texts.extend(config.classifier.out_of_scope_examples)
    labels.extend([OOS_LABEL] * len(config.classifier.out_of_scope_examples))
    return train_cached(LabelledTexts(texts, labels), cache_dir)


def load_agent(
    agent_dir: Path | str, *, data_dir: Path | None = None, cache_dir: Path | None = None
) -> Agent:
    """Load ``agent.yaml`` and ``tools.py`` from a folder.

    ``tools.py`` declares tools with ``@tool`` and may define ``setup(data_dir) -> dict``,
    whose result becomes the tools' ``deps`` (database paths, clients). When the config
    enables the classifier, it is trained on the intents' examples, or loaded from
    ``cache_dir`` when the same examples were trained before.
    """
    root = Path(agent_dir)
    if not (root / "agent.yaml").is_file():
        raise ConfigInvalidError(f"{root} has no agent.yaml")
    config = load_config(root / "agent.yaml")
    tools: list[ToolSpec] = []
    deps: dict[str, Any] = {}
    tools_file = root / "tools.py"
    if tools_file.is_file():
        module = _import_tools(tools_file)
        tools = [value for value in vars(module).values() if isinstance(value, ToolSpec)]
        setup = getattr(module, "setup", None)
        if callable(setup):
            deps = dict(setup(data_dir or root / ".data"))
    classifiers = [train_classifier(config, cache_dir)] if config.classifier.enabled else []
    return Agent.build(config, tools, deps=deps, classifiers=classifiers, root=root)
