"""``without_values_at_its_ends``: the run's own values named beside a free-text answer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.runtime.loop import without_values_at_its_ends


@pytest.mark.parametrize(
    ("text", "values", "left"),
    [
        ("OD2611250001 杭州市西湖区文一路5号", ["OD2611250001"], "杭州市西湖区文一路5号"),
        ("杭州市西湖区文一路5号，OD2611250001", ["OD2611250001"], "杭州市西湖区文一路5号"),
        ("od2611250001：12 Baker Street", ["OD2611250001"], "12 Baker Street"),
        # inside the answer it stays: it may be part of it
        ("杭州市 OD2611250001 文一路5号", ["OD2611250001"], "杭州市 OD2611250001 文一路5号"),
        ("OD2611250001", ["OD2611250001"], ""),
        ("杭州市西湖区文一路5号", ["", "OD2611250001"], "杭州市西湖区文一路5号"),
    ],
)
def test_a_value_at_either_end_is_taken_off(text: str, values: list[str], left: str) -> None:
    assert without_values_at_its_ends(text, values) == left


@given(st.text(max_size=60), st.lists(st.text(max_size=12), max_size=3))
def test_what_is_left_is_never_longer_and_ends_the_text(text: str, values: list[str]) -> None:
    left = without_values_at_its_ends(text, values)
    assert len(left) <= len(text)
    assert left in text


@given(st.text(alphabet="上海市区路号0123456789 ", max_size=40))
def test_text_naming_no_value_is_kept_as_it_is(text: str) -> None:
    assert without_values_at_its_ends(text, ["OD2611250001"]) == text
