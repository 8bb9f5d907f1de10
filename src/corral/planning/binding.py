"""Parameter binding: a validated step's references are replaced by known values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.planning.references import Reference, literal
from corral.planning.validate import CompiledStep


@dataclass(frozen=True, slots=True)
class _Binding:
    """How one step's arguments are bound, worked out once per step (``_binding``)."""

    args: tuple[tuple[str, Reference | None, Any, bool], ...]
    """Per argument: its name, its reference (or ``None``), its literal value with a
    ``$$`` escape undone (text and scalars), and whether it is a list or dict to walk."""
    reads_facts: bool


def _binding(compiled: CompiledStep) -> _Binding:
    """The step's binding, kept on the step (it depends on nothing else)."""
    binding = compiled.derived.get("binding")
    if isinstance(binding, _Binding):
        return binding
    references = compiled.references
    args: list[tuple[str, Reference | None, Any, bool]] = []
    for name, value in compiled.step.args.items():
        reference = references.get(value) if isinstance(value, str) else None
        if reference is None and isinstance(value, str) and value.startswith("$$"):
            value = value[1:]
        args.append((name, reference, value, isinstance(value, (list, dict))))
    reads = any(reference.scope == "facts" for reference in references.values())
    binding = _Binding(tuple(args), reads)
    compiled.derived["binding"] = binding
    return binding


def bind_arguments(
    compiled: CompiledStep,
    entities: Mapping[str, Any],
    facts: Mapping[str, Any],
    results: Mapping[str, Any],
    message: str | None = None,
) -> dict[str, Any]:
    """The step's arguments with every reference resolved (``message``: ``$message``'s).

    A reference with no value raises ``MissingArgumentError``: the value is never guessed.
    """
    bound: dict[str, Any] = {}
    for name, reference, value, nested in _binding(compiled).args:
        if reference is not None:
            bound[name] = reference.resolve(entities, facts, results, message)
        elif nested:
            bound[name] = _bind(value, compiled, (entities, facts, results, message))
        else:
            bound[name] = value
    return bound


def _bind(
    value: Any,
    compiled: CompiledStep,
    sources: tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str | None],
) -> Any:
    """A nested value with its references resolved and its ``$$`` escapes undone."""
    if isinstance(value, str) and value in compiled.references:
        return compiled.references[value].resolve(*sources)
    if isinstance(value, list):
        return [_bind(item, compiled, sources) for item in value]
    if isinstance(value, dict):
        return {key: _bind(item, compiled, sources) for key, item in value.items()}
    return literal(value)


def reads_facts(compiled: CompiledStep) -> bool:
    """Whether the step's arguments name a fact (``$facts.x``): only then are facts merged."""
    return _binding(compiled).reads_facts
