"""Which of one's orders has shipped, asked of the order desk: a list, not one order.

Found by a walkthrough on main: "哪个订单发货了" and "我哪个订单还没发货" were taken by
the classifier for a cancellation (asked back what was meant), "which of my orders
shipped" asked for one order's number, and after one order's answer each answered for
that order alone. The English list said "I found 1 orders".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus, RunSummary
from tests.conftest import ORDERS

ALL_ZH = ("OD2611280008", "OD2611250001", "OD2611200002")
"""Three of the four orders of the last 30 days: the Chinese list names its first three."""
SHIPPED = ("OD2611200002",)
"""The one shipped order: English names the status, and the search keeps only it."""


def talk(tmp_path: Path, *lines: str) -> list[RunSummary]:
    async def run() -> list[RunSummary]:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        return [await runtime.start(line, session_id="s") for line in lines]

    return asyncio.run(run())


WHICH = [
    ("哪个订单发货了", ALL_ZH),
    ("我哪个订单还没发货", ALL_ZH),
    ("请问我哪些订单已经签收了？", ALL_ZH),
    ("which of my orders shipped", SHIPPED),
    ("which order has shipped?", SHIPPED),
    ("哪一单还没到", ALL_ZH),
    ("哪个订单发货了没有", ALL_ZH),
    ("have any of my orders shipped?", SHIPPED),
    # a review of aa0d7d3: "shipped" said not to be is no filter (only the shipped order
    # was listed); every order is, with its status
    ("which of my orders hasn't shipped yet", ALL_ZH),
    ("which orders are shipped but not delivered yet?", SHIPPED),
]


@pytest.mark.parametrize(("line", "listed"), WHICH)
def test_which_order_has_shipped_lists_the_orders(
    tmp_path: Path, line: str, listed: tuple[str, ...]
) -> None:
    [answer] = talk(tmp_path, line)
    assert answer.intent is not None and answer.intent.label == "query_order", answer
    assert answer.status is RunStatus.FINISHED and answer.outcome == "success", answer
    for order in listed:
        assert order in (answer.reply or ""), answer.reply


@pytest.mark.parametrize(("line", "listed"), WHICH)
def test_after_one_order_s_answer_it_still_lists_them_all(
    tmp_path: Path, line: str, listed: tuple[str, ...]
) -> None:
    first, which = talk(tmp_path, "OD2611250001 到哪了", line)
    assert "OD2611250001" in (first.reply or "")
    assert which.intent is not None and which.intent.label == "query_order", which
    for order in listed:
        assert order in (which.reply or ""), which.reply


@pytest.mark.parametrize(
    "line", ["OD2611250001 发货了吗", "东西发货了吗", "has my order shipped yet"]
)
def test_whether_one_order_has_shipped_is_still_that_order_s_parcel(
    tmp_path: Path, line: str
) -> None:
    [answer] = talk(tmp_path, line)
    assert answer.intent is not None and answer.intent.label == "logistics", answer


def test_a_list_of_one_order_reads_as_english(tmp_path: Path) -> None:
    [answer] = talk(tmp_path, "which of my orders shipped")
    assert "1 in all" in (answer.reply or "") and "1 orders" not in (answer.reply or "")


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("这是哪个订单？帮我取消了吧", "cancel"),
        ("哪个订单帮我取消了吧", "cancel"),
        ("I don't remember which order it was, but please cancel it", "cancel"),
    ],
)
def test_which_order_beside_a_request_still_means_the_last_one(
    tmp_path: Path, line: str, label: str
) -> None:
    """A review of aa0d7d3: "哪个订单" or "which order" anywhere in a line kept the last
    turn's order from carrying, and the request asked for its number again."""
    _, asked = talk(tmp_path, "OD2611250001 到哪了", line)
    assert asked.intent is not None and asked.intent.label == label, asked
    assert asked.status is RunStatus.AWAITING_CONFIRM and "OD2611250001" in (asked.reply or "")


@pytest.mark.parametrize("line", ["哪个订单先别发货了", "which order do you want shipped"])
def test_a_line_that_asks_no_status_is_no_list(tmp_path: Path, line: str) -> None:
    """A review of aa0d7d3: "哪个订单先别发货了" (那 typed as 哪) is a cancel."""
    [answer] = talk(tmp_path, line)
    assert answer.intent is None or answer.intent.label != "query_order", answer


@pytest.mark.parametrize(
    "line", ["which orders are still not completed", "list orders not completed"]
)
def test_a_status_said_not_to_be_is_no_filter(tmp_path: Path, line: str) -> None:
    """A review of fb1d8a1: each listed only the completed order."""
    [answer] = talk(tmp_path, line)
    assert "waiting to ship" in (answer.reply or ""), answer.reply


def test_a_status_set_against_another_is_still_the_filter(tmp_path: Path) -> None:
    """A review of df2ece2: "not cancelled" here says which to leave out, and the
    completed filter was dropped with it."""
    [answer] = talk(tmp_path, "show my completed orders, not cancelled ones")
    assert answer.status is RunStatus.FINISHED and "(completed)" in (answer.reply or "")
    assert "waiting to ship" not in (answer.reply or ""), answer.reply
