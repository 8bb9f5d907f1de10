"""A line that takes a question's request back, then asks something else, is both.

Found on main: asked for a refund's order id, "算了，帮我查下我的订单" or "never mind,
show me my orders" ended the refund (the withdrawal) and the request after it was lost:
the orders were never listed. The withdrawal still ends the run; the line is then a run of
its own, as a withdrawal then a question is at a confirmation
(``test_withdrawn_then_another_request.py``). Not where what follows would write
("算了，取消吧" takes the refund back and cancels no order), nor where it is only a
withdrawal or a thanks.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.agent import Agent
from corral.contracts import RunStatus, RunSummary
from corral.effects import FixedEffects
from tests.conftest import ORDERS, ROOT
from tests.helpers import corral_cli
from tests.serving import client, load, serving

LISTED = ("OD2611280008", "OD2611250001", "OD2611200002")


async def _asked_for_the_order(tmp_path: Path) -> tuple[Agent, Runtime, RunSummary]:
    """The orders example, and a refund of session ``s`` asking which order."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("我要退款", session_id="s")
    assert asked.status is RunStatus.AWAITING_USER, asked
    return orders, runtime, asked


def _written(orders: Agent) -> int:
    """Rows any of the orders example's write tools made."""
    with sqlite3.connect(orders.deps["db"]) as conn:
        return sum(
            int(conn.execute(f"SELECT count(*) FROM {ledger}").fetchone()[0])
            for ledger in ("refunds", "cancellations", "address_changes")
        )


@pytest.mark.parametrize(
    "line",
    [
        "算了，帮我查下我的订单",
        "never mind, show me my orders",
        "I changed my mind, show me my orders",
        "算了不退了，帮我查一下我的订单",
        "算了，帮我查下我自己的订单",  # a review of 64ca6d5: whose orders, not who looks
    ],
)
async def test_asked_for_the_order_a_withdrawal_then_a_question_answers_it(
    line: str, tmp_path: Path
) -> None:
    orders, runtime, asked = await _asked_for_the_order(tmp_path)
    answered = await runtime.start(line, session_id="s")
    withdrawn = await runtime.summary(asked.run_id)
    assert withdrawn.status is RunStatus.FINISHED and withdrawn.outcome == "cancelled"
    assert answered.run_id != asked.run_id and answered.outcome == "success", answered
    assert answered.intent is not None and answered.intent.label == "query_order"
    reply = answered.reply or ""
    assert all(order in reply for order in LISTED), reply
    # told that the refund was dropped, then the list
    assert reply.index(LISTED[0]) > 0 and answered.pending is None
    assert _written(orders) == 0


@pytest.mark.parametrize(
    "line", ["never mind, show me my orders", "算了，查下我所有的订单", "算了，我有哪些订单"]
)
async def test_at_an_order_s_question_a_withdrawal_then_all_orders_lists_them(
    line: str, tmp_path: Path
) -> None:
    """Found on main: asked for OD2611280008's new address, each listed that order alone
    (the run's order carried into the request after the withdrawal)."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("OD2611280008 我要改地址", session_id="s")
    assert asked.status is RunStatus.AWAITING_USER, asked
    answered = await runtime.start(line, session_id="s")
    withdrawn = await runtime.summary(asked.run_id)
    assert withdrawn.outcome == "cancelled" and answered.outcome == "success", answered
    assert all(order in (answered.reply or "") for order in LISTED), answered.reply
    assert _written(orders) == 0


@pytest.mark.parametrize(
    "line",
    [
        "算了",
        "算了，谢谢",  # a thanks after it is the withdrawal's
        "算了，取消吧",  # an order's cancellation by its words: only the refund is dropped
        "算了，不要了",
        "never mind",
        # a review of 2309382: each declined the lookup it names, which was made
        "算了，我自己查一下订单号",
        "不用了，订单状态我看过了",
        "no thanks, I'll check my order status myself",
    ],
)
async def test_asked_for_the_order_a_withdrawal_alone_only_ends_the_run(
    line: str, tmp_path: Path
) -> None:
    orders, runtime, asked = await _asked_for_the_order(tmp_path)
    back = await runtime.start(line, session_id="s")
    assert back.run_id == asked.run_id and back.outcome == "cancelled", back
    assert len(runtime.store.list_runs()) == 1
    assert _written(orders) == 0


def test_over_http_a_withdrawal_then_a_question_answers_it(tmp_path: Path) -> None:
    agent = load(ROOT / "examples" / "orders", tmp_path / "home")
    with serving(agent, home=tmp_path / "home") as url, client(url) as http:
        post = "/agents/orders/runs"
        asked = http.post(post, json={"session_id": "web", "message": "我要退款"}).json()
        assert asked["status"] == "awaiting_user", asked
        line = "never mind, show me my orders"
        back = http.post(post, json={"session_id": "web", "message": line}).json()
        assert back["run_id"] != asked["run_id"] and back["outcome"] == "success", back
        assert all(order in back["reply"] for order in LISTED), back
        withdrawn = http.get(f"/runs/{asked['run_id']}").json()
        assert withdrawn["outcome"] == "cancelled", withdrawn


def test_in_the_cli_chat_a_withdrawal_then_a_question_answers_it(tmp_path: Path) -> None:
    lines = "我要退款\n算了，帮我查下我的订单\n/quit\n"
    done = corral_cli(tmp_path / "home", "chat", str(ORDERS), "--session", "c", stdin=lines)
    said = done.stdout
    assert "这次先不办了" in said and all(order in said for order in LISTED), said


async def test_asked_for_an_exchange_s_order_a_withdrawal_then_a_question_answers_it(
    tmp_path: Path,
) -> None:
    aftersales = load_agent(ROOT / "examples" / "aftersales", data_dir=tmp_path / "as")
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("我的打印机上周坏了，能换新吗？", session_id="s")
    assert asked.status is RunStatus.AWAITING_USER, asked
    answered = await runtime.start("算了，打印机保修多久", session_id="s")
    assert answered.run_id != asked.run_id and answered.outcome == "success", answered
    assert "60 个月" in (answered.reply or "")
    assert (await runtime.summary(asked.run_id)).outcome == "cancelled"
    # "算了，帮我报修" would write (a repair is booked at once): only the exchange ends
    other = await runtime.start("我的打印机上周坏了，能换新吗？", session_id="t")
    back = await runtime.start("算了，帮我报修", session_id="t")
    assert back.run_id == other.run_id and back.outcome == "cancelled", back


@pytest.mark.parametrize(
    "line",
    [
        # a review of 2309382: the waiting run's order chose the cancel plan of the new
        # run, and a yes cancelled the order
        "算了吧，订单状态改为已取消",
        "never mind, mark my order as cancelled",
    ],
)
async def test_at_an_order_s_question_a_withdrawal_then_a_write_only_ends_the_run(
    line: str, tmp_path: Path
) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("OD2611280008 我要改地址", session_id="s")
    assert asked.status is RunStatus.AWAITING_USER, asked
    back = await runtime.start(line, session_id="s")
    assert back.run_id == asked.run_id and back.outcome == "cancelled", back
    await runtime.start("确认", session_id="s")
    assert _written(orders) == 0


@pytest.mark.parametrize(
    "line",
    [
        # a review of 64ca6d5: each was taken for the person doing it themselves
        "算了，我看过了物流没动，帮我查下订单到哪了",
        "never mind, where is my order? I already paid",
    ],
)
async def test_a_withdrawal_then_a_request_that_names_what_was_done_still_runs_it(
    line: str, tmp_path: Path
) -> None:
    _, runtime, asked = await _asked_for_the_order(tmp_path)
    back = await runtime.start(line, session_id="s")
    assert back.run_id != asked.run_id and back.intent is not None, back
    assert back.intent.label == "logistics", back
    assert (await runtime.summary(asked.run_id)).outcome == "cancelled"
