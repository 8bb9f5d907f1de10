"""Named crash points for durability tests: SIGKILL the process exactly there.

Production never sets them. A test starts ``corral`` with ``CORRAL_FAULTS=after_tool`` (a
comma-separated list; ``point@N`` kills at the N-th time the point is reached) and checks
that ``corral resume`` recovers: no lost event, no repeated write. The points:

``before_commit``  events of a batch are buffered, not yet stored;
``after_commit``   the batch is stored, the JSONL log not yet written;
``before_tool``    the step's start is durable (fenced), the tool not yet entered;
``after_tool``     the tool returned (its effect happened), nothing recorded yet.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from corral.effects import WrappedEffects

if TYPE_CHECKING:
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec

POINTS = ("before_commit", "after_commit", "before_tool", "after_tool")
ENV_VAR = "CORRAL_FAULTS"


@dataclass
class Faults:
    """Where to crash; ``Faults()`` crashes nowhere."""

    kill_at: dict[str, int] = field(default_factory=dict)
    """Point -> the hit (1-based) at which the process is killed."""
    hits: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Faults:
        """Parse ``CORRAL_FAULTS``; unknown point names are an error, not a silent no-op."""
        spec = environ.get(ENV_VAR, "").strip()
        kill_at: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            point, _, nth = item.partition("@")
            if point not in POINTS:
                raise ValueError(f"{ENV_VAR}: unknown point {point!r}; known: {POINTS}")
            kill_at[point] = int(nth) if nth else 1
        return cls(kill_at)

    @property
    def active(self) -> bool:
        """True when any point is armed."""
        return bool(self.kill_at)

    def hit(self, point: str) -> None:
        """Count a pass through ``point``; SIGKILL this process on the armed hit."""
        if point not in self.kill_at:
            return
        self.hits[point] = self.hits.get(point, 0) + 1
        if self.hits[point] == self.kill_at[point]:
            os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class FaultyEffects(WrappedEffects):
    """Wraps real effects and crashes around tool calls at the armed points."""

    faults: Faults = field(default_factory=Faults)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """``before_tool``, the call, ``after_tool``."""
        self.faults.hit("before_tool")
        result = await self.inner.call_tool(spec, args, context, timeout_s)
        self.faults.hit("after_tool")
        return result
