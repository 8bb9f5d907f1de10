"""Politeness around a free-text value: "建国路1号 谢谢" is the address 建国路1号.

A pattern that captures free text (an address, a note) stops at punctuation, at a named
order, or at the end of the message; a "谢谢" or "thanks" typed after the value without a
comma ran on into it, and the address was confirmed and written as "建国路1号 谢谢".
Such tails are cut off every pattern capture and every whole answer: no id or code ends
in one, so only free text loses anything, and only the tail.
"""

from __future__ import annotations

import re

_TAIL_WORDS = (
    "谢谢你了",
    "谢谢您了",
    "谢谢你",
    "谢谢您",
    "谢谢",
    "多谢",
    "谢了",
    "谢啦",
    "感谢",
    "麻烦你了",
    "麻烦您了",
    "麻烦了",
    "辛苦了",
    "有劳了",
)
_TAIL_WORDS_EN = (
    r"thank\s+you(?:\s+(?:so|very)\s+much)?",
    r"thanks(?:\s+a\s+lot|\s+so\s+much)?",
    r"many\s+thanks",
    "thx",
    "please",
    "pls",
    "plz",
)
_SEPARATORS = r"[\s,，、。!！~～;；:：]"
_ENDING = r"[\s,，、。.!！~～;；:：]"
"""After a tail word, a full stop too; not before one: "5 Main St. thanks" keeps "St."."""
_PARTICLES = r"[啊呀哈哦啦喔呢嘛了]"
_TAIL = re.compile(
    r"(?:"
    + _SEPARATORS
    + r"*(?:"
    + "|".join(_TAIL_WORDS)
    + r"|(?<![A-Za-z0-9_\-/.#])(?:"
    + "|".join(_TAIL_WORDS_EN)
    + r")(?![A-Za-z]))"
    + _PARTICLES
    + r"*"
    + _ENDING
    + r"*)+$",
    re.IGNORECASE,
)
"""One or more politeness words at the very end, with the spaces, punctuation and
particles ("谢谢啦～", ", thank you!") around them."""


def without_politeness_tail(value: str) -> str:
    """``value`` without the thanks or please it ends with (and the separators before it).

    "北京市朝阳区建国路1号 谢谢" → "北京市朝阳区建国路1号"; "5 Main St, thanks!" →
    "5 Main St". A value that is nothing but politeness ("谢谢") comes back empty: it gave
    no value.
    """
    return _TAIL.sub("", value).rstrip()


_HEAD = re.compile(
    r"^(?:(?:好的|嗯嗯|是的|稍等一下|稍等|等一下|等等|好|嗯|哦|噢|呃|额|对)[\s,，、。.!！~～:：]++"
    r"|(?:ok(?:ay)?|sure|yes|yeah|yep|wait|hold\s+on|one\s+sec)"
    r"(?:\s*+[,.!:;，。！：]++\s*+|\s++(?=it'?s\b|it\s+is\b)))+"
    r"(?:(?:it'?s|it\s+is)\s++|(?:就是|是)(?=\S))?",
    re.IGNORECASE,
)
"""An acknowledgement or a word asking for time before a whole answer, with the break
after it: a Chinese one's space or punctuation, an English one's punctuation (or "it's"
after it). A word of an address keeps its place: "好望角路5号", "Yes Street 5"."""


def without_politeness_head(value: str) -> str:
    """``value`` without the "好的，", "稍等，" or "wait, it's" it starts with.

    Asked for the new address, "稍等，上海市徐汇区漕溪北路100号" and "wait, it's 12 Baker
    Street" were proposed and written whole; a line that is nothing but one ("稍等") is
    what ``entities.*.not_an_answer`` reads, and is kept as it is here.
    """
    rest = _HEAD.sub("", value, count=1)
    return rest if rest.strip() else value
