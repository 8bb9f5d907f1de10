"""Money amounts in Chinese and English: 三百块 → 300, 两千五 → 2500, ¥1,299.50, 1.5万."""

from __future__ import annotations

import re

from corral.intent.dates import CN_DIGITS, chinese_number

_CN_NUM = r"[零〇一二两三四五六七八九十百千万]+"
_AMOUNT = re.compile(
    r"(?:[¥￥$]\s*(?P<sym>\d[\d,]*(?:\.\d+)?))"
    r"|(?P<num>\d[\d,]*(?:\.\d+)?)\s*(?P<wan>万)?\s*(?:块钱|块|元|rmb|yuan|cny|dollars?|usd)"
    r"|(?P<cn>" + _CN_NUM + r")\s*(?:块钱|块|元)(?P<tail>[一二三四五六七八九])?",
    re.IGNORECASE,
)
_DIGITS = CN_DIGITS


def chinese_amount(text: str) -> int | None:
    """A Chinese numeral with 万 and colloquial tails: 两千五 2500, 三百五 350, 一万二 12000."""
    if "万" in text:
        high, _, low = text.partition("万")
        high_value = chinese_number(high) if high else 1
        if high_value is None:
            return None
        low_value = _tail(low, 1000) if low else 0
        return None if low_value is None else high_value * 10000 + low_value
    return _tail(text, None)


def _tail(text: str, unit_hint: int | None) -> int | None:
    # "两千五" means 2500: a trailing digit after a unit counts in the next lower unit.
    units = {"千": 1000, "百": 100, "十": 10}
    if len(text) >= 2 and text[-1] in _DIGITS and text[-2] in units and text[-2] != "十":
        head = chinese_number(text[:-1])
        if head is None:
            return None
        return head + _DIGITS[text[-1]] * units[text[-2]] // 10
    if len(text) == 1 and text in _DIGITS and unit_hint:
        return _DIGITS[text] * unit_hint
    return chinese_number(text)


def find_amount(text: str) -> float | None:
    """The first money amount in ``text``, as a number."""
    for match in _AMOUNT.finditer(text):
        if match.group("sym"):
            return float(match.group("sym").replace(",", ""))
        if match.group("num"):
            value = float(match.group("num").replace(",", ""))
            return value * 10000 if match.group("wan") else value
        value_cn = chinese_amount(match.group("cn"))
        if value_cn is not None:
            tail = match.group("tail")
            return float(value_cn) + (_DIGITS[tail] / 10 if tail else 0.0)
    return None
