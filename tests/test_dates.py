"""Relative and absolute dates, Chinese and English, against a fixed clock and time zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.intent.dates import chinese_number, find_relative_date
from tests.date_table import NOW, TABLE, ZONE


def test_the_table_has_at_least_forty_expressions() -> None:
    assert len(TABLE) >= 40


@pytest.mark.parametrize(("text", "start", "end"), TABLE)
def test_expression_resolves_to_the_range(text: str, start: str, end: str) -> None:
    found = find_relative_date(text, NOW, ZONE)
    assert found is not None, text
    assert (found.start.isoformat(), found.end.isoformat()) == (start, end)


def test_time_zone_changes_the_day() -> None:
    late = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)  # already 30 Nov in Shanghai
    utc = find_relative_date("今天", late, "UTC")
    shanghai = find_relative_date("今天", late, "Asia/Shanghai")
    assert utc is not None and utc.start.isoformat() == "2026-11-29"
    assert shanghai is not None and shanghai.start.isoformat() == "2026-11-30"


def test_earliest_expression_wins() -> None:
    found = find_relative_date("昨天说上周的订单", NOW, ZONE)
    assert found is not None and found.text == "昨天"


def test_no_date_and_impossible_dates() -> None:
    assert find_relative_date("打印机坏了", NOW, ZONE) is None
    assert find_relative_date("2026-02-31", NOW, ZONE) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("三", 3),
        ("十", 10),
        ("十二", 12),
        ("二十", 20),
        ("两", 2),
        ("21", 21),
        ("一百零五", 105),
        ("abc", None),
    ],
)
def test_chinese_numbers(text: str, value: int | None) -> None:
    assert chinese_number(text) == value


TEXTS_WITH_DATES = st.lists(
    st.one_of(st.sampled_from([text for text, _, _ in TABLE]), st.text(max_size=12)), max_size=6
).map("".join)
"""Arbitrary text with date expressions of the table mixed in, so most examples find one."""


@given(TEXTS_WITH_DATES, st.integers(min_value=-18 * 60, max_value=5 * 60 + 59))
def test_date_finder_reads_any_text_from_the_text_and_the_local_day_alone(
    text: str, minutes: int
) -> None:
    """Any text: no exception; a found range is a real range, named by words of the text;
    and the answer depends only on the local day, not on the hour (NOW is 18:00 there)."""
    found = find_relative_date(text, NOW, ZONE)
    same_day = NOW + timedelta(minutes=minutes)  # 00:00 to 23:59 in Shanghai
    assert find_relative_date(text, same_day, ZONE) == found
    if found is not None:
        assert found.text and found.text in text
        assert found.start <= found.end


def written_in_chinese(value: int) -> str:
    """1 to 9999 as written in Chinese: 一千零五, 三千二百, 一百一十, 九."""
    digits, parts, gap = "零一二三四五六七八九", [], False
    for unit, size in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
        digit = value // size % 10
        if digit == 0:
            gap = bool(parts)
            continue
        parts.append(("零" if gap else "") + digits[digit] + unit)
        gap = False
    return "".join(parts)


@given(st.integers(min_value=1, max_value=9999))
def test_numbers_round_trip_in_chinese_and_digits(value: int) -> None:
    assert chinese_number(written_in_chinese(value)) == value
    assert chinese_number(str(value)) == value


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        ("will it rain on Friday in Shanghai", "周五上海会下雨吗"),
        ("this Friday", "这周五"),
        ("next Friday", "下周五"),
        ("flight to Chengdu on Monday", "周一去成都的机票"),
    ],
)
def test_an_english_weekday_is_the_day_its_chinese_twin_names(english: str, chinese: str) -> None:
    """Found by a walkthrough, on a Thursday: "on Friday" was the Friday before (a
    forecast for last week), 周五 the next day; "next Friday" and "this Friday" gave none."""
    thursday = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)
    said, told = (
        find_relative_date(english, thursday, ZONE),
        find_relative_date(chinese, thursday, ZONE),
    )
    assert said is not None and told is not None
    assert (said.start, said.end) == (told.start, told.end)


@pytest.mark.parametrize(
    ("text", "weekday", "day"),
    [
        ("the package I ordered on Friday", "past", "2026-11-27"),  # said on a Monday
        ("周五买的键盘", "past", "2026-11-27"),
        ("will it rain on Friday", "future", "2026-12-04"),
        ("周五会下雨吗", "future", "2026-12-04"),
        ("on Friday", "this_week", "2026-12-04"),
        ("上周五", "future", "2026-11-27"),  # says its week: as said
        ("next Friday", "past", "2026-12-11"),
        ("on Monday", "past", "2026-11-30"),  # today is the latest Monday up to today
    ],
)
def test_a_bare_weekday_goes_the_way_its_entity_says(text: str, weekday: str, day: str) -> None:
    """Review: with "on Friday" read as this week's, an orders query said on a Monday
    ("ordered on Friday") searched the coming Friday; a forecast needs the coming one."""
    monday = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    found = find_relative_date(text, monday, ZONE, weekday)  # type: ignore[arg-type]
    assert found is not None and found.start.isoformat() == day
