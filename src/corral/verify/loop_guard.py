"""Loop detection by state hash and by repeated identical tool calls (seed 000 §3.4)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.hashing import canonical_json, stable_hash

__all__ = ["LoopGuard", "stable_hash"]

_SCALARS = frozenset({str, int, type(None)})
"""Values whose canonical JSON is equal exactly when they are equal (not ``bool``: ``True
== 1``, but ``true`` is not ``1``)."""


def value_key(value: Any) -> object:
    """A key for ``value`` that two values share exactly when their canonical JSON is equal.

    A flat dict of text keys and text, whole-number or null values (most tool arguments
    and many results) is keyed by its items sorted by name, which costs half of encoding
    it; anything else by its canonical JSON, unless that JSON reads back as such a flat
    dict (an enum or a date among the values, say), which is then keyed as that dict is:
    so a value has one key whichever way it came.

    A tuple of items rather than a set of them: the names differ, so sorting never
    compares two values, and a tuple of text and numbers is a third of a set's memory and
    untracked by the garbage collector (a run keeps two keys per step while it runs).
    """
    if type(value) is not dict:
        return canonical_json(value)
    for name, item in value.items():
        if type(name) is not str or type(item) not in _SCALARS:
            break
    else:
        return tuple(sorted(value.items()))
    text = canonical_json(value)
    for item in value.values():
        if isinstance(item, (dict, list, tuple, float, bool)):  # it cannot read back flat
            return text
    back = json.loads(text)
    for item in back.values():
        if type(item) not in _SCALARS:
            return text
    return tuple(sorted(back.items()))


@dataclass
class LoopGuard:
    """Flags a run that repeats itself instead of making progress.

    Its keys live only in memory (a resumed run rebuilds the call counts from the log), so
    they are what they stand for (``value_key``: equal exactly when the canonical JSON is),
    not digests of it. What the run knows enters the state key as one number kept up to
    date fact by fact (``fact_written``), so judging a step costs the same however many
    facts there are.
    """

    max_identical_calls: int = 2
    calls: dict[tuple[str, object], tuple[str, ...]] = field(default_factory=dict)
    """(tool, arguments' key) -> the steps that made that call, in order (most: one)."""
    states: set[Any] = field(default_factory=set)
    facts_digest: int = 0
    """The XOR of one 64-bit digest per (fact name, value): equal facts, equal digest."""
    fact_digests: dict[str, int] = field(default_factory=dict)
    called: dict[int, tuple[Mapping[str, Any], object]] = field(default_factory=dict)
    """``id(args)`` -> the arguments and their key, from ``observe_call`` until
    ``observe_result`` reads it for the same arguments (held, so the id is not reused)."""

    def observe_call(self, step_id: str, tool: str, args: Mapping[str, Any]) -> str | None:
        """Record a call; a reason when more than the limit of steps made this exact call."""
        key = value_key(args)
        self.called[id(args)] = (args, key)
        made = (tool, key)
        steps = self.calls.get(made, ())
        if step_id not in steps:
            steps = self.calls[made] = (*steps, step_id)
        if len(steps) > self.max_identical_calls:
            return (
                f"{tool} was called with the same arguments by {len(steps)} steps "
                f"({', '.join(sorted(steps))})"
            )
        return None

    def fact_written(self, name: str, value: Any) -> None:
        """Fold a fact the run now knows (a new one, or a new value) into ``facts_digest``."""
        digest = int(stable_hash([name, value]), 16)
        self.facts_digest ^= self.fact_digests.get(name, 0) ^ digest
        self.fact_digests[name] = digest

    def observe_result(self, tool: str, args: Mapping[str, Any], data: Any) -> str | None:
        """Record the state after a step; a reason when the same state was seen before.

        The state is what the run knows (the facts folded in by ``fact_written``) and the
        call that led there (tool, arguments, result), not which steps are done: every
        step adds its id to that set, so a key holding it never repeats and the check
        could never fire. A step that makes a call already made, gets the same answer and
        leaves the facts as they were has brought the run back where it was.
        """
        known = self.called.pop(id(args), None)
        key = known[1] if known is not None and known[0] is args else value_key(args)
        return self._seen((self.facts_digest, tool, key, value_key(data)))

    def observe_state(self, facts: Mapping[str, Any], last_call: Any) -> str | None:
        """Record a state given whole (``facts`` and the last call, as ``observe_result``).

        For callers that do not keep ``fact_written`` up to date; it hashes every fact.
        """
        return self._seen(stable_hash([facts, last_call]))

    def _seen(self, key: object) -> str | None:
        if key in self.states:
            return "the run came back to a state it had already been in"
        self.states.add(key)
        return None
