"""A line that calls off a request by its name ("改地址的申请取消掉吧") is no cancellation.

Found on main: said at the confirmation of an address change, "改地址的申请取消掉吧"
("cancel the address-change request") was read by the cancel intent's rule (取消掉), and
the desk proposed cancelling the whole order while the address change still waited.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus
from corral.intent.confirmation import called_off
from tests.conftest import AFTERSALES, ORDERS, ROOT
from tests.helpers import still_waits_after

TRIAGE = ROOT / "examples" / "triage"
CHANGE = "OD2611250001 改地址到上海市徐汇区漕溪北路100号"
CHANGE_EN = "change the address of OD2611250001 to 12 Baker Street, Shanghai"


def written(data_dir: Path) -> tuple[list[str], list[str], str]:
    """The address changes and cancellations written, and OD2611250001's status."""
    with sqlite3.connect(data_dir / "orders.db") as db:
        changes = [row[0] for row in db.execute("SELECT order_id FROM address_changes")]
        cancels = [row[0] for row in db.execute("SELECT order_id FROM cancellations")]
        (status,) = db.execute(
            "SELECT status FROM orders_recent WHERE order_id = 'OD2611250001'"
        ).fetchone()
    return changes, cancels, status


@pytest.mark.parametrize(
    ("first", "line"),
    [
        (CHANGE, "改地址的申请取消掉吧"),
        (CHANGE, "取消改地址"),
        (CHANGE, "修改地址的请求撤销吧"),
        (CHANGE_EN, "cancel the address change"),
        (CHANGE_EN, "please cancel my address change request"),
    ],
)
def test_calling_off_the_address_change_by_name_declines_it_and_proposes_nothing(
    tmp_path: Path, first: str, line: str
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        waiting = await runtime.start(first, session_id="s")
        assert waiting.status is RunStatus.AWAITING_CONFIRM
        answered = await runtime.start(line, session_id="s")
        assert answered.pending is None, answered  # nothing proposed in its place
        declined = await runtime.summary(waiting.run_id)
        assert declined.status is RunStatus.FINISHED and declined.outcome == "cancelled"
        after = await runtime.start("确认" if first == CHANGE else "confirm", session_id="s")
        assert after.outcome != "success", after  # nothing waits for a yes

    asyncio.run(talk())
    assert written(tmp_path) == ([], [], "pending")


@pytest.mark.parametrize("line", ["改地址的申请取消掉吧", "cancel the address change"])
def test_said_with_nothing_waiting_it_proposes_no_cancellation(tmp_path: Path, line: str) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        said = await runtime.start(f"OD2611250001 {line}", session_id="s")
        assert said.intent is None or said.intent.label != "cancel", said
        assert said.status is not RunStatus.AWAITING_CONFIRM, said  # asked, at most
        # a second review: nor is it a request to change the address
        assert said.pending is None or said.pending.slot != "new_address", said

    asyncio.run(talk())
    assert written(tmp_path) == ([], [], "pending")


@pytest.mark.parametrize(
    "line",
    ["取消订单 OD2611250001", "OD2611250001 取消掉吧", "cancel order OD2611250001"],
)
def test_the_order_s_own_cancellation_is_still_one(tmp_path: Path, line: str) -> None:
    understood = load_agent(ORDERS, data_dir=tmp_path).intent.rule_intent(line)
    assert understood == "cancel"


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("改地址的申请取消掉吧", "改地址的申请"),
        ("取消换新", "换新"),
        ("帮我把改地址撤销了", "改地址"),
        ("cancel the address change", "the address change"),
        ("Cancel the address change.", "the address change"),
        ("不要取消退款", None),  # kept, not called off
        ("退款就不取消了", None),
        ("don’t cancel the refund", None),
        ("dont cancel the refund", None),
        ("I won't cancel the refund", None),
        ("取消退款的话多久到账", None),  # a question, a condition
        ("退款取消后还能再申请吗", None),
        ("if I cancel the refund later, is there a fee", None),
        ("确认退款，顺便取消订单 OD2611250001", None),  # a yes and another request
        ("cancel the repair and replace it", None),
        ("取消改地址，直接取消订单吧", None),
        ("好的", None),  # nothing called off
        ("取消", None),  # nothing named
        ("取消" * 200, None),  # too long to be an answer
    ],
)
def test_what_a_line_calls_off_is_read_only_from_a_line_that_only_calls_off(
    line: str, named: str | None
) -> None:
    assert called_off(line) == named


REFUND = "OD2611200002 退款"
EXCHANGE = "HD20240501 打印机坏了，我要换新"


@pytest.mark.parametrize(
    ("example", "first", "line", "waits"),
    [
        # "don't cancel the refund" keeps it waiting: no decline
        (ORDERS, "我要退款 OD2611100003", "不要取消退款", True),
        # a review: a call-off word anywhere, and the request named anywhere, declined
        # a yes, a question about calling it off, or a call-off of something else
        (ORDERS, REFUND, "确认退款，不撤回", True),
        (ORDERS, REFUND, "退款吧，不取消了", True),
        (ORDERS, REFUND, "退款别给我取消", True),
        (ORDERS, REFUND, "可以退款，顺便把我的差评撤回", True),
        (ORDERS, REFUND, "yes, refund it, I need to withdraw the money", True),
        (ORDERS, REFUND, "取消退款的话多久到账？", True),
        (ORDERS, REFUND, "退款取消了会怎样", True),
        (ORDERS, REFUND, "退款申请提交后还能撤销吗", True),
        (ORDERS, REFUND, "can I cancel the refund later?", True),
        (ORDERS, REFUND, "won't cancel the refund", True),
        (ORDERS, REFUND, "退款取消吧", False),  # the refund called off by its name
        (ORDERS, REFUND, "取消 OD2611250001 的退款", True),  # another order's refund
        # a second review: another refund than the waiting one, or a second request
        (ORDERS, REFUND, "取消之前那个退款", True),
        (ORDERS, REFUND, "cancel my previous refund", True),
        (ORDERS, REFUND, "取消退款申请 RF7AE137E449", True),
        (ORDERS, REFUND, "取消订单再退款", True),
        (ORDERS, REFUND, "确认取消退款", False),  # ... and the confirm word before it
        # a third review: the waiting order's own id named (a blanket refusal of digits
        # offered the refund again, and a "确认" paid it)
        (ORDERS, REFUND, "取消退款 OD2611200002", False),
        (ORDERS, REFUND, "cancel my last refund request", False),
        (ORDERS, REFUND, "cancel the refund for OD2611200002", False),
        # the order's own cancellation at the address change's prompt is a request of
        # its own, as before: the change waits
        (ORDERS, CHANGE, "取消订单 OD2611250001", True),
        # the same at an exchange's prompt
        (AFTERSALES, EXCHANGE, "撤销换新是不是要收费？", True),
        (AFTERSALES, EXCHANGE, "换新申请提交了还能撤回吗", True),
        (AFTERSALES, EXCHANGE, "换新，不撤回", True),
        (AFTERSALES, EXCHANGE, "确认换新，不取消", True),
        (AFTERSALES, EXCHANGE, "换新别给我撤销", True),
        (AFTERSALES, EXCHANGE, "可以，换新后能取消吗", True),
        (AFTERSALES, EXCHANGE, "换新申请撤回吧", False),
    ],
)
def test_only_a_line_calling_off_the_waiting_request_by_name_declines_it(
    tmp_path: Path, example: Path, first: str, line: str, waits: bool
) -> None:
    assert still_waits_after(example, tmp_path, first, line) is waits


@pytest.mark.parametrize(
    "line",
    ["取消改地址，帮我把订单 OD2611250001 取消", "地址不改了，直接取消订单 OD2611250001 吧"],
)
def test_calling_off_the_change_and_cancelling_the_order_still_asks_the_cancel(
    tmp_path: Path, line: str
) -> None:
    """A review: the cancel intent's unless read "取消改地址" anywhere in the line, and
    "…，帮我把订单 OD… 取消" asked for the new address; the order's cancel is asked."""

    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        said = await runtime.start(line, session_id="s")
        assert said.intent is not None and said.intent.label == "cancel", said
        assert said.status is RunStatus.AWAITING_CONFIRM

    asyncio.run(talk())


@pytest.mark.parametrize(
    ("example", "line"),
    [
        (ORDERS, "取消 OD2611250001 的退款"),
        (ORDERS, "退款取消掉"),
        (ORDERS, "取消 OD2611250001 的改地址"),
        (ORDERS, "cancel the refund for OD2611250001"),
        (AFTERSALES, "取消 HD20250920 的换新"),
        (AFTERSALES, "取消报修"),
    ],
)
def test_a_call_off_of_a_request_that_writes_proposes_no_write(
    tmp_path: Path, example: Path, line: str
) -> None:
    """Found on main: "取消 OD2611250001 的退款" proposed cancelling the order (the cancel
    rule read 取消 before an order id), and "取消 HD20250920 的换新" an exchange of it."""

    async def talk() -> None:
        runtime = Runtime(load_agent(example, data_dir=tmp_path), MemoryStore())
        said = await runtime.start(line, session_id="s")
        assert said.status is not RunStatus.AWAITING_CONFIRM, said
        yes = await runtime.start("confirm" if line.isascii() else "确认", session_id="s")
        assert yes.outcome != "success", yes  # nothing was waiting for it

    asyncio.run(talk())
    if example == ORDERS:
        assert written(tmp_path) == ([], [], "pending")


def test_a_call_off_of_another_orders_request_at_a_confirmation_proposes_nothing(
    tmp_path: Path,
) -> None:
    """To "create the exchange of HD20240501?", "取消 HD20250920 的换新" proposed a second
    exchange, of HD20250920, on main. Now it proposes none (the intent's ``unless``): it
    is unclear, and the first, another order's, still waits."""

    async def talk() -> None:
        runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path), MemoryStore())
        waiting = await runtime.start("HD20240501 打印机坏了，申请换新", session_id="s")
        assert waiting.status is RunStatus.AWAITING_CONFIRM, waiting
        said = await runtime.start("取消 HD20250920 的换新", session_id="s")
        assert said.outcome == "unclear" and said.pending is None, said
        kept = await runtime.summary(waiting.run_id)
        assert kept.status is RunStatus.AWAITING_CONFIRM, kept

    asyncio.run(talk())


@pytest.mark.parametrize(
    ("example", "line"),
    [
        (ORDERS, "取消订单并退款 OD2611280008"),
        (ORDERS, "取消OD2611250001退钱"),
        (ORDERS, "cancel OD2611280008 with refund"),
        (AFTERSALES, "取消维修改换新 HD20240501"),
        (AFTERSALES, "取消键坏了 HD20240501"),
        (TRIAGE, "取消支付报错 C10001"),
        (TRIAGE, "cancel payment errors C10001"),
        (TRIAGE, "取消订阅 C20001 重复扣费"),
        # a fifth review: a call-off pattern read anywhere, or without 的 after the id
        (ORDERS, "取消 OD2611280008 退款"),
        (ORDERS, "取消 OD2611280008 改地址"),
        (ORDERS, "刚才不小心取消退款申请了，请重新帮我退款 OD2611200002"),
        (ORDERS, "帮我取消订单 OD2611280008，顺便取消退款申请"),
        (AFTERSALES, "HD20240501 打印机坏了，不小心取消换新申请了，请重新换新"),
    ],
)
def test_a_call_off_that_names_no_request_as_such_is_read_as_it_was(
    tmp_path: Path, example: Path, line: str
) -> None:
    """A second review: the first version read any short line opening with 取消 or cancel
    as a call-off, and "取消订单并退款 OD…", "取消键坏了" (a broken key) or a payment
    outage were asked about instead of handled. Only a request named as one is."""

    async def talk() -> None:
        runtime = Runtime(load_agent(example, data_dir=tmp_path), MemoryStore())
        said = await runtime.start(line, session_id="s")
        understood = (await runtime.load_state(said.run_id)).intent
        assert understood is not None and not understood.need_clarification, said

    asyncio.run(talk())


@pytest.mark.parametrize(
    "line",
    [
        "取消OD2611250001",
        "OD2611250001 取消掉",
        "帮我取消订单 OD2611250001",
        "please cancel order OD2611250001",
        "cancel my order OD2611250001",
        "取消这个订单 OD2611250001",
    ],
)
def test_a_call_off_of_the_order_itself_is_still_a_cancellation(tmp_path: Path, line: str) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        said = await runtime.start(line, session_id="s")
        assert said.status is RunStatus.AWAITING_CONFIRM, said
        assert said.intent is not None and said.intent.label == "cancel", said

    asyncio.run(talk())
