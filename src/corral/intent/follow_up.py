"""Follow-ups: "那 OD2611250002 呢？", "what about my other order?".

A customer who has just been answered about one order often asks the same of another in
a few words that say no intent of their own. Read alone, such a line is unclear, and
asking "do you want to track a parcel or get a refund?" after the parcel was just tracked
is what a person would never do. The line is read as the session's last request again,
of the value it names, only when code can tell it is nothing else: what is left of it
once the entity values it names are taken out is a follow-up frame (a lead such as 那 or
"what about", "my other order", a tail such as 呢), and it names a value or says "another".
"""

from __future__ import annotations

import re

_CORRECTION = (
    r"(?:(?:不对|不是|错了|弄错了|搞错了|说错了|打错了|写错了|输错了|no|nope|sorry|oops|wait)"
    r"[\s,，、.。!！]*)+(?:我是说|我说的是|应该是|是|i\s+meant|i\s+mean|it'?s|it\s+is|should\s+be)?"
)
"""A line that takes back what the last one named: "不对，是 OD…", "sorry, I meant OD…"."""

_FRAME = re.compile(
    rf"""
    ^(?P<correction>{_CORRECTION})?[\s,，、]*
    (?:(?:那么?|还有|另外|再问一下|再问下|and|so|ok(?:ay)?|then|also)[\s,，、]*)?
    (?:(?:what|how)\s+about\s*|what\s+of\s*)?
    (?:我的|我那个|my\b|the\b)?\s*
    (?P<other>另一个|另外一个|另外那个|另一单|其他的?|其它的?|别的|other\b|another\b)?\s*
    (?:订单号?|单子|单号|那单|那个|这个|工单|包裹|快递|orders?\b|tickets?\b|ones?\b|parcel\b|package\b)?\s*
    (?:的?(?:呢|怎么样了?|咋样了?|如何)|too\b|as\s+well\b)?
    [\s?？。.!！,，~]*$
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""What may be left of a follow-up line once the values it names are taken out."""

FOLLOW_UP_CHARS = 60
"""A longer line says more than "and that one?": it is read for an intent of its own."""


def is_correction(rest: str, named: bool) -> bool:
    """Whether a follow-up line corrects the last one: it names a value, after "不对" or "no"."""
    if not named or len(rest) > FOLLOW_UP_CHARS:
        return False
    frame = _FRAME.match(rest.strip())
    return frame is not None and frame.group("correction") is not None


def is_follow_up(rest: str, named: bool) -> bool:
    """Whether a line is a follow-up, from ``rest`` (the line less the values it names).

    ``named``: the line named a value. A frame that names none must say "another" ("那另
    一个订单呢？"): "那呢？" or "ok" alone asks nothing.
    """
    if len(rest) > FOLLOW_UP_CHARS:
        return False
    frame = _FRAME.match(rest.strip())
    return frame is not None and (named or frame.group("other") is not None)
