"""Follow-ups: "那 OD2611250002 呢？", "what about my other order?", "不对，是 OD…".

A customer who has just been answered about one order often asks the same of another in
a few words that say no intent of their own. Read alone, such a line is unclear, and
asking "do you want to track a parcel or get a refund?" after the parcel was just tracked
is what a person would never do. The line is read as the session's last request again,
of the value it names, only when code can tell it is nothing else: what is left of it
once the entity values it names are taken out is a frame of a few known words.

Three kinds, since they are not equally sure:

- ``bare``: nothing but values ("OD2611200002"). Taken only for a value the last
  request needs (its ``requires``): a bare phone number or amount asks nothing.
- ``follow_up``: a value, or "another", in a frame ("那 … 呢？", "what about …?",
  "还有一个 …", "same for …").
- ``correction``: a value after "no" ("不对，是 …", "sorry, I meant …", "wrong order,
  it's …", "actually, …"), or before "instead". Said at a confirmation, it declines it
  first. "不是 X" (not X) is no correction to X, and a line that adds ("wait, also …
  too") corrects nothing.

Runs of spaces and punctuation are read possessively (``*+``): a frame never backtracks
through them, so a line of a few known words is read in one pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FollowUpKind = Literal["bare", "follow_up", "correction"]


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A follow-up line as read: its kind, and the entities whose values it names."""

    kind: FollowUpKind
    named: frozenset[str]
    noun: bool = False
    """The frame names what the value is ("订单", "快递", "parcel"): a rule may have read it."""


_BREAK = r"[\s,，、.。!！:：;；~]"
"""What separates the words of a frame (a space, a comma, a full stop, in either script)."""

_SEP = _BREAK + "*+"

_NO = (
    r"(?:不对|我?(?:错了|弄错了|搞错了|说错了|打错了|写错了|输错了|发错了)|不是这个|不是那个|不是这单"
    r"|等等|等一下|等下|其实|no|nope|sorry|oops|wrong\s+order|wrong\s+one|wrong\s+number|my\s+bad"
    r"|wait|actually)"
)
"""Words that take back what the last line named (``_WAITS`` only beside another: below)."""

_WAITS = frozenset({"wait", "等等", "等一下", "等下"})
""""Wait" takes nothing back alone ("等等，OD… 也要"): only beside a "meant"."""

_MEANT = (
    r"(?:我是说|我说的是|应该是|换成|改成|改为|改到|是"
    # "我要取消的是 OD…" (its verb may be a value taken out: 取消, a status)
    rf"|我?(?:要|想)(?:取消|退款|退|改|查|问|换|修)?{_SEP}的?{_SEP}(?:是|应该是)"
    r"|i\s+meant|i\s+mean|it'?s|it\s+is|should\s+be|make\s+it)"
)

_LEAD = (
    r"(?:那么|那个|这个|那|还有一个|还有个|还有|另外|再问一下|再问下|and|so|ok(?:ay)?|then|also"
    r"|(?:what|how)\s+about|what\s+of|(?:the\s+)?same\s+(?:for|with))"
)

_OWNING_LEADS = frozenset({"这个", "那个", "这", "那"})
"""Leads that own the noun after them ("是 OD… 那单"): with it, they ask nothing more."""

_OWNER = r"(?:我的|我那个|那个|这个|my|the)"
_OTHER = r"(?:另一个|另外一个|另外那个|另一单|其他的?|其它的?|别的|other|another)"
_NOUN = (
    r"(?:订单号|订单|单子|单号|那单|工单|包裹|快递|收货地址|地址|order\s+(?:number|no\.?|\#)|orders?"
    r"|tickets?|ones?|parcel|package"
    r"|number|address|单)"
)
_ADDS = r"(?:的?(?:呢|怎么样了?|咋样了?|如何)|too|as\s+well|then)"
"""Tails that ask the same of one more value: a follow-up's, never a correction's."""

_SOFT = r"(?:才对|啊|呀|吧|please|pls|thanks|thank\s+you|谢谢)"
"""Tails that say nothing of their own (a correction may end in one: "是 OD… 才对")."""

_VALUE_NOUNS = frozenset({"地址", "收货地址", "address"})
"""Nouns that, after "OD… 的", name a value the order has, not the order ("OD… 的订单")."""

_SAYS_WHICH = frozenset(
    {"是", "我是说", "我说的是", "应该是", "it's", "it is", "i meant", "i mean"}
)
"""Words that say which one was meant: "是 OD… 的地址" names the order whose address it is.
After "改成" or "换成" a value's owner ("改成 OD… 的地址") names the value, not the order."""

_STRONG_MEANT = frozenset(
    {"我是说", "我说的是", "应该是", "换成", "改成", "改为", "改到"}
    | {"i meant", "i mean", "should be", "make it"}
)
"""Words that correct alone ("换成 OD…"); "是 OD…" or "it's OD…" alone do not."""

_END = r"(?![a-z])"
"""A word ends here: "no" is not the start of "not" (Chinese words meet without a space)."""

_FRAME = re.compile(
    rf"""
    ^{_SEP}
    (?P<named_first>{_NOUN}{_END}{_SEP}(?={_NO}))?
    (?P<no>(?:{_NO}{_END}{_SEP})*)
    (?P<meant>{_MEANT}{_END}{_SEP})?
    (?P<lead>(?:{_LEAD}{_END}{_SEP})*)
    (?:{_OWNER}{_END}{_SEP})?
    (?P<other>{_OTHER}{_END}{_SEP})?
    (?P<noun>的?{_NOUN}{_END}{_SEP})?
    (?P<named_as>(?:是|应该是|is|should\s+be){_END}{_SEP})?
    (?P<adds>(?:{_ADDS}{_END}{_SEP})*)
    (?P<instead>instead{_END}{_SEP})?
    (?P<soft>(?:{_SOFT}{_END}{_SEP})*)
    [?？]*+{_SEP}$
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""What may be left of a follow-up line once the values it names are taken out."""

FOLLOW_UP_CHARS = 60
"""A longer line says more than "and that one?": it is read for an intent of its own."""


def _frame(rest: str) -> re.Match[str] | None:
    """The frame ``rest`` matches, if it is short enough to be a follow-up."""
    return _FRAME.match(rest) if len(rest) <= FOLLOW_UP_CHARS else None


def read_follow_up(rest: str, named: frozenset[str]) -> FollowUp | None:
    """A line read as a follow-up from ``rest`` (the line less the values of ``named``).

    One match of the frame gives both its kind and whether it names a noun.
    """
    frame = _frame(rest)
    kind = _kind(frame, bool(named)) if frame is not None else None
    if frame is None or kind is None:
        return None
    noun = frame.group("noun") or frame.group("named_first")  # "地址写错了，应该是…"
    return FollowUp(kind, named, noun is not None)


def follow_up_kind(rest: str, named: bool) -> FollowUpKind | None:
    """What kind of follow-up a line is, from ``rest`` (the line less the values it names).

    ``named``: the line named a value. A frame that names none must say "another" ("那另
    一个订单呢？"): "那呢？" or "ok" alone asks nothing, and corrects nothing.
    """
    frame = _frame(rest)
    return _kind(frame, named) if frame is not None else None


def _its_value(frame: re.Match[str]) -> bool:
    """Whether the frame names a value of the one named ("OD… 的地址"), not the one itself."""
    noun = frame.group("noun") or ""
    return noun.startswith("的") and _words(noun[1:]) in _VALUE_NOUNS


def _kind(frame: re.Match[str], named: bool) -> FollowUpKind | None:
    """``follow_up_kind`` of a line whose ``rest`` matched the frame."""
    no = _words(frame.group("no"))
    # "我要取消的是 OD…", "订单号是 OD…" (after its noun) say which was meant too
    meant = _words(frame.group("meant") or frame.group("named_as") or "")
    adds = frame.group("lead") or frame.group("other") or frame.group("adds")
    instead = frame.group("instead") is not None  # "OD… instead": in place of the last one
    if no or meant or instead:  # a correction, or nothing
        # "改成这个地址，…": 这个 before a noun names it, it asks nothing more
        owns = _words(frame.group("lead") or "") in _OWNING_LEADS and frame.group("noun")
        if owns and not (frame.group("other") or frame.group("adds")):
            adds = None
        if _its_value(frame) and meant not in _SAYS_WHICH:
            return None  # "改成 OD… 的地址": that order's address is the value, not the order
        said_no = any(word not in _WAITS for word in no.split())
        wanted = meant.startswith(("我要", "我想", "要", "想"))  # "我要取消的是 OD…"
        strong = meant in _STRONG_MEANT or wanted or instead or (meant and frame.group("soft"))
        takes_back = said_no or (no and meant) or strong
        return "correction" if named and not adds and takes_back else None
    if frame.group("other") is not None:
        return "follow_up"
    if not named or _its_value(frame):
        return None  # "OD… 的地址呢" asks of that order's address, not the last request
    return "follow_up" if adds else "bare"


def _words(said: str) -> str:
    """Frame words as one lower-case line, single-spaced, without punctuation."""
    return " ".join(re.sub(_BREAK + "+", " ", said.lower()).split())
