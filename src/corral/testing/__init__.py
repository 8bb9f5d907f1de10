"""Testing agents without a network: deterministic effects, and eval suites.

``FixedEffects`` (a fixed clock and counted ids; it lives in ``corral.effects``) makes a
run repeatable; ``evaluation`` runs an agent's ``eval.yaml`` cases end to end.
"""

from corral.testing.effects import FixedEffects

__all__ = ["FixedEffects"]
