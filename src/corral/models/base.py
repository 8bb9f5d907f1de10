"""The one ``Model`` interface every provider implements, and the values it exchanges.

Requests and responses are plain frozen dataclasses: they are recorded in the event log
(so a run can be replayed without the model) and fingerprinted (so a replay finds the
answer to the same question).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from corral.hashing import stable_hash

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: Role
    content: str


PURPOSES = ("intent", "extract", "plan", "decide", "judge", "reply")
"""The layers that ask a model, as ``ModelRequest.purpose`` names them."""


@dataclass(frozen=True)
class ModelRequest:
    """What a layer asks a model: messages, an optional JSON schema, a temperature."""

    purpose: str
    """Which layer asks (one of ``PURPOSES``): for events, budgets, temperatures."""
    messages: tuple[Message, ...]
    schema: dict[str, Any] | None = None
    """JSON Schema of the expected output; providers use structured output when they can."""
    schema_name: str = "output"
    temperature: float = 0.0
    max_tokens: int = 512

    def fingerprint(self) -> str:
        """A stable hash of everything that determines the answer (replay looks it up)."""
        return stable_hash(
            [
                self.purpose,
                [(m.role, m.content) for m in self.messages],
                self.schema,
                self.temperature,
                self.max_tokens,
            ],
            24,
        )

    def with_reask(self, answer: str, problems: str) -> ModelRequest:
        """The same request plus the rejected answer and what was wrong with it."""
        follow_up = (
            Message("assistant", answer),
            Message(
                "user",
                "That output was rejected: "
                + problems
                + "\nReply again with JSON only, fixing exactly these problems.",
            ),
        )
        return replace(self, messages=self.messages + follow_up)


@dataclass(frozen=True)
class Usage:
    """Token counts: from the provider's usage fields, estimated only when they are missing."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False

    @property
    def total(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def as_event(self) -> dict[str, Any]:
        """The ``usage`` of a ``model_call`` event (folded into the run's token count)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated": self.estimated,
        }


@dataclass(frozen=True)
class ModelResponse:
    """The model's raw answer."""

    text: str
    usage: Usage
    model: str
    latency_ms: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)


class Model(Protocol):
    """A chat model. Implementations: OpenAI-compatible, scripted, replay."""

    @property
    def name(self) -> str:
        """A short identifier, such as ``openai:deepseek-chat``."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request; raises ``ModelUnavailableError`` or ``ModelTimeoutError``."""
        ...


_CJK = re.compile(r"[\u3400-\u9fff]")


def estimate_tokens(text: str) -> int:
    """A rough count when a provider gives none: one per CJK character, one per 4 others.

    Nothing is downloaded to count tokens; the estimate is marked as such in events.
    """
    cjk = len(_CJK.findall(text))
    return cjk + max(0, len(text) - cjk) // 4 + 1


def estimate_usage(request: ModelRequest, text: str) -> Usage:
    """Estimated usage of a request and its answer."""
    prompt = sum(estimate_tokens(m.content) for m in request.messages)
    return Usage(prompt, estimate_tokens(text), estimated=True)
