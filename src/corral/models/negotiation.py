"""Which structured-output mode an endpoint takes, decided once and remembered in the home.

A mode is given up only when the endpoint rejects the response format itself: a 400 or
422 whose body names ``response_format`` or ``json_schema``, or the llama.cpp server's
500 that is a request-validation error naming ``response_format``. Any other failure (a
plain 5xx, a timeout, a dropped connection) says nothing about the format, so it never
costs a mode: a transient burst must not leave a healthy server in prompt-only mode.

What was learned is kept per (base URL, model) in a small JSON file of the corral home,
with an expiry, so a new process starts with the mode that worked instead of probing
again. The file is a cache: a missing, corrupt or foreign one is ignored and rewritten.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from corral.files import owned_private, write_private

StructuredMode = Literal["json_schema", "json_object", "prompt"]
MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "prompt")
NEGOTIATION_FILE = "model-negotiation.json"
"""Its name in the home's cache folder."""
DEFAULT_TTL_S = 24 * 3600.0
"""How long a negotiated mode is trusted before the endpoint is probed again."""
MAX_CACHE_BYTES = 256 * 1024
"""A larger file is not ours to read (it is ignored and replaced)."""

_NAMES_FORMAT = re.compile(r"response_format|json_schema", re.IGNORECASE)


def rejects_format(status: int, body: str) -> bool:
    """Whether an HTTP error refuses the structured-output request itself.

    400/422 must name the response format; a 500 counts only as the llama.cpp server's
    request validation error (``N validation error`` ... ``'response_format'``), which
    that server reports as an internal error.
    """
    if status in (400, 422):
        return bool(_NAMES_FORMAT.search(body))
    if status == 500:
        return "validation error" in body and "response_format" in body
    return False


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    modes: list[StructuredMode] = Field(min_length=1)
    at: float
    """Unix time the modes were learned."""


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    endpoints: dict[str, _Entry] = Field(default_factory=dict)


@dataclass(frozen=True)
class NegotiationCache:
    """The home's record of negotiated modes; ``ttl_s`` bounds how long an entry holds."""

    path: Path
    ttl_s: float = DEFAULT_TTL_S

    @staticmethod
    def key(base_url: str, model: str) -> str:
        """One endpoint and model (a server may serve several models differently)."""
        return json.dumps([base_url.rstrip("/"), model])

    def _read(self) -> _File:
        if not owned_private(self.path) or self.path.stat().st_size > MAX_CACHE_BYTES:
            return _File()
        try:
            return _File.model_validate_json(self.path.read_bytes())
        except (OSError, ValidationError):
            return _File()

    def load(self, base_url: str, model: str, now: float) -> tuple[StructuredMode, ...] | None:
        """The modes learned for this endpoint, unless missing or expired."""
        if self.ttl_s <= 0:
            return None
        entry = self._read().endpoints.get(self.key(base_url, model))
        if entry is None or not 0 <= now - entry.at < self.ttl_s:
            return None
        return tuple(entry.modes)

    def store(
        self, base_url: str, model: str, modes: tuple[StructuredMode, ...], now: float
    ) -> None:
        """Remember ``modes``; expired entries of other endpoints are dropped on the way.

        A home that cannot be written only costs the next process a probe.
        """
        if self.ttl_s <= 0:
            return
        data = self._read()
        kept = {k: e for k, e in data.endpoints.items() if 0 <= now - e.at < self.ttl_s}
        kept[self.key(base_url, model)] = _Entry(modes=list(modes), at=now)
        with contextlib.suppress(OSError):
            write_private(self.path, _File(endpoints=kept).model_dump_json().encode())
