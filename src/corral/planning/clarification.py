"""``need_clarification``: planning cannot start without a value only the user can give.

Before a plan is made, code checks the entities the intent ``requires``: one that is
missing, or that the message gives two different values for (two cities, two order ids),
raises ``need_clarification``. corral never guesses which one was meant. The one handler
asks the user (the question for a missing value is ``questions:`` in config; an ambiguous
one lists the values it found), at most ``limits.max_questions`` times per entity, then
hands the run to a person.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from corral.contracts import NeedClarification

ClarificationOutcome = Literal["ask", "handoff"]


def clarification_needed(
    missing: Sequence[str], ambiguous: Mapping[str, list[str]]
) -> NeedClarification | None:
    """The signal for the first missing required entity, else the first ambiguous one."""
    if missing:
        return NeedClarification(entity=missing[0], problem="missing")
    for name, values in ambiguous.items():
        return NeedClarification(entity=name, problem="ambiguous", candidates=values)
    return None


def latest_mention(
    mentions: Callable[[str, Iterable[str]], Mapping[str, list[str]]],
    messages: Sequence[str],
    name: str,
) -> tuple[str, list[str]] | None:
    """The latest of ``messages`` that gives entity ``name`` a value, and the values it gives."""
    for text in reversed(messages):
        values = mentions(text, [name]).get(name)
        if values:
            return text, values
    return None


def latest_ambiguity(
    mentions: Callable[[str, Iterable[str]], Mapping[str, list[str]]],
    messages: Sequence[str],
    names: Iterable[str],
) -> dict[str, list[str]]:
    """Entity -> its values, for those the latest message mentioning them gives two of.

    ``messages``: the run's user messages and answers, oldest first; ``mentions``: the
    values a text gives per entity. An answer to "which one?" that names no value does
    not settle the question: the message before it still gives two, so it is still
    ambiguous (asked again, then a person), instead of the first value being taken.
    """
    ambiguous: dict[str, list[str]] = {}
    for name in names:
        found = latest_mention(mentions, messages, name)
        if found is not None and len(found[1]) > 1:
            ambiguous[name] = found[1]
    return ambiguous


def handle_need_clarification(
    signal: NeedClarification, asked: int, max_questions: int
) -> ClarificationOutcome:
    """The one handler: ask, unless this entity was asked for ``max_questions`` times."""
    del signal  # the same rule for a missing and an ambiguous value
    return "handoff" if asked >= max_questions else "ask"
