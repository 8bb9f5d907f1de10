"""``ReplayModel``: answers from a recorded run's log, and fails loudly on anything new."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from corral.contracts import Event, EventType
from corral.errors import ReplayDivergedError
from corral.models.base import ModelRequest, ModelResponse, Usage


@dataclass
class ReplayModel:
    """The answers a run recorded, looked up by request fingerprint, in order."""

    answers: dict[str, deque[ModelResponse]] = field(default_factory=lambda: defaultdict(deque))
    name: str = "replay"

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> ReplayModel:
        """Collect every recorded model call."""
        model = cls()
        for event in events:
            if event.type is EventType.MODEL_CALL:
                data = event.data
                usage = data.get("usage", {})
                model.answers[data["fingerprint"]].append(
                    ModelResponse(
                        text=data["text"],
                        usage=Usage(
                            usage.get("prompt_tokens", 0),
                            usage.get("completion_tokens", 0),
                            usage.get("estimated", False),
                        ),
                        model=data.get("model", "replay"),
                        latency_ms=data.get("latency_ms", 0.0),
                    )
                )
        return model

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded answer to this exact request; ``ReplayDivergedError`` if there is none."""
        queue = self.answers.get(request.fingerprint())
        if not queue:
            raise ReplayDivergedError(
                f"the recorded run never asked this {request.purpose!r} request",
                hint="the prompt, schema or path changed since the run was recorded",
            )
        return queue.popleft()
