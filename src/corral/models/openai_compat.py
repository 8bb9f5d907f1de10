"""Any OpenAI-compatible endpoint through the official ``openai`` SDK.

That covers OpenAI, DeepSeek, Qwen (DashScope), vLLM, Ollama and the llama.cpp server.
Structured output is negotiated per endpoint, most precise first:

1. ``json_schema`` (OpenAI, vLLM, recent Ollama);
2. ``json_object`` with the schema alongside (the llama.cpp server answers HTTP 500 to
   ``json_schema`` but honours ``{"type": "json_object", "schema": ...}``; others ignore it);
3. prompt only: the schema is in the system prompt, and the repair pipeline does the rest.

A mode is dropped only when the endpoint rejects the format itself (see ``negotiation``),
and the next one is tried at once, inside the same attempt; each refused request is listed
in the response's ``negotiation.requests`` (mode, HTTP status, latency). What was learned
is kept in the home's cache when the model is given one. Apart from that step-down, one
request is one attempt: the SDK's own retries are off
(``max_retries=0``), because corral's retry (``runtime.modeling``) records every attempt
as an event and counts its tokens. A failure becomes ``ModelUnavailableError`` (saying
whether another attempt may help, and the server's ``Retry-After``) or
``ModelTimeoutError``.
"""

from __future__ import annotations

import email.utils
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from corral.clipping import clip
from corral.errors import ConfigInvalidError, ModelTimeoutError, ModelUnavailableError
from corral.models.base import ModelRequest, ModelResponse, Usage, estimate_usage
from corral.models.negotiation import (
    DEFAULT_TTL_S,
    MODES,
    NegotiationCache,
    StructuredMode,
    rejects_format,
)

__all__ = ["MODES", "OpenAICompatibleModel", "StructuredMode", "retry_after"]

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Besides every 5xx: the HTTP errors another attempt may cure."""
MAX_ERROR_TEXT = 300


def retry_after(headers: Any) -> float | None:
    """The ``Retry-After`` header in seconds (a number or an HTTP date), if usable."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _body(exc: Any) -> str:
    try:
        return str(exc.response.text)
    except Exception:  # a body that cannot be read names nothing
        return ""


@dataclass
class OpenAICompatibleModel:
    """A chat-completions endpoint.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.
    ``negotiation_cache``: the home's file of negotiated modes (``None``: probe in every
    process); an entry older than ``negotiation_ttl_s`` is probed again.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 30.0
    modes: tuple[StructuredMode, ...] = MODES
    """Structured-output modes still believed to work, best first."""
    negotiation_cache: Path | None = None
    negotiation_ttl_s: float = DEFAULT_TTL_S
    client: Any = field(default=None, repr=False)
    _source: str = field(default="default", init=False, repr=False)
    """Where ``modes`` came from: ``default``, ``cache`` or ``probe``."""
    _cache_read: bool = field(default=False, init=False, repr=False)

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
                max_retries=0,  # every attempt is corral's, and an event
            )

    def _without_key(self, text: str) -> str:
        """``text`` with the key this model sends shown as ``[API_KEY]``.

        An endpoint may echo it in an error ("Incorrect API key provided: ..."): a key
        whose shape redaction does not know would be stored, logged and traced as it is.
        """
        key = getattr(self.client, "api_key", None)
        if not isinstance(key, str) or len(key) < 8 or key == "not-needed":
            return text
        return text.replace(key, "[API_KEY]")

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self.model}"

    @property
    def _cache(self) -> NegotiationCache | None:
        if self.negotiation_cache is None:
            return None
        return NegotiationCache(self.negotiation_cache, self.negotiation_ttl_s)

    def _endpoint(self) -> str:
        return str(self.client.base_url)

    def _recall(self) -> None:
        """Start from the modes the home remembers for this endpoint (once per process)."""
        if self._cache_read:
            return
        self._cache_read = True
        cache = self._cache
        known = cache.load(self._endpoint(), self.model, time.time()) if cache else None
        if known is not None:
            self.modes, self._source = known, "cache"

    def _remember(self) -> None:
        """Keep what this process learned: a rejected mode at once, else the first success."""
        self._source = "probe"
        cache = self._cache
        if cache is not None:
            cache.store(self._endpoint(), self.model, self.modes, time.time())

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
        """Ask the endpoint once, stepping down the structured-output modes it rejects."""
        import openai

        if request.schema is not None:
            self._recall()
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        steps: list[dict[str, Any]] = []
        started = time.perf_counter()
        while True:
            sent = time.perf_counter()
            mode = self.modes[0] if request.schema is not None else "prompt"
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
            except openai.APIStatusError as exc:
                status, body = exc.status_code, self._without_key(_body(exc))
                if mode != "prompt" and rejects_format(status, body):
                    steps.append(
                        {
                            "mode": mode,
                            "http_status": status,
                            "latency_ms": round((time.perf_counter() - sent) * 1000, 3),
                        }
                    )
                    self._drop(mode)
                    continue
                raise ModelUnavailableError(
                    f"{self.name}: HTTP {status}: {clip(body, MAX_ERROR_TEXT) or exc.message}",
                    retryable=status in RETRYABLE_STATUS or status >= 500,
                    retry_after=retry_after(exc.response.headers),
                    status=status,
                ) from exc
            except openai.APIConnectionError as exc:
                raise ModelUnavailableError(f"{self.name}: {self._without_key(str(exc))}") from exc
            except openai.APIError as exc:
                raise ModelUnavailableError(
                    f"{self.name}: {self._without_key(str(exc))}", retryable=False
                ) from exc
            except ValueError as exc:  # a body that is not the protocol's JSON
                raise ModelUnavailableError(
                    f"{self.name}: malformed response: {exc}", retryable=False
                ) from exc
            latency = (time.perf_counter() - started) * 1000
            if request.schema is not None and self._source == "default":
                self._remember()  # the first mode works: a cache entry spares the next probe
            return self._response(request, completion, latency, mode, steps)

    def _drop(self, mode: StructuredMode) -> None:
        """Forget the mode this request tried, not whichever is first now.

        Concurrent requests may all be refused the same mode: each removes only what it
        was refused, so one rejection never costs a mode nobody tried, and the cache keeps
        exactly what the endpoint rejected.
        """
        self.modes = tuple(m for m in self.modes if m != mode) or ("prompt",)
        self._remember()

    def _response(
        self,
        request: ModelRequest,
        completion: Any,
        latency: float,
        mode: StructuredMode,
        steps: list[dict[str, Any]],
    ) -> ModelResponse:
        text = _answer_text(self.name, completion)
        counted = _counted(completion) or estimate_usage(request, text)
        meta: dict[str, Any] = {"structured_mode": mode}
        if request.schema is not None:
            rejected = [step["mode"] for step in steps]  # each refused request's mode
            meta["negotiation"] = {"source": self._source, "rejected": rejected}
            if steps:  # each refused request: its own HTTP round trip, not a counted call
                meta["negotiation"]["requests"] = steps
        return ModelResponse(
            text=text, usage=counted, model=self.name, latency_ms=latency, meta=meta
        )


def _malformed(name: str, what: str) -> ModelUnavailableError:
    """A body that is not the protocol's: ``MODEL_UNAVAILABLE``, not retried (errors.md)."""
    return ModelUnavailableError(f"{name}: malformed response: {what}", retryable=False)


def _answer_text(name: str, completion: Any) -> str:
    """The answer's text, from a chat completion as the SDK parsed it (leniently).

    The SDK hands back whatever a 200 carried: an HTML page as a string, ``null``, a
    list, a ``message`` that is a string. Each is the endpoint's fault, said as such; a
    content given as a list of parts (some gateways, reasoning models) is the text of its
    text parts, the others left out.
    """
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise _malformed(name, f"not a chat completion ({type(completion).__name__})")
    if not choices:
        raise _malformed(name, "a chat completion without any choice")
    content = getattr(getattr(choices[0], "message", None), "content", _NO_CONTENT)
    if content is None:
        return ""  # no text (tool calls only): an empty answer, re-asked
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # text parts, maybe beside others (a reasoning model's)
        texts = [text for text in map(_part_text, content) if text is not None]
        if texts:
            return "".join(texts)
    raise _malformed(name, f"a message whose content is {type(content).__name__}, not text")


_NO_CONTENT: Any = object()


def _part_text(part: Any) -> str | None:
    """The text of one content part (``{"type": "text", "text": ...}``), else ``None``."""
    text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
    return text if isinstance(text, str) else None


def _counted(completion: Any) -> Usage | None:
    """The token counts the endpoint gave, when they are counts (else they are estimated).

    A count that is not a whole number of zero or more (``"12 tokens"``, ``-1000000``) is
    not one: taken as given, a negative count undid the run's token and cost budgets. Nor
    is one past ``MAX_TOKENS_COUNTED``: no call holds that many, and one past int64 could
    not be stored (the run was lost), or added up with the home's others in SQL.
    """
    usage = getattr(completion, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    answer = getattr(usage, "completion_tokens", None) or 0
    if _count(prompt) and _count(answer):
        return Usage(prompt, answer)
    return None


MAX_TOKENS_COUNTED = 100_000_000
"""More tokens than any model's window holds, a hundred times over: not a count."""


def _count(value: object) -> TypeGuard[int]:
    return (
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_COUNTED
    )
