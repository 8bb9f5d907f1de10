"""The reply check's units: currencies apart, set phrases and ordinal dates not refused.

Review of issue 9, finding 8: "Refund of 128 dollars" passed for ``amount_cny: 128``
(every currency was one unit), while harmless replies cost a re-ask and then the
template: 祝您有愉快的一天 (一天 read as one day), "December 3rd" (read as an id) and
"20% off" for ``discount: 0.2``.
"""

from __future__ import annotations

import pytest

from corral.reply.model_reply import reply_problems


@pytest.mark.parametrize(
    ("reply", "facts"),
    [
        ("Refund of 128 dollars is on its way.", {"amount_cny": 128}),
        ("Refund of €128 is on its way.", {"amount_cny": 128}),
        ("已退款 128 美元。", {"refund_cny": 128}),
        ("It will arrive on December 4th.", {"eta": "2026-12-03"}),
    ],
)
def test_a_wrong_currency_or_day_is_refused(reply: str, facts: dict[str, object]) -> None:
    assert reply_problems(reply, facts, "refund please")[0].startswith(
        "states values no tool returned: "
    )


@pytest.mark.parametrize(
    ("reply", "facts"),
    [
        ("已退款 128 元，祝您有愉快的一天！", {"amount_cny": 128}),
        ("Refund of ¥128 / 128 RMB is on its way.", {"amount_cny": 128}),
        ("It will arrive on December 3rd.", {"eta": "2026-12-03"}),
        ("You get 20% off.", {"discount": 0.2}),
    ],
)
def test_grounded_currencies_phrases_ordinals_and_percentages_pass(
    reply: str, facts: dict[str, object]
) -> None:
    assert reply_problems(reply, facts, "refund please") == []
