"""The loop guard's keys: two calls or results are the same exactly when their canonical
JSON is, however the key was reached (a flat dict is keyed without encoding it)."""

from __future__ import annotations

import datetime
import decimal
import enum
import itertools
from typing import Any

import pytest

from corral.hashing import canonical_json
from corral.verify.loop_guard import LoopGuard, value_key


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    ONE = 1


class Tag(enum.StrEnum):
    RED = "red"


DAY = datetime.date(2026, 12, 1)

VALUES: list[Any] = [
    None,
    {},
    {"a": 1},
    {"a": True},
    {"a": 1.0},
    {"a": "1"},
    {"a": None},
    {"a": Level.ONE},
    {"a": Tag.RED},
    {"a": "red"},
    {"a": Colour.RED},
    {"a": "Colour.RED"},
    {"a": DAY},
    {"a": "2026-12-01"},
    {"a": decimal.Decimal("1")},
    {"a": True, "b": "x"},
    {"b": "x", "a": 1},
    {"a": 1, "b": 2},
    {"b": 2, "a": 1},
    {"a": [1]},
    {"a": (1,)},
    {"a": {"b": 1}},
    {1: "x"},
    {"1": "x"},
    {"a": float("nan")},
    {"a": -0.0},
    {"a": 0.0},
    [1, 2],
    "text",
    {"value": 3},
]


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations_with_replacement(VALUES, 2)))
def test_keys_are_equal_exactly_when_the_canonical_json_is(a: Any, b: Any) -> None:
    assert (value_key(a) == value_key(b)) is (canonical_json(a) == canonical_json(b))


def test_the_third_step_with_one_exact_call_is_a_loop_and_a_boolean_is_not_a_number() -> None:
    guard = LoopGuard(max_identical_calls=2)
    assert guard.observe_call("s1", "add", {"a": 1, "b": 2}) is None
    assert guard.observe_call("s2", "add", {"b": 2, "a": Level.ONE}) is None
    assert guard.observe_call("s3", "add", {"a": True, "b": 2}) is None
    assert guard.observe_call("s4", "add", {"a": 1, "b": 2}) == (
        "add was called with the same arguments by 3 steps (s1, s2, s4)"
    )


def test_a_state_seen_again_is_reported_once_the_facts_are_the_same() -> None:
    guard = LoopGuard()
    assert guard.observe_result("add", {"a": 1}, {"value": 2}) is None
    assert guard.observe_result("add", {"a": 1}, {"value": True}) is None
    assert guard.observe_result("add", {"a": 1}, {"value": 2}) is not None
    guard.fact_written("total", 2)
    assert guard.observe_result("add", {"a": 1}, {"value": 2}) is None


def test_a_result_keys_the_arguments_alike_whether_or_not_they_were_the_calls_own() -> None:
    guard = LoopGuard()
    args = {"a": 1}
    assert guard.observe_call("s1", "add", args) is None
    assert guard.observe_result("add", args, {"value": 2}) is None  # the call's key, reused
    assert guard.observe_result("add", {"a": Level.ONE}, {"value": 2}) is not None  # an equal copy
    assert guard.called == {}
