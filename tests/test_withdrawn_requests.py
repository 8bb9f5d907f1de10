"""An answer that takes the request back ends the run cancelled, as a declined step does.

Found by a walkthrough: asked "What is the new address?", "never mind, I will keep it"
became the address ("Change the delivery address of order OD2611250001 to "never mind, I
will keep it"?"), and asked for an order number, "forget it, cancel" was asked again and
then handed to a person.
"""

from __future__ import annotations

import pytest

from corral import MemoryStore, RunStatus, Runtime, load_agent
from corral.intent.confirmation import withdraws
from corral.testing import FixedEffects
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("never mind, I will keep it", True),
        ("算了不改了", True),
        ("forget it, cancel", True),
        ("不用了，谢谢", True),
        ("cancel", True),
        ("No thanks!", True),
        ("不要改", True),
        ("那就算了吧", True),  # found by a walkthrough: an opener before it hid it
        ("还是算了", True),
        ("先不改了", True),
        ("actually, never mind", True),
        ("ok, forget it", True),
        ("oh no, never mind", True),
        # re-reading 1eda806: asked for the new address, it was proposed as the address
        ("好的，不用改了", True),
        ("那就寄到公司吧", False),
        ("actually it's 上海市徐汇区漕溪北路100号", False),
        # an answer after all, or a new request: not taken back
        ("取消 OD2611250001", False),
        ("算了，还是寄到上海市徐汇区漕溪北路100号吧", False),
        ("算了，还是寄到我公司前台吧", False),  # found by review: no digit, still an answer
        ("never mind, ship it to my office instead", False),
        ("算了，OD2611250001 我还要，不取消了", True),  # found by a walkthrough: the id
        ("never mind, I'll keep OD2611250001, don't cancel it", True),  # kept it an answer
        ("上海市徐汇区漕溪北路100号", False),
        ("OD2611250001 发货了吗", False),
        ("cancellation policy?", False),
        ("nobody told me", False),
        ("", False),
    ],
)
def test_withdraws(line: str, meant: bool) -> None:
    assert withdraws(line) is meant


@pytest.mark.parametrize(
    ("example", "request_", "withdrawal", "asked_for"),
    [
        (
            "orders",
            "I put the wrong address on OD2611250001",
            "never mind, I will keep it",
            "new_address",
        ),
        ("aftersales", "I want a replacement", "forget it, cancel", "order_id"),
    ],
)
async def test_an_answer_that_takes_the_request_back_cancels_the_run(
    example: str, request_: str, withdrawal: str, asked_for: str
) -> None:
    agent = load_agent(ROOT / "examples" / example)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(request_, session_id="w1")
    assert asked.status is RunStatus.AWAITING_USER
    done = await runtime.start(withdrawal, session_id="w1")
    assert done.run_id == asked.run_id
    assert done.status is RunStatus.FINISHED and done.outcome == "cancelled"
    assert done.reply == "OK, I have left it as it was. Nothing was changed."
    state = await runtime.load_state(done.run_id)
    assert asked_for not in state.entities  # not taken as the value asked for
    assert not state.steps  # nothing was planned, nothing ran


async def test_a_question_s_answer_that_is_an_address_is_still_taken() -> None:
    runtime = Runtime(
        load_agent(ROOT / "examples" / "orders"), MemoryStore(), effects=FixedEffects()
    )
    await runtime.start("地址填错了 OD2611250001", session_id="w2")
    given = await runtime.start("算了，还是寄到上海市徐汇区漕溪北路100号吧", session_id="w2")
    assert given.status is RunStatus.AWAITING_CONFIRM


async def test_a_request_of_another_intent_is_not_taken_as_a_free_text_answer() -> None:
    """Found by a walkthrough: asked for the new address, "OD2611250001 发货了吗" became
    the address the confirmation proposed."""
    runtime = Runtime(
        load_agent(ROOT / "examples" / "orders"), MemoryStore(), effects=FixedEffects()
    )
    asked = await runtime.start("I put the wrong address on OD2611250001", session_id="w4")
    again = await runtime.start("OD2611250001 发货了吗", session_id="w4")
    # a question of its own (orders' questions interrupt): answered, and the address
    # question waits for its answer
    assert again.run_id != asked.run_id and again.status is RunStatus.FINISHED
    assert "waiting for your answer" in (again.reply or "") or "还在等" in (again.reply or "")
    state = await runtime.load_state(asked.run_id)
    assert state.status is RunStatus.AWAITING_USER and "new_address" not in state.entities
    given = await runtime.start("上海市徐汇区漕溪北路100号", session_id="w4")
    assert given.status is RunStatus.AWAITING_CONFIRM and given.run_id == asked.run_id


async def test_a_yes_is_no_free_text_answer() -> None:
    """Found by a walkthrough: asked for the new address, "好的" became the address, and
    the next "是的" wrote it."""
    runtime = Runtime(
        load_agent(ROOT / "examples" / "orders"), MemoryStore(), effects=FixedEffects()
    )
    asked = await runtime.start("我要改地址 OD2611250001", session_id="w5")
    yes = await runtime.start("好的", session_id="w5")
    # answered on its own (a thanks that closes), and the question is asked again
    assert "要改到哪个地址" in (yes.reply or "")
    state = await runtime.load_state(asked.run_id)
    assert state.status is RunStatus.AWAITING_USER and "new_address" not in state.entities
    given = await runtime.start("不用了，地址是北京市朝阳区建国路88号", session_id="w5")
    assert given.status is RunStatus.AWAITING_CONFIRM
    assert "「北京市朝阳区建国路88号」" in (given.reply or "")


async def test_an_address_with_a_logistics_word_is_still_the_address() -> None:
    """Found by review: "广州市白云区太和镇物流园路8号" read as the logistics intent, so it
    was asked again, then handed to a person."""
    runtime = Runtime(
        load_agent(ROOT / "examples" / "orders"), MemoryStore(), effects=FixedEffects()
    )
    await runtime.start("我要改地址 OD2611250001", session_id="w6")
    given = await runtime.start("广州市白云区太和镇物流园路8号", session_id="w6")
    assert given.status is RunStatus.AWAITING_CONFIRM
    assert "「广州市白云区太和镇物流园路8号」" in (given.reply or "")


async def test_taking_it_back_while_naming_the_order_asked_for_cancels() -> None:
    """Found by review: asked which order, "算了，OD2611250001 我还要，不取消了" filled the
    order number, and the cancellation was proposed."""
    runtime = Runtime(
        load_agent(ROOT / "examples" / "orders"), MemoryStore(), effects=FixedEffects()
    )
    await runtime.start("我要取消订单", session_id="w7")
    done = await runtime.start("算了，OD2611250001 我还要，不取消了", session_id="w7")
    assert done.status is RunStatus.FINISHED and done.outcome == "cancelled"
