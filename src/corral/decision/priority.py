"""A run's priority (seed 001: is the user in a hurry? is the budget tight?), by rules.

The caller may set it (``Runtime.start(..., priority=...)``, ``corral run --priority``);
otherwise words in the message set it, from ``decision.priority_words`` in agent.yaml.
A word preceded by a negation ("不急", "不用急", "别着急", "not urgent") does not count,
nor one whose negation is softened by a degree word ("不是很急", "没那么急", "not very
urgent"): the user says it is not urgent. Text is compared in NFKC form, so full-width
letters ("ＡＳＡＰ", typed with a Chinese input method) match their keywords.
When both kinds of word are present, urgent wins: a deadline is a hard constraint, a
price a soft one. Nothing here asks a model, so the same message always gets the same
priority.
"""

from __future__ import annotations

import re
import unicodedata
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


DEGREE_WORDS: tuple[str, ...] = (
    "是",
    "很",
    "太",
    "那么",
    "这么",
    "怎么",
    "算",
    "特别",
    "非常",
    "十分",
    "有",
    "着",
    "最",
    "一定",
    "要",
    "very",
    "that",
    "so",
    "really",
    "too",
    "particularly",
    "the",
    "a",
    "an",
)
"""Words that may stand between a negation and the keyword it negates ("不是很急",
"没有那么急", "不一定要最便宜", "not very urgent", "not the cheapest"); at most
``_MAX_DEGREE_WORDS`` of them are skipped."""

_MAX_DEGREE_WORDS = 3

_LOOK_BACK = 64
"""Characters before a word that may hold its negation and degree words: enough for any
of them, and a bound, so that a long message's many keywords cost linear time."""


def _normal(text: str) -> str:
    """``text`` as words are compared: NFKC (full-width letters as ASCII), lower case."""
    return unicodedata.normalize("NFKC", text).lower()


def _ends_with(text: str, word: str) -> bool:
    """Whether ``text`` ends with ``word``; an English word must start a word there."""
    if not word or not text.endswith(word):
        return False
    start = len(text) - len(word)
    return not word.isascii() or start == 0 or not text[start - 1].isalnum()


def _without_degree_word(text: str) -> str | None:
    """``text`` without the degree word it ends with, else ``None``."""
    for word in DEGREE_WORDS:
        if _ends_with(text, word):
            return text[: len(text) - len(word)].rstrip()
    return None


def _negated(before: str, negations: list[str]) -> bool:
    """Whether ``before`` (the text up to a word) ends with a negation, spaces aside.

    Degree words between the negation and the word are skipped ("不是很", "not very").
    An English negation must start a word ("casino cheap" is not "no cheap").
    """
    text: str | None = before.rstrip()
    for _ in range(_MAX_DEGREE_WORDS + 1):
        if text is None or not text:
            return False
        if any(_ends_with(text, _normal(negation.strip())) for negation in negations):
            return True
        text = _without_degree_word(text)
    return False


def _found(text: str, words: list[str], negations: list[str]) -> str | None:
    """The first of ``words`` in ``text`` that is not negated, or ``None``."""
    lowered = _normal(text)
    for word in words:
        needle = _normal(word)
        start = lowered.find(needle)
        while needle and start >= 0:
            boundary = not needle.isascii() or start == 0 or not lowered[start - 1].isalnum()
            if boundary and not _negated(lowered[max(0, start - _LOOK_BACK) : start], negations):
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

    Most messages name no priority at all: one search for any of the words (normalised
    as ``detect_priority`` compares them: NFKC, lower case) answers those; a message that
    has one goes through ``detect_priority`` unchanged.
    """

    def __init__(self, words: PriorityWords) -> None:
        self.words = words
        needles = sorted({_normal(w) for w in (*words.urgent, *words.budget) if w}, key=len)
        self._any = re.compile("|".join(map(re.escape, reversed(needles)))) if needles else None

    def detect(self, text: str) -> PriorityFound:
        """The priority ``text`` asks for (``detect_priority``)."""
        if self._any is None or self._any.search(_normal(text)) is None:
            return DEFAULT
        return detect_priority(text, self.words)


def run_priority(given: str | None, message: str, detector: PriorityDetector) -> PriorityFound:
    """The caller's priority when given, else the message's."""
    if given is not None:
        return PriorityFound(check_priority(given), "caller")
    return detector.detect(message)
