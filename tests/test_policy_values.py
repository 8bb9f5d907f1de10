"""A tool policy written in Python is refused when agent.yaml would refuse it.

Found by a walkthrough: ``ToolPolicy(kind="writ")`` was taken; the tool, a write, was then
retried as a read after a timeout and entered three times with one idempotency key.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from corral import ToolPolicy, tool
from corral.errors import ConfigInvalidError, ErrorCode
from corral.tools.policy import RateLimit, RetryPolicy


class Done(BaseModel):
    ok: bool


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "writ"},
        {"kind": "WRITE"},
        {"timeout_s": -1},
        {"timeout_s": 0},
        {"timeout_s": float("nan")},
        {"timeout_s": True},
        {"timeout_s": "10"},
        {"idempotent": "yes"},
        {"requires_confirmation": 1},
        {"latency_ms": -5},
        {"cost": float("inf")},
        {"equivalent_group": "  "},
        {"max_output_chars": 0},
        {"max_output_chars": 10.5},
        {"max_interrupted_calls": 0},
        {"max_interrupted_calls": True},
        {"retry": (2, (1.0,))},
        {"rate_limit": {"calls": 1, "per_s": 1}},
    ],
)
def test_a_policy_agent_yaml_would_refuse_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigInvalidError) as raised:
        ToolPolicy(**fields)
    assert raised.value.code is ErrorCode.CONFIG_INVALID
    assert next(iter(fields)) in raised.value.message


@pytest.mark.parametrize(
    "fields",
    [{"max_retries": -1}, {"max_retries": 11}, {"backoff_s": (-1.0,)}, {"backoff_s": [1.0]}],
)
def test_a_retry_policy_out_of_range_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigInvalidError):
        RetryPolicy(**fields)


def test_the_misspelt_write_is_refused_when_the_tool_is_declared() -> None:
    kind: Any = "writ"  # from a variable: the type checker does not see it
    with pytest.raises(ConfigInvalidError, match="'writ'"):

        @tool(policy=ToolPolicy(kind=kind))
        def book(room: str) -> Done:
            """Books a room."""
            return Done(ok=True)


def test_every_valid_policy_still_builds() -> None:
    policy = ToolPolicy(
        kind="write",
        idempotent=True,
        timeout_s=0.5,
        retry=RetryPolicy(0, ()),
        requires_confirmation=True,
        equivalent_group="rooms",
        latency_ms=0,
        cost=1,
        rate_limit=RateLimit(5, 1.0),
        max_output_chars=1,
        max_interrupted_calls=1,
    )
    assert policy.kind == "write" and policy.timeout_s == 0.5


def many(*names: str) -> Done:
    return Done(ok=True)


def named(**values: str) -> Done:
    return Done(ok=True)


def positional(n: int, /) -> Done:
    return Done(ok=True)


@pytest.mark.parametrize("fn", [many, named, positional])
def test_a_tool_whose_parameters_no_schema_can_say_is_refused_when_declared(fn: Any) -> None:
    """Found by a walkthrough: ``def varargs(*args: str)`` was declared, and its plan
    failed only when run (``PLAN_INVALID: required parameter 'args' is not bound``)."""
    with pytest.raises(ConfigInvalidError, match=f"tool '{fn.__name__}'"):
        tool(fn)


def test_a_declared_tool_sets_its_bound_on_interrupted_calls() -> None:
    """``max_interrupted_calls:`` in a declared tool's ``policy`` reaches its ToolPolicy."""
    from pydantic import ValidationError

    from corral.tools.declared import ToolPolicyConfig

    assert ToolPolicyConfig().to_policy().max_interrupted_calls == 3
    assert ToolPolicyConfig(max_interrupted_calls=1).to_policy().max_interrupted_calls == 1
    for wrong in (0, 101, "2"):
        with pytest.raises(ValidationError):
            ToolPolicyConfig(max_interrupted_calls=wrong)
