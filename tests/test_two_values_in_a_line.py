"""A value a line gives two of, and the request does not need, is not taken as the first.

Found by a walkthrough (reproduced on main through the API): "HD20240501 的打印机和
HD20250920 的显示器都坏了，想换新" was asked which order; "HD20250920" chose the monitor's,
and its exchange was refused, "订单 HD20250920 买的不是您说的这个产品": the line's first
product (the printer) had been taken as the product named, and checked against the
monitor's order. Now a value the line gives two of that the request does not require is
left unknown (the order says which product it is); one it requires is asked about.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent
from corral.testing import FixedEffects
from tests.conftest import ROOT
from tests.helpers import exchange_count

BOTH = "HD20240501 的打印机和 HD20250920 的显示器都坏了，想换新"


@pytest.mark.parametrize(
    ("chosen", "product"), [("HD20250920", "显示器"), ("HD20240501", "打印机")]
)
async def test_the_order_chosen_is_exchanged_whichever_product_came_first(
    aftersales: Agent, chosen: str, product: str
) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(BOTH, session_id="both")
    assert asked.status is RunStatus.AWAITING_USER and asked.pending is not None
    assert "HD20240501" in asked.pending.prompt and "HD20250920" in asked.pending.prompt
    answered = await runtime.start(chosen, session_id="both")
    assert answered.status is RunStatus.AWAITING_CONFIRM, answered  # not refused
    assert answered.pending is not None and product in answered.pending.prompt
    done = await runtime.start("确认", session_id="both")
    assert done.status is RunStatus.FINISHED and done.outcome == "success", done
    assert exchange_count(aftersales) == 1


@pytest.mark.parametrize(
    "line", ["HD20250920 打印机坏了想换新", "HD20250920 打印机坏了想换新，不是显示器"]
)
async def test_a_line_about_one_order_keeps_its_product_checked(
    aftersales: Agent, line: str
) -> None:
    """What the change must not take: the printer named for the monitor's order is refused
    (a third review: a first version dropped both products of the second line, and the
    guard with them)."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    refused = await runtime.start(line, session_id="one")
    assert refused.outcome == "refused", refused
    assert exchange_count(aftersales) == 0


async def test_a_ticket_naming_two_services_keeps_the_first(tmp_path: Path) -> None:
    """Triage files the first service named, as before (a first version filed none)."""
    triage = load_agent(ROOT / "examples" / "triage", data_dir=tmp_path / "triage")
    runtime = Runtime(triage, MemoryStore(), effects=FixedEffects())
    line = "C10001 账单不对，支付扣了两次，登录也看不到发票"
    filed = await runtime.start(line, session_id="two")
    assert filed.status is RunStatus.FINISHED, filed
    with sqlite3.connect(triage.deps["db"]) as conn:
        products = [row[0] for row in conn.execute("SELECT product FROM tickets")]
    assert products == ["payments"]
