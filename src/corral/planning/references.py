"""Argument references: ``$entities.x``, ``$facts.x``, ``$s1.result.a.b`` and ``$message``.

A reference is parsed once when the plan is validated; binding at run time only walks
the already parsed path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from corral.errors import MissingArgumentError

_REF = re.compile(
    r"^\$(?:(?P<scope>entities|facts)\.(?P<name>[A-Za-z_]\w*)(?P<rest>(?:\.\w+)*)"
    r"|(?P<message>message)"
    r"|(?P<step>[A-Za-z_]\w*)\.result(?P<path>(?:\.\w+)*))(?P<optional>\?)?$"
)


@dataclass(frozen=True)
class Reference:
    """One parsed reference. ``path`` walks into the value (fields, then nested fields)."""

    scope: Literal["entities", "facts", "step", "message"]
    name: str
    """The entity or fact name, or the step id (``message`` for ``$message``)."""
    path: tuple[str, ...]
    text: str
    optional: bool = False
    """Written with a trailing ``?``: a missing value binds ``None`` instead of failing.

    Validation only allows it for parameters that accept ``None``.
    """

    def resolve(
        self,
        entities: Mapping[str, Any],
        facts: Mapping[str, Any],
        results: Mapping[str, Any],
        message: str | None = None,
    ) -> Any:
        """The referenced value; raises ``MissingArgumentError`` rather than guess one.

        ``message``: the text of the message that started the run (``$message``); a run
        started from a plan (``Runtime.run_plan``) has none.
        """
        scope = self.scope
        if scope == "message":
            value: Any = message
        else:
            source = results if scope == "step" else facts if scope == "facts" else entities
            value = source.get(self.name)
        for part in self.path:
            # a dict first: the usual case, without the ABC's slower check
            value = value.get(part) if type(value) is dict or isinstance(value, Mapping) else None
        if value is None and not self.optional:
            raise MissingArgumentError(f"{self.text} has no value")
        return value


def parse_reference(value: Any) -> Reference | None:
    """A ``Reference`` for a ``$...`` string; ``None`` for a literal.

    ``$$text`` escapes a literal dollar; any other ``$`` string that is not a valid
    reference raises ``ValueError``.
    """
    if not isinstance(value, str) or not value.startswith("$") or value.startswith("$$"):
        return None
    match = _REF.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a reference ($entities.x, $facts.x, $s1.result.x, $message)"
        )
    optional = match.group("optional") is not None
    if match.group("message"):
        return Reference("message", "message", (), value, optional)
    if match.group("step"):
        path = tuple(p for p in match.group("path").split(".") if p)
        return Reference("step", match.group("step"), path, value, optional)
    rest = tuple(p for p in match.group("rest").split(".") if p)
    scope: Literal["entities", "facts"] = (
        "entities" if match.group("scope") == "entities" else "facts"
    )
    return Reference(scope, match.group("name"), rest, value, optional)


def literal(value: Any) -> Any:
    """Undo the ``$$`` escape in literals, recursively."""
    if isinstance(value, str) and value.startswith("$$"):
        return value[1:]
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    return value


def iter_references(value: Any) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every ``$`` string inside an argument value, with its position (for nested args)."""
    if isinstance(value, str) and value.startswith("$") and not value.startswith("$$"):
        yield (), value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for pos, text in iter_references(item):
                yield (str(index), *pos), text
    elif isinstance(value, dict):
        for key, item in value.items():
            for pos, text in iter_references(item):
                yield (str(key), *pos), text
