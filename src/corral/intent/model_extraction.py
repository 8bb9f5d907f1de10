"""Entity extraction by a model, with grounding: an invented value never gets through.

Only entities the rules did not find are asked for. A value is kept only when it appears
in the user's text, or is the canonical value of a vocabulary word that appears there, or
matches one of the entity's patterns inside the text. Everything else is dropped, and the
event says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, create_model

from corral.config import EntitySpec
from corral.intent.grounding import Evidence, grounded
from corral.models.base import Message, ModelRequest
from corral.models.schema import GrammarModel, raw_checked

MAX_VALUE_CHARS = 200
"""A value is words copied from the message, not a paragraph."""


def extraction_model(wanted: Iterable[str]) -> type[BaseModel]:
    """``{"entities": {NAME: "exact words", ...}}`` with the wanted names as fixed properties.

    Every name is optional (leave out what the message does not say) and nothing else may
    appear, so a grammar-constrained server cannot invent a field name. The validated
    ``entities`` stay the plain mapping the model wrote (entity name -> text).
    """
    fields: dict[str, Any] = {
        f"e{index}": (str, Field(default=None, alias=name, max_length=MAX_VALUE_CHARS))
        for index, name in enumerate(wanted)
    }
    entities = create_model("ExtractedEntities", __base__=GrammarModel, **fields)
    answer: type[BaseModel] = create_model(
        "ExtractionAnswer",
        __base__=GrammarModel,
        entities=(raw_checked(entities), Field(default_factory=dict)),
    )
    return answer


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
        extraction_model(wanted).model_json_schema(),
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
