"""Any OpenAI-compatible endpoint through the official ``openai`` SDK.

That covers OpenAI, DeepSeek, Qwen (DashScope), vLLM, Ollama and the llama.cpp server.
Structured output is negotiated per endpoint, most precise first:

1. ``json_schema`` (OpenAI, vLLM, recent Ollama);
2. ``json_object`` with the schema alongside (the llama.cpp server answers HTTP 500 to
   ``json_schema`` but honours ``{"type": "json_object", "schema": ...}``; others ignore it);
3. prompt only: the schema is in the system prompt, and the repair pipeline does the rest.

A mode that fails with a 400/422/500 is dropped for this endpoint and the next one is tried
at once. The SDK's own retries (with backoff) handle 429 and 5xx; what still fails becomes
``ModelUnavailableError`` or ``ModelTimeoutError``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from corral.errors import ConfigInvalidError, ModelTimeoutError, ModelUnavailableError
from corral.models.base import ModelRequest, ModelResponse, Usage, estimate_usage

StructuredMode = Literal["json_schema", "json_object", "prompt"]
MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "prompt")


@dataclass
class OpenAICompatibleModel:
    """A chat-completions endpoint.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 30.0
    max_retries: int = 2
    modes: tuple[StructuredMode, ...] = MODES
    """Structured-output modes still believed to work, best first."""
    client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        try:
            from openai import AsyncOpenAI
        except ImportError as exc:
            raise ConfigInvalidError(
                "OpenAI-compatible models need the openai SDK", hint="pip install 'corral[openai]'"
            ) from exc
        if self.client is None:
            self.client = AsyncOpenAI(
                api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                base_url=self.base_url or os.environ.get("OPENAI_BASE_URL"),
                timeout=self.timeout_s,
                max_retries=self.max_retries,
            )

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self.model}"

    def _response_format(self, request: ModelRequest, mode: StructuredMode) -> Any:
        if request.schema is None or mode == "prompt":
            return None
        if mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema},
            }
        return {"type": "json_object", "schema": request.schema}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the endpoint, stepping down structured-output modes it rejects."""
        import openai

        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        while True:
            mode = self.modes[0] if request.schema is not None else "prompt"
            started = time.perf_counter()
            kwargs: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "temperature": request.temperature,
                "max_tokens": request.max_tokens,
            }
            response_format = self._response_format(request, mode)
            if response_format is not None:
                kwargs["response_format"] = response_format
            try:
                completion = await self.client.chat.completions.create(**kwargs)
            except openai.APITimeoutError as exc:
                raise ModelTimeoutError(
                    f"{self.name} did not answer in {self.timeout_s:g} s"
                ) from exc
            except (
                openai.BadRequestError,
                openai.UnprocessableEntityError,
                openai.InternalServerError,
            ) as exc:
                if mode != "prompt" and len(self.modes) > 1:
                    self.modes = self.modes[1:]  # this endpoint does not take that mode
                    continue
                raise ModelUnavailableError(f"{self.name}: {exc}") from exc
            except openai.APIError as exc:
                raise ModelUnavailableError(f"{self.name}: {exc}") from exc
            except ValueError as exc:  # a body that is not the protocol's JSON
                raise ModelUnavailableError(f"{self.name}: malformed response: {exc}") from exc
            latency = (time.perf_counter() - started) * 1000
            return self._response(request, completion, latency, mode)

    def _response(
        self, request: ModelRequest, completion: Any, latency: float, mode: StructuredMode
    ) -> ModelResponse:
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = getattr(completion, "usage", None)
        if usage is not None and usage.prompt_tokens is not None:
            counted = Usage(int(usage.prompt_tokens), int(usage.completion_tokens or 0))
        else:
            counted = estimate_usage(request, text)
        return ModelResponse(
            text=text,
            usage=counted,
            model=self.name,
            latency_ms=latency,
            meta={"structured_mode": mode},
        )
