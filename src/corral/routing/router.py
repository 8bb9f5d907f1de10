"""The route layer: what to do with an understood message, by per-intent policy from config.

Routing is pure code over config. Complaints go to a person with no tool at all; chit-chat
gets a canned reply; a plan runs only when its required entities are known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.config import AgentConfig
from corral.contracts import IntentResult, RouteAction, RouteDecision
from corral.errors import ExpressionInvalidError
from corral.tools.registry import ToolRegistry
from corral.verify.expressions import Expression, compile_expression


def allowed_tools(
    config: AgentConfig, intent: str, registry: ToolRegistry | None = None
) -> list[str]:
    """The intent's allow-list: declared, or else the tools its plan template names.

    With a registry, the equivalents of each allowed tool are allowed too, so the
    decision layer may fall back to them.
    """
    spec = config.intent(intent)
    if spec.tools:
        return substitutes(config, set(spec.tools), registry, rewrites=False)
    names: set[str] = set()
    for template in plan_templates(config, intent):
        names |= {step.tool for step in config.plans[template].steps}
    return substitutes(config, names, registry)


def substitutes(
    config: AgentConfig,
    names: set[str],
    registry: ToolRegistry | None,
    *,
    rewrites: bool = True,
) -> list[str]:
    """``names`` with what may run in their place: rewrite targets, equivalent tools."""
    if rewrites:
        names = names | {r.use_tool for r in config.argument_rewrites if r.tool in names}
    if registry is not None:
        names |= {e.name for n in list(names) if n in registry for e in registry.equivalents(n)}
    return sorted(names)


def plan_templates(config: AgentConfig, intent: str) -> list[str]:
    """Every plan template an intent may use (its rules' and its default)."""
    spec = config.intent(intent)
    names = [rule.plan for rule in spec.plan_rules] + ([spec.plan] if spec.plan else [])
    return [name for name in dict.fromkeys(names) if name in config.plans]


def choose_plan(
    config: AgentConfig,
    intent: str,
    known: Mapping[str, Any],
    compiled: Sequence[tuple[Expression, str]] | None = None,
) -> str | None:
    """The template for this message: the first plan rule that holds, else the default.

    ``compiled`` are the intent's rules parsed once at agent load (``DecisionPolicy``);
    without them the rules are parsed here. A rule that reads a missing value is false.
    """
    spec = config.intent(intent)
    rules = (
        compiled
        if compiled is not None
        else [(compile_expression(rule.when), rule.plan) for rule in spec.plan_rules]
    )
    for when, plan in rules:
        try:
            if when.evaluate({"entities": dict(known)}):
                return plan
        except ExpressionInvalidError:
            continue
    return spec.plan


def required_entities(config: AgentConfig, intent: str, template: str | None) -> list[str]:
    """What must be known before planning: the intent's ``requires``, then the template's."""
    declared = config.plans.get(template) if template else None
    extra = declared.requires if declared else []
    return list(dict.fromkeys([*config.intent(intent).requires, *extra]))


def route(
    config: AgentConfig,
    understood: IntentResult,
    known: Mapping[str, Any],
    registry: ToolRegistry | None = None,
    plan_rules: Mapping[str, Sequence[tuple[Expression, str]]] | None = None,
    allowed: Mapping[str, Sequence[str]] | None = None,
) -> RouteDecision:
    """Choose the action for one message. ``known`` holds every entity known so far.

    ``allowed``: each intent's allow-list, computed once per agent (``Agent.allowed``);
    without it the allow-list is computed here.
    """
    if understood.label is None or understood.need_clarification:
        action = RouteAction(config.on_low_confidence)
        return RouteDecision(
            action=action,
            intent=understood.label,
            template="clarify" if action is RouteAction.CLARIFY else None,
            reason=f"confidence {understood.confidence:.2f} is below "
            f"{config.limits.intent_confidence:.2f}",
        )
    spec = config.intent(understood.label)
    if spec.route is RouteAction.HANDOFF:
        return RouteDecision(
            action=RouteAction.HANDOFF,
            intent=spec.name,
            reason=spec.handoff_reason or f"intent {spec.name} goes to a person",
        )
    if spec.route is RouteAction.REPLY:
        return RouteDecision(
            action=RouteAction.REPLY, intent=spec.name, template=spec.reply, reason="canned reply"
        )
    if spec.route is RouteAction.CLARIFY:
        return RouteDecision(
            action=RouteAction.CLARIFY,
            intent=spec.name,
            template=spec.reply or "clarify",
            reason="intent asks to clarify",
        )
    template = choose_plan(
        config, spec.name, known, plan_rules.get(spec.name) if plan_rules else None
    )
    needed = required_entities(config, spec.name, template)
    missing = [name for name in needed if known.get(name) in (None, "")]
    tools = allowed.get(spec.name) if allowed is not None else None
    return RouteDecision.whole(  # every field, from the agent's config: validated there
        action=RouteAction.PLAN,
        intent=spec.name,
        template=template,
        reason="missing " + ", ".join(missing) if missing else "run plan",
        missing_entities=missing,
        allowed_tools=list(tools)
        if tools is not None
        else allowed_tools(config, spec.name, registry),
    )
