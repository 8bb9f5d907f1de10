"""The verify layer: verifiers of results, recovery decisions, rules, the loop guard.

The verifiers judge a step's result (success criteria, the model judge); the recovery
ladder's decisions say what may follow a failure; safe expressions back both.
"""

from corral.verify.expressions import Expression, compile_expression
from corral.verify.loop_guard import LoopGuard, stable_hash
from corral.verify.rules import CompiledRule, check_success, compile_rules
from corral.verify.verifiers import DEFAULT_VERIFIERS, StepOutcome, Verifier, VerifyRun

__all__ = [
    "DEFAULT_VERIFIERS",
    "CompiledRule",
    "Expression",
    "LoopGuard",
    "StepOutcome",
    "Verifier",
    "VerifyRun",
    "check_success",
    "compile_expression",
    "compile_rules",
    "stable_hash",
]
