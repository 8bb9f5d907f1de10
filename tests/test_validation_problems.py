"""Config, tool arguments and model output describe pydantic's problems one way."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, RootModel, ValidationError

from corral import parse_config
from corral.errors import ConfigInvalidError
from corral.validation import validation_problems


class Inner(BaseModel):
    n: int


class Outer(BaseModel):
    a: int
    inner: Inner
    tags: list[str]


def _error(model: type[BaseModel], data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


def test_each_problem_is_where_then_why_and_the_list_is_cut_at_the_limit() -> None:
    exc = _error(Outer, {"a": "x", "inner": {"n": "y"}, "tags": [1]})
    assert validation_problems(exc, 10) == (
        "a: Input should be a valid integer, unable to parse string as an integer; "
        "inner.n: Input should be a valid integer, unable to parse string as an integer; "
        "tags.0: Input should be a valid string"
    )
    assert validation_problems(exc, 1) == (
        "a: Input should be a valid integer, unable to parse string as an integer"
    )


def test_a_problem_with_the_whole_value_is_named_by_root() -> None:
    exc = _error(RootModel[int], "x")
    assert validation_problems(exc, 8) == (
        ": Input should be a valid integer, unable to parse string as an integer"
    )
    assert validation_problems(exc, 8, root="output").startswith("output: Input should")


def test_a_config_error_lists_its_problems_in_that_form() -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        parse_config({"name": "x", "intents": "nope"}, source="agent.yaml")
    assert caught.value.message.startswith("agent.yaml: intents: ")
