"""``ScriptedModel``: a model for tests and demos that answers from a script."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from corral.models.base import ModelRequest, ModelResponse, estimate_usage

Reply = str | Callable[[ModelRequest], str]


@dataclass
class ScriptedModel:
    """Answers with the scripted replies in order, or with a function of the request.

    ``assert_complete()`` fails when the workflow asked fewer times than scripted, which
    catches a workflow that drifted from its script.
    """

    replies: Sequence[Reply] = ()
    function: Callable[[ModelRequest], str] | None = None
    name: str = "scripted"
    requests: list[ModelRequest] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted reply (or the function's answer)."""
        index = len(self.requests)
        self.requests.append(request)
        if self.function is not None:
            text = self.function(request)
        elif index < len(self.replies):
            reply = self.replies[index]
            text = reply(request) if callable(reply) else reply
        else:
            raise AssertionError(
                f"ScriptedModel was asked {index + 1} times but has {len(self.replies)} replies"
                f" (purpose {request.purpose!r})"
            )
        return ModelResponse(text=text, usage=estimate_usage(request, text), model=self.name)

    def assert_complete(self) -> None:
        """Raise unless every scripted reply was used."""
        if self.function is None and len(self.requests) != len(self.replies):
            raise AssertionError(
                f"ScriptedModel used {len(self.requests)} of {len(self.replies)} replies"
            )
