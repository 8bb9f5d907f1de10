"""A call-off asked of the desk, at the prompt of the request it calls off, declines it.

Reproduced on main (a review of the orders demo, OD2611200002's refund of 459 waiting for
its "确认"): "能帮我把这个退款取消吗？" and "我改主意了，可以撤销退款吗？" were read as the
refund asked for again and proposed as a run of its own; "could you withdraw the refund
request?" showed the prompt again; the "好的" after each submitted the refund. The same
held for an exchange. ``called_off`` now reads the call-off inside a request asked of the
desk ("能帮我…吗", "可以…吗", "could you…"), so the waiting request is declined by its
name as a plain "取消退款" is. A first version declined on any call-off word beside the
request's words, and a review found it declining refunds asked for ("航班取消了要退款")
and questions ("取消退款要手续费吗？"): those are pinned here as read as before.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent
from corral.intent.confirmation import called_off
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
        "could you withdraw the refund request?",
        "can you cancel my refund?",
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
    _, runtime, run_id = await waiting(tmp_path, ORDERS, "OD2611200002 退款")
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
    "line",
    [
        "航班取消了要退款",  # a reason, and the refund asked for
        "退款然后把差评撤回",  # something else called off
        "取消退款要手续费吗？",  # questions about calling off
        "退款能取消吗？",
        "退款被取消了怎么办",
        "refund it so I can withdraw the cash",
    ],
)
async def test_a_line_that_asks_for_no_call_off_of_the_refund_declines_nothing(
    tmp_path: Path, line: str
) -> None:
    _, runtime, run_id = await waiting(tmp_path, ORDERS, "OD2611200002 退款")
    answered = await runtime.start(line, session_id=SESSION)
    assert answered.outcome != "cancelled", answered
    assert (await runtime.summary(run_id)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("能帮我把这个退款取消吗？", "这个退款"),
        ("我改主意了，可以撤销退款吗？", "退款"),
        ("could you withdraw the refund request?", "the refund request"),
        ("可以把改地址的申请撤回吗", "改地址的申请"),
        # asked whether it could be, not asked for: nothing is called off
        ("退款能取消吗？", None),
        ("can I cancel the refund later?", None),
        ("可以取消退款的话多久到账", None),
        ("能帮我取消退款然后重新申请吗", None),
        ("can you refund it so I can withdraw it", None),
    ],
)
def test_a_call_off_asked_of_the_desk_names_what_it_calls_off(line: str, named: str | None) -> None:
    assert called_off(line) == named
