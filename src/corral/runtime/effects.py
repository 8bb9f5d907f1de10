"""The effects boundary: the only door through which nondeterminism enters a run.

The clock, ids, sleeps and tool calls all pass through an ``Effects`` object. The run
loop records what came back in its event log, so a run is a deterministic function of
that log: it can be resumed, replayed as a regression test, or hosted by a durable
engine (each ``call_tool`` can become a durable step of DBOS or Temporal).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from corral.models.base import Model, ModelRequest, ModelResponse
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec


class Effects(Protocol):
    """Everything nondeterministic that a run may do."""

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for durations."""
        ...

    def new_id(self, prefix: str) -> str:
        """A fresh unique id such as ``run_3f2a...``."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait (retry backoff)."""
        ...

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """Run one tool attempt; raises ``TimeoutError`` past ``timeout_s``."""
        ...

    async def call_model(self, model: Model, request: ModelRequest) -> ModelResponse:
        """Ask a model once; raises ``ModelUnavailableError`` or ``ModelTimeoutError``."""
        ...


@dataclass
class LiveEffects:
    """The real world: system clock, random ids, real sleeps, real tool calls."""

    def now(self) -> datetime:
        """Wall-clock time in UTC."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """``time.perf_counter``."""
        return time.perf_counter()

    def new_id(self, prefix: str) -> str:
        """``prefix_`` plus 16 random hex digits."""
        return f"{prefix}_{uuid.uuid4().hex[:16]}"

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """Call the tool with its validated arguments; sync tools run in a worker thread."""
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if spec.context_param:
            kwargs[spec.context_param] = context
        async with asyncio.timeout(timeout_s):  # no extra task, unlike wait_for
            if spec.is_async:
                return await spec.fn(**kwargs)
            return await asyncio.to_thread(spec.fn, **kwargs)

    async def call_model(self, model: Model, request: ModelRequest) -> ModelResponse:
        """Ask the model."""
        return await model.complete(request)
