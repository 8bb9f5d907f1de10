"""Answers read by code: yes or no to a confirmation, or a request taken back.

A line answering a question about a request may take the request back ("算了", "never
mind"): ``withdraws``.

A confirmation moves money and goods, so only a plain yes or no counts: a yes or no word
or phrase, alone or followed by filler or by more of the same, in Chinese or English.
Anything else is neither, and the confirmation is asked again (the chat) or left waiting
(a new message of the session starts a run of its own). Code decides this, not a model.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterator

from corral.intent.questions import reads_as_question
from corral.intent.repeats import holds_back
from corral.textfold import fold_word_characters

YES = {
    "是",
    "是的",
    "好",
    "好的",
    "确认",
    "确定",
    "同意",
    "可以",
    "行",
    "嗯",
    "对",
    "对的",
    "没问题",
    "没错",
    "嗯嗯",
    "可以的",
    "好滴",
    "好哒",
    "y",
    "yes",
    "yep",
    "yeah",
    "ok",
    "okay",
    "sure",
    "confirm",
    "confirmed",
    "go ahead",
    "no problem",
}
NO = {
    "不",
    "不要",
    "不用",
    "先不要",
    "先不用",
    "不行",
    "不是",
    "否",
    "算了",
    "别",
    "不确认",
    "别确认",
    "不同意",
    "don't confirm",
    "do not confirm",
    "n",
    "no",
    "nope",
}
"""Not "取消"/"cancel": said to "cancel order X?", either could mean yes as well as no
(to any other prompt it calls the prompt off: ``_calls_off``).
Nor a deferral ("先别确认", "not now", "don't confirm yet"): asked again, not declined."""
_BREAKS = re.compile(r"[\s,，、。．｡.!！?？;；~～—–―]+")
"""What parts the words of a line: spaces and punctuation, dashes too ("不用了——物流呢")."""
_PARTICLES = "了吧啊呀呢哈嘛哦啦"
FILLER = {
    "please",
    "pls",
    "plz",
    "thanks",
    "thank you",
    "thx",
    "at all",
    "谢谢",
    "谢谢你",
    "谢啦",
    "麻烦了",
    "辛苦了",
}
"""Words after a yes or a no that leave it one: "yes please", "no thanks"."""
URGED = {
    "换吧",
    "办吧",
    "退吧",
    "改吧",
    "发吧",
    "做吧",
    "来吧",
    "弄吧",
    "确认吧",
    "提交吧",
    "继续吧",
    "就这样吧",
}
"""After a yes, words that urge it on ("好的，换吧"). Only these: "好，算了吧" ("OK, forget
it"), "好的，改天吧" ("some other day") and "好的，不要吧" are no yes, nor "好吧，取消吧",
which said to "refund 699?" may cancel the refund (to "取消订单…吗？" it says the prompt's
action again: ``_echoes``)."""
MAX_ANSWER_CHARS = 200
"""The longest line read as a yes or no (a longer one is a message of its own)."""
NOT_ANSWERS = {"对了", "对吧", "是吧", "是吗", "是嘛", "对吗", "好吗", "行吗", "可以吗"}
"""First words that read like a yes but open something else or ask: 对了 is "by the
way", 对吧 and 是吧 "right?", 是嘛 "really?" (a question, with or without its question
mark)."""


def _words(line: str) -> str:
    """The line's words, lower case, one space apart.

    Letters, digits and apostrophes as ASCII ones, as intent rules read them: a phone's
    ``ＯＫ``, ``Ｙｅｓ．`` and ``don’t``. Emoji are left out (``是的 😊``, ``好的🙏``):
    they add a mood, not an answer (a line of emoji alone is none).
    """
    folded = fold_word_characters(line).strip().lower()
    return _BREAKS.sub(" ", "".join(ch for ch in folded if not _emoji(ch))).strip()


def _emoji(ch: str) -> bool:
    """A pictograph, or what joins and styles them (ZWJ, variation selectors)."""
    return unicodedata.category(ch) in ("So", "Sk") or ch in "\u200d\ufe0e\ufe0f"


_RUN_INTO = sorted((w for w in YES | NO if not w.isascii()), key=len, reverse=True)
"""The Chinese yes and no words, longest first: what a run-together line may start with."""
_PHRASES = sorted((p for p in YES | NO if " " in p), key=len, reverse=True)
"""The yes and no words of more than one word, longest first: "no problem" before "no"."""


def _word(word: str) -> bool | None:
    """A yes or no word, tried with the sentence-final particles left out one at a time.

    Chinese is written without spaces: a yes or no word run into its thanks
    (``好的谢谢``, ``不用谢谢``) is read as the two words. A word with laughter in
    it (哈哈) is neither: "嗯嗯哈哈" is as likely to brush the question off as to say yes
    (one 哈 is a particle: "好哈" says yes).
    """
    whole = word
    if "哈哈" in word:
        return None
    while word:
        if word in YES:
            # "没错吧", "对的了吧": a yes that says a thing is so, then 吧, asks ("it is
            # right, isn't it?"); "好吧", "行吧" go ahead
            return None if word in _ASSERTIONS and "吧" in whole[len(word) :] else True
        if word in NO:
            return False
        if len(word) < 2 or word[-1] not in _PARTICLES:
            break
        word = word[:-1]
    if whole.isascii():
        return None
    for lead in _RUN_INTO:
        if whole.startswith(lead) and whole[len(lead) :] in FILLER:
            return lead in YES
    said = next((s for s in _SAID_RIGHT if whole.startswith(s) and len(whole) > len(s)), "")
    if said and _word(whole[len(said) :]) is True:  # "地址没错", "金额对的"
        return True
    return True if _yes_run(whole) else None


_ASSERTIONS = frozenset({"是", "是的", "对", "对的", "没错", "没问题", "可以的"})
"""The yes words that say a thing is so, rather than let it go ahead: with 吧 after them
they ask whether it is ("订单号没错吧" carried out a cancellation)."""


def _asks_if_so(word: str) -> bool:
    """Whether a word asks whether a thing is so: "没错吧", "对吧", "订单号没错了吧"."""
    if word in NOT_ANSWERS - {"对了"}:
        return True
    core = word.rstrip(_PARTICLES)
    if "吧" not in word[len(core) :]:
        return False
    said = next((s for s in _SAID_RIGHT if core.startswith(s) and len(core) > len(s)), "")
    return core[len(said) :] in _ASSERTIONS


_ALONE_PARTICLES = re.compile(f" (?=[{_PARTICLES}]+(?: |$))")
"""A space before particles that stand alone ("没错 吧"): they end the word before them."""


_SAID_RIGHT = ("收货地址", "地址", "订单号", "单号", "金额", "信息", "都")
"""What a yes may say is right, run into it: "地址没错，确认" to "把地址改成…吗？" (a review of
4cf5000: it was a request of its own, which asked for the address again)."""


_RUN_TOGETHER = sorted(
    ("嗯", "嗯嗯", "好", "好的", "确认", "确定", "可以", "可以的", "同意", "没问题"),
    key=len,
    reverse=True,
)
"""The yes words that read as one when run together ("嗯确认", "好的好的"). Not 是, 对 or
行: "嗯是吧" and "嗯对吧" ask ("right?"), "好是好" and "对是对" concede ("fine, but…"),
"行行好" begs, and "好的对了" goes on ("ok, by the way")."""


def _yes_run(word: str) -> bool:
    """Whether a Chinese word is yes words run together: "嗯确认", "嗯嗯好的", "好的好的".

    Every part one of ``_RUN_TOGETHER`` (one sentence-final particle may end it): a no
    among them ("好不要") or any other word ("好贵") makes it no answer, and so does 吧
    after a word that says a thing is so ("嗯没问题吧" asks: ``_ASSERTIONS``).
    """
    lead = ""
    while word:
        after = lead
        lead = next((w for w in _RUN_TOGETHER if word.startswith(w)), "")
        if not lead:
            asks = word == "吧" and after in _ASSERTIONS
            return len(word) == 1 and word in _PARTICLES and not asks
        word = word[len(lead) :]
    return True


_CONFIRMING = ("确认", "同意", "confirm", "approve")
"""Words that approve what follows them: "确认退款", "confirm the refund"."""
_NAMED_ZH = {
    "退款",
    "退货",
    "换新",
    "换货",
    "修改",
    "改地址",
    "提交",
    "发送",
    "发布",
    "执行",
    "办理",
}
_NAMED_EN = {"it", "this", "that", "refund", "return", "exchange", "change", "post", "order"}
"""What a confirm word may name, and nothing else: "确认退50", "确认错了", "approve later",
"confirm the refund amount" name something else, or say no, or not now."""


def _confirms(words: list[str]) -> bool:
    """Whether the line approves by naming what it approves: "确认退款", "confirm the refund".

    The confirm word, then one of a few action words (and "the", "please") and nothing
    else: an allow-list, since a blocklist of what does not mean yes is never complete.
    "确认取消" is none: said to "refund 699?", it may cancel the refund (as ``NO`` says).
    """
    first = words[0]
    lead = next((c for c in _CONFIRMING if first.startswith(c)), None)
    if lead is None:
        return False
    if lead.isascii():  # "confirm the refund", "approve it please"
        named = [w for w in words[1:] if w not in ("the", "please")]
        return first == lead and len(named) == 1 and named[0] in _NAMED_EN
    return len(words) == 1 and first[len(lead) :] in _NAMED_ZH  # "确认退款"


def yes_or_no(line: str, prompt: str | None = None) -> bool | None:
    """The line as an answer to a confirmation: True, False, or None when it is neither.

    A yes or no word or phrase (``go ahead``, ``no problem``, ``不用了``), alone or followed
    only by filler (``yes please``, ``no thanks``) or by more of the same (``是的，确认``,
    ``好的，换吧``). Anything else after it (``好，我再考虑一下``, ``no worries``) makes the
    line no answer: a confirmation moves money and goods, so it is asked again.

    ``prompt``: the confirmation's own words. A line that says its action again is a yes
    to it (``_echoes``): "确认取消" to "确认取消订单 OD…吗？", "yes, cancel it" to "Cancel
    order OD…?". Without them, "确认取消" may cancel what is asked ("refund 699?").
    """
    if _asks(line):  # "确定？", "ok?", "确定？！": a question, not an answer
        return None
    if len(line) > MAX_ANSWER_CHARS:  # a yes is short: 15 000 characters of 好的 is no answer
        return None
    answer = _plain_yes_or_no(line)
    if answer is None and prompt is not None:
        words = _words(line).split()
        if _echoes(words, prompt):
            return True
        if _calls_off(words, prompt):
            return False
    return answer


_CALL_OFF = frozenset({"取消", "撤销", "cancel", "stop"})
"""Words that call off what a prompt asks, unless it asks to cancel (``_calls_off``)."""


def _calls_off(words: list[str], prompt: str) -> bool:
    """Whether the words call off a prompt that is no cancellation: a no to it.

    "cancel", "取消吧", "no, cancel it" to "Shall I refund 699 CNY?" or "确认为这单退款
    699 元吗？": the refund is called off (it was read as a new request to cancel the
    order, refused, while the refund still waited). To "确认取消订单…吗？" the same word
    may say yes as well as no, and is no answer; so is it after a yes word ("好吧，取消吧").
    """
    rest = list(words)
    while rest and _word(rest[0]) is False:  # "no, cancel it"
        rest = rest[1:]
    if not rest:
        return False
    asked = _words(prompt)
    if any(word in asked for word in _CALL_OFF):
        return False
    first = rest[0].rstrip(_SAID_PARTICLES)
    named = next((w for w in _CALL_OFF if first.startswith(w) and not w.isascii()), "")
    if named and first != named:  # "取消退款" to a refund's prompt: the action it asks
        action = first[len(named) :]
        return len(rest) == 1 and action in _NAMED_ZH and action in asked.replace(" ", "")
    if first not in _CALL_OFF:
        return False
    # "cancel that", "cancel the refund" (the prompt's own verb); not "cancel the order",
    # a request of its own to a refund's prompt
    return all(word in _CALLED_OFF or (word in _VERBS_EN and word in asked) for word in rest[1:])


_CALLED_OFF = frozenset({"it", "that", "this", "the", "please", "now"})
"""What may follow a word of ``_CALL_OFF`` in a line that calls a prompt off."""


def _asks(line: str) -> bool:
    """Whether the line asks: a question mark anywhere, not only last ("确定？！", "ok?😅")."""
    return "?" in line or "？" in line


def _plain_yes_or_no(line: str) -> bool | None:
    """``yes_or_no`` of a line short enough and no question, without the prompt's words."""
    text = _ALONE_PARTICLES.sub("", _words(line))  # "没错 吧" is "没错吧"
    if not text:
        return None
    asking = [word for word in text.split() if _asks_if_so(word)]
    if asking:  # "没错吧": no yes, unless a confirm word says it ("没错吧，确认")
        others = " ".join(word for word in text.split() if word not in asking)
        return True if others and explicit_yes(others) else None
    lead = next((p for p in _PHRASES if text == p or text.startswith(p + " ")), None)
    words = text.split()
    if lead is not None:
        answer: bool | None = lead in YES
        rest = text[len(lead) :].split()
    elif words[0] in NOT_ANSWERS:
        return None
    elif _confirms(words):
        return True
    else:
        answer, rest = _word(words[0]), words[1:]
    after = " ".join(rest)
    if answer is None or not rest or after in FILLER or _word(after) is answer:
        return answer
    if answer and _confirms(rest):  # "好的，确认退款", "ok, confirm the refund"
        return True
    for word in rest:
        same = word in FILLER or _word(word) is answer
        urged = answer and word in URGED  # 换吧, 办吧: go on (not 算了吧, 改天吧)
        if not (same or urged):
            return None
    return answer


_OBJECTS_EN = frozenset({"it", "the", "order", "please", "now"})
"""What may follow the prompt's verb in an English line that says it again ("cancel that"
is as often "scratch that")."""
_VERBS_EN = frozenset({"cancel", "refund", "change", "update", "exchange", "replace", "post"})
"""The verbs an English prompt may open with, or ask with "shall I": the actions a line
may say again. Not any first word: "Order OD… is completed. Shall I refund…?" opens with
"order"."""
_ACTIONS_ZH = frozenset({*_NAMED_ZH, "取消", "取消订单", "撤销", "改", "换"})
"""What may follow 确认 in a Chinese line that says the prompt's action again: whole words,
not fragments ("确认取", "确认为")."""
_SAID_PARTICLES = "吧了啊呀"


def may_say_the_action(line: str) -> bool:
    """Whether ``line`` could say a prompt's action again (``_echoes``): cheap, no prompt.

    The session reads a waiting run's prompt only for such a line: a 确认/确定 word, an
    action word, an English action verb, or a negation before a verb (``declines_by_verb``).
    """
    if _MAY_DECLINE.search(line):
        return True
    words = _words(line).split()
    return any(
        word.startswith(("确认", "确定"))
        or word.rstrip(_SAID_PARTICLES) in _ACTIONS_ZH
        or word in _VERBS_EN
        for word in words
    )


def _echoes(words: list[str], prompt: str) -> bool:
    """Whether the words (yes words first, or none) say the prompt's action again.

    "确认取消", "好的，确认取消" or "好吧，取消吧" to "确认取消订单 OD…吗？": 确认 or 确定 and
    an action word that follows 确认 in the prompt, or (after a yes word) that action word
    alone. "yes, cancel it" to "Cancel order OD…?" or "Shall I cancel …?": the prompt's
    verb, one of a few, after a yes or followed by "it", "the order"; not the verb alone,
    which may take the request back (``NO``).
    """
    if not words or words[0] in NOT_ANSWERS:
        return False
    rest = list(words)
    while rest and rest[0] not in NOT_ANSWERS and _word(rest[0]) is True:
        rest = rest[1:]
    if not rest:
        return False
    after_yes = len(rest) < len(words)
    first = rest[0]
    if not first.isascii():
        lead = next((c for c in ("确认", "确定") if first.startswith(c)), "")
        if not lead and not after_yes:  # "取消" alone may take the request back (``NO``)
            return False
        action = first[len(lead) :].rstrip(_SAID_PARTICLES)
        asked = _words(prompt).replace(" ", "")
        return len(rest) == 1 and action in _ACTIONS_ZH and f"确认{action}" in asked
    if first not in _VERBS_EN or (len(rest) == 1 and not after_yes):  # "cancel" alone
        return False
    asked = _words(prompt)
    said_again = asked.startswith(f"{first} ") or f"shall i {first} " in asked
    return said_again and all(word in _OBJECTS_EN for word in rest[1:])


_EXPLICIT = ("确认", "确定", "同意", "confirm", "approve", "go ahead")
"""Words that approve in so many words: what ``explicit_yes`` looks for."""


def explicit_yes(line: str) -> bool:
    """Whether the line is a yes (``yes_or_no``) that says so in so many words.

    "确认", "确定，退吧", "是的，确认", "confirm the refund", "yes, go ahead": a yes to a
    prompt the person was reminded of below another reply (``still_to_confirm``). There,
    "好的", "哦" or "ok thanks" may as well acknowledge that reply, or take up what it
    suggested ("直接取消订单就行"): they approve nothing there, nor does a line that says
    an action again ("好的，确认取消", "ok, cancel it"), which may take up that suggestion.
    """
    if yes_or_no(line) is not True:
        return False
    text = _words(line)
    return any(word.startswith(_EXPLICIT) for word in text.split()) or "go ahead" in text


WITHDRAWN = (
    "算了",
    "不用了",
    "不要了",
    "不需要了",
    "不改了",
    "不用改",
    "不要改",
    "别改",
    "不换了",
    "不退了",
    "不修了",
    "不查了",
    "不办了",
    "不取消了",
    "never mind",
    "nevermind",
    "forget it",
    "forget about it",
    "changed my mind",
    "i changed my mind",
    "i've changed my mind",
    "i have changed my mind",
    "改主意了",
    "我改主意了",
    "don't bother",
    "no thanks",
    "no thank you",
)
"""Phrases that take the request back, whatever follows them ("never mind, I'll keep it")."""
WITHDRAWN_ALONE = ("取消", "cancel", "stop", "不用", "不要", "no")
"""Words that take it back only alone or with filler: "取消 OD123" answers "which order?"."""
_KEPT = ("还要", "不取消", "不退", "不改", "keep", "don't cancel", "do not cancel")
"""After a withdrawal phrase, words that say what stays as it is: the line takes the
request back even when it names the order ("never mind, I'll keep OD2611250001")."""
_ANSWERS_AFTER = ("还是", "改成", "改到", "换成", "寄到", "送到", "instead", "rather", "actually")
"""After a withdrawal phrase, words that give the answer after all ("算了，还是寄到公司")."""
_WITHDRAW_LEADS = sorted(WITHDRAWN + WITHDRAWN_ALONE, key=len, reverse=True)
OPENERS = (
    "那就",
    "那",
    "还是",
    "先",
    "暂时",
    "嗯",
    "哎",
    "唉",
    "呃",
    "额",
    "哦",
    "噢",
    "好吧",
    "好的",
    "好",
    "actually",
    "oh",
    "oh well",
    "hmm",
    "um",
    "uh",
    "ah",
    "well",
    "ok",
    "okay",
    "no",
    "wait",
)
"""Words that may open a line that takes the request back: "那就算了", "还是算了吧", "先不退了",
"嗯，算了", "actually never mind", "ok, forget it". Read past only where a withdrawal
follows them (``_past_openers``): "还是修一下吧" and "actually, repair it" put another
request in place of this one (``switches``), and "no" alone is a no of its own."""
_OPENERS = tuple(sorted(OPENERS, key=len, reverse=True))


_YES_OPENERS = frozenset({"好的", "好", "好吧", "嗯", "ok", "okay"})
_CHANGE_LEADS = ("不改了", "不用改", "不要改", "别改")
"""After a yes word, these say no more than "nothing to change": "好的，不用改了" said to
"refund 459?" may as well be a go-ahead. Asked again (a review of a0c018b)."""


def _past_openers(text: str, *, prompt: bool = False) -> str:
    """``text`` from its withdrawal on, past the ``OPENERS`` before it; else ``text``.

    A bare "no" opens one ("oh no, never mind") as well as it is one ("no thanks").
    ``prompt``: said to a confirmation, where after a yes word a line of ``_CHANGE_LEADS``
    is none; asked for a value ("what is the new address?") it takes the request back.
    """
    for rest, after_yes in itertools.islice(_openings(text), 1, None):
        lead = next((p for p in _WITHDRAW_LEADS if _opens(rest, p)), None)
        if lead is None or (lead in WITHDRAWN_ALONE and any(_opens(rest, w) for w in _OPENERS)):
            continue
        return text if prompt and after_yes and lead in _CHANGE_LEADS else rest
    return text


def _openings(text: str, openers: tuple[str, ...] = _OPENERS) -> Iterator[tuple[str, bool]]:
    """``text``, then what follows each word of ``openers`` it opens with, one at a time.

    With each, whether a yes word was among the openers read past. What ``_past_openers``
    and ``defers`` both walk: "嗯，先不退了" is "嗯，先不退了", "先不退了", "不退了".
    """
    after_yes = False
    yield text, after_yes
    while (opener := next((w for w in openers if _opens(text, w)), None)) is not None:
        after_yes = after_yes or opener in _YES_OPENERS
        text = text[len(opener) :].strip()
        yield text, after_yes


_CALLING_OFF = re.compile(r"取消|撤销|撤回|\b(?:cancel|call\s+off|withdraw)\b", re.IGNORECASE)
_CALLED_OFF_ZH = re.compile(
    r"(?:帮我|请|麻烦)?把?(?P<before>[^取撤]{1,20}?)(?:给我)?(?:取消|撤销|撤回)掉?[了吧啊呀]*"
    r"|(?:确认|确定)?(?:帮我|请|麻烦)?(?:取消|撤销|撤回)掉?(?P<after>[^取撤]{1,20}?)[了吧啊呀]*"
)
"""A line that is only a call-off and what it calls off: "改地址的申请取消掉吧", "取消换新"."""
_CALLED_OFF_EN = re.compile(
    r"(?:please\s+)?(?:cancel|call\s+off|withdraw)\s+(?P<after>[a-z0-9' ]{1,40}?)(?:\s+please)?",
    re.IGNORECASE,
)
_NOT_ONLY_CALLED_OFF = re.compile(
    r"[不没别未吗呢么嘛还再]|能|可以|会|后|的话|之前|以前|上次|上一|早先"
    r"|\b(?:not|no|never|won't|can|could|will|would|if|when|later|and|then|but|or|too"
    r"|previous|earlier|old|other)\b|n't\b",
    re.IGNORECASE,
)
"""What makes a call-off line more than one (``called_off``): a negation, a question, a
condition or a time ("取消退款的话多久到账", "can I cancel the refund later?"), a second
thing ("and", "还", "取消订单再退款"), or another one than the waiting request ("取消之前
那个退款", "cancel my previous refund"; an id the waiting run does not hold is the
caller's to refuse)."""
CALLED_OFF_CHARS = 40
"""The longest line read as a call-off by name: "改地址的申请取消掉吧" is short."""


_ANOTHER_ONE = re.compile(
    r"上一|之前|以前|上次|早先|另|其他|其它|别的|\b(?:previous|earlier|old|other|another)\b",
    re.IGNORECASE,
)


_REFUSAL_HEAD = re.compile(
    r"^\W*(?:(?:不是这个|不是这单|不是|不对|不行|不)\s*[,，、。.!！;；]"
    r"|(?:(?:no|nope)\s*[,，.!;]|no\s*,?\s*wait\b|actually\s*,?\s*no\b"
    r"|not\s+(?:that|this)\s+one\b)\W*)\s*",
    re.IGNORECASE,
)
"""A line that opens with a bare no: "不，", "不对，", "no,", "no wait", "not that one".

Not "no thanks" nor "no problem": "no thanks, please proceed" takes nothing back."""


def after_a_refusal(line: str) -> str | None:
    """What a line says after the no it opens with, or ``None`` (no such no, or nothing after).

    "不，退50元就行", "no wait, refund 50 yuan instead", "not that one, refund OD…",
    "actually no, cancel the other one": said at a confirmation, the no is to what it
    asked, and the rest asks something else. "不客气", "nothing else" open with no no.
    """
    found = _REFUSAL_HEAD.match(line)
    if found is None:
        return None
    rest = line[found.end() :].strip()
    return rest or None


_ANOTHER_OF_THEM = re.compile(
    r"(?:是|要|取消|退|改)\s*(?:另一|另外一)\s*(?:个|笔|单)|\bthe\s+other\s+one\b",
    re.IGNORECASE,
)


def names_another_one(text: str) -> bool:
    """Whether ``text`` asks for "the other one" ("是另一个", "取消另外一个")."""
    return _ANOTHER_OF_THEM.search(text) is not None


_CLAUSE_END = re.compile(r"[,，、。.!！?？;；]")


def first_clause(text: str) -> str:
    """``text`` up to its first comma or stop: "等一下" of "等一下，我问问"."""
    return _CLAUSE_END.split(text, maxsplit=1)[0].strip()


def calls_off_another(line: str) -> bool:
    """Whether ``line`` calls off one it says is another, or an earlier one.

    "取消上一单的退款", "取消之前那个的退款申请", "cancel my previous refund": not the
    request that waits now.
    """
    text = fold_word_characters(line)
    return _CALLING_OFF.search(text) is not None and _ANOTHER_ONE.search(text) is not None


def says_calling_off(text: str) -> bool:
    """Whether ``text`` has a word that calls something off ("确认取消订单…吗？")."""
    return _CALLING_OFF.search(fold_word_characters(text)) is not None


def called_off(line: str) -> str | None:
    """What the line calls off, when it only calls something off; else ``None``.

    "改地址的申请取消掉吧" gives "改地址的申请", "cancel the address change" gives "the
    address change": the caller reads it with the waiting request's own rule. One clause,
    short, the call-off word at its start or its end, and nothing that makes it a
    question, a negation, a condition or a second request: "确认退款，不撤回", "退款别给我
    取消", "取消退款的话多久到账？" and "can I cancel the refund later?" call nothing off
    (a first version read any line with a call-off word in it, and declined yeses).
    """
    text = fold_word_characters(line).strip().rstrip("。.!！~～ ")
    if not text or len(text) > CALLED_OFF_CHARS or _asks(text):
        return None
    if re.search(r"[,，、;；:：\n—–―]", text):
        return None
    found = _CALLED_OFF_ZH.fullmatch(text) or _CALLED_OFF_EN.fullmatch(text)
    if found is None:
        return None
    named = (found.groupdict().get("before") or found.group("after") or "").strip()
    if not named or _NOT_ONLY_CALLED_OFF.search(text) or _CALLING_OFF.search(named):
        return None
    return named


def withdraws(line: str) -> bool:
    """Whether the line, the answer to a question about a request, takes the request back.

    It starts with a phrase of ``WITHDRAWN`` and says nothing with a digit after it (an
    address or an order id would be an answer: "算了，还是寄到漕溪北路100号"), or it is
    a word of ``WITHDRAWN_ALONE`` with nothing but filler or more of the same. Read only
    when the answer gave the question no value: a "no" that answers a yes-or-no question
    is its value.
    """
    text = _past_openers(_words(line))
    lead = next((p for p in _WITHDRAW_LEADS if _opens(text, p)), None)
    if lead is None:
        return False
    rest = text[len(lead) :].strip()
    if lead in WITHDRAWN:  # unless it goes on to answer: a number, or "还是...", "instead"
        if any(m in rest for m in _ANSWERS_AFTER):
            return False
        kept = any(w in rest for w in (*WITHDRAWN, *_KEPT))  # "算了，OD123 我还要，不取消了"
        return kept or not any(c.isdigit() for c in rest)
    return all(word in FILLER or withdraws(word) for word in rest.split())


def confirmation_answer(line: str, prompt: str | None = None) -> bool | None:
    """The line said to a confirmation: a yes or no (``yes_or_no``), or a withdrawal.

    "算了不退了", "never mind": the request taken back is a no to the step that carries
    it out. Read as no answer, it was a new message: the customer was told "I did not
    understand", and the step still waited for a yes. Only a line that does nothing but
    take it back: a phrase of ``WITHDRAWN``, then filler, more of them, or what stays
    as it is ("I'll keep it"). Anything else after it may be a yes ("不需要了，取消" said
    to "cancel order OD…?", "算了，换吧", "never mind, go ahead") or a request of its
    own ("算了不退了，帮我查一下物流"): asked again, or a message of its own. A bare
    "cancel" or "取消" said to "cancel order OD…?" may mean either, and is asked again.
    """
    decided = yes_or_no(line, prompt)
    if decided is not None or _asks(line):
        return decided
    text = _past_openers(_words(line), prompt=True)
    lead = next((p for p in _WITHDRAWN_FIRST if _opens(text, p)), None)
    if lead is None and keeps_it(line):
        return False
    if lead is None:
        return False if prompt is not None and declines_by_verb(line, prompt) else None
    rest = text[len(lead) :].split()
    kept = " ".join(rest) in _KEEPING  # "never mind, I'll keep it"
    return False if kept or all(_takes_back(piece) for piece in rest) else None


_VERBS_OF = {
    "换": ("换新", "换货", "更换"),
    "退": ("退款", "退货"),
    "改": ("改成", "改为", "改到", "修改", "改地址"),
    "修": ("维修", "修理", "报修"),
}
"""The verb a person says of a write, and the words of the prompts that ask it. Not 取消:
"别取消" said to "refund 459?" may as well mean "go on, don't call it off"."""
_DECLINING = ("不要", "不想", "不用", "不需要", "别")
"""What says "I don't want" before a verb: "不想换了", "别退", "不用改"."""


def _declining_phrases() -> dict[str, tuple[str, ...]]:
    """Each phrase that declines an action by its verb, and the prompt words it declines.

    A negation and the verb, or the action's own word ("不想换了", "别换", "不要换新了",
    "不用修"); 不 with its 了 only ("不退" says what stays as it is, ``_KEPT``).
    """
    phrases: dict[str, tuple[str, ...]] = {}
    for verb, asked in _VERBS_OF.items():
        for said in {verb, *(word for word in asked if len(word) == 2)}:
            phrases[f"不{said}了"] = asked
            for negation in _DECLINING:
                phrases[f"{negation}{said}"] = asked
                phrases[f"{negation}{said}了"] = asked
    return phrases


_DECLINED_BY_VERB = _declining_phrases()
_DECLINED_FIRST = sorted(_DECLINED_BY_VERB, key=len, reverse=True)
_MAY_ASK = ("吗", "呢", "么", "嘛")
_MAY_DECLINE = re.compile("|".join(map(re.escape, _DECLINED_FIRST)))
"""Any declining phrase: the line's prompt is read for it ("不要报修", "别换")."""
_DECLINE_OPENERS = tuple(sorted((*OPENERS, "我", "等等", "等一下"), key=len, reverse=True))
"""What may open a decline by its verb: "还是不要换了吧", "等等，我不想换了", "嗯，不用换了"."""


def declines_by_verb(line: str, prompt: str) -> bool:
    """Whether the line declines ``prompt``'s action by its verb, and does nothing else.

    "我不想换了", "先别换", "还是不要换了吧", "别退款了" said to a prompt that asks that
    action (an exchange, a refund): a no, as "不换了" and "不退了" were. Before, they were
    answered "I did not understand" while the write still waited. The phrase must name
    what the prompt asks ("不用修" to an exchange's prompt is no answer: it may decline
    another thing to have this one), open the line after ``_DECLINE_OPENERS`` only, and
    be followed by filler or more withdrawals only ("不想换了，谢谢"; not "不要换地址",
    "不想换了，还是退款吧"). Not a question, nor a line that may ask ("不用换了呢", "不想换
    了嘛", as ``switches`` reads them). After a yes word, not a change's ("好的，不用改了"
    may be a go-ahead, as ``_CHANGE_LEADS`` says).
    """
    if _asks(line) or len(line) > MAX_ANSWER_CHARS or _words(line).endswith(_MAY_ASK):
        return False
    for text, after_yes in _openings(_words(line), _DECLINE_OPENERS):
        lead = next((p for p in _DECLINED_FIRST if _opens(text, p)), "")
        actions = _DECLINED_BY_VERB.get(lead, ())
        if not any(action in prompt for action in actions) or (after_yes and "修改" in actions):
            continue
        rest = text[len(lead) :]
        pieces = rest.split()
        if not rest.startswith(" ") and pieces and not _takes_back(pieces[0]):
            continue  # "不要换地址": the phrase begins a longer word
        return all(_takes_back(piece) for piece in pieces)
    return False


_WITHDRAWN_OF = {
    "不取消了": ("取消",),
    "不退了": ("退款", "退货"),
    "不改了": ("改成", "改为", "改到", "修改", "改地址"),
    "不用改": ("改成", "改为", "改到", "修改", "改地址"),
    "不要改": ("改成", "改为", "改到", "修改", "改地址"),
    "别改": ("改成", "改为", "改到", "修改", "改地址"),
    "不换了": ("换新", "换货", "更换"),
    "不修了": ("维修", "修理", "报修"),
}
"""Withdrawals that name their action: they take back only a prompt that asks it ("不取消
了，退款多久到账？" said to a refund's prompt keeps the refund)."""
_WITHDRAWN_ANY = frozenset({"不用了", "不办了", "no thanks", "no thank you", "don't bother"})
"""Withdrawals of whatever was asked (not "不要了", which may be said of the item: "不要
了，退吧"; nor "不查了", which takes back no write)."""
_WITHDRAWN_OR_RESIGNED = frozenset(
    {"算了", "never mind", "nevermind", "forget it", "forget about it"}
)
"""Withdrawals that may as well give in ("算了，换了吧", "never mind, proceed"): they take
nothing back before another line, only before a withdrawal that does ("算了不退了，…")."""
_URGING = (
    *URGED,
    "直接",
    "赶紧",
    "马上",
    "确认",
    "就",
    "听你的",
    "按你说的",
    "照办",
    "just",
    "go ahead",
    "right away",
    "confirm",
    "approve",
    "do it",
    "fine",
    "proceed",
    "carry on",
    "create",
    "please do",
)
"""Words that urge an action on: after a withdrawal, the line asks for one after all."""
_PUTTING_OFF = (
    "先",
    "再决定",
    "再说",
    "再确认",
    "再退",
    "再取消",
    "等下",
    "等一下",
    "明天",
    "稍后",
    "回头",
    "然后",
    "的话",
    "later",
    "decide",
    "for now",
    "first",
    "after",
    "if ",
)
"""Words that put the request off rather than take it back ("算了，先查下物流再决定")."""
_ACTIONS = (
    "取消",
    "退款",
    "退货",
    "换新",
    "换货",
    "维修",
    "改地址",
    "地址",
    "cancel",
    "refund",
    "exchange",
    "replacement",
    "repair",
    "address",
)
"""What a prompt may ask: a line that names it again after a withdrawal asks about it."""
_MONEY = ("钱", "到账", "账户", "money", "account", "paid")
_PAYS = ("退款", "退回", "退货", "取消", "refund", "cancel", "payment")
"""A prompt that pays back, and the words of a question about that money."""


_ON_ONES_OWN = re.compile(
    r"自己(?:来|查|看|找|弄|搞|处理|问|去)"
    r"|(?:[看查]过了|查到了)[了啦啊吧]*+(?:[，,。.!！~～\s]|$)"
    r"|\b(?:myself|ourselves)\b"
)


def on_ones_own(line: str) -> bool:
    """Whether the line says the person does the thing, or did it, themselves.

    "算了，我自己查一下订单号", "不用了，订单状态我看过了", "no thanks, I'll check my order
    status myself": after a withdrawal, such a line asks nothing of the agent, though a
    rule reads a request in its words. Not "我自己的订单" (whose orders), nor "我看过了物流
    没动，帮我查下" (what was seen goes on to ask), nor "already" ("I already paid").
    """
    return _ON_ONES_OWN.search(fold_word_characters(line).lower()) is not None


def withdraws_first(line: str, prompt: str | None = None) -> bool:
    """Whether the line takes ``prompt``'s request back first, then goes on to another thing.

    "不取消了，帮我查下物流", "no thanks, where is my parcel?": a withdrawal of
    ``_WITHDRAWN_ANY`` or ``_WITHDRAWN_OF`` opens it (past the ``OPENERS``, and past
    "算了" or "never mind", which may as well give in: "算了，换了吧"), as a word of its
    own (an English one with a break after it), and more than another withdrawal or
    filler follows (a line that is only a withdrawal is ``confirmation_answer``'s no). One
    that names its action takes back only a prompt that asks it (not checked without
    ``prompt``). Not where the rest may still say yes or answer: a yes word, an urging
    ("不修了，坏了就直接换", "no thanks, go ahead"), what gives the answer after all ("不
    用了，寄到公司", "还是…"), what puts it off ("不用了，先查下物流再决定", "先不用了"),
    or a question about the request itself or its money. Whether the rest is another
    request is the caller's to read (its rules).
    """
    words = _words(line)
    text = _past_openers(words, prompt=True)
    if any(word in words[: len(words) - len(text)] for word in _PUTTING_OFF):
        return False  # "先不用了，…": for now
    lead = next((p for p in _WITHDRAWN_FIRST if _opens(text, p)), None)
    if lead in _WITHDRAWN_OR_RESIGNED:  # "算了不退了，…": the one after it says
        text = text[len(lead) :].strip()
        lead = next((p for p in _WITHDRAWN_FIRST if _opens(text, p)), None)
    if lead is None or not (lead in _WITHDRAWN_ANY or lead in _WITHDRAWN_OF):
        return False
    actions = _WITHDRAWN_OF.get(lead, ())
    if prompt is not None and actions and not any(action in prompt for action in actions):
        return False
    if lead.isascii() and not re.search(
        rf"\b{re.escape(lead)}\s*[,，.。!！;；:：~～…\-—–―]", fold_word_characters(line).lower()
    ):
        return False  # "no thanks cancelling, …": it runs on into what it takes back
    rest = text[len(lead) :]
    if prompt is not None and any(a in prompt and a in rest for a in _ACTIONS):
        return False  # "不用了，取消后多久退款？": a question about the request itself
    if prompt is not None and any(w in rest for w in _MONEY) and any(a in prompt for a in _PAYS):
        return False  # "不用了，钱什么时候到账" to a refund: its money
    pieces = rest.split()
    if not pieces or " ".join(pieces) in _KEEPING or all(map(_takes_back, pieces)):
        return False
    if not rest.startswith(" ") and not _takes_back(pieces[0]):
        return False  # "不用了解…": the phrase begins a longer word
    if any(word in f"{rest} " for word in (*_ANSWERS_AFTER, *_URGING, *_PUTTING_OFF)):
        return False
    return not any(_yes_piece(piece) for piece in pieces) and " ".join(pieces) not in YES


def _yes_piece(piece: str) -> bool:
    """A word of a line that says yes, or urges the action on ("确认取消", "退吧")."""
    bare = piece.rstrip(_PARTICLES) or piece
    # "换了吧", "创建吧" (and every word of ``URGED``): a suggestion, maybe the prompt's
    return piece.endswith("吧") or bare in YES or piece.startswith(_EXPLICIT)


DEFERRALS = frozenset(
    {
        "先别确认",
        "先不确认",
        "先等等",
        "等等",
        "等一下",
        "等下",
        "稍等",
        "稍等一下",
        "我再想想",
        "再想想",
        "我想想",
        "让我想想",
        "我再考虑一下",
        "再考虑一下",
        "我考虑一下",
        "考虑一下",
        "晚点再说",
        "以后再说",
        "回头再说",
        "再说",
        "先不急",
        "不急",
        "先放一放",
        "not yet",
        "not now",
        "not right now",
        "later",
        "maybe later",
        "wait",
        "hold on",
        "hang on",
        "let me think",
        "let me think about it",
        "i'll think about it",
        "i need to think about it",
        "give me a minute",
        "one moment",
        "just a moment",
        "one sec",
    }
)
"""Lines that put a confirmation off, with no yes and no no: "not yet", "我再想想".
Nothing is done and the confirmation waits; the run says so (``defers``)."""


def defers(line: str) -> bool:
    """Whether the line only puts the confirmation off: "not yet", "好，我再考虑一下".

    A deferral, perhaps after a word of ``OPENERS`` and with filler or a particle after
    it, and nothing else ("等等，我说错了，是 OD…" corrects). Read at a confirmation the
    person was just shown: before, "not yet" was a message of its own, which the
    classifier took for a tracking question, and the tracking was looked up.
    """
    if _asks(line) or len(line) > MAX_ANSWER_CHARS:
        return False
    return any(_without_filler(said) in DEFERRALS for said, _ in _openings(_words(line)))


def _without_filler(text: str) -> str:
    """``text`` without the filler words and the particles it ends with ("我再想想吧")."""
    words = text.split()
    while words and words[-1] in FILLER:
        words.pop()
    return " ".join(words).rstrip(_PARTICLES)


SWITCHES = ("算了", "那还是", "不如", "actually", "on second thought", "instead", "rather")
"""Words that open a line putting another request in place of the one asked about: "算了
还是修一下吧", "actually just repair it" (``switches``). Not 还是 alone: "还是坏了" is
"still broken", "还是想问一下…" "I still want to ask"."""


def switches(line: str) -> bool:
    """Whether the line opens by putting something in place of what was asked about.

    "算了还是修一下吧", "no wait, actually just repair it", "repair it instead": said to
    "shall I create the exchange?", the exchange is not wanted. A question ("actually, how
    long does the refund take?") puts nothing in its place. Whether the rest is a request
    of another intent is the caller's to decide (its rules'); a no or a "wait" before the
    switch word, as a word of its own ("不，算了…", "no wait, actually…"), is read past.
    """
    if _asks(line) or line.rstrip().endswith(("吗", "呢", "么", "嘛")):  # a question
        return False
    text = _words(line)
    while True:
        lead = next((w for w in ("no", "不", "wait", "等等", "等一下") if _leads(text, w)), None)
        if lead is None:
            break
        text = text[len(lead) :].strip()
    return any(_opens(text, word) for word in SWITCHES) or text.endswith(" instead")


def _leads(text: str, word: str) -> bool:
    """``text`` starts with ``word`` followed by a break: "不，算了" but not "不如"."""
    return text == word or text.startswith(f"{word} ")


_WITHDRAWN_FIRST = sorted(WITHDRAWN, key=len, reverse=True)
_STAYS = frozenset({"i'll keep it", "i will keep it", "keep it", "留着"})
"""What says the thing stays as it is."""
_KEEPING = _STAYS | {"我还要", "还要"}
"""What may follow a withdrawal at a confirmation and leave it one: what stays as it is."""


_SAYS_NOTHING = tuple(
    sorted(
        (*_DECLINE_OPENERS, "i", "就行", "就好", "就可以", "即可", "就", "要不", "just"),
        key=len,
        reverse=True,
    )
)
"""What says nothing more beside a no: what may open one, "就行" ("用原来的地址就行"), and
"就", "要不" or "just" before it ("就用原来的地址", "要不用原来的地址吧", "just use the old
address": keep the old one)."""


def says_nothing_more(text: str) -> bool:
    """Whether ``text`` is only words that open a line, filler and particles.

    What is left of a line once what it says no to is taken out: "我 了" of "我不想改地址
    了", "please" of "please keep the old address", "不" of "不，用原来的地址就行".
    "别", a number or a place says more.
    """
    for piece in _words(text).split():
        piece = piece.rstrip(_PARTICLES)
        if (
            piece
            and piece.strip("不")  # a word of its own ("不，用原来的地址", "不不，…"); not "不好吧"
            and piece not in FILLER
            and all(rest for rest, _ in _openings(piece, _SAYS_NOTHING))
        ):
            return False
    return True


_KEPT_ALONE = _STAYS | {"我留着"}
"""What says the thing stays as it is, said alone: "keep it" to "refund 459?", "cancel the
order?", "create the exchange?" or "change the address?" is a no to each. Not "我还要"
("I still want it", said of the order or of the exchange asked about)."""


def keeps_it(line: str) -> bool:
    """Whether the line only says the thing stays as it is: "还是留着吧", "no, keep it".

    After the words that may open a withdrawal (a "no" too), with filler or a particle
    after it. Before, "actually keep it" to "refund 459?" was "I did not understand".
    """
    if _asks(line) or len(line) > MAX_ANSWER_CHARS:
        return False
    return any(_without_filler(said) in _KEPT_ALONE for said, _ in _openings(_words(line)))


def _takes_back(piece: str) -> bool:
    """One piece of a line after its withdrawal phrase that leaves it a withdrawal.

    Filler, what stays as it is, or another withdrawal, which may open with a word of
    ``OPENERS`` ("算了，先不退了") and leave out its 了 ("算了，不退"); a particle alone
    ends the phrase before it ("算了吧").
    """
    piece = _past_openers(piece)  # 先不退了 -> 不退了
    while piece and piece[-1] in _PARTICLES and piece not in WITHDRAWN:
        piece = piece[:-1]  # 不退了吧 -> 不退了
    if not piece or piece in FILLER or piece in _KEEPING:
        return True
    return piece in WITHDRAWN or f"{piece}了" in WITHDRAWN


def _opens(text: str, lead: str) -> bool:
    """``text`` starts with ``lead`` as a word (Chinese has no spaces between words)."""
    if not text.startswith(lead):
        return False
    after = text[len(lead) : len(lead) + 1]
    return not after or after == " " or not (lead.isascii() and after.isascii())


_NEGATED = re.compile(r"[不没别未]|\b(?:no|not|never|nope|nothing)\b|n't\b", re.IGNORECASE)
_COURTESIES = re.compile(r"不好意思|没事|没关系|不客气|没问题|不错")
"""Words with a negation in them that deny nothing: an apology, a thanks, "fine"."""


def unsettles_a_yes(line: str) -> bool:
    """Whether a yes right after ``line`` may answer ``line`` rather than a prompt.

    A question ("是不是已经发货了？", "退款政策是什么"), a negation ("不退了吗": "对" says
    yes, not refunding), or what holds a request back (``repeats.holds_back``: a call-off,
    a deferral, a change). Read of a line nobody understood at a confirmation: after it, a
    plain "对" or "好的" approved the prompt that was shown again beneath it.
    """
    folded = fold_word_characters(line)
    asks = _asks(folded) or reads_as_question(folded)
    return asks or says_a_negation(folded) or holds_back(folded, "")


def says_a_negation(line: str) -> bool:
    """Whether ``line`` has a word of negation: 不, 没, 别, 未, "no", "not", "n't".

    Not in a courtesy ("不好意思", "没关系"): those deny nothing.
    """
    return _NEGATED.search(_COURTESIES.sub(" ", fold_word_characters(line))) is not None


def yes_beyond_doubt(line: str) -> bool:
    """A yes that can answer nothing but a prompt.

    In so many words (``explicit_yes``: "确认", "confirm the refund"), or urging its action
    on (``URGED``: "是的，退吧").
    """
    return explicit_yes(line) or any(word in URGED for word in _words(line).split())
