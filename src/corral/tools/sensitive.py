"""``Sensitive()``: mark a tool field whose values must never be shown or logged.

>>> @tool
... def verify_card(card_holder: Annotated[str, Sensitive()]) -> Verified: ...

Logs, ``corral traces``/``show``/``handoff`` and handoff packets show ``[REDACTED]`` for
the field and for its value wherever else it appears. The event store keeps the value,
because the tool needs it when a run resumes.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

REDACTED = "[REDACTED]"
"""What a hidden value shows as, wherever corral hides one (logs, prompts, secrets)."""
SECRET_NAME = re.compile(
    r"(?i)(?:.*[_-])?(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret"
    r"|password|passwd|authorization|private[_-]?key)"
)
"""A name that says its value is a secret (``fullmatch``: ``api_key``, ``DB_PASSWORD``):
a logged field (``observe.redact``), a value an MCP server is given in its environment."""


@dataclass(frozen=True)
class Sensitive:
    """Annotation marker: ``Annotated[str, Sensitive()]`` on a tool parameter or output field."""


def sensitive_fields(model: type[BaseModel]) -> set[str]:
    """Names of the fields of ``model`` (and of models nested in it) marked ``Sensitive``."""
    found: set[str] = set()
    seen: set[type[BaseModel]] = set()

    def walk(current: type[BaseModel]) -> None:
        if current in seen:
            return
        seen.add(current)
        for name, info in current.model_fields.items():
            if any(isinstance(item, Sensitive) for item in info.metadata):
                found.add(name)
            for inner in _models_in(info.annotation):
                walk(inner)

    walk(model)
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
