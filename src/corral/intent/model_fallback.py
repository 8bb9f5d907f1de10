"""The model fallback of the intent layer: the label is constrained to the declared enum.

Asked only when rules and the classifier are below the threshold, and only when config
enables it. The output schema's ``enum`` lists the declared intents plus ``none``; a label
outside it is rejected by validation and re-asked, never passed on.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from corral.config import AgentConfig
from corral.contracts import IntentResult
from corral.models.base import Message, ModelRequest
from corral.models.schema import GrammarModel

NONE_LABEL = "none"


def literal_of(values: tuple[str, ...]) -> Any:
    """``Literal[values]`` built at run time: the enum a model's answer must come from."""
    return Literal.__getitem__(values)


def intent_output_model(config: AgentConfig) -> type[BaseModel]:
    """``{label: one of the intents or "none", confidence: 0..1}``, as a pydantic model."""
    labels = (*tuple(spec.name for spec in config.intents), NONE_LABEL)
    model: type[BaseModel] = create_model(
        "IntentAnswer",
        __base__=GrammarModel,
        label=(literal_of(labels), ...),
        confidence=(float, Field(ge=0.0, le=1.0)),
    )
    return model


def intent_request(config: AgentConfig, text: str, temperature: float) -> ModelRequest:
    """The classification prompt: the intents with their descriptions and a few examples."""
    lines = []
    for spec in config.intents:
        examples = "; ".join(spec.examples[:3])
        lines.append(
            f"- {spec.name}: {spec.description or spec.name}"
            + (f" (e.g. {examples})" if examples else "")
        )
    system = (
        f"You classify messages sent to: {config.description or config.name}.\n"
        'Choose exactly one label from this list, or "none" if no label fits:\n'
        + "\n".join(lines)
        + '\nReply with JSON only: {"label": "...", "confidence": 0.0-1.0}. '
        "The confidence is the probability that the label is right."
    )
    schema = intent_output_model(config).model_json_schema()
    return ModelRequest(
        "intent",
        (Message("system", system), Message("user", text[:2000])),
        schema,
        "intent",
        temperature,
        64,
    )


def to_intent_result(answer: Any) -> IntentResult | None:
    """The model's answer as an ``IntentResult``; ``None`` for ``none``."""
    label = str(answer.label)
    if label == NONE_LABEL:
        return None
    confidence = float(answer.confidence)
    return IntentResult(
        label=label,
        confidence=round(confidence, 4),
        source="model",
        evidence=f"model p={confidence:.2f}",
    )
