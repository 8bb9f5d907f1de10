"""Money amounts in Chinese and English: 三百块 → 300, 两千五 → 2500, ¥1,299.50, 1.5万."""

from __future__ import annotations

import math
import re

from corral.intent.dates import CN_DIGITS, chinese_number

_CN_NUM = r"[零〇一二两三四五六七八九十百千万]+"
_MULT = r"(?:[十百千万]|[kK](?![a-zA-Z]))"
_NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?"
"""Digits, commas only between groups of three (1,000; not 1,00), a fraction, and an
exponent (1e3 is 1000: read as its value, or its 3 alone was the amount)."""
_AMOUNT = re.compile(
    r"(?:[¥￥$]\s*(?P<sym>" + _NUMBER + r")(?P<symult>" + _MULT + r")?)"
    # a number starts where digits do, and its spaces are not given back: a search from
    # each digit of a long run, splitting the spaces after it two ways, took minutes
    r"|(?<!\d)(?P<num>" + _NUMBER + r")\s*+(?P<mult>" + _MULT + r")?\s*"
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
        if _glued(text, match):
            continue  # "-50元", "1.2.3元", "0x10元", "1,00元": the tail of a longer token
        digits = match.group("sym") or match.group("num")
        if digits:
            unit = match.group("symult") or match.group("mult")
            if unit and "e" in digits.lower():
                continue  # "1e3k元": an exponent and a unit, nobody's amount
            value = _times(digits, unit)
            if math.isfinite(value):
                return value
            continue
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


_GLUE = re.compile(r"[A-Za-z_.．\-−－+＋]|(?<=[\d,.+\-−])[,/]")
"""Right before a number, what makes it the tail of a longer token: a letter ("0x10",
"OD…"), a point ("1.2.3", ".5"), a sign or dash ("-50": refused, not read as 50; "10-50":
a range), or a comma or slash after a digit, point or sign ("1,00": no thousands group;
"1/50元"). Full-width points and signs too: letters and digits are folded to ASCII before
amounts are read, they are not."""
_CURRENCY_CODE = re.compile(r"(?<![A-Za-z])(?:US|HK|NT|AU|CA|NZ|SG|RMB|CN|A|C|S)$")
"""Letters a currency sign may follow: "US$20", "HK$100", "RMB¥500" (no other letters)."""
_GROUPED = re.compile(r"(?<![\d.])\d{1,3}[，\s]$")
"""A short number and a full-width comma or a space before three digits: "1，500元" is
1,500 typed with a Chinese input method, "1 000元" a thousand; not 500, nor 0."""
_RUNS_ON = re.compile(r"[,，.．]\d|\s\d{3}(?!\d)")
"""After a number behind a currency sign, what makes it the head of a longer one:
"¥1，500", "$1,00", "¥1 500" (read as 1 before)."""


def _glued(text: str, match: re.Match[str]) -> bool:
    """Whether the number ``match`` found is only part of a longer token.

    Read alone, it would be a wrong amount: "-50元" as 50, "1,00元" as 0, "1，500元" as 500,
    "¥1，500" as 1. Refused instead: a money amount is never guessed.
    """
    start = match.start()
    if match.group("sym"):
        if _RUNS_ON.match(text, match.end("sym")):
            return True
        if start and text[start - 1].isascii() and text[start - 1].isalpha():
            return _CURRENCY_CODE.search(text, 0, start) is None
    if start and _GLUE.match(text, start - 1):
        return True
    number = match.group("num") or ""
    whole = number.split(".")[0]
    return len(whole) == 3 and whole.isdigit() and bool(_GROUPED.search(text, 0, start))


def _times(digits: str, unit: str | None) -> float:
    """``digits`` (commas allowed) times its unit's multiplier, if any."""
    value = float(digits.replace(",", ""))
    return value * _MULTIPLIERS[unit.lower()] if unit else value
