"""A tool's output model, derived from its return annotation.

Plan references, facts, success checks and the model planner read a result through one
pydantic model, whatever the tool declares it returns:

- a pydantic model is used as it is;
- a dataclass or a ``TypedDict`` becomes a model with the same fields (a dataclass
  instance is read by attribute, so a subclass's extra fields are not kept);
- anything else pydantic can validate (``str``, ``int``, ``float``, ``bool``, ``dict``,
  ``list[...]``) is the single field ``value``: ``$s1.result.value``,
  ``facts: {name: result.value}``, ``success: result.value > 0``.

The result is validated against that model when the tool returns, as before.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, is_typeddict

from pydantic import (
    BaseModel,
    ConfigDict,
    PydanticSchemaGenerationError,
    PydanticUserError,
    create_model,
)

from corral.errors import ConfigInvalidError

VALUE_FIELD = "value"
"""The field that holds a result that is not a record (a string, a number, a mapping)."""


@dataclass(frozen=True, slots=True)
class Output:
    """How a tool's result is read: the model, and whether the value is wrapped in it."""

    model: type[BaseModel]
    wrapped: bool
    """True when the tool returns a plain value, stored as ``{"value": ...}``."""


def derive_output(tool_name: str, annotation: Any) -> Output:
    """The output of a tool returning ``annotation``; raises ``ConfigInvalidError``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Output(annotation, wrapped=False)
    name = f"{tool_name}_output"
    try:
        if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
            hints = typing.get_type_hints(annotation, include_extras=True)
            fields: dict[str, Any] = {
                f.name: (hints[f.name], _default(f)) for f in dataclasses.fields(annotation)
            }
            config = ConfigDict(from_attributes=True)
            return Output(create_model(name, __config__=config, **fields), wrapped=False)
        if is_typeddict(annotation):
            hints = typing.get_type_hints(annotation, include_extras=True)
            total = annotation.__required_keys__
            fields = {k: _key(t, k in total) for k, t in hints.items()}
            return Output(create_model(name, **fields), wrapped=False)
        if annotation is None or annotation is Any or annotation is object:
            raise TypeError("no type")
        value: dict[str, Any] = {VALUE_FIELD: (annotation, ...)}
        return Output(create_model(name, **value), wrapped=True)
    except (TypeError, NameError, PydanticSchemaGenerationError, PydanticUserError):
        raise ConfigInvalidError(
            f"tool {tool_name!r}: cannot describe its return annotation "
            f"{getattr(annotation, '__name__', annotation)!r}",
            hint="return a pydantic model, a dataclass, a TypedDict, str, int, float, "
            "bool or dict (or one of them | None); on Python < 3.12 a TypedDict nested in "
            "a result must come from typing_extensions",
        ) from None


def _key(annotation: Any, required: bool) -> tuple[Any, Any]:
    """A ``TypedDict`` key as a model field: its type and ``...`` (required) or ``None``.

    ``Required``/``NotRequired`` are read here: under ``from __future__ import
    annotations`` Python 3.11 leaves them out of ``__required_keys__``.
    """
    origin = typing.get_origin(annotation)
    if origin in (typing.Required, typing.NotRequired):
        required = origin is typing.Required
        annotation = typing.get_args(annotation)[0]
    return annotation, ... if required else None


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return ...
