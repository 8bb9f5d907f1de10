"""Deterministic effects for tests: a fixed, advancing clock, counted ids, no real sleeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from corral.runtime.effects import LiveEffects

if TYPE_CHECKING:
    from corral.models.base import Model, ModelRequest, ModelResponse
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec


@dataclass
class FixedEffects:
    """Effects whose clock starts at ``start`` and whose ids count up.

    Tool calls still really run (through ``LiveEffects``), so tests exercise real tools;
    ``sleeps`` records every backoff instead of waiting.
    """

    start: datetime = field(default_factory=lambda: datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    tick: timedelta = timedelta(milliseconds=1)
    sleeps: list[float] = field(default_factory=list)
    _counter: int = 0
    _now: datetime | None = None
    _live: LiveEffects = field(default_factory=LiveEffects)

    def now(self) -> datetime:
        """The fixed clock, advanced by ``tick`` on every read."""
        self._now = (self._now or self.start) + self.tick
        return self._now

    def monotonic(self) -> float:
        """Real monotonic time, so durations are still measured."""
        return self._live.monotonic()

    def new_id(self, prefix: str) -> str:
        """``prefix_000001``, ``prefix_000002``, ..."""
        self._counter += 1
        return f"{prefix}_{self._counter:06d}"

    async def sleep(self, seconds: float) -> None:
        """Record the wait; do not wait."""
        self.sleeps.append(seconds)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """Really call the tool."""
        return await self._live.call_tool(spec, args, context, timeout_s)

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """Really ask the model (a ScriptedModel in most tests), within the deadline."""
        return await self._live.call_model(model, request, deadline_s)
