"""Choosing a concrete tool among equivalent ones, by deterministic policy.

Health comes first (a tool that failed twice in a row is degraded), then the declared
latency or cost, then the tool the plan named, then the name. No model is asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec

DEGRADE_AFTER = 2
"""Consecutive failures after which a tool is degraded (seed 001)."""


@dataclass
class ToolHealth:
    """Consecutive failures per tool. Shared by the runs of one agent in one process."""

    consecutive_failures: dict[str, int] = field(default_factory=dict)
    degrade_after: int = DEGRADE_AFTER

    def record(self, tool: str, ok: bool) -> None:
        """Count a failed call, or reset the count after a success."""
        self.consecutive_failures[tool] = 0 if ok else self.consecutive_failures.get(tool, 0) + 1

    def degraded(self, tool: str) -> bool:
        """True once the tool failed ``degrade_after`` times in a row."""
        return self.consecutive_failures.get(tool, 0) >= self.degrade_after

    def degraded_among(self, tools: Iterable[str]) -> list[str]:
        """The given tools that are degraded, in their order; at once when none is.

        Asked at every run's start: it walks the (few) counts, not every tool.
        """
        limit = self.degrade_after
        failing = {t for t, n in self.consecutive_failures.items() if n >= limit}
        return [t for t in tools if t in failing] if failing else []


def rank_tools(
    registry: ToolRegistry,
    requested: str,
    health: ToolHealth,
    prefer: Literal["latency", "cost"] = "latency",
    exclude: Iterable[str] = (),
    latency: Mapping[str, float] | None = None,
) -> list[ToolSpec]:
    """Candidates for a step, best first: the requested tool's equivalents minus ``exclude``.

    ``latency``: tool -> the milliseconds to rank it by, where known better than its
    declared ``latency_ms`` (an observed p95, ``decision.choice``).
    """
    excluded = set(exclude)
    candidates = [s for s in registry.equivalents(requested) if s.name not in excluded]
    if len(candidates) < 2:  # most tools have no equivalent: nothing to rank
        return candidates
    known = latency or {}

    def key(spec: ToolSpec) -> tuple[bool, float, float, bool, str]:
        millis = known.get(spec.name, spec.policy.latency_ms)
        primary = millis if prefer == "latency" else spec.policy.cost
        secondary = spec.policy.cost if prefer == "latency" else millis
        return (health.degraded(spec.name), primary, secondary, spec.name != requested, spec.name)

    return sorted(candidates, key=key)
