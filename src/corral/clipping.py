"""Cutting text to a length without cutting a token that redaction must see whole.

Events keep short texts (a message's summary, a model's error, a result's summary) and
redaction runs when they are shown. A phone number, an e-mail or a key cut in two is no
longer recognised, so its first part was shown as it is: the cut must not fall inside one.
"""

from __future__ import annotations

from corral.textfold import fold_to_ascii

_TOKEN_MARKS = frozenset("@._+-:/%=()")
"""Besides ASCII letters and digits, what ids, addresses and keys are written with."""
_REACH = 80
"""How far a cut may move on to end the token it falls in."""


def _in_token(text: str, index: int) -> bool:
    ch = fold_to_ascii(text[index])  # full-width too: redaction folds before it looks
    if ch.isascii() and (ch.isalnum() or ch in _TOKEN_MARKS):
        return True
    # a space inside a number written in groups: a card, "+1 (415) 555-0100"
    if ch != " " or not 0 < index < len(text) - 1:
        return False
    before, after = fold_to_ascii(text[index - 1]), fold_to_ascii(text[index + 1])
    return (before.isdigit() or before == ")") and (after.isdigit() or after == "(")


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, never inside a token.

    A cut inside one moves on to the token's end (at most ``_REACH`` on); a token longer
    than that is left out whole, unless that would leave less than half of ``limit``
    (one long word, a blob): that is cut at ``limit``, where what is left of it is still
    long enough for redaction to know a key by its shape.
    """
    if len(text) <= limit:
        return text
    end, stop = limit, min(len(text), limit + _REACH)
    while end < stop and _in_token(text, end) and _in_token(text, end - 1):
        end += 1
    if end < len(text) and _in_token(text, end) and _in_token(text, end - 1):
        start = limit  # a token too long to end: cut before it
        while start > 0 and _in_token(text, start - 1):
            start -= 1
        return text[:start] if start >= limit // 2 else text[:limit]
    return text[:end]
