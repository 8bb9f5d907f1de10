"""Planning: a plan of steps, checked before anything runs, and its arguments bound.

A plan comes from a template in config or from a model. Either way it is validated
statically (references between steps, types, the facts each step reads and publishes,
cycles) and becomes a ``PlanGraph``; at run time ``bind_arguments`` fills each step's
arguments from the user's entities and earlier results.
"""

from corral.planning.binding import bind_arguments
from corral.planning.references import Reference, parse_reference
from corral.planning.validate import CompiledStep, PlanContext, PlanGraph, validate_plan

__all__ = [
    "CompiledStep",
    "PlanContext",
    "PlanGraph",
    "Reference",
    "bind_arguments",
    "parse_reference",
    "validate_plan",
]
