"""Relative dates in Chinese and English, turned into ISO date ranges in a time zone.

The reference time is injected (the run records it once, at its start), so the same
message always resolves to the same range, in replays too.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

_CN_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def chinese_number(text: str) -> int | None:
    """Parse ``3``, ``三``, ``十二``, ``二十``, ``两``; ``None`` if it is not a number."""
    if text.isdigit():
        return int(text)
    if not text or any(ch not in _CN_DIGITS and ch != "十" for ch in text):
        return None
    if "十" not in text:
        value = 0
        for ch in text:
            value = value * 10 + _CN_DIGITS[ch]
        return value
    tens, _, ones = text.partition("十")
    return (_CN_DIGITS[tens] if tens else 1) * 10 + (_CN_DIGITS[ones] if ones else 0)


@dataclass(frozen=True)
class DateRange:
    """An inclusive range of local dates, and the words it came from."""

    start: date
    end: date
    text: str

    def as_json(self) -> dict[str, str]:
        """The form stored in entities: ISO dates."""
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "text": self.text}


def _month_start(day: date, months_back: int) -> date:
    index = day.year * 12 + (day.month - 1) - months_back
    return date(index // 12, index % 12 + 1, 1)


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


_NUM = r"(\d+|[零一二两三四五六七八九十]+)"
_UNIT_DAYS = {"天": 1, "日": 1, "周": 7, "星期": 7, "礼拜": 7, "day": 1, "week": 7}


def _ago(today: date, amount: int, unit: str) -> tuple[date, date]:
    if unit in ("个月", "月", "month"):
        start = _month_start(today, amount)
        last_day = calendar.monthrange(start.year, start.month)[1]
        point = start.replace(day=min(today.day, last_day))
        return point, point
    if unit in ("年", "year"):
        year = today.year - amount
        last_day = calendar.monthrange(year, today.month)[1]
        point = today.replace(year=year, day=min(today.day, last_day))
        return point, point
    point = today - timedelta(days=amount * _UNIT_DAYS[unit])
    return point, point


def _fixed(today: date) -> list[tuple[re.Pattern[str], tuple[date, date]]]:
    week = _week_start(today)
    month = today.replace(day=1)
    last_month = _month_start(today, 1)
    table: list[tuple[str, tuple[date, date]]] = [
        (r"今天|今日|\btoday\b", (today, today)),
        (r"大前天", (today - timedelta(days=3), today - timedelta(days=3))),
        (r"前天|\bday before yesterday\b", (today - timedelta(days=2), today - timedelta(days=2))),
        (r"昨天|昨日|\byesterday\b", (today - timedelta(days=1), today - timedelta(days=1))),
        (r"上上(个)?(周|星期|礼拜)", (week - timedelta(days=14), week - timedelta(days=8))),
        (
            r"上(个)?(周|星期|礼拜)|\blast week\b",
            (week - timedelta(days=7), week - timedelta(days=1)),
        ),
        (r"(本|这)(个)?(周|星期|礼拜)|\bthis week\b", (week, today)),
        (r"上(个)?月|\blast month\b", (last_month, month - timedelta(days=1))),
        (r"(本|这)(个)?月|\bthis month\b", (month, today)),
        (r"去年|\blast year\b", (date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))),
        (r"今年|\bthis year\b", (date(today.year, 1, 1), today)),
        (r"最近|近期|\brecently\b|\blately\b", (today - timedelta(days=6), today)),
    ]
    return [(re.compile(p, re.IGNORECASE), r) for p, r in table]


_AGO_CN = re.compile(_NUM + r"\s*(个月|天|日|周|星期|礼拜|年)(之|以)?前")
_AGO_EN = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE
)
_EN_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def find_relative_date(text: str, now: datetime, timezone: str) -> DateRange | None:
    """The first relative date expression in ``text``, resolved against ``now`` in ``timezone``."""
    today = now.astimezone(ZoneInfo(timezone)).date()
    found: list[tuple[int, DateRange]] = []
    match = _AGO_CN.search(text)
    if match:
        amount = chinese_number(match.group(1))
        if amount is not None and amount < 1000:
            start, end = _ago(today, amount, match.group(2))
            found.append((match.start(), DateRange(start, end, match.group(0))))
    match = _AGO_EN.search(text)
    if match:
        word = match.group(1).lower()
        amount = int(word) if word.isdigit() else _EN_WORDS[word]
        if amount < 1000:
            start, end = _ago(today, amount, match.group(2).lower())
            found.append((match.start(), DateRange(start, end, match.group(0))))
    for pattern, (start, end) in _fixed(today):
        hit = pattern.search(text)
        if hit:
            found.append((hit.start(), DateRange(start, end, hit.group(0))))
            break
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]
