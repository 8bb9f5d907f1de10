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

_HOLDS_BACK_ZH = (
    "取消",
    "撤销",
    "不要",
    "不用",
    "不想",
    "不需要",
    "别",
    "先不",
    "暂时不",
    "再说",
    "考虑",
    "想想",
    "放一放",
    "等等",
    "等一下",
    "缓一缓",
    "算了",
    # or changes it: "不对，地址改成公司", "换新，还是修一下吧"
    "不对",
    "不是",
    "错了",
    "改成",
    "改为",
    "换成",
    "还是",
    "而是",
)
_HOLDS_BACK_EN = re.compile(
    r"(?i)\b(?:cancel\w*|stop|no|not|don'?t|never|hold|later|wait|think|pause|rather"
    r"|wrong|instead|actually|meant|sorry|change)\b"
)
_CANCEL_WORDS = re.compile(r"(?i)取消|撤销|\bcancel\w*")
"""Hold a request back, unless the request is itself a cancellation ("确认取消订单…吗？")."""
_ANOTHER_ZH = ("另", "其他", "其它", "别的", "也", "还有一", "再来一", "多一")
_ANOTHER_EN = re.compile(
    r"(?i)\b(?:another|other|different|too|also|second|both|as well|one more|more)\b"
)


def holds_back(line: str, prompt: str) -> bool:
    """Whether ``line`` cancels, refuses, puts off or changes a request (see ``prompt``).

    The prompt's own cancel words aside: a cancellation's words are its request ("帮我取消
    OD2611250001" at "确认取消订单 OD2611250001…吗？" asks for it again), where "取消换新" at
    the exchange's prompt holds the exchange back.
    """
    said = _CANCEL_WORDS.sub(" ", line) if _CANCEL_WORDS.search(prompt) else line
    return any(word in said for word in _HOLDS_BACK_ZH) or bool(_HOLDS_BACK_EN.search(said))


def asks_for_another(line: str) -> bool:
    """Whether ``line`` asks for one more ("另一台也坏了", "my other order too")."""
    return any(word in line for word in _ANOTHER_ZH) or bool(_ANOTHER_EN.search(line))
