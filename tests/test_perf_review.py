"""Review of the performance branches: each fast path must answer as the slow one did.

Each test here compares a computation made faster with the one it replaced (or with a
full recompute), over the cases users hit and over generated values.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral import MemoryStore, Runtime
from corral.config import PriorityWords
from corral.decision.priority import PriorityDetector, detect_priority
from corral.effects import FixedEffects
from tests.test_priority import flights_agent, started

WORDS = PriorityWords()

# ------------------------------------------------------------------ priority words


def test_the_per_agent_detector_reads_full_width_words_as_detect_priority_does() -> None:
    """Text is compared in NFKC form: the detector's first look must be in that form too,
    or 'ＡＳＡＰ' typed with a Chinese input method is read as naming no priority."""
    detector = PriorityDetector(WORDS)
    for message in ("ＡＳＡＰ！", "Ｃｈｅａｐｅｓｔ please", "ｕｒｇｅｎｔ", "asap"):
        assert detector.detect(message) == detect_priority(message, WORDS), message
    assert detector.detect("ＡＳＡＰ！").priority == "urgent"


_PIECES = ("急", "不", "便宜", "ＡＳＡＰ", "Ａ", "ｓ", "asap", "ASAP", "cheap", "Ｃ", "ﬁ", "!", "İ")
_LETTERS = st.sampled_from([*_PIECES, "ß", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LETTERS, max_size=8).map("".join))
def test_the_detector_answers_as_detect_priority_for_any_message(message: str) -> None:
    assert PriorityDetector(WORDS).detect(message) == detect_priority(message, WORDS)


async def test_a_full_width_urgent_message_makes_an_urgent_run() -> None:
    agent = flights_agent(priority_words={"urgent": ["rush"], "budget": ["frugal"]})
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    rushed = await runtime.start("go ＲＵＳＨ")
    assert started(runtime, rushed.run_id)["priority"] == "urgent"
