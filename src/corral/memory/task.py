"""Structured task memory (seed 004 §2.2): goal, completed steps, current step, facts.

Memory is immutable: an update returns a new value. The run loop is its only writer, and
every write is an event (``fact_written`` or ``fact_rejected``), so the memory of any run
can be rebuilt from its log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from corral.records import fast_init


class FactSource(StrEnum):
    """Where a fact came from. The order of priority is user > tool > model."""

    USER = "user"
    TOOL = "tool"
    MODEL = "model"

    @property
    def priority(self) -> int:
        """Higher wins: a user correction beats a tool result, which beats a model guess."""
        return {"user": 3, "tool": 2, "model": 1}[self.value]


@fast_init
@dataclass(frozen=True, slots=True)
class Fact:
    """One known value, with where it came from."""

    name: str
    value: Any
    source: FactSource
    origin: str
    """The step id, or ``message`` for what the user said."""


NO_FACTS: Mapping[str, Fact] = MappingProxyType({})
"""The facts of a memory that has none: one read-only mapping shared by every such memory
(a proxy per run would be one more object the garbage collector walks while it runs)."""


@fast_init
@dataclass(frozen=True, slots=True)
class TaskMemory:
    """What one run knows. Each layer reads only the slice it needs."""

    goal: str = ""
    completed_steps: tuple[str, ...] = ()
    """Rolling one-line summaries of finished steps."""
    facts: Mapping[str, Fact] = field(default_factory=lambda: NO_FACTS)

    def accepts(self, fact: Fact) -> bool:
        """Whether ``fact`` may replace the current value of its name (same or higher priority)."""
        current = self.facts.get(fact.name)
        return current is None or fact.source.priority >= current.source.priority

    def with_fact(self, fact: Fact) -> TaskMemory:
        """A new memory holding ``fact``; callers check ``accepts`` first."""
        facts = dict(self.facts)
        facts[fact.name] = fact
        return TaskMemory(self.goal, self.completed_steps, MappingProxyType(facts))

    def with_completed(self, summary: str) -> TaskMemory:
        """A new memory with one more completed-step summary."""
        return TaskMemory(self.goal, (*self.completed_steps, summary), self.facts)

    def values(self) -> dict[str, Any]:
        """Fact name -> value, the slice templates and bindings read."""
        return {name: fact.value for name, fact in self.facts.items()}
