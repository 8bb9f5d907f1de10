"""A plain yes after an unclear line it may answer approves nothing; a call-off by what
the prompt states declines; a question declines nothing.

Reproduced on main (a review of the orders demo, OD2611200002's refund of 459 waiting):

- "不退了吗" ("not refunding any more?"), "是不是已经发货了", "退款政策是什么" or "取消耳机的
  退款申请" was answered "didn't understand" and the prompt again; a "对" or "好的" after
  it, which may as well answer that line ("right, not refunding"), submitted the refund.
  Now only a yes in so many words does (the reminder asks for 确认), and a plain yes
  gets the prompt shown once more.
- "取消键盘的退款申请" and "取消459元的退款申请" name the waiting refund by what its prompt
  states (the keyboard, 459 元), not by a value the run holds: each was read as a refund
  of its own, proposed beside the waiting one, and "好的" submitted it.
- "退款政策是什么" at the refund's prompt declined the refund: the intent's ``unless``
  (a question of policy asks for no refund) was read as a no to it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent
from corral.intent.confirmation import says_a_negation, unsettles_a_yes
from corral.testing import FixedEffects
from tests.conftest import ORDERS

REFUND = "OD2611200002 退款"
SESSION = "s"


def refunds(agent: Agent) -> list[str]:
    """The orders refunded, as the demo's database holds them (written by the tool)."""
    with sqlite3.connect(agent.deps["db"]) as conn:
        return [row[0] for row in conn.execute("SELECT order_id FROM refunds")]


async def refund_waiting(tmp_path: Path) -> tuple[Agent, Runtime, str, str]:
    """The orders demo with OD2611200002's refund waiting: agent, runtime, run, prompt."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(REFUND, session_id=SESSION)
    assert paused.status is RunStatus.AWAITING_CONFIRM and paused.pending is not None
    return orders, runtime, paused.run_id, paused.pending.prompt


async def assert_refunded_by(orders: Agent, runtime: Runtime, waiting: str, line: str) -> None:
    """``line`` approves the waiting refund: its run finishes, and the order is refunded."""
    done = await runtime.start(line, session_id=SESSION)
    assert done.run_id == waiting and done.status is RunStatus.FINISHED, done
    assert refunds(orders) == ["OD2611200002"]


@pytest.mark.parametrize(
    "unclear",
    [
        "不退了吗",
        "是不是已经发货了",
        "退款政策是什么",
        "取消耳机的退款申请",
        "我再想想，退款会扣运费吗",
    ],
)
@pytest.mark.parametrize("yes", ["对", "好的"])
async def test_a_plain_yes_after_an_unclear_line_it_may_answer_approves_nothing(
    tmp_path: Path, unclear: str, yes: str
) -> None:
    orders, runtime, waiting, prompt = await refund_waiting(tmp_path)
    aside = await runtime.start(unclear, session_id=SESSION)
    assert aside.outcome == "unclear" and prompt in (aside.reply or ""), aside
    answered = await runtime.start(yes, session_id=SESSION)
    assert answered.run_id != waiting and prompt in (answered.reply or ""), answered
    assert (await runtime.summary(waiting)).status is RunStatus.AWAITING_CONFIRM
    assert refunds(orders) == []
    await assert_refunded_by(orders, runtime, waiting, "确认")


async def test_a_plain_yes_said_again_after_the_prompt_shown_once_more_approves(
    tmp_path: Path,
) -> None:
    """ "对" after "不退了吗" shows the prompt once more (asking nothing else): a "对" after
    that is a yes to it, read as right after the prompt."""
    orders, runtime, waiting, prompt = await refund_waiting(tmp_path)
    await runtime.start("不退了吗", session_id=SESSION)
    again = await runtime.start("对", session_id=SESSION)
    assert again.outcome == "unclear" and again.pending is None and prompt in (again.reply or "")
    await assert_refunded_by(orders, runtime, waiting, "对")


async def test_a_plain_yes_after_an_unclear_line_that_says_nothing_still_approves(
    tmp_path: Path,
) -> None:
    orders, runtime, waiting, _ = await refund_waiting(tmp_path)
    assert (await runtime.start("嗯那个", session_id=SESSION)).outcome == "unclear"
    await assert_refunded_by(orders, runtime, waiting, "对")


@pytest.mark.parametrize(
    "line",
    [
        "取消键盘的退款申请",
        "取消459元的退款申请",
        "取消 459 元的退款",
        # a second review: pointers of more than one word point at it all the same
        "取消我刚才的退款申请",
        "取消这笔订单的退款",
        "帮我取消刚刚那个的退款申请吧",
    ],
)
async def test_a_call_off_naming_what_the_prompt_states_declines_the_refund(
    tmp_path: Path, line: str
) -> None:
    orders, runtime, waiting, _ = await refund_waiting(tmp_path)
    answered = await runtime.start(line, session_id=SESSION)
    assert answered.run_id == waiting and answered.outcome == "cancelled", answered
    after = await runtime.start("好的", session_id=SESSION)
    assert after.pending is None and refunds(orders) == []


@pytest.mark.parametrize("line", ["取消耳机的退款申请", "取消699元的退款申请"])
async def test_a_call_off_naming_something_else_proposes_nothing_and_declines_nothing(
    tmp_path: Path, line: str
) -> None:
    """The earphones are another order's, and 699 is not this refund: no second refund is
    proposed beside the waiting one, and the waiting one is not declined."""
    orders, runtime, waiting, _ = await refund_waiting(tmp_path)
    answered = await runtime.start(line, session_id=SESSION)
    assert answered.run_id != waiting and answered.pending is None, answered
    assert (await runtime.summary(waiting)).status is RunStatus.AWAITING_CONFIRM
    assert refunds(orders) == []


@pytest.mark.parametrize("line", ["退款政策是什么", "我再想想，退款会扣运费吗"])
async def test_a_question_about_the_refund_declines_nothing(tmp_path: Path, line: str) -> None:
    _, runtime, waiting, _ = await refund_waiting(tmp_path)
    await runtime.start(line, session_id=SESSION)
    assert (await runtime.summary(waiting)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    ("line", "unsettles"),
    [
        ("不退了吗", True),
        ("是不是已经发货了", True),
        ("what is the refund policy?", True),
        ("I don't know", True),
        ("取消耳机的退款申请", True),
        ("再考虑一下", True),
        ("嗯那个", False),
        ("hmm", False),
        ("asdf", False),
    ],
)
def test_what_unsettles_a_yes(line: str, unsettles: bool) -> None:
    assert unsettles_a_yes(line) is unsettles


@pytest.mark.parametrize(
    ("line", "negation"),
    [("不退了", True), ("don't cancel it", True), ("别发了", True), ("退款政策是什么", False)],
)
def test_what_says_a_negation(line: str, negation: bool) -> None:
    assert says_a_negation(line) is negation


# A review of the first version: after an unclear line a yes may answer, everything but a
# plain yes was read as after a reminder, and a switch, a withdrawal or a yes that says the
# action no longer reached the waiting run (a refund switched away stayed one "confirm"
# from being made beside the other).
@pytest.mark.parametrize(
    ("first", "unclear", "line"),
    [
        ("refund OD2611200002", "wait what?", "refund OD2611100003 instead"),
        ("OD2611200002 退款", "不退了吗", "算了，还是退款 OD2611100003 吧"),
        ("OD2611200002 退款", "不退了吗", "不用了，物流到哪了"),
        ("取消订单 OD2611250001", "是不是还没发货？", "算了不取消了，改地址吧"),
        ("refund OD2611200002", "wait what?", "no thanks, where is my parcel?"),
    ],
)
async def test_after_an_unclear_line_a_no_or_a_switch_still_declines(
    tmp_path: Path, first: str, unclear: str, line: str
) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    waiting = await runtime.start(first, session_id=SESSION)
    assert waiting.status is RunStatus.AWAITING_CONFIRM
    assert (await runtime.start(unclear, session_id=SESSION)).outcome == "unclear"
    await runtime.start(line, session_id=SESSION)
    assert (await runtime.summary(waiting.run_id)).outcome == "cancelled"


@pytest.mark.parametrize(
    ("first", "unclear", "yes"),
    [
        ("取消订单 OD2611250001", "是不是还没发货？", "确认取消"),
        ("取消订单 OD2611250001", "是不是还没发货？", "好的，取消吧"),
        ("OD2611200002 退款", "是不是已经发货了", "是的，退吧"),
        ("OD2611200002 退款", "是不是已经发货了", "确认"),
    ],
)
async def test_after_an_unclear_line_a_yes_beyond_doubt_approves(
    tmp_path: Path, first: str, unclear: str, yes: str
) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    waiting = await runtime.start(first, session_id=SESSION)
    await runtime.start(unclear, session_id=SESSION)
    done = await runtime.start(yes, session_id=SESSION)
    assert done.run_id == waiting.run_id and done.outcome == "success", done


@pytest.mark.parametrize(
    "line",
    ["取消上一单的退款", "取消之前那个的退款申请", "取消老婆的退款申请", "取消鼠标的退款申请"],
)
async def test_a_call_off_of_another_or_an_unknown_one_declines_nothing(
    tmp_path: Path, line: str
) -> None:
    """A review: the wider call-off pattern declined the keyboard's refund for these."""
    orders, runtime, waiting, _ = await refund_waiting(tmp_path)
    answered = await runtime.start(line, session_id=SESSION)
    assert answered.pending is None, answered  # no second refund proposed
    assert (await runtime.summary(waiting)).status is RunStatus.AWAITING_CONFIRM
    await runtime.start("好的", session_id=SESSION)
    assert refunds(orders) == []


@pytest.mark.parametrize(
    "line",
    [
        "OD2611280008 为什么被取消了",
        "为什么取消不了 OD2611280008",
        "为什么不能取消订单 OD2611250001？",
    ],
)
async def test_why_a_cancellation_is_asked_about_declines_none(tmp_path: Path, line: str) -> None:
    """A second review: a why-question is no cancellation request, and no "no" to the
    cancellation waiting either (it declined OD2611250001's)."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    waiting = await runtime.start("取消订单 OD2611250001", session_id=SESSION)
    answered = await runtime.start(line, session_id=SESSION)
    assert answered.intent is not None and answered.intent.label == "query_order", answered
    assert (await runtime.summary(waiting.run_id)).status is RunStatus.AWAITING_CONFIRM
