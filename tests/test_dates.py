"""Relative and absolute dates, Chinese and English, against a fixed clock and time zone."""

from __future__ import annotations

from datetime import UTC, datetime

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


@given(st.text(max_size=200))
def test_date_finder_never_crashes(text: str) -> None:
    find_relative_date(text, NOW, ZONE)
