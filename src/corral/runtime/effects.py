"""Kept so ``corral.runtime.effects`` still imports: the effects live in ``corral.effects``."""

from corral.effects import Effects, LiveEffects

__all__ = ["Effects", "LiveEffects"]
