"""``need_clarification``: planning cannot start without a value only the user can give.

Before a plan is made, code checks the entities the intent ``requires``: one that is
missing, or that the message gives two different values for (two cities, two order ids),
raises ``need_clarification``. corral never guesses which one was meant. The one handler
asks the user (the question for a missing value is ``questions:`` in config; an ambiguous
one lists the values it found), at most ``limits.max_questions`` times per entity, then
hands the run to a person.
"""

from __future__ import annotations

import re
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


_ASKS = ("?", "？", "吗", "呢", "么", "嘛")
"""How a line that asks ends."""

_PICKS_ONE = re.compile(
    r"(?:那|这)一?(?:个|单|笔)[\s。.!！~～]*$|(?i:^\s*(?:it'?s\s+|it\s+is\s+)?(?:the|that|this)\s+one\b)"
)
"""A line that points at one of what was asked about ("…还没到的那个", "the one that…")."""


def asks(text: str) -> bool:
    """Whether a line reads as a question (it ends as one does)."""
    return text.rstrip().endswith(_ASKS)


def another_request(
    text: str, its_intent: str | None, asked_intent: str, found: Mapping[str, object]
) -> bool:
    """Whether an answer to a question is a new request of another intent, not its answer.

    ``its_intent``: the intent the rules alone give ``text`` (``IntentLayer.rule_intent``);
    ``asked_intent``: the run's; ``found``: the entities the answer gives. A line a rule
    reads as another intent that asks or names something is a request: asked which order
    to cancel, "先帮我查一下 OD2611250001 到哪了" or "where is OD2611250001 right now?";
    asked for the new address, "OD2611250001 发货了吗". It is read as a new message, never
    as the value asked for. An address that trips a rule but names and asks nothing
    ("广州市白云区太和镇物流园路8号") is an answer, and so is a line that points at one
    ("OD2611250001 快递还没到的那个", "the one that hasn't been delivered, OD2611250001").
    """
    if its_intent is None or its_intent == asked_intent or _PICKS_ONE.search(text):
        return False
    return bool(found) or asks(text)
