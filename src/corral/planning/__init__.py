"""The planning layer: DAG templates, references, static validation and binding."""

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
