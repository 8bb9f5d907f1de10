"""A line that takes the waiting request back, then asks something else, declines it.

Found on main: to "确认取消订单 OD2611250001…吗？", "不取消了，帮我查下物流" ("I won't cancel
after all; check the delivery for me") looked the parcel up and left the cancellation
waiting, with "your earlier request is still waiting for your go-ahead ... reply 确认"
under the answer: one "确认" from the cancellation the customer had just taken back. So
did "算了，帮我查下物流", "never mind, where is my parcel" and, to a refund, "算了不退了，
帮我查一下物流".

A review of the first fix: a withdrawal is not always one. "不修了，坏了就直接换" says yes
to the exchange, "不要了，退吧" is said of the item, "算了，寄到…" gives the address after
all, and "不用了解" only begins with "不用了"; a request that writes in the rest is not a
question, and stays a request of its own beside the waiting one, as before.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus
from corral.intent.confirmation import withdraws_first
from tests.conftest import AFTERSALES, ORDERS
from tests.helpers import waiting_run_after

CANCEL = "取消订单 OD2611250001"
CANCEL_EN = "cancel order OD2611250001"
REFUND = "退款 OD2611200002"
REFUND_EN = "refund OD2611200002"
ADDRESS = "OD2611250001 地址改成 上海市浦东新区世纪大道100号"
ADDRESS_EN = "change the address of OD2611250001 to 100 Century Avenue, Shanghai"


def written(data_dir: Path) -> tuple[list[str], list[str]]:
    """The cancellations and refunds written."""
    with sqlite3.connect(data_dir / "orders.db") as db:
        cancels = [row[0] for row in db.execute("SELECT order_id FROM cancellations")]
        refunds = [row[0] for row in db.execute("SELECT order_id FROM refunds")]
    return cancels, refunds


@pytest.mark.parametrize(
    ("first", "line", "yes"),
    [
        (CANCEL, "不取消了，帮我查下物流", "确认"),
        (CANCEL, "算了，不取消了，帮我查下物流", "确认"),
        (CANCEL, "不用了，帮我查下物流", "确认"),
        (CANCEL_EN, "no thanks, where is my parcel?", "confirm"),
        (REFUND, "算了不退了，帮我查一下物流", "确认"),
        (REFUND, "不用了，OD2611200002 到哪了", "确认"),
        # a fourth review: a negation of the waiting request, then another order's
        # question, declines it as it did on main (the intent's unless)
        (CANCEL, "不要取消了，帮我查下 OD2611280008 的物流", "确认"),
        (REFUND, "不退款了，帮我查下 OD2611280008 的物流", "确认"),
        (CANCEL_EN, "don't cancel it, where is OD2611200002?", "confirm"),
        # a dash parts the two as a comma does (it ran them into one word)
        (CANCEL, "不用了——帮我查下物流", "确认"),
        (REFUND, "算了不退了—帮我查一下物流", "确认"),
        (CANCEL_EN, "no thanks—where is my parcel?", "confirm"),
    ],
)
def test_taking_the_request_back_before_another_one_declines_it(
    tmp_path: Path, first: str, line: str, yes: str
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        waiting = await runtime.start(first, session_id="s")
        assert waiting.status is RunStatus.AWAITING_CONFIRM, waiting
        answered = await runtime.start(line, session_id="s")
        declined = await runtime.summary(waiting.run_id)
        assert declined.status is RunStatus.FINISHED and declined.outcome == "cancelled"
        # the other request is answered, and nothing is left to say yes to
        assert answered.status is RunStatus.FINISHED and answered.outcome == "success"
        assert answered.intent is not None and answered.intent.label == "logistics"
        assert answered.pending is None and "确认" not in (answered.reply or "")
        assert "confirm" not in (answered.reply or "").lower()
        after = await runtime.start(yes, session_id="s")
        assert after.outcome != "success", after

    asyncio.run(talk())
    assert written(tmp_path) == ([], [])


@pytest.mark.parametrize(
    ("first", "line"),
    [
        # a question beside it, no taking back: the confirmation waits, as it did
        (CANCEL_EN, "actually, where is my parcel?"),
        (CANCEL, "OD2611250001 物流到哪了"),
        # "I don't want it, cancel it" says the cancellation again: not declined
        (CANCEL, "不要了，取消吧"),
        # a review of the first fix: a yes, an urging or an answer after the withdrawal
        (CANCEL, "算了，确认吧，顺便查下物流"),
        (CANCEL, "算了算了，确认取消，顺便帮我查下另一单 OD2611200002 的物流"),
        (CANCEL, "不用了解了，确认取消，另外 OD2611200002 物流到哪了"),
        (CANCEL, "不需要了，赶紧退款吧"),
        (REFUND, "不要了，包裹还没到，直接退"),
        (REFUND, "不要了，物流太慢了，退吧"),
        (REFUND, "不用了，物流显示已经签收了，退吧"),
        (REFUND_EN, "forget it, the delivery is too slow, go ahead"),
        (ADDRESS, "算了，寄到上海市浦东新区快递驿站"),
        (ADDRESS, "不用了，送到小区门口的快递柜"),
        (ADDRESS, "算了，还是改到世纪大道100号吧，快递能送到吗"),
        (ADDRESS_EN, "never mind, send it to the parcel locker at 5 Century Avenue, Shanghai"),
        # another request that writes is a request of its own beside it, as before
        (REFUND, "不用了，帮我取消 OD2611280008"),
        # a second review: a line that puts it off, and asks first, takes nothing back
        (REFUND, "算了，先帮我查下物流再决定"),
        (REFUND, "不用了，先查物流，等下再确认"),
        (REFUND, "不退了，先看物流，明天再说"),
        (REFUND, "算了，物流到哪了？到了的话我再退"),
        (REFUND_EN, "never mind for now, where is my parcel? I'll decide after"),
        # a third review: a withdrawal of another action than the one asked
        (REFUND, "不取消了，退款多久到账？"),
        (REFUND, "不用改，退款多久到账？"),
        (REFUND_EN, "never mind cancelling, how long does the refund take?"),
        (REFUND_EN, "never mind the address, where is my parcel?"),
        (CANCEL, "不退了，取消后钱什么时候到？"),
        (CANCEL, "不修了，这单发货了没"),
        (REFUND, "算了，查下物流然后确认"),
        # a sixth review: "算了" and "never mind" may as well give in ("oh well"): alone
        # before a question they take nothing back
        (CANCEL, "算了，帮我查下物流"),
        (CANCEL, "那就算了，帮我查物流"),
        (CANCEL_EN, "never mind, where is my parcel"),
        (CANCEL, "算了，办了吧，物流呢"),
        (CANCEL_EN, "never mind, proceed. where is my parcel?"),
        (CANCEL, "算了，钱什么时候退回来？"),
        (REFUND, "算了，物流到哪了？没到就退"),
        (REFUND, "不用了，物流到哪了？没到就退"),
        (REFUND_EN, "no thanks, please proceed. where is my parcel?"),
        # a seventh review: the refund's money, and "for now"
        (REFUND, "不用了，钱退到哪个账户"),
        (REFUND, "不用了，钱什么时候到账"),
        (REFUND, "先不用了，帮我查下物流"),
        # ...and a refund called off at a cancellation's prompt calls off another thing
        (CANCEL, "取消退款"),
        (CANCEL, "撤回退款申请"),
        (CANCEL, "取消 OD2611250001 的退款"),
        (CANCEL_EN, "cancel the refund"),
        # a fourth review: a yes, or a question about the request itself, after it
        (REFUND, "算了，就退吧。物流到哪了"),
        (CANCEL, "算了，你办吧，物流呢"),
        (CANCEL, "算了，那就这样，查下物流"),
        (CANCEL_EN, "never mind, do it, where is my parcel?"),
        (CANCEL, "算了，取消后钱什么时候到？"),
        (REFUND, "算了，退款多久到账？"),
        # a fifth review: keeping an application is no call-off of it
        (REFUND, "我不想取消退款申请"),
        (REFUND, "千万别撤回退款申请"),
        (CANCEL, "取消订单，不是取消退款申请"),
    ],
)
def test_a_line_that_takes_nothing_back_leaves_the_confirmation_waiting(
    tmp_path: Path, first: str, line: str
) -> None:
    kept = waiting_run_after(ORDERS, tmp_path, first, line)
    assert kept.status is RunStatus.AWAITING_CONFIRM or kept.outcome == "success", kept


@pytest.mark.parametrize(
    "line",
    [
        "不修了，坏了就换吧",
        # a fourth review: the exchange's prompt says 保修, no repair
        "不修了，保修期多久",
        "不修了，维修进度怎么样",
        "算了，换了吧，保修期多久",
        "不用了，给我换了吧，维修进度怎么样",
        "别撤回换新申请，打印机真的坏了",
        "我不想撤回换新申请",
        "不用了，打印机坏了好几次了，直接换",
        "forget it, the printer is dead, just send a new one",
        "never mind, it still doesn't work, go ahead",
        "no thanks, I don't want a repair, just go ahead",
    ],
)
def test_a_yes_to_the_exchange_after_a_withdrawal_does_not_decline_it(
    tmp_path: Path, line: str
) -> None:
    kept = waiting_run_after(AFTERSALES, tmp_path, "HD20240501 打印机坏了，申请换新", line)
    assert kept.status is RunStatus.AWAITING_CONFIRM or kept.outcome == "success", kept


@pytest.mark.parametrize(
    ("line", "prompt", "expected"),
    [
        ("不取消了，帮我查下物流", "确认取消订单 OD2611250001 吗？", True),
        ("不取消了，帮我查下物流", "确认为这单退款 459 元吗？", False),
        ("不退了，帮我查下物流", "确认为这单退款 459 元吗？", True),
        ("不退了，帮我查下物流", "确认取消订单 OD…吗？取消后钱会原路退回。", False),
        ("不用了，帮我查下物流", "确认为这单退款 459 元吗？", True),
    ],
)
def test_a_withdrawal_that_names_its_action_takes_back_only_that_action(
    line: str, prompt: str, expected: bool
) -> None:
    assert withdraws_first(line, prompt) is expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("算了，帮我查下物流", False),
        ("不取消了，帮我查下物流", True),
        ("那就算了，不退了，帮我查物流", True),
        ("never mind, where is my parcel?", False),
        ("No thanks. Where is my parcel", True),
        # only a withdrawal: confirmation_answer's, not this
        ("算了", False),
        ("算了吧", False),
        ("不用了，谢谢", False),
        ("never mind, I'll keep it", False),
        ("算了，不退了", False),
        # no withdrawal first
        ("帮我查下物流，算了", False),
        ("actually, where is my parcel?", False),
        ("取消吧", False),
        ("", False),
        # a review: a yes, an urging, an answer, a longer word, the item
        ("算了，确认吧，顺便查下物流", False),
        ("不修了，坏了就直接换", False),
        ("never mind, go ahead and check the parcel", False),
        ("算了，寄到公司吧", False),
        ("不用了解了，物流到哪了", False),
        ("不要了，物流太慢了", False),
        ("算了不退了，帮我查一下物流", True),
    ],
)
def test_withdraws_first_reads_a_withdrawal_that_opens_a_longer_line(
    line: str, expected: bool
) -> None:
    assert withdraws_first(line) is expected
