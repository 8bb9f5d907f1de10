"""A line that asks to call off the request waiting for a yes declines it.

Reproduced on main (a review of the orders demo, OD2611200002's refund of 459 waiting for
its "确认"): "能帮我把这个退款取消吗？", "我改主意了，可以撤销退款吗？", "取消退款，我已经申请
过了" were read as a refund asked for again, proposed as a run of its own, and the
"好的" after it submitted the refund; "could you withdraw the refund request?" showed the
prompt again, and "好的" submitted it. The same held for an exchange and an address
change. Each now declines the waiting request: a no is safe, and asking again costs one
line. A negation beside the call-off word ("退款别给我取消": keep it), another order's
refund, or a request that is itself a call-off (a cancellation's prompt) is read as before.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent
from corral.intent.confirmation import call_off_clauses
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES, ORDERS

SESSION = "s"


def rows(agent: Agent, table: str) -> int:
    """How many rows the demo's database holds in ``table`` (written by its tools)."""
    with sqlite3.connect(agent.deps["db"]) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def waiting(tmp_path: Path, example: Path, request: str) -> tuple[Agent, Runtime, str]:
    """The demo with ``request`` waiting for its confirmation: agent, runtime, run id."""
    agent = load_agent(example, data_dir=tmp_path / "data")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(request, session_id=SESSION)
    assert paused.status is RunStatus.AWAITING_CONFIRM, paused
    return agent, runtime, paused.run_id


async def assert_declined_then_nothing_written(
    agent: Agent, runtime: Runtime, run_id: str, line: str, table: str
) -> None:
    """``line`` declines the waiting run, and a "好的" after it writes nothing."""
    answered = await runtime.start(line, session_id=SESSION)
    assert answered.run_id == run_id and answered.outcome == "cancelled", answered
    after = await runtime.start("好的", session_id=SESSION)
    assert after.pending is None, after
    assert rows(agent, table) == 0


@pytest.mark.parametrize(
    "line",
    [
        "能帮我把这个退款取消吗？",
        "我改主意了，可以撤销退款吗？",
        "取消退款，我已经申请过了",
        "could you withdraw the refund request?",
    ],
)
async def test_asking_to_call_off_the_waiting_refund_declines_it(tmp_path: Path, line: str) -> None:
    orders, runtime, run_id = await waiting(tmp_path, ORDERS, "OD2611200002 退款")
    await assert_declined_then_nothing_written(orders, runtime, run_id, line, "refunds")


async def test_asking_to_call_off_the_waiting_exchange_declines_it(tmp_path: Path) -> None:
    aftersales, runtime, run_id = await waiting(
        tmp_path, AFTERSALES, "HD20240501 打印机坏了，申请换新"
    )
    await assert_declined_then_nothing_written(
        aftersales, runtime, run_id, "能帮我把换新取消吗？", "exchanges"
    )


async def test_keeping_the_refund_is_no_call_off(tmp_path: Path) -> None:
    """ "退款别给我取消": a negation beside the call-off word keeps it; nothing declines."""
    _orders, runtime, run_id = await waiting(tmp_path, ORDERS, "OD2611200002 退款")
    answered = await runtime.start("退款别给我取消", session_id=SESSION)
    assert answered.outcome != "cancelled", answered
    assert (await runtime.summary(run_id)).status is RunStatus.AWAITING_CONFIRM


async def test_calling_off_another_order_s_refund_leaves_the_waiting_one(tmp_path: Path) -> None:
    orders, runtime, run_id = await waiting(tmp_path, ORDERS, "OD2611200002 退款")
    answered = await runtime.start("能把 OD2611250001 的退款取消吗？", session_id=SESSION)
    assert answered.run_id != run_id, answered
    assert (await runtime.summary(run_id)).status is RunStatus.AWAITING_CONFIRM
    assert rows(orders, "refunds") == 0


async def test_a_cancellation_asked_for_again_at_its_own_prompt_is_not_declined(
    tmp_path: Path,
) -> None:
    """At "确认取消订单…吗？" the call-off word is the request's own action."""
    _, runtime, run_id = await waiting(tmp_path, ORDERS, "取消订单 OD2611250001")
    answered = await runtime.start("能帮我取消这个订单吗？", session_id=SESSION)
    assert answered.outcome != "cancelled", answered
    assert (await runtime.summary(run_id)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    ("line", "clauses"),
    [
        ("能帮我把这个退款取消吗？", ["能帮我把这个退款取消吗"]),
        ("我改主意了，可以撤销退款吗？", ["可以撤销退款吗"]),
        ("取消退款，我已经申请过了", ["取消退款"]),
        ("could you withdraw the refund request?", ["could you withdraw the refund request"]),
        # the caller reads it with the refund's rule: a review is called off, not the refund
        ("可以退款，顺便把我的差评撤回", ["顺便把我的差评撤回"]),
        ("可以，换新后能取消吗", []),
        ("yes, refund it, I need to withdraw the money", []),
        ("取消退款的话多久到账？", []),  # asked about, on a condition
        ("退款取消了会怎样", []),
        ("退款申请提交后还能撤销吗", []),
        ("can I cancel the refund later?", []),
        ("退款多久到账", []),
    ],
)
def test_which_clauses_ask_now_to_call_something_off(line: str, clauses: list[str]) -> None:
    assert call_off_clauses(line) == clauses
