"""Success criteria and business rules: deterministic verdicts, computed by code."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.config import BusinessRule
from corral.contracts import Verdict
from corral.errors import ErrorCode, ExpressionInvalidError
from corral.verify.expressions import Expression, compile_expression


def check_success(expression: Expression | None, names: Mapping[str, Any]) -> Verdict:
    """Judge a step result by its declared success criterion (passes when none is declared)."""
    if expression is None:
        return Verdict(passed=True, check="success", reason="no criterion declared")
    try:
        passed = bool(expression.evaluate(names))
    except ExpressionInvalidError as exc:
        return Verdict(
            passed=False,
            check="success",
            reason=exc.message,
            code=ErrorCode.SUCCESS_CRITERIA_FAILED.value,
        )
    return Verdict(
        passed=passed,
        check="success",
        reason=f"{expression.text} is {'true' if passed else 'false'}",
        code=None if passed else ErrorCode.SUCCESS_CRITERIA_FAILED.value,
    )


@dataclass(frozen=True)
class CompiledRule:
    """A business rule with its expression parsed once."""

    rule: BusinessRule
    expression: Expression

    def judgeable(self, names: Mapping[str, Any]) -> bool:
        """Whether every value the rule reads is known (so its verdict is decisive)."""
        try:
            self.expression.evaluate(names)
        except ExpressionInvalidError:
            return False
        return True

    def check(self, names: Mapping[str, Any]) -> Verdict:
        """Passes when ``require`` holds; a value that is missing counts as a violation."""
        try:
            passed = bool(self.expression.evaluate(names))
            reason = f"{self.rule.name}: {self.rule.require} is {'true' if passed else 'false'}"
        except ExpressionInvalidError as exc:
            passed, reason = False, f"{self.rule.name}: cannot be judged ({exc.message})"
        return Verdict(
            passed=passed,
            check="business_rule",
            reason=reason,
            code=None if passed else ErrorCode.BUSINESS_RULE_VIOLATED.value,
        )


def compile_rules(rules: list[BusinessRule]) -> list[CompiledRule]:
    """Parse every rule's expression; raises ``ExpressionInvalidError`` at load time."""
    return [CompiledRule(rule, compile_expression(rule.require)) for rule in rules]
