"""Helpers for testing agents without a network: deterministic effects."""

from corral.testing.effects import FixedEffects

__all__ = ["FixedEffects"]
