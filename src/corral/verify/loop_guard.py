"""Loop detection by state hash and by repeated identical tool calls (seed 000 §3.4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.hashing import stable_hash

__all__ = ["LoopGuard", "stable_hash"]


@dataclass
class LoopGuard:
    """Flags a run that repeats itself instead of making progress."""

    max_identical_calls: int = 2
    calls: dict[str, set[str]] = field(default_factory=dict)
    states: set[str] = field(default_factory=set)

    def observe_call(self, step_id: str, tool: str, args: Mapping[str, Any]) -> str | None:
        """Record a call; a reason when more than the limit of steps made this exact call."""
        key = stable_hash([tool, args])
        steps = self.calls.setdefault(key, set())
        steps.add(step_id)
        if len(steps) > self.max_identical_calls:
            return (
                f"{tool} was called with the same arguments by {len(steps)} steps "
                f"({', '.join(sorted(steps))})"
            )
        return None

    def observe_state(self, facts: Mapping[str, Any], last_call: Any) -> str | None:
        """Record a state after a step; a reason when the same state was seen before.

        The state is what the run knows (``facts``) and the call that led there (tool,
        arguments, result), not which steps are done: every step adds its id to that set,
        so a key holding it never repeats and the check could never fire. A step that makes
        a call already made, gets the same answer and leaves the facts as they were has
        brought the run back where it was.
        """
        key = stable_hash([facts, last_call])
        if key in self.states:
            return "the run came back to a state it had already been in"
        self.states.add(key)
        return None
