"""A message naming more values than the run acted on is told which it did not do.

Found on main: "查一下OD2611250001和OD2611200002" answered OD2611250001 and said nothing
of OD2611200002, so the customer took both to be looked at. ``query_order`` requires no
order id (it also lists orders by time), so two ids were not asked about; its
``order_detail`` plan reads ``$entities.order_id`` and took the first. Asking "which
one?" instead was tried and reverted: "两个都要" was then asked again and handed to a
person. A read now answers the one it took and names the others to send on their own;
a write (``query_order``'s cancel plan) asks which one first, as the cancel intent does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus
from tests.conftest import ORDERS, ROOT


def test_a_plan_needs_what_it_reads_without_a_question_mark(tmp_path: Path) -> None:
    agent = load_agent(ORDERS, data_dir=tmp_path)
    assert "order_id" in agent.template_entities["order_detail"]
    # ``$entities.order_date?``: read when given, never a value the plan needs
    assert agent.template_entities["order_search"] == ()


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (
            "查一下OD2611250001和OD2611200002",
            "这次只查了订单号 OD2611250001；您还提到了 OD2611200002",
        ),
        (
            "check OD2611250001 and OD2611200002",
            "This answer covers order number OD2611250001 only; you also mentioned OD2611200002",
        ),
    ],
)
def test_the_order_not_looked_up_is_named_and_asked_for_on_its_own(
    tmp_path: Path, line: str, says: str
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        first = await runtime.start(line, session_id="s")
        assert first.status is RunStatus.FINISHED, first
        answer, note = (first.reply or "").rsplit("\n", 1)
        assert "OD2611250001" in answer and "OD2611200002" not in answer
        assert note.startswith(says)
        # sent on its own, as the note says: the same request, of that order
        other = await runtime.start("OD2611200002", session_id="s")
        assert other.status is RunStatus.FINISHED, other
        assert "OD2611200002" in (other.reply or "") and "\n" not in (other.reply or "")
        stored = [e.payload for e in await runtime.events(first.run_id)]
        assert any(getattr(p, "text", None) == first.reply for p in stored)  # in the log

    asyncio.run(talk())


def test_an_order_not_found_still_names_the_other(tmp_path: Path) -> None:
    # found by review: the note was the success path's only, so the order that exists
    # went unmentioned after "没查到订单 OD9999999999"
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        done = await runtime.start("查一下OD9999999999和OD2611250001")
        assert done.outcome == "not_found", done
        assert "您还提到了 OD2611250001" in (done.reply or ""), done.reply

    asyncio.run(talk())


@pytest.mark.parametrize(
    "line",
    [
        "把OD2611250001和OD2611280008的状态改成已取消",
        "把OD2611200002和OD2611280008的状态改成已取消",
    ],
)
def test_a_write_of_one_of_two_orders_asks_which_first(tmp_path: Path, line: str) -> None:
    # found by review: query_order's cancel plan cancelled the first order, then the note
    # said to send the second on its own, which only looked it up; nothing said it was
    # not cancelled
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        asked = await runtime.start(line, session_id="s")
        assert asked.status is RunStatus.AWAITING_USER, asked
        assert "哪一个" in (asked.reply or "")
        assert not [s for s in asked.steps if s.status.value == "succeeded"]

    asyncio.run(talk())


def test_both_asked_for_at_a_which_question_is_told_one_at_a_time(tmp_path: Path) -> None:
    # found by review: "两个都要" met the same question word for word, then a person
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        await runtime.start("把OD2611250001和OD2611280008的状态改成已取消", session_id="s")
        again = await runtime.start("两个都要", session_id="s")
        assert again.status is RunStatus.AWAITING_USER, again
        assert (again.reply or "").startswith("一次只能办一个订单号：")
        chosen = await runtime.start("OD2611280008", session_id="s")
        assert chosen.status is RunStatus.AWAITING_CONFIRM, chosen
        assert "OD2611280008" in (chosen.reply or "")

    asyncio.run(talk())


def test_one_order_named_twice_or_once_adds_nothing(tmp_path: Path) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        for line in ("查一下OD2611250001", "查一下 OD2611250001，就是 od2611250001 这单"):
            done = await runtime.start(line)
            assert done.status is RunStatus.FINISHED, done
            assert "还提到了" not in (done.reply or ""), done.reply

    asyncio.run(talk())


def test_signal_words_a_plan_reads_optionally_may_be_several(tmp_path: Path) -> None:
    # triage's fault plan reads ``$entities.degraded_words?``: "slow" and "some users"
    # both say it is degraded; neither is left undone
    agent = load_agent(ROOT / "examples" / "triage", data_dir=tmp_path)

    async def talk() -> None:
        runtime = Runtime(agent, MemoryStore())
        done = await runtime.start("C10003 SMS delivery is slow for some users")
        assert done.status is RunStatus.FINISHED, done
        assert "also mentioned" not in (done.reply or "")

    asyncio.run(talk())
