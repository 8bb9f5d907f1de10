"""``without_values_at_its_ends``: the run's own values named beside a free-text answer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.runtime.loop import called, without_values_at_its_ends


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


LABELS = ["订单号", "order number"]


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("订单 OD2611250001 杭州市文一路5号", "杭州市文一路5号"),
        ("订单号：OD2611250001，杭州市文一路5号", "杭州市文一路5号"),
        ("杭州市文一路5号，订单号 OD2611250001", "杭州市文一路5号"),
        ("Order #OD2611250001: 12 Baker Street", "12 Baker Street"),
        ("12 Baker Street, for order OD2611250001", "12 Baker Street"),
        ("12 Baker Street for OD2611250001", "12 Baker Street"),
        ("12 Baker Street, order number OD2611250001", "12 Baker Street"),
        # a review of df2ece2: a word pointing at it, and a dash between
        ("12 Baker Street, for the order OD2611250001", "12 Baker Street"),
        ("杭州市文一路5号，这个订单 OD2611250001", "杭州市文一路5号"),
        ("Order: OD2611250001 - 12 Baker Street", "12 Baker Street"),
        ("12 Baker Street - for order OD2611250001", "12 Baker Street"),
        # a letter that folds longer (ß -> ss) before the value moved every index after it
        ("Hauptstraße 5, OD2611250001", "Hauptstraße 5"),
        ("Hauptstraße 5, for order OD2611250001", "Hauptstraße 5"),
        # a pointing word without the label stays: "the" may end a name
        ("12 Baker Street, The OD2611250001", "12 Baker Street, The"),
        # a word that only ends like a joining word or a label stays: "Boston" is no "on"
        ("12 Main Street, Boston OD2611250001", "12 Main Street, Boston"),
        ("12 Bakerorder OD2611250001", "12 Bakerorder"),
        # what is called so but is not the value stays as it was
        ("订单 OD2611250002 杭州市文一路5号", "订单 OD2611250002 杭州市文一路5号"),
        ("订单杭州市文一路5号", "订单杭州市文一路5号"),
    ],
)
def test_a_value_called_by_its_label_is_taken_off_with_it(text: str, left: str) -> None:
    assert without_values_at_its_ends(text, ["OD2611250001"], LABELS) == left


def test_a_label_in_letters_shortens_by_whole_words_only() -> None:
    assert called(["product", "订单号", "order number"]) == (
        "order number",
        "product",
        "order",
        "订单号",
        "订单",
    )
    assert without_values_at_its_ends("pr HD2024: 12 Baker St", ["HD2024"], ["product"]) == (
        "pr HD2024: 12 Baker St"
    )


@given(
    st.text(max_size=60), st.lists(st.text(max_size=12), max_size=3), st.sampled_from([[], LABELS])
)
def test_with_labels_what_is_left_is_never_longer_and_is_in_the_text(
    text: str, values: list[str], labels: list[str]
) -> None:
    left = without_values_at_its_ends(text, values, labels)
    assert len(left) <= len(text)
    assert left in text


@given(st.text(max_size=60), st.lists(st.text(max_size=12), max_size=3))
def test_what_is_left_is_never_longer_and_ends_the_text(text: str, values: list[str]) -> None:
    left = without_values_at_its_ends(text, values)
    assert len(left) <= len(text)
    assert left in text


@given(st.text(alphabet="上海市区路号0123456789 ", max_size=40))
def test_text_naming_no_value_is_kept_as_it_is(text: str) -> None:
    assert without_values_at_its_ends(text, ["OD2611250001"]) == text
