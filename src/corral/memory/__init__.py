"""Structured memory: task memory with prioritised facts."""

from corral.memory.task import Fact, FactSource, TaskMemory

__all__ = ["Fact", "FactSource", "TaskMemory"]
