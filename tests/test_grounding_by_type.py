"""A plan argument is grounded as the value the tool will receive, by its parameter's type.

Review of issue 9, findings 1-3: the tool's input model coerces leniently, so ``"200"``
for an ``int`` became 200 after it was "grounded" as a substring of OD2611200002; ``"0"``
for a ``date`` became 1970-01-01; ``"on"`` (in "phone") became ``True``; any "ok?" or
可以 grounded ``permanent: true``; the 2026 of a date grounded ``amount_cny: 2026``.
Each case is a real run whose model writes the value: it must never reach the tool.
"""

from __future__ import annotations

from typing import Any

import pytest

from corral import RunStatus, tool
from corral.intent.grounding import Evidence, ground_argument
from tests.test_model_planner_numbers import (
    CALLS,
    Refunded,
    deliver,
    refund,
    run,
    step,
    steps,
)


@tool
def close_account(order_id: str, permanent: bool = False) -> Refunded:
    """Close the account of an order's buyer (``permanent`` cannot be undone)."""
    CALLS.append({"close": order_id, "permanent": permanent})
    return Refunded(ok=True)


@pytest.mark.parametrize(
    ("tool_", "args", "message"),
    [
        (refund, {"amount_cny": "200"}, "refund order A1, my tracking is OD2611200002"),
        (refund, {"amount_cny": "12"}, "refund A12 please"),
        (refund, {"amount_cny": "1"}, "refund A1 please"),
        (refund, {"amount_cny": True}, "refund A1 yes please"),
        (deliver, {"day": "0"}, "refund A1 order OD2611200002"),
        (close_account, {"permanent": "on"}, "refund A1, the phone is broken"),
        (close_account, {"permanent": "t"}, "refund A1, it broke"),
        (close_account, {"permanent": "y"}, "refund A1, it is for my kid"),
        (close_account, {"permanent": 1}, "refund A1 order, 1 item"),
        (close_account, {"permanent": True}, "refund A1 可以帮我看看吗"),
        (close_account, {"permanent": True}, "refund A1, is it ok?"),
        (close_account, {"permanent": True}, "refund A1, confirm?"),
        (refund, {"amount_cny": 2026}, "refund A1 bought on 2026-05-03"),
        (refund, {"amount_cny": 10}, "refund A1, at 10:30"),
        (refund, {"amount_cny": 128}, "refund A1, it cost 128 dollars"),
    ],
)
async def test_a_coerced_or_unconfirmed_value_never_reaches_the_tool(
    tool_: Any, args: dict[str, Any], message: str
) -> None:
    CALLS.clear()
    plan = steps(step(tool_.name, **args))
    summary, calls = await run([tool_], [plan] * 3, message)
    assert CALLS == []
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "PLAN_INVALID"
    assert "was not given by the user" in calls[0]["reason"]


@pytest.mark.parametrize(
    ("tool_", "args", "message", "received"),
    [
        (refund, {"amount_cny": "300"}, "refund A1, 三百块", {"amount_cny": 300}),
        (refund, {"amount_cny": 300.0}, "refund A1, 300 yuan", {"amount_cny": 300}),
        (close_account, {"permanent": True}, "refund A1. Yes, close it.", {"permanent": True}),
        (close_account, {"permanent": "true"}, "refund A1，确认永久注销。", {"permanent": True}),
    ],
)
async def test_a_value_the_user_gave_runs(
    tool_: Any, args: dict[str, Any], message: str, received: dict[str, Any]
) -> None:
    CALLS.clear()
    summary, _ = await run([tool_], [steps(step(tool_.name, **args))], message)
    assert summary.status is RunStatus.FINISHED
    assert len(CALLS) == 1 and received.items() <= CALLS[0].items()


def test_the_parameter_type_decides_how_a_value_is_grounded() -> None:
    said = Evidence.of("order A12 was 2026-05-03 at 10:30, 300 yuan, ¥5 fee")
    assert not ground_argument("12", str, said)  # not a whole token
    assert ground_argument("a12", str, said) and ground_argument("A12", str, said)
    assert ground_argument("300", int, said, key="amount_cny")
    assert not ground_argument(300, int, said, key="amount_usd")  # yuan, not dollars
    assert not ground_argument(True, int, said)  # True is not 1
    assert ground_argument(2026, int, said, key="year")  # a calendar field may take it
    assert not ground_argument(2026, int, said, key="amount")
    assert ground_argument(["300", "5"], list[int], said, key="amounts_cny")
    assert not ground_argument(["300", "12"], list[int] | None, said)


def test_an_object_argument_with_a_reference_inside_is_grounded_as_written() -> None:
    said = Evidence.of("ship A12 to Lyon")
    assert ground_argument({"city": "Lyon", "order": None}, dict[str, str], said)
    assert not ground_argument({"city": "Lyo", "order": None}, dict[str, str], said)
