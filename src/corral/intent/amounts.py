"""Money amounts in Chinese and English: 三百块 → 300, 两千五 → 2500, ¥1,299.50, 1.5万."""

from __future__ import annotations

import re

from corral.intent.dates import CN_DIGITS, chinese_number

_CN_NUM = r"[零〇一二两三四五六七八九十百千万]+"
_MULT = r"(?:[十百千万]|[kK](?![a-zA-Z]))"
_AMOUNT = re.compile(
    r"(?:[¥￥$]\s*(?P<sym>\d[\d,]*(?:\.\d+)?)(?P<symult>" + _MULT + r")?)"
    r"|(?P<num>\d[\d,]*(?:\.\d+)?)\s*(?P<mult>" + _MULT + r")?\s*"
    r"(?:块钱|块|元|rmb|yuan|cny|dollars?|usd)"
    r"|(?P<cn>" + _CN_NUM + r")\s*(?:块钱|块|元)(?P<tail>[一二三四五六七八九])?",
    re.IGNORECASE,
)
_MULTIPLIERS = {"十": 10, "百": 100, "千": 1000, "万": 10000, "k": 1000}
"""A unit after digits: 3百块 is 300, 1.5万 15000, 2k 2000."""
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
        if _mixed(text, match):
            continue  # "3百五十块", "5千5百块", "¥3千万": numerals mixed, not read (never guessed)
        if match.group("sym"):
            return _times(match.group("sym"), match.group("symult"))
        if match.group("num"):
            return _times(match.group("num"), match.group("mult"))
        value_cn = chinese_amount(match.group("cn"))
        if value_cn is not None:
            tail = match.group("tail")
            return float(value_cn) + (_DIGITS[tail] / 10 if tail else 0.0)
    return None


_NUMERAL = frozenset("零〇一二两三四五六七八九十百千万亿") | frozenset("0123456789")


def _mixed(text: str, match: re.Match[str]) -> bool:
    """Whether the amount ``match`` found is part of a longer mix of digits and numerals.

    Digits or a numeral right before it ("5千" before "5百块"), or a unit right after its
    own ("¥3千" before "万"): read alone, it would be a wrong amount.
    """
    before = text[match.start() - 1] if match.start() else ""
    if before in _NUMERAL:
        return True
    unit = match.group("symult")
    after = text[match.end()] if unit and match.end() < len(text) else ""
    return after in _NUMERAL


def _times(digits: str, unit: str | None) -> float:
    """``digits`` (commas allowed) times its unit's multiplier, if any."""
    value = float(digits.replace(",", ""))
    return value * _MULTIPLIERS[unit.lower()] if unit else value
