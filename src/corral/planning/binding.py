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

    def bind(value: Any) -> Any:
        if isinstance(value, str):
            reference = references.get(value)
            if reference is not None:
                return reference.resolve(entities, facts, results)
            return literal(value)
        if isinstance(value, list):
            return [bind(item) for item in value]
        if isinstance(value, dict):
            return {key: bind(item) for key, item in value.items()}
        return value  # a number, a bool or None: nothing to resolve or unescape

    return {name: bind(value) for name, value in compiled.step.args.items()}


def reads_facts(compiled: CompiledStep) -> bool:
    """Whether the step's arguments name a fact (``$facts.x``): only then are facts merged."""
    return any(reference.scope == "facts" for reference in compiled.references.values())
