"""Follow-up lines ("那 OD… 呢？", "what about my other order?") ask the session's last request.

Before, such a line was unclear on its own, and the customer who had just been told where
one parcel was got "do you want to check an order, track a parcel, get a refund...?".
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus
from corral.intent.follow_up import is_correction, is_follow_up
from tests.conftest import AFTERSALES, ORDERS
from tests.helpers import corral_cli


@pytest.mark.parametrize(
    ("rest", "named"),
    [
        ("那  呢？", True),
        ("  ", True),
        ("what about  ?", True),
        ("and  ?", True),
        ("how about my other order?", False),
        ("那另一个订单呢", False),
        ("还有  呢", True),
        ("  too", True),
        ("那我的  呢？", True),
        ("不对，是  ", True),
        ("sorry, i meant  ", True),
    ],
)
def test_a_frame_that_names_a_value_or_another_is_a_follow_up(rest: str, named: bool) -> None:
    assert is_follow_up(rest, named)


@pytest.mark.parametrize(
    ("rest", "named"),
    [
        ("那呢？", False),  # names nothing, says no "another"
        ("ok", False),
        ("我要退款  ", True),  # a request of its own
        ("  发货了吗", True),
        ("why is  so late?", True),
        ("那  呢" + "。" * 80, True),  # a long line says more
    ],
)
def test_anything_else_is_not(rest: str, named: bool) -> None:
    assert not is_follow_up(rest, named)


def test_a_correction_names_a_value_after_a_no() -> None:
    assert is_correction("不对，是  ", True) and is_correction("oops, no, it's  ", True)
    assert not is_correction("不对，是  ", False)  # names nothing: no value to take back
    assert not is_correction("那  呢？", True)  # another value, not this one's correction
    assert not is_correction("不对，我要退款  ", True)


def test_the_values_a_line_names_are_taken_out_before_the_frame_is_read(tmp_path: Path) -> None:
    layer = load_agent(ORDERS, data_dir=tmp_path).intent
    assert layer.entities.without_values("那 ＯＤ２６１１２５０００１ 呢？") == ("那   呢？", True)
    assert layer.follows_up("what about OD2611200002?")
    assert layer.follows_up("OD2611200002")
    assert not layer.follows_up("OD2611200002 发货了吗 为什么这么慢")
    assert not layer.follows_up("那呢？")


def test_a_follow_up_asks_the_last_request_of_the_order_it_names(tmp_path: Path) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        first = await runtime.start("OD2611250001 到哪了", session_id="s")
        assert first.intent is not None and first.intent.label == "logistics"
        other = await runtime.start("那 OD2611200002 呢？", session_id="s")
        assert other.status is RunStatus.FINISHED, other
        assert other.intent is not None and other.intent.label == "logistics"
        assert other.intent.source == "session"
        assert "OD2611200002" in (other.reply or "") and "OD2611250001" not in (other.reply or "")
        asked = await runtime.start("那另一个订单呢", session_id="s")  # which one: asked
        assert asked.status is RunStatus.AWAITING_USER, asked
        assert "订单号" in (asked.reply or "")

    asyncio.run(talk())


def test_no_follow_up_without_an_understood_last_turn(tmp_path: Path) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        alone = await runtime.start("那 OD2611200002 呢？")  # no session
        assert alone.status is RunStatus.AWAITING_USER and alone.intent is not None
        assert alone.intent.source != "session"
        unclear = await runtime.start("我想问一下", session_id="s")  # a guess, below the bar
        assert unclear.status is RunStatus.AWAITING_USER and unclear.intent is not None
        assert unclear.intent.label is not None  # a label all the same, never a request
        hello = await runtime.start("你好", session_id="t")  # answered from a template
        assert hello.status is RunStatus.FINISHED
        for session_id in ("s", "t"):
            session = runtime.store.get_session(session_id, datetime.now(UTC))
            assert session is not None and session.turns[-1]["request"] is None
        after = await runtime.start("那 OD2611200002 呢？", session_id="t")
        assert after.intent is not None and after.intent.source != "session", after

    asyncio.run(talk())


def test_a_reply_intent_is_not_followed(tmp_path: Path) -> None:
    """A greeting answered from a template runs no plan: "那你呢" is not asked again."""

    async def talk() -> None:
        agent = load_agent(AFTERSALES, data_dir=tmp_path)
        runtime = Runtime(agent, MemoryStore())
        hello = await runtime.start("你好", session_id="s")
        assert hello.intent is not None and hello.intent.label is not None
        assert agent.config.intent(hello.intent.label).route.value == "reply"
        again = await runtime.start("那 HD20250920 呢？", session_id="s")
        assert again.intent is not None and again.intent.source != "session", again

    asyncio.run(talk())


def test_a_follow_up_run_replays_on_the_same_path(tmp_path: Path) -> None:
    from corral.runtime.replay import replay_run

    async def talk() -> None:
        agent = load_agent(ORDERS, data_dir=tmp_path)
        runtime = Runtime(agent, MemoryStore())
        await runtime.start("where is my order OD2611250001", session_id="s")
        followed = await runtime.start("what about OD2611200002?", session_id="s")
        assert followed.intent is not None and followed.intent.source == "session"
        report = await replay_run(agent, await runtime.events(followed.run_id))
        assert report.same_path, report

    asyncio.run(talk())


def test_follow_ups_through_the_cli_each_turn_a_process(tmp_path: Path) -> None:
    def turn(message: str) -> dict[str, object]:
        args = ("run", str(ORDERS), message, "--session", "s", "--json")
        found: dict[str, object] = json.loads(corral_cli(tmp_path, *args).stdout)
        return found

    first = turn("where is OD2611250001")  # no "my": the rule reads it now
    assert first["status"] == "finished" and first["intent"] == {
        "label": "logistics",
        "confidence": 0.88,
        "source": "rule",
    }
    other = turn("what about OD2611200002?")
    assert other["status"] == "finished", other
    assert "OD2611200002" in str(other["reply"])
    asked = turn("and my other order?")
    assert asked["status"] == "awaiting_user" and "order number" in str(asked["reply"]), asked


def statuses(data_dir: Path, *order_ids: str) -> dict[str, str]:
    """The demo shop's statuses of these recent orders, and its cancellations among them."""
    with sqlite3.connect(data_dir / "orders.db") as db:
        found = dict(db.execute("SELECT order_id, status FROM orders_recent"))
        cancelled = {row[0] for row in db.execute("SELECT order_id FROM cancellations")}
    return {o: found[o] + (" (logged)" if o in cancelled else "") for o in order_ids}


def test_a_correction_at_a_confirmation_declines_it_and_asks_of_the_corrected_order(
    tmp_path: Path,
) -> None:
    """Found on main: "不对，是 OD…" at "cancel OD2611250001?" got "I did not understand",
    and the next "好的" went to a person while the cancel of the wrong order still waited."""

    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        wrong = await runtime.start("取消订单 OD2611250001", session_id="s")
        assert wrong.status is RunStatus.AWAITING_CONFIRM
        corrected = await runtime.start("不对，是 OD2611280008", session_id="s")
        assert corrected.run_id != wrong.run_id
        assert corrected.status is RunStatus.AWAITING_CONFIRM, corrected
        assert "OD2611280008" in (corrected.reply or "")
        assert corrected.intent is not None and corrected.intent.label == "cancel"
        declined = await runtime.summary(wrong.run_id)
        assert declined.status is RunStatus.FINISHED and declined.outcome == "cancelled"
        said = [e.data.get("text") for e in await runtime.events(wrong.run_id)]
        assert "不对，是 OD2611280008" in said  # the decline says why
        done = await runtime.start("好的", session_id="s")
        assert done.run_id == corrected.run_id and done.outcome == "success", done

    asyncio.run(talk())
    assert statuses(tmp_path, "OD2611250001", "OD2611280008") == {
        "OD2611250001": "pending",  # the wrong one: never cancelled
        "OD2611280008": "canceled (logged)",
    }


def test_a_correction_after_a_reply_asks_the_same_of_the_corrected_order(tmp_path: Path) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        await runtime.start("OD2611250001 到哪了", session_id="s")
        corrected = await runtime.start("sorry, I meant OD2611200002", session_id="s")
        assert corrected.status is RunStatus.FINISHED, corrected
        assert corrected.intent is not None and corrected.intent.label == "logistics"
        assert "OD2611200002" in (corrected.reply or "")

    asyncio.run(talk())


def test_a_correction_at_an_address_question_is_not_the_address(tmp_path: Path) -> None:
    """Found on main: asked for the new address, "不对，是 OD2611280008" became the address
    ("改成「不对，是 OD2611280008」吗？"), and a yes wrote it to the order."""

    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        asked = await runtime.start("OD2611250001 改地址", session_id="s")
        assert asked.status is RunStatus.AWAITING_USER
        again = await runtime.start("不对，是 OD2611280008", session_id="s")
        assert again.run_id == asked.run_id and again.status is RunStatus.AWAITING_USER, again
        assert "不对" not in (again.reply or "")
        confirm = await runtime.start("上海市徐汇区漕溪北路100号", session_id="s")
        assert confirm.status is RunStatus.AWAITING_CONFIRM, confirm
        assert "OD2611280008" in (confirm.reply or "") and "漕溪北路" in (confirm.reply or "")

    asyncio.run(talk())
