"""A no at a confirmation, then another request: the request that waited is declined.

Found by a safety review (reproduced through ``corral run --session`` on the orders
example): to "确认为这单退款 100 元吗？", "不，退50元就行" opened the 50 yuan refund and
kept the 100 yuan one waiting. After the 50 was confirmed, the reply said "your earlier
request is still waiting: ... refund 100 yuan?", and a second "确认" refunded that too:
150 yuan for a customer who had said no to 100. So did "no wait, refund 50 yuan
instead", "not that one, refund OD2611100003" (both orders refunded) and "actually no,
cancel the other one" (the order the customer had just refused was cancelled: the new
run took it from the last turn, as "the other one" was no word ``carry_unless`` read).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus, RunSummary
from corral.intent.confirmation import after_a_refusal
from tests.conftest import ORDERS
from tests.helpers import corral_cli, still_waits_after


def refunds(data_dir: Path) -> list[tuple[str, float]]:
    with sqlite3.connect(data_dir / "orders.db") as db:
        return sorted(db.execute("SELECT order_id, amount_cny FROM refunds").fetchall())


def cancellations(data_dir: Path) -> list[str]:
    with sqlite3.connect(data_dir / "orders.db") as db:
        return [row[0] for row in db.execute("SELECT order_id FROM cancellations")]


def declined_then(data_dir: Path, first: str, line: str, *after: str) -> list[RunSummary]:
    """Say ``first`` (it waits for a yes), then ``line`` (it declines that), then ``after``.

    What ``line`` and each of ``after`` were answered.
    """

    async def talk() -> list[RunSummary]:
        runtime = Runtime(load_agent(ORDERS, data_dir=data_dir), MemoryStore())
        waiting = await runtime.start(first, session_id="s")
        assert waiting.status is RunStatus.AWAITING_CONFIRM
        said = [await runtime.start(line, session_id="s")]
        declined = await runtime.summary(waiting.run_id)
        assert declined.status is RunStatus.FINISHED and declined.outcome == "cancelled"
        for each in after:
            said.append(await runtime.start(each, session_id="s"))
        return said

    return asyncio.run(talk())


def test_a_corrected_refund_refunds_the_corrected_amount_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    said = []
    for line in ("OD2611200002退100元", "不，退50元就行", "确认", "确认"):
        done = corral_cli(home, "run", str(ORDERS), line, "--session", "S1", "--json")
        said.append(json.loads(done.stdout))
    assert said[0]["status"] == "awaiting_confirm" and "100 元" in said[0]["reply"]
    assert said[1]["status"] == "awaiting_confirm" and "50 元" in said[1]["reply"]
    assert "100 元" not in said[2]["reply"]  # nothing else is said to be waiting
    assert said[3]["status"] != "finished" or "退款" not in said[3]["reply"]
    (data,) = {path.parent for path in home.rglob("orders.db")}
    assert refunds(data) == [("OD2611200002", 50.0)]


@pytest.mark.parametrize(
    ("first", "line", "yes", "refunded"),
    [
        ("refund OD2611200002", "no wait, refund 50 yuan instead", "yes", [("OD2611200002", 50.0)]),
        (
            "refund OD2611200002",
            "not that one, refund OD2611100003",
            "yes",
            [("OD2611100003", 699.0)],
        ),
        # found on main: "退 OD… 吧" was no refund, so the line was not understood and the
        # refund said no to stayed waiting
        ("OD2611200002 我要退款", "不对，退 OD2611100003 吧", "确认", [("OD2611100003", 699.0)]),
    ],
)
def test_the_request_said_no_to_is_never_carried_out(
    tmp_path: Path, first: str, line: str, yes: str, refunded: list[tuple[str, float]]
) -> None:
    corrected, done, again = declined_then(tmp_path, first, line, yes, yes)
    assert corrected.status is RunStatus.AWAITING_CONFIRM
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    assert again.outcome != "success"  # nothing is left to say yes to
    assert refunds(tmp_path) == refunded


@pytest.mark.parametrize(
    ("line", "intent"),
    [
        ("退 OD2611100003 吧", "refund_return"),
        ("不对，退 OD2611100003 吧", "refund_return"),
        ("那就退 OD2611100003 吧", "refund_return"),
        ("帮我退OD2611100003", "refund_return"),
        # found by review: 退 after a word that refuses it asked for the refund refused
        ("别退 OD2611200002 吧", None),
        ("不能退 OD2611200002 吧？", None),
        ("不用退 OD2611200002 吧", None),
        ("没必要退 OD2611200002 吧", None),
        ("先别退 OD2611200002 啊", None),
        ("为什么不能退 OD2611200002 啊", None),
        ("不对，别退 OD2611200002 吧", None),
        ("退 OD2611100003 吧？", None),
        ("别给我退 OD2611200002 吧", None),
        ("不用帮我退 OD2611200002 吧", None),
        ("不用麻烦退 OD2611200002 吧", None),
        ("别 退 OD2611200002 吧", None),
        ("好的，帮我退 OD2611100003 吧", "refund_return"),
    ],
)
def test_a_bare_refund_of_an_order_is_asked_for_only_unrefused(
    tmp_path: Path, line: str, intent: str | None
) -> None:
    assert load_agent(ORDERS, data_dir=tmp_path).intent.rule_intent(line) == intent


@pytest.mark.parametrize(
    ("first", "line", "yes"),
    [
        ("cancel OD2611250001", "actually no, cancel the other one", "yes"),
        ("取消OD2611250001", "不对，是另一个", "确认"),
        ("取消OD2611250001", "不是这个，取消另外一个吧", "确认"),
    ],
)
def test_another_one_is_asked_for_and_the_refused_order_is_kept(
    tmp_path: Path, first: str, line: str, yes: str
) -> None:
    answered, _ = declined_then(tmp_path, first, line, yes)
    assert "OD2611250001" not in (answered.reply or "").split("\n")[-1]
    assert cancellations(tmp_path) == []


@pytest.mark.parametrize(
    ("line", "rest"),
    [
        ("不，退50元就行", "退50元就行"),
        ("不对，是另一个", "是另一个"),
        ("不是这个，取消另外一个吧", "取消另外一个吧"),
        ("no wait, refund 50 yuan instead", "refund 50 yuan instead"),
        ("No, refund OD2611100003", "refund OD2611100003"),
        ("not that one, refund OD2611100003", "refund OD2611100003"),
        ("actually no, cancel the other one", "cancel the other one"),
        # no bare no at the head: a thanks, a yes, a withdrawal of its own, a word
        ("no thanks, please proceed", None),
        ("no problem, go ahead", None),
        ("nothing else, cancel it", None),
        ("不客气，帮我查物流", None),
        ("不要了，取消吧", None),
        ("不用了，帮我查下物流", None),
        ("不，", None),
    ],
)
def test_what_a_line_says_after_its_no(line: str, rest: str | None) -> None:
    assert after_a_refusal(line) == rest


@pytest.mark.parametrize(
    ("first", "line"),
    [
        # a review of the first fix: a no that says yes after all, or asks to wait
        ("取消OD2611250001", "不，我是说确认"),
        ("cancel OD2611250001", "No, that's right, go ahead"),
        ("cancel OD2611250001", "no, it's fine, do it"),
        ("OD2611200002退100元", "不，就这个"),
        ("取消OD2611250001", "不，我确定"),
        ("cancel OD2611250001", "no, I mean yes"),
        ("取消OD2611250001", "不对，等一下，我问问"),
    ],
)
def test_a_no_that_says_yes_after_all_or_waits_keeps_the_request(
    tmp_path: Path, first: str, line: str
) -> None:
    assert still_waits_after(ORDERS, tmp_path, first, line)
