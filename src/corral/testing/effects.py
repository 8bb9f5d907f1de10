"""Deterministic effects for tests; they live in ``corral.effects``, beside the live ones.

``runtime.replay`` builds on them, so they sit below both ``runtime`` and ``testing``.
"""

from corral.effects import FixedEffects

__all__ = ["FixedEffects"]
