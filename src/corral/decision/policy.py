"""The decision layer's declared policies: argument rewrites and hard tool constraints.

Both come from config and are compiled once per agent. The scheduler asks them, before a
step runs, which tool it really is (a rewrite) and which candidates may serve it (the
constraints). No model is asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.config import AgentConfig, ArgumentRewrite
from corral.errors import ExpressionInvalidError
from corral.planning.references import literal, parse_reference
from corral.verify.expressions import Expression, compile_expression


@dataclass(frozen=True)
class Rewrite:
    """A compiled argument rewrite."""

    rule: ArgumentRewrite
    when: Expression

    def applies(self, tool: str, names: Mapping[str, Any]) -> bool:
        """Whether this rewrite turns a call of ``tool`` with these values into another tool."""
        if tool != self.rule.tool:
            return False
        try:
            return bool(self.when.evaluate(names))
        except ExpressionInvalidError:
            return False  # a value the condition reads is missing: the rewrite does not apply

    def arguments(
        self, old: Mapping[str, Any], entities: Mapping[str, Any], facts: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The new tool's arguments: carried over by name, then the declared ones."""
        args = dict(old)
        for key, value in self.rule.args.items():
            ref = parse_reference(value)
            args[key] = literal(value) if ref is None else ref.resolve(entities, facts, {})
        return args


@dataclass(frozen=True)
class DecisionPolicy:
    """Everything the decision layer was told in config, compiled."""

    rewrites: tuple[Rewrite, ...]
    constraints: Mapping[str, Expression]
    plan_rules: Mapping[str, tuple[tuple[Expression, str], ...]] = field(default_factory=dict)
    """Intent -> its ``plan_rules`` as (condition, template), parsed once."""

    @classmethod
    def compile(cls, config: AgentConfig) -> DecisionPolicy:
        """Parse every expression; raises ``ExpressionInvalidError`` on a bad one."""
        return cls(
            tuple(Rewrite(r, compile_expression(r.when)) for r in config.argument_rewrites),
            {tool: compile_expression(expr) for tool, expr in config.tool_constraints.items()},
            {
                spec.name: tuple((compile_expression(r.when), r.plan) for r in spec.plan_rules)
                for spec in config.intents
                if spec.plan_rules
            },
        )

    def rewrites_tool(self, tool: str) -> bool:
        """Whether any rewrite is declared for ``tool`` (most are not: nothing to evaluate)."""
        return bool(self.rewrites) and any(r.rule.tool == tool for r in self.rewrites)

    def rewrite(self, tool: str, names: Mapping[str, Any]) -> Rewrite | None:
        """The first rewrite that applies to this call, if any."""
        return next((r for r in self.rewrites if r.applies(tool, names)), None)

    def allows(self, tool: str, names: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether the tool's hard constraint holds; a value it needs but lacks means no."""
        expression = self.constraints.get(tool)
        if expression is None:
            return True, "no constraint"
        try:
            held = bool(expression.evaluate(names))
        except ExpressionInvalidError as exc:
            return False, f"cannot be judged: {exc.message}"
        return held, f"{expression.text} is {'true' if held else 'false'}"
