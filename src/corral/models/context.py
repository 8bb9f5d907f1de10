"""A hard context budget per model call: each layer sends its slice, newest detail first.

Older step summaries are folded into one line ("N earlier steps done") once the budget is
reached, so a long task costs about the same per call as a short one, instead of growing
with the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence

from corral.models.base import estimate_tokens


def fit_summaries(summaries: Sequence[str], budget_tokens: int) -> list[str]:
    """The newest summaries that fit ``budget_tokens``, oldest folded into one line."""
    kept: list[str] = []
    used = 0
    for summary in reversed(summaries):
        cost = estimate_tokens(summary)
        if used + cost > budget_tokens:
            break
        kept.append(summary)
        used += cost
    folded = len(summaries) - len(kept)
    head = [f"({folded} earlier steps done)"] if folded else []
    return head + list(reversed(kept))


def clip(text: str, budget_tokens: int) -> str:
    """``text`` cut to about ``budget_tokens`` tokens."""
    if estimate_tokens(text) <= budget_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= budget_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "…"
