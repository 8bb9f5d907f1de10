"""Kept so ``corral.planning.typecheck`` still imports: the rules live in ``corral.typecheck``.

Both ``planning`` (references into tool parameters) and ``verify`` (fields of tool
output) need them, so they sit below both.
"""

from corral.typecheck import describe, field_type, is_assignable

__all__ = ["describe", "field_type", "is_assignable"]
