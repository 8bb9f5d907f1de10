"""A run's priority (seed 001: is the user in a hurry? is the budget tight?), by rules.

The caller may set it (``Runtime.start(..., priority=...)``, ``corral run --priority``);
otherwise words in the message set it, from ``decision.priority_words`` in agent.yaml.
A word preceded by a negation ("不急", "不用急", "别着急", "not urgent") does not count.
When both kinds of word are present, urgent wins: a deadline is a hard constraint, a
price a soft one. Nothing here asks a model, so the same message always gets the same
priority.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from corral.config import PriorityWords
from corral.errors import InvalidArgumentError

Priority = Literal["urgent", "normal", "budget"]
"""How equivalent tools are ranked: by latency, by the agent's preference, by price."""

PRIORITIES: tuple[Priority, ...] = get_args(Priority)
_BY_NAME: dict[str, Priority] = {known: known for known in PRIORITIES}


@dataclass(frozen=True)
class PriorityFound:
    """The run's priority and where it came from (recorded in ``run_started``)."""

    priority: Priority
    source: str
    """``caller``, ``message: <word>`` or ``default``."""


def check_priority(value: str) -> Priority:
    """``value`` as a priority; ``InvalidArgumentError`` names the allowed ones."""
    for known in PRIORITIES:
        if value == known:
            return known
    raise InvalidArgumentError(
        f"unknown priority {value!r}", hint=f"use one of {', '.join(PRIORITIES)}"
    )


def stored_priority(value: str) -> Priority:
    """A recorded priority; one this version does not know ranks as ``normal``."""
    return _BY_NAME.get(value, "normal")


def _negated(before: str, negations: list[str]) -> bool:
    """Whether ``before`` (the text up to a word) ends with a negation, spaces aside.

    An English negation must start a word ("casino cheap" is not "no cheap").
    """
    text = before.rstrip().lower()
    for negation in negations:
        word = negation.strip().lower()
        if not word or not text.endswith(word):
            continue
        start = len(text) - len(word)
        if not word.isascii() or start == 0 or not text[start - 1].isalnum():
            return True
    return False


def _found(text: str, words: list[str], negations: list[str]) -> str | None:
    """The first of ``words`` in ``text`` that is not negated, or ``None``."""
    lowered = text.lower()
    for word in words:
        needle = word.lower()
        start = lowered.find(needle)
        while needle and start >= 0:
            boundary = not needle.isascii() or start == 0 or not lowered[start - 1].isalnum()
            if boundary and not _negated(lowered[:start], negations):
                return word
            start = lowered.find(needle, start + 1)
    return None


def detect_priority(text: str, words: PriorityWords) -> PriorityFound:
    """The priority the message asks for: urgent, budget, or normal when it says neither."""
    for priority, listed in (("urgent", words.urgent), ("budget", words.budget)):
        word = _found(text, listed, words.negations)
        if word is not None:
            return PriorityFound(check_priority(priority), f"message: {word}")
    return DEFAULT


DEFAULT = PriorityFound("normal", "default")
"""The priority of a message that names none."""


class PriorityDetector:
    """``detect_priority`` for one agent's words, with its words compiled once.

    Most messages name no priority at all: one search for any of the words (lowered)
    answers those; a message that has one goes through ``detect_priority`` unchanged.
    """

    def __init__(self, words: PriorityWords) -> None:
        self.words = words
        needles = sorted({w.lower() for w in (*words.urgent, *words.budget) if w}, key=len)
        self._any = re.compile("|".join(map(re.escape, reversed(needles)))) if needles else None

    def detect(self, text: str) -> PriorityFound:
        """The priority ``text`` asks for (``detect_priority``)."""
        if self._any is None or self._any.search(text.lower()) is None:
            return DEFAULT
        return detect_priority(text, self.words)


def run_priority(
    given: str | None, message: str, words: PriorityWords | PriorityDetector
) -> PriorityFound:
    """The caller's priority when given, else the message's."""
    if given is not None:
        return PriorityFound(check_priority(given), "caller")
    if isinstance(words, PriorityDetector):
        return words.detect(message)
    return detect_priority(message, words)
