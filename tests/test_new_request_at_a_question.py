"""A new request of another intent typed while a question is open is not its answer.

Found by a walkthrough: asked which order to cancel, "先帮我查一下 OD2611250001 到哪了"
(first tell me where OD2611250001 is) filled the order and asked to confirm the cancel;
"where is OD2611250001 right now?" did the same in English. Such a line is read as the
run's new message: the cancel is set aside, the parcel is tracked. A bare answer
("OD2611250001", "是OD2611250001", "OD2611250001 那个") still fills the order.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from corral import MemoryStore, RunStatus, Runtime, load_agent
from corral.planning.clarification import another_request
from corral.testing import FixedEffects
from tests.conftest import ROOT

ORDERS = ROOT / "examples" / "orders"
TRACKED = ["get_order", "get_logistics", "generate_reply"]


@pytest.mark.parametrize(
    ("line", "asked_intent", "slot", "meant"),
    [
        # a request of another intent that names or asks something
        ("先帮我查一下 OD2611250001 到哪了", "cancel", "order_id", True),
        ("where is OD2611250001 right now?", "cancel", "order_id", True),
        ("actually, where is my order OD2611250001?", "cancel", "order_id", True),
        ("我要退款 OD2611250001", "cancel", "order_id", True),
        ("OD2611250001 发货了吗", "change_address", "new_address", True),
        ("has it shipped?", "change_address", "new_address", True),
        # an answer: a bare value, one pointed at, the same intent, an address
        ("OD2611250001", "cancel", "order_id", False),
        ("是OD2611250001", "cancel", "order_id", False),
        ("OD2611250001 那个", "cancel", "order_id", False),
        ("单号 OD2611250001", "cancel", "order_id", False),
        ("OD2611250001 快递还没到的那个", "cancel", "order_id", False),
        ("the one that hasn't been delivered, OD2611250001", "cancel", "order_id", False),
        ("取消 OD2611250001", "cancel", "order_id", False),
        ("广州市白云区太和镇物流园路8号", "change_address", "new_address", False),
        ("查一下物流", "cancel", "order_id", False),  # names and asks nothing: asked again
    ],
)
def test_another_request(line: str, asked_intent: str, slot: str, meant: bool) -> None:
    intent = load_agent(ORDERS).intent
    found = intent.entities.extract(line, datetime(2026, 11, 29, tzinfo=UTC), answering=slot)
    assert another_request(line, intent.rule_intent(line), asked_intent, found) is meant


@pytest.mark.parametrize(
    ("request_", "line", "said"),
    [
        ("取消订单", "先帮我查一下 OD2611250001 到哪了", "还没发货"),
        ("cancel my order", "where is OD2611250001 right now?", "hasn't shipped"),
    ],
)
async def test_a_new_request_typed_at_a_question_is_handled_not_taken_as_the_answer(
    request_: str, line: str, said: str
) -> None:
    runtime = Runtime(load_agent(ORDERS), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(request_, session_id="n1")
    assert asked.status is RunStatus.AWAITING_USER
    done = await runtime.start(line, session_id="n1")
    assert done.run_id == asked.run_id  # the run's new message, the cancel set aside
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    assert said in (done.reply or "")
    assert done.pending is None  # no confirmation of a cancel is asked
    state = await runtime.load_state(done.run_id)
    assert state.intent is not None and state.intent.label == "logistics"
    assert [s.tool for s in state.steps.values()] == TRACKED
    # the cancel can be asked for again: the order named is carried over
    again = await runtime.start("那取消吧", session_id="n1")
    assert again.run_id != done.run_id and again.status is RunStatus.AWAITING_CONFIRM
    assert "OD2611250001" in (again.reply or "")


@pytest.mark.parametrize("answer", ["OD2611250001", "是OD2611250001", "OD2611250001 那个"])
async def test_a_bare_answer_still_fills_the_order(answer: str) -> None:
    runtime = Runtime(load_agent(ORDERS), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("取消订单", session_id="n2")
    given = await runtime.start(answer, session_id="n2")
    assert given.run_id == asked.run_id and given.status is RunStatus.AWAITING_CONFIRM
    state = await runtime.load_state(given.run_id)
    assert state.intent is not None and state.intent.label == "cancel"
    assert state.entities["order_id"] == "OD2611250001"
