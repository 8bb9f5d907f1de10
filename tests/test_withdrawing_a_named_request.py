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
from corral.intent.confirmation import without_calling_off
from tests.conftest import ORDERS

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
    ("line", "left"),
    [
        ("改地址的申请取消掉吧", "改地址的申请 掉吧"),
        ("cancel the address change", "  the address change"),
        ("Cancel the address change", "  the address change"),
        ("不要取消退款", None),  # kept, not called off
        ("don’t cancel the refund", None),
        ("do not cancel it", None),
        ("好的", None),  # nothing called off
        ("取消" * 200, None),  # too long to be an answer
    ],
)
def test_what_a_line_calls_off_is_what_is_left_of_it(line: str, left: str | None) -> None:
    assert without_calling_off(line) == left


@pytest.mark.parametrize(
    ("first", "line", "waits"),
    [
        # "don't cancel the refund" keeps it waiting: no decline
        ("我要退款 OD2611100003", "不要取消退款", True),
        # the order's own cancellation at the address change's prompt is a request of
        # its own, as before: the change waits
        (CHANGE, "取消订单 OD2611250001", True),
    ],
)
def test_a_line_calling_off_something_else_leaves_the_request_waiting(
    tmp_path: Path, first: str, line: str, waits: bool
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        waiting = await runtime.start(first, session_id="s")
        assert waiting.status is RunStatus.AWAITING_CONFIRM
        await runtime.start(line, session_id="s")
        still = await runtime.summary(waiting.run_id)
        assert (still.status is RunStatus.AWAITING_CONFIRM) is waits, still

    asyncio.run(talk())
