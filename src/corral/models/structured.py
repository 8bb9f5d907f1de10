"""The structured-output pipeline every model-backed layer uses.

parse → repair (json-repair: code fences, prose around the JSON, trailing commas,
truncation) → validate with pydantic → the caller's own checks (a plan's static
validation, grounding) → on any failure, re-ask with the errors, up to the bound (default
2) → ``MODEL_OUTPUT_INVALID``. Every attempt is reported (raw text, tokens, latency, the
reason it was rejected) so it becomes an event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from corral.clipping import clip
from corral.errors import ModelOutputInvalidError
from corral.inputs import unicode_safe_value
from corral.json_values import check_finite, loads_finite
from corral.models.base import Model, ModelRequest, ModelResponse
from corral.validation import validation_problems

T = TypeVar("T", bound=BaseModel)
MAX_RECORDED_TEXT = 20_000
MAX_REASK_ANSWER = 1_500
RECORDED_META = ("structured_mode", "negotiation")
"""What a provider reports about a call that its event keeps (how output was constrained)."""


@dataclass(frozen=True)
class Attempt:
    """One model answer and what the pipeline made of it."""

    request: ModelRequest
    response: ModelResponse
    number: int
    accepted: bool
    repaired: bool
    reason: str = ""

    def as_event(self) -> dict[str, Any]:
        """The ``model_call`` event data (enough to replay the call)."""
        usage = self.response.usage
        return {
            "purpose": self.request.purpose,
            "model": self.response.model,
            "fingerprint": self.request.fingerprint(),
            "attempt": self.number,
            "text": self.response.text[:MAX_RECORDED_TEXT],
            "usage": usage.as_event(),
            "latency_ms": round(self.response.latency_ms, 3),
            "accepted": self.accepted,
            "repaired": self.repaired,
            "reason": clip(self.reason, 500),
            "status": "success" if self.accepted else "rejected",
            **{k: v for k, v in self.response.meta.items() if k in RECORDED_META},
        }


Caller = Callable[[Model, ModelRequest], Any]
"""``effects.call_model``: the recorded door to the model."""
Listener = Callable[[Attempt], None]
Check = Callable[[T], list[str]]


def parse_json(text: str) -> tuple[Any, bool]:
    """The JSON value in ``text`` and whether it had to be repaired; ``ValueError`` if none.

    ``NaN``, ``Infinity`` and ``1e999`` are refused: Python's JSON reader accepts them, and
    they would reach a tool as floats that compare false with everything.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the output was empty")
    try:
        value, repaired = _parsed(stripped)
    except RecursionError:  # 1 000 nested brackets: no answer of ours is this deep
        raise ValueError("the output is nested too deeply to be an answer") from None
    # JSON's escapes make lone surrogates of ASCII text ("\\ud800"): no store could keep them
    return (unicode_safe_value(value) if "\\u" in stripped else value), repaired


def _parsed(stripped: str) -> tuple[Any, bool]:
    """``parse_json`` of text that is not blank: as it is, else repaired."""
    try:
        return loads_finite(stripped), False
    except json.JSONDecodeError:
        pass
    repaired = json_repair.loads(stripped)
    if not isinstance(repaired, dict | list) or not repaired:
        raise ValueError("no JSON object found in the output")
    return check_finite(repaired), True


async def ask_structured(
    model: Model,
    request: ModelRequest,
    output: type[T],
    call: Caller,
    listener: Listener,
    *,
    max_reasks: int = 2,
    check: Check[T] | None = None,
) -> T:
    """Ask until the output parses, validates and passes ``check``; raises after the bound."""
    if request.schema is None:
        request = ModelRequest(
            request.purpose,
            request.messages,
            output.model_json_schema(),
            output.__name__,
            request.temperature,
            request.max_tokens,
        )
    reasons: list[str] = []
    original = request
    for number in range(1, max_reasks + 2):
        response: ModelResponse = await call(model, request)
        repaired = False
        try:
            # stored cut at the limit: one that long is refused, so its cut record (a replay
            # gets exactly the limit, which json-repair might close) is refused as well
            if len(response.text) >= MAX_RECORDED_TEXT:
                raise ValueError(f"the answer is {MAX_RECORDED_TEXT:,} characters or more")
            data, repaired = parse_json(response.text)
            value = output.model_validate(data)
            problems = check(value) if check is not None else []
            if problems:
                raise ValueError("; ".join(problems))
        except ValidationError as exc:
            reason = validation_problems(exc, 8, root="output")
        except ValueError as exc:
            reason = str(exc)
        else:
            listener(Attempt(request, response, number, True, repaired))
            return value
        listener(Attempt(request, response, number, False, repaired, reason))
        reasons.append(reason)
        # Each re-ask shows only the latest answer (clipped): the context stays bounded
        # however many times the model got it wrong.
        request = original.with_reask(response.text[:MAX_REASK_ANSWER], reason)
    raise ModelOutputInvalidError(
        f"{request.purpose}: the model's output stayed invalid after {max_reasks} re-asks: "
        + " | ".join(reasons)
    )
