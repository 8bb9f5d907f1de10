"""Entity extraction by a model, with grounding: an invented value never gets through.

Only entities the rules did not find are asked for. A value is kept only when it appears
in the user's text, or is the canonical value of a vocabulary word that appears there, or
matches one of the entity's patterns inside the text. Everything else is dropped, and the
event says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from corral.config import EntitySpec
from corral.intent.grounding import Evidence, grounded
from corral.models.base import Message, ModelRequest


class ExtractionAnswer(BaseModel):
    """Entity name -> the exact words of the message."""

    model_config = ConfigDict(extra="ignore")

    entities: dict[str, str] = Field(default_factory=dict, max_length=20)


def extraction_request(
    text: str, wanted: Mapping[str, EntitySpec], temperature: float = 0.0
) -> ModelRequest:
    """Ask for the wanted entities, copied exactly from the message."""
    names = ", ".join(wanted)
    system = (
        f"Extract these fields from the customer's message: {names}. Copy each value exactly "
        "as it is written in the message. Leave out any field the message does not state; "
        'never guess. Reply with JSON only: {"entities": {"field": "value"}}.'
    )
    return ModelRequest(
        "extract",
        (Message("system", system), Message("user", text[:2000])),
        ExtractionAnswer.model_json_schema(),
        "extract",
        temperature,
        200,
    )


def _as_text(value: Any) -> str:
    """A proposed value as the string an entity holds (``300.0`` → ``"300"``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def ground(
    text: str,
    proposed: Mapping[str, Any],
    wanted: Mapping[str, EntitySpec],
    now: datetime | None = None,
    timezone: str = "UTC",
) -> tuple[dict[str, Any], dict[str, str]]:
    """(kept values, dropped name -> reason).

    A value is in the message when it occurs there, or, normalised, states the same
    number, date or yes/no (``corral.intent.grounding``): "300" for 三百, "2026-12-01"
    for 明天 at ``now``, the run's recorded clock.
    """
    kept: dict[str, Any] = {}
    dropped: dict[str, str] = {}
    lowered = text.lower()
    evidence = Evidence.of(text, (), now, timezone)
    for name, raw in proposed.items():
        spec = wanted.get(name)
        if spec is None:
            dropped[name] = "not a requested entity"
            continue
        value = _as_text(raw)
        if spec.kind == "vocabulary":
            surfaces = [w for w, c in spec.vocabulary.items() if c == value or w == value]
            if any(s.lower() in lowered for s in surfaces):
                kept[name] = spec.vocabulary.get(value, value)
            else:
                dropped[name] = f"{value!r} is not a catalogue word in the message"
            continue
        if not value or not grounded(
            raw if isinstance(raw, bool | int | float) else value, evidence
        ):
            dropped[name] = f"{value!r} does not appear in the message"
            continue
        if spec.patterns and not any(re.search(p, value, re.IGNORECASE) for p in spec.patterns):
            dropped[name] = f"{value!r} does not match the entity's pattern"
            continue
        kept[name] = value.upper() if spec.upper else value
    return kept, dropped
