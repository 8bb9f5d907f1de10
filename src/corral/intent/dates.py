"""Relative and absolute dates in Chinese and English, as ISO date ranges in a time zone.

The reference time is injected (the run records it once, at its start), so the same
message always resolves to the same range, in replays too.

Why not ``dateparser``: it was evaluated on the table in ``tests/test_dates.py``. It parses
single points ("3 days ago", "昨天") but not ranges ("上周" is a week, "最近三天" is three
days, "上个月" is a month), its Chinese coverage of colloquial forms (大前天, 上上周,
半个月前, 这两天) is thin, and it consults the system clock and locale unless every setting
is pinned. A range is what a query tool needs, so corral keeps this small table of rules.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

CN_DIGITS = {
    "零": 0,
    "〇": 0,
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
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}


def chinese_number(text: str) -> int | None:
    """Parse ``3``, ``三``, ``十二``, ``二十``, ``两``, ``一百零五``; ``None`` otherwise."""
    if text.isdigit():
        return int(text)
    if not text or any(ch not in CN_DIGITS and ch not in _CN_UNITS for ch in text):
        return None
    total, digit = 0, None
    for ch in text:
        if ch in CN_DIGITS:
            digit = CN_DIGITS[ch]
        else:
            total += (1 if digit is None else digit) * _CN_UNITS[ch]
            digit = None
    return total + (digit or 0)


@dataclass(frozen=True)
class DateRange:
    """An inclusive range of local dates, and the words it came from."""

    start: date
    end: date
    text: str

    def as_json(self) -> dict[str, str]:
        """The form stored in entities: ISO dates."""
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "text": self.text}


def _shift_months(day: date, months: int) -> date:
    index = day.year * 12 + (day.month - 1) + months
    year, month = index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _month_range(day: date) -> tuple[date, date]:
    return day.replace(day=1), day.replace(day=calendar.monthrange(day.year, day.month)[1])


_NUM = r"(\d+|[零〇一二两三四五六七八九十百]+|a|an|one|two|three|four|five|six|seven|ten)"
_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "ten": 10,
}
_WEEKDAYS_CN = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_WEEKDAYS_EN = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
}
_MONTHS_EN = {
    name: i
    for i, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}


def _number(text: str) -> int | None:
    lowered = text.lower()
    return _EN_NUMBERS[lowered] if lowered in _EN_NUMBERS else chinese_number(text)


def _unit_days(unit: str) -> int | None:
    unit = unit.lower().rstrip("s")
    if unit in ("天", "日", "day"):
        return 1
    if unit in ("周", "星期", "礼拜", "个星期", "个礼拜", "week"):
        return 7
    return None


Resolver = Callable[[re.Match[str], date], tuple[date, date] | None]


def _ago(match: re.Match[str], today: date) -> tuple[date, date] | None:
    amount, unit = _number(match.group("n")), match.group("unit")
    if amount is None or amount > 3650:
        return None
    days = _unit_days(unit)
    if days is not None:
        point = today - timedelta(days=amount * days)
    elif unit.lower().rstrip("s") in ("个月", "月", "month"):
        point = _shift_months(today, -amount)
    else:  # years
        point = _shift_months(today, -12 * amount)
    return point, point


def _last_n(match: re.Match[str], today: date) -> tuple[date, date] | None:
    amount, unit = _number(match.group("n")), match.group("unit")
    if amount is None or amount > 3650:
        return None
    days = _unit_days(unit)
    if days is not None:
        return today - timedelta(days=amount * days - 1), today
    months = 12 * amount if unit.lower().rstrip("s") in ("年", "year") else amount
    return _shift_months(today, -months) + timedelta(days=1), today


def _last_months(months: int) -> Callable[[date], tuple[date, date]]:
    """The span of the last ``months`` months, ending today ("最近半年": six)."""
    return lambda today: (_shift_months(today, -months) + timedelta(days=1), today)


def _weekday_cn(match: re.Match[str], today: date) -> tuple[date, date]:
    week_start = today - timedelta(days=today.weekday())
    offset = {"上上": -14, "上": -7, "下": 7, "本": 0, "这": 0, "": 0}[match.group("which") or ""]
    point = week_start + timedelta(days=offset + _WEEKDAYS_CN[match.group("day")])
    return point, point


def _weekday_en(match: re.Match[str], today: date) -> tuple[date, date]:
    """An English weekday, read as the Chinese one is (a week starts on Monday).

    ``last Friday``: the one before today. ``on``/``this Friday``: this week's, as 周五;
    ``next Friday``: next week's, as 下周五.
    """
    target = _WEEKDAYS_EN[match.group("day").lower()]
    which = match.group("which").lower()
    if which == "last":
        point = today - timedelta(days=(today.weekday() - target) % 7 or 7)
    else:
        week_start = today - timedelta(days=today.weekday())
        point = week_start + timedelta(days=target + (7 if which == "next" else 0))
    return point, point


def _absolute(year: int | None, month: int, day: int, today: date) -> tuple[date, date] | None:
    try:
        point = date(year or today.year, month, day)
    except ValueError:
        return None
    if year is None and point > today:  # "10月1日" said in November means this year's
        point = point.replace(year=point.year - 1) if point - today > timedelta(days=31) else point
    return point, point


def _named_month(month: int | None, today: date) -> tuple[date, date] | None:
    if month is None or not 1 <= month <= 12:
        return None
    year = today.year if month <= today.month else today.year - 1
    start, end = _month_range(date(year, month, 1))
    return start, min(end, today)


def _fixed(resolve: Callable[[date], tuple[date, date]]) -> Resolver:
    return lambda _match, today: resolve(today)


def _week(today: date, weeks: int) -> tuple[date, date]:
    start = today - timedelta(days=today.weekday()) + timedelta(days=7 * weeks)
    return start, start + timedelta(days=6)


def _weekend(today: date, weeks: int) -> tuple[date, date]:
    """Saturday and Sunday of this week (``weeks`` = 0, from today on if it has begun)."""
    saturday = today - timedelta(days=today.weekday()) + timedelta(days=5 + 7 * weeks)
    return (max(saturday, today) if weeks == 0 else saturday), saturday + timedelta(days=1)


def _point(day: date) -> tuple[date, date]:
    return day, day


def _days(today: date, first: int, last: int) -> tuple[date, date]:
    return today + timedelta(days=first), today + timedelta(days=last)


_RULES: list[tuple[str, Resolver]] = [
    # absolute dates first: they are the most specific
    (
        r"(?P<y>\d{4})[-/.年](?P<m>\d{1,2})[-/.月](?P<d>\d{1,2})[日号]?",
        lambda m, t: _absolute(int(m["y"]), int(m["m"]), int(m["d"]), t),
    ),
    (
        r"(?P<m>\d{1,2})月(?P<d>\d{1,2})[日号]",
        lambda m, t: _absolute(None, int(m["m"]), int(m["d"]), t),
    ),
    (
        r"\b(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<d>\d{1,2})"
        r"(?:st|nd|rd|th)?\b",
        lambda m, t: _absolute(None, _MONTHS_EN[m["mon"].lower()], int(m["d"]), t),
    ),
    (
        r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep"
        r"|oct|nov|dec)[a-z]*\b",
        lambda m, t: _absolute(None, _MONTHS_EN[m["mon"].lower()], int(m["d"]), t),
    ),
    # a named month: "9月份的订单", "in September" (this year's, or last year's if still ahead)
    (
        r"(?<![\d年])(?P<m>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月份?(?![\d一二三四五六七八九十]*[日号])",
        lambda m, t: _named_month(chinese_number(m["m"]), t),
    ),
    (
        r"\bin\s+(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b",
        lambda m, t: _named_month(_MONTHS_EN[m["mon"].lower()], t),
    ),
    # spans that end today
    (
        r"(?:最近|近|过去|这)\s*(?P<n>"
        + _NUM[1:-1]
        + r")\s*(?P<unit>个月|天|日|周|个?星期|个?礼拜|年)"
        r"(?:内|以来|里)?",
        _last_n,
    ),
    # half a year: "最近半年的订单" was the last seven days ("最近" alone), "半年内" none
    (
        r"(?:最近|近|过去|这)\s*半年(?:内|以来|里)?|半年(?:以内|之内|内|以来)",
        _fixed(_last_months(6)),
    ),
    (
        r"\b(?:in\s+)?(?:the\s+)?(?:last|past)\s+(?:half\s+(?:a\s+)?year|six\s+months)\b",
        _fixed(_last_months(6)),
    ),
    (r"\b(?:in\s+)?(?:the\s+)?past\s+year\b", _fixed(_last_months(12))),
    (r"(?P<n>\d+|[一二两三四五六七八九十]+)\s*(?P<unit>天|日|周|个?星期)(?:以内|之内|内)", _last_n),
    (
        r"\b(?:in\s+)?(?:the\s+)?(?:last|past)\s+(?P<n>" + _NUM[1:-1] + r")\s+(?P<unit>days?|weeks?"
        r"|months?|years?)\b",
        _last_n,
    ),
    # "N units ago"
    (r"(?P<n>" + _NUM[1:-1] + r")\s*(?P<unit>个月|天|日|周|个?星期|个?礼拜|年)(?:之|以)?前", _ago),
    (r"\b(?P<n>" + _NUM[1:-1] + r")\s+(?P<unit>days?|weeks?|months?|years?)\s+ago\b", _ago),
    (r"半个月(?:之|以)?前", _fixed(lambda t: _days(t, -15, -15))),
    (r"\bhalf a month ago\b", _fixed(lambda t: _days(t, -15, -15))),
    # weekdays
    (
        r"(?P<which>上上|上|下|本|这)?(?:个)?(?:周|星期|礼拜)(?P<day>[一二三四五六日天])",
        _weekday_cn,
    ),
    (
        r"\b(?P<which>last|on|this|next)\s+(?P<day>monday|tuesday|wednesday|thursday|friday"
        r"|saturday|sunday)\b",
        _weekday_en,
    ),
    # named days and periods
    (r"大前天", _fixed(lambda t: _days(t, -3, -3))),
    (r"前天|\bday before yesterday\b", _fixed(lambda t: _days(t, -2, -2))),
    (r"昨天|昨日|昨晚|\byesterday\b", _fixed(lambda t: _days(t, -1, -1))),
    (r"大后天", _fixed(lambda t: _days(t, 3, 3))),
    (r"后天|\bday after tomorrow\b", _fixed(lambda t: _days(t, 2, 2))),
    (r"明天|明日|\btomorrow\b", _fixed(lambda t: _days(t, 1, 1))),
    (r"今天|今日|今早|今晚|\btoday\b|\btonight\b", _fixed(lambda t: _days(t, 0, 0))),
    (r"前两天|前几天|\ba few days ago\b", _fixed(lambda t: _days(t, -3, -1))),
    (r"这几天", _fixed(lambda t: _days(t, -2, 0))),
    # weekends before weeks: "这周末" is Saturday and Sunday, not "这周" (Monday to today)
    (r"上(?:个)?周末|\blast weekend\b", _fixed(lambda t: _weekend(t, -1))),
    (r"下(?:个)?周末|\bnext weekend\b", _fixed(lambda t: _weekend(t, 1))),
    (r"(?:本|这)?(?:个)?周末|\b(?:this|the) weekend\b", _fixed(lambda t: _weekend(t, 0))),
    (r"上上(?:个)?(?:周|星期|礼拜)|\bthe week before last\b", _fixed(lambda t: _week(t, -2))),
    (r"上(?:个)?(?:周|星期|礼拜)|\blast week\b", _fixed(lambda t: _week(t, -1))),
    (r"下(?:个)?(?:周|星期|礼拜)|\bnext week\b", _fixed(lambda t: _week(t, 1))),
    (
        r"(?:本|这)(?:个)?(?:周|星期|礼拜)|\bthis week\b|\bearlier this week\b",
        _fixed(lambda t: (_week(t, 0)[0], t)),
    ),
    (r"上上个?月", _fixed(lambda t: _month_range(_shift_months(t, -2)))),
    (
        r"上个?月底|\bend of last month\b",
        _fixed(lambda t: _point(_month_range(_shift_months(t, -1))[1])),
    ),
    (
        r"上个?月初",
        _fixed(
            lambda t: (_shift_months(t, -1).replace(day=1), _shift_months(t, -1).replace(day=10))
        ),
    ),
    (r"上个?月|\blast month\b", _fixed(lambda t: _month_range(_shift_months(t, -1)))),
    (r"(?:本|这个?)月初|月初", _fixed(lambda t: (t.replace(day=1), min(t, t.replace(day=10))))),
    (r"(?:本|这个?)月|\bthis month\b", _fixed(lambda t: (t.replace(day=1), t))),
    (r"去年|\blast year\b", _fixed(lambda t: (date(t.year - 1, 1, 1), date(t.year - 1, 12, 31)))),
    (r"今年|\bthis year\b", _fixed(lambda t: (date(t.year, 1, 1), t))),
    (r"最近|近期|\brecently\b|\blately\b", _fixed(lambda t: _days(t, -6, 0))),
]
_COMPILED = [(re.compile(pattern, re.IGNORECASE), resolve) for pattern, resolve in _RULES]


BareWeekday = Literal["this_week", "past", "future"]
"""Which day a bare weekday (周五, "on Friday") names: this week's (as 周五 reads), the
latest one up to today (an order placed on Friday), or the next one from today (a
forecast for Friday). "上周五", "this/next/last Friday" say which themselves."""


def find_relative_date(
    text: str, now: datetime, timezone: str, weekday: BareWeekday = "this_week"
) -> DateRange | None:
    """The first date expression in ``text``, resolved against ``now`` in ``timezone``.

    When several rules match, the one that starts first wins, then the one listed first.
    """
    today = now.astimezone(ZoneInfo(timezone)).date()
    best: tuple[int, int, DateRange] | None = None
    for order, (pattern, resolve) in enumerate(_COMPILED):
        for match in pattern.finditer(text):
            if best is not None and match.start() >= best[0]:
                break
            resolved = resolve(match, today)
            if resolved is not None:
                if weekday != "this_week" and _bare_weekday(resolve, match):
                    resolved = _toward(resolved[0], today, weekday)
                best = (match.start(), order, DateRange(resolved[0], resolved[1], match.group(0)))
                break
    return best[2] if best else None


def _bare_weekday(resolve: object, match: re.Match[str]) -> bool:
    """Whether ``match`` is a weekday that says no week: 周五, 星期五, "on Friday"."""
    if resolve is _weekday_cn:
        return not match.group("which")
    return resolve is _weekday_en and match.group("which").lower() == "on"


def _toward(point: date, today: date, weekday: BareWeekday) -> tuple[date, date]:
    """``point`` (this week's) moved a week back (``past``) or on (``future``) if needed."""
    if weekday == "past" and point > today:
        point -= timedelta(days=7)
    elif weekday == "future" and point < today:
        point += timedelta(days=7)
    return point, point
