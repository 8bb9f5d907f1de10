"""Parameter binding: a validated step's references are replaced by known values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.planning.references import literal
from corral.planning.validate import CompiledStep


def bind_arguments(
    compiled: CompiledStep,
    entities: Mapping[str, Any],
    facts: Mapping[str, Any],
    results: Mapping[str, Any],
) -> dict[str, Any]:
    """The step's arguments with every reference resolved.

    A reference with no value raises ``MissingArgumentError``: the value is never guessed.
    """
    references = compiled.references
    bound: dict[str, Any] = {}
    for name, value in compiled.step.args.items():  # most are a reference or a scalar
        if isinstance(value, str):
            reference = references.get(value)
            if reference is not None:
                value = reference.resolve(entities, facts, results)
            elif value.startswith("$$"):
                value = value[1:]
        elif isinstance(value, (list, dict)):
            value = _bind(value, compiled, entities, facts, results)
        bound[name] = value
    return bound


def _bind(
    value: Any,
    compiled: CompiledStep,
    entities: Mapping[str, Any],
    facts: Mapping[str, Any],
    results: Mapping[str, Any],
) -> Any:
    """A nested value with its references resolved and its ``$$`` escapes undone."""
    if isinstance(value, str) and value in compiled.references:
        return compiled.references[value].resolve(entities, facts, results)
    if isinstance(value, list):
        return [_bind(item, compiled, entities, facts, results) for item in value]
    if isinstance(value, dict):
        return {key: _bind(item, compiled, entities, facts, results) for key, item in value.items()}
    return literal(value)


def reads_facts(compiled: CompiledStep) -> bool:
    """Whether the step's arguments name a fact (``$facts.x``): only then are facts merged."""
    for reference in compiled.references.values():  # noqa: SIM110 (any() adds a generator)
        if reference.scope == "facts":
            return True
    return False
