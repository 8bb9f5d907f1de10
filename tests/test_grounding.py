"""Normalising numbers and dates, and the grounding rule for each literal type.

The normaliser is checked against independent oracles (Python's own formatting and a
Chinese numeral writer below), the rules against values a model might invent.
"""

from __future__ import annotations

import enum
from datetime import UTC, date, datetime
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.intent.grounding import (
    Evidence,
    Quantity,
    declared_choices,
    grounded,
    key_unit,
    parse_date,
    parse_number,
    quantities,
    said_dates,
)

CN = "零一二三四五六七八九"


def chinese(n: int, two: str = "二") -> str:
    """``n`` (1..99999) as a Chinese numeral in its standard reading: 10010 is 一万零一十."""
    out, zero = "", False
    for value, unit in ((10000, "万"), (1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = n // value % 10
        if digit == 0:
            zero = bool(out)
            continue
        if zero:
            out, zero = out + "零", False
        word = two if digit == 2 and value >= 100 else CN[digit]
        out += ("" if digit == 1 and value == 10 and not out else word) + unit
    return out


@given(st.integers(min_value=0, max_value=10**12))
def test_an_int_in_digits_with_separators_or_a_currency_is_itself(n: int) -> None:
    for text in (str(n), f"{n:,}", f"¥{n:,}", f"$ {n}", f"{n:,}元", f" {n} "):
        assert parse_number(text) == n, text


@given(st.integers(min_value=0, max_value=10**9))
def test_thousands_and_wan_multiply(n: int) -> None:
    assert parse_number(f"{n}k") == parse_number(f"{n}K") == n * 1000
    assert parse_number(f"{n}万") == n * 10000
    assert parse_number(f"{n}.5万") == n * 10000 + 5000


@given(st.integers(min_value=0, max_value=10**7), st.integers(min_value=0, max_value=99))
def test_decimals_are_read_exactly(whole: int, cents: int) -> None:
    assert parse_number(f"{whole}.{cents:02d}") == pytest.approx(whole + cents / 100)


@given(st.integers(min_value=1, max_value=99999), st.sampled_from(["二", "两"]))
def test_chinese_numerals_round_trip(n: int, two: str) -> None:
    assert parse_number(chinese(n, two)) == n, chinese(n, two)
    assert [q.value for q in quantities(f"退{chinese(n, two)}块钱", bare_words=False)] == [n]


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["A", "ORD-", "sku_", "x"]))
def test_digits_inside_an_id_are_not_a_number(n: int, prefix: str) -> None:
    assert parse_number(f"{prefix}{n}") is None
    assert quantities(f"order {prefix}{n} shipped") == []
    assert quantities(f"order {n}b shipped") == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("三百", 300),
        ("两千五", 2500),
        ("三百五", 350),
        ("一万二", 12000),
        ("1.5万", 15000),
        ("1.5万元", 15000),
        ("2k", 2000),
        ("1,299", 1299),
        ("¥1,299.50", 1299.5),
        ("￥300", 300),
        ("300块", 300),
        ("300.0", 300),
        ("Three", 3),
        ("百分之十五", 15),
        ("A123", None),
        ("12 apples", None),
        ("", None),
    ],
)
def test_the_forms_the_issue_names(text: str, value: float | None) -> None:
    assert parse_number(text) == value


def test_units_are_read_with_the_number() -> None:
    found = quantities("6 yuan in 2 days, a 60-month plan, 15% off, 三天, ¥5 for A62")
    assert [(q.value, q.unit) for q in found] == [
        (6, "cny"),
        (2, "day"),
        (60, "month"),
        (15, "percent"),
        (3, "day"),
        (5, "cny"),
    ]
    assert [q.value for q in quantities("costs 5. Or 7, or 8.")] == [5, 7, 8]
    assert quantities("2026-05-03 at 10:30") == [
        Quantity(2026, None, 0, 10, in_date=True),
        Quantity(5, None, 0, 10, in_date=True),
        Quantity(3, None, 0, 10, in_date=True),
        Quantity(10, None, 14, 19, in_date=True),
        Quantity(30, None, 14, 19, in_date=True),
    ]
    assert [key_unit(k) for k in ("eta_days", "amount_cny", "term_months", "min_price", "id")] == [
        "day",
        "cny",
        "month",
        None,
        None,
    ]


NOW = datetime(2025, 3, 10, 2, 0, tzinfo=UTC)  # a Monday; 10:00 in Shanghai


def test_dates_the_user_said_resolve_against_the_given_clock() -> None:
    days = said_dates("明天 or 下周一, and May 3; also 2025-12-25", NOW, "Asia/Shanghai")
    assert days == {
        date(2025, 3, 11),  # 明天
        date(2025, 3, 17),  # 下周一
        date(2024, 5, 3),  # May 3, the past one (a query's reading) ...
        date(2025, 5, 3),  # ... and the coming one (a delivery's)
        date(2025, 12, 25),
    }
    assert said_dates("3月5日或2024年3月5日", NOW, "UTC") == {
        date(2025, 3, 5),
        date(2026, 3, 5),
        date(2024, 3, 5),
    }
    assert said_dates("nothing dated here", NOW, "UTC") == set()
    assert parse_date("2025-03-11") == parse_date("2025-03-11T09:00:00+08:00") == date(2025, 3, 11)
    assert parse_date("tomorrow") is None


class Speed(enum.Enum):
    SLOW = "slow"
    FAST = "fast"


def test_numbers_need_the_same_number_from_someone() -> None:
    said = Evidence.of("退三百块给 A9999, 2k 以内", [{"quote": {"amount": 128.0}}], NOW)
    assert grounded(300, said) and grounded(300.0, said) and grounded("300", said)
    assert grounded(2000, said) and grounded(128, said)  # "2k"; a tool result
    assert not grounded(9999, said)  # only inside the id A9999
    assert not grounded(301, said) and not grounded(-300, said)
    assert grounded(7, said, declared={1, 7}) and not grounded(7, said, declared={True})


def test_dates_need_the_same_day() -> None:
    said = Evidence.of("deliver tomorrow", ["2025-04-01"], NOW, "UTC")
    assert grounded("2025-03-11", said) and grounded("2025-03-11T15:00:00", said)
    assert grounded("2025-04-01", said)  # a known value
    assert not grounded("2025-03-12", said)
    assert not grounded("2025-03-11", Evidence.of("deliver tomorrow"))  # no clock, no guess


def test_booleans_need_a_stated_yes_or_no_a_known_value_or_the_default() -> None:
    assert grounded(True, Evidence.of("yes, notify me"))
    assert grounded(False, Evidence.of("不要通知我"))
    assert not grounded(True, Evidence.of("不要通知我"))  # 不要 is a no, not a 要
    assert not grounded(True, Evidence.of("refund A1"))
    polite = Evidence.of("你好，我是 A1 的买家，不好意思，请退款 please")
    assert not grounded(True, polite) and not grounded(False, polite)
    assert not grounded(False, Evidence.of("refund A1"))
    assert grounded(False, Evidence.of("refund A1"), declared={False})  # the default
    assert not grounded(True, Evidence.of("refund A1"), declared={1})  # True is not 1
    assert grounded(True, Evidence.of("refund A1", [{"eligible": True}]))


def test_strings_enums_lists_and_none() -> None:
    said = Evidence.of("ship A12 to Lyon fast", [{"city": "Paris"}])
    assert grounded("Lyon", said) and grounded("Paris", said) and grounded(None, said)
    assert not grounded("Berlin", said)
    choices = declared_choices(Speed | None)
    assert choices == {"slow", "fast"} and grounded("slow", said, choices)
    assert declared_choices(list[Literal["a", 2]]) == {"a", 2}
    assert grounded(["Lyon", "Paris"], said) and not grounded(["Lyon", "Rome"], said)
    assert not grounded({"to": "Lyon", "n": 12}, said)  # 12 is inside the id A12
    assert not grounded(object(), said)
