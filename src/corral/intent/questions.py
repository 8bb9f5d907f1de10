"""Whether a line reads as a question, the one reading the intent layer and the run share.

Kept apart from ``pipeline`` (which loads the config's pydantic models) so that the
confirmation reader, imported by the CLI's light paths, can use it too.
"""

from __future__ import annotations

QUESTION_ENDINGS = ("?", "？", "吗", "呢", "么", "嘛")
"""How a question ends: a question mark, or a particle that asks."""


def reads_as_question(text: str) -> bool:
    """Whether a line reads as a question (it ends as one does)."""
    return text.rstrip().endswith(QUESTION_ENDINGS)
