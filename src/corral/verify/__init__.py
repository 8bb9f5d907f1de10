"""The verify layer: safe expressions, success criteria, business rules, loop guard."""

from corral.verify.expressions import Expression, compile_expression
from corral.verify.loop_guard import LoopGuard, stable_hash
from corral.verify.rules import CompiledRule, check_success, compile_rules

__all__ = [
    "CompiledRule",
    "Expression",
    "LoopGuard",
    "check_success",
    "compile_expression",
    "compile_rules",
    "stable_hash",
]
