"""Words that keep a line from asking again for the request a confirmation waits for.

``Runtime._repeats_request`` answers a line that asks again for the waiting request
("换新要多久能到？" at "…创建换新单，可以吗？") with that confirmation, instead of a second
run that asks it again. Taking a line for a repeat that is not one would swallow a
request, so these words send a line back to what it did before (a run of its own): one
that holds the request back or changes it ("取消换新", "换新我再考虑一下", "不对，地址改成
公司", "not now") or asks for one more ("另一台打印机也要换新", "my other order too").
Read only there; the rules and the yes-or-no reading are untouched.
"""

from __future__ import annotations

import re

_CANCEL = re.compile(r"(?i)取消|撤销|\bcancel\w*|\bstop\b")
_REFUSE = re.compile(r"(?i)不要|不用|不想|不需要|别|算了|\b(?:no|not|don'?t|never)\b")
"""A no, or the reason of a cancellation ("这个不想要了，帮我取消吧", "I don't need it")."""
_DEFER = re.compile(
    r"(?i)先不|暂时不|再说|考虑|想想|放一放|等等|等一下|缓一缓"
    r"|\b(?:hold|later|wait|think|pause)\b"
)
_CHANGE = re.compile(
    r"(?i)不对|不是|错了|改成|改为|换成|还是|而是"
    r"|\b(?:wrong|instead|actually|meant|sorry|change|rather)\b"
)
_REASONS = re.compile(
    r"(?i)不想要了?|不要了|不需要了|用不上|用不着"
    r"|\b(?:don'?t|do not|no longer) (?:want|need) (?:it|this|that|them)\b"
)
"""Why a cancellation is asked for ("这个不想要了", "I don't need it anymore"): read at a
cancellation's prompt as its reason, not as a no ("I no longer want to cancel" is one)."""
_ANOTHER_ZH = ("另", "其他", "其它", "别的", "也", "一起", "还有一", "再来一", "多一")
_ANOTHER_EN = re.compile(
    r"(?i)\b(?:another|other|different|too|also|second|both|as well|one more|more)\b"
)


def holds_back(line: str, prompt: str) -> bool:
    """Whether ``line`` cancels, refuses, puts off or changes the request ``prompt`` asks.

    Words the prompt says itself are its action, not a change of it ("change the address"
    at "Change the delivery address of …?"; whole words: "change" is not in "exchange").
    At a cancellation ("确认取消订单…吗？") a cancel word is the request, and its reason
    is none of these ("这个不想要了，帮我取消吧" asks for it again); a no ("取消订单算了",
    "I no longer want to cancel"), a deferral or a change still holds it back.
    Elsewhere any of them does: "取消换新" at the exchange's prompt.
    """
    cancels = _CANCEL.search(prompt) is not None
    if cancels:
        line = _REASONS.sub(" ", line)
    kinds = (_REFUSE, _DEFER, _CHANGE) if cancels else (_CANCEL, _REFUSE, _DEFER, _CHANGE)
    return any(not _says(prompt, found.group(0)) for kind in kinds for found in kind.finditer(line))


def _says(prompt: str, word: str) -> bool:
    """Whether ``prompt`` says ``word`` itself (a whole word, for a Latin one)."""
    if word.isascii():
        return re.search(rf"(?i)\b{re.escape(word)}\b", prompt) is not None
    return word in prompt


def asks_for_another(line: str) -> bool:
    """Whether ``line`` asks for one more ("另一台也坏了", "my other order too")."""
    return any(word in line for word in _ANOTHER_ZH) or bool(_ANOTHER_EN.search(line))


_AND = re.compile(
    r"(?i)\band\b|和|以及|还要|还有|顺便|同样|两个都|两单都|都要|再(?:退|取消|撤|换|改|修|办)"
)
"""Words that join a second thing: not 都 or 再 alone ("我都搞混了", "我再看了下")."""


def adds_a_request(line: str) -> bool:
    """Whether ``line`` asks for one more, or joins a second thing.

    "…, and refund OD…", "两个都不要了", "顺便退款 OD…": said beside a switch word, the
    line adds a request, and replaces none (``Runtime._replaces_value``).
    """
    return asks_for_another(line) or _AND.search(line) is not None
