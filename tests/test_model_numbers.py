"""Model output may not smuggle NaN or infinities to a tool: Python's JSON reader accepts them."""

from __future__ import annotations

import pytest

from corral.models.structured import parse_json


@pytest.mark.parametrize(
    "text",
    [
        '{"quantity": NaN}',
        '{"quantity": Infinity}',
        '{"args": {"amount": -Infinity}}',
        '{"amount": 1e999}',
        '{"steps": [{"args": {"n": 1e400}}]}',
    ],
)
def test_non_finite_numbers_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a value a tool can take"):
        parse_json(text)


def test_a_repaired_answer_is_checked_too() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        parse_json('Here you go: {"amount": 1e999, "note": "ok"')  # cut off: repaired


def test_ordinary_numbers_still_parse() -> None:
    assert parse_json('{"quantity": 2, "price": 19.5, "big": 1e300}') == (
        {"quantity": 2, "price": 19.5, "big": 1e300},
        False,
    )


@pytest.mark.parametrize("depth", [1000, 50_000])
def test_output_nested_too_deeply_is_refused_not_a_crash(depth: int) -> None:
    """Found by a walkthrough: 1 000 nested brackets (2 KB, within max_tokens) raised a
    RecursionError out of the run, which was then lost."""
    from corral.models.structured import parse_json

    for text in ('{"steps":' + "[" * depth + "]" * depth + "}", '{"steps":' + "[" * depth):
        with pytest.raises(ValueError, match="nested too deeply"):
            parse_json(text)
