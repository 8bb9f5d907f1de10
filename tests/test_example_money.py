"""The orders example moves money once: a hostile walkthrough found an order of
599 CNY refunded 1 498 CNY over three runs, and the refund's amount never shown before it
was approved (30 000 asked became 599 silently).

Each run is approved as a person would after reading its confirmation; the business
database is then read to count what was really written.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from corral import FixedEffects, MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus, RunSummary
from tests.conftest import ORDERS


def _refunded(data: Path, order_id: str) -> float:
    with sqlite3.connect(data / "orders.db") as db:
        row = db.execute("SELECT sum(amount_cny) FROM refunds WHERE order_id = ?", (order_id,))
        return float(row.fetchone()[0] or 0)


def test_a_refund_shows_its_amount_and_never_takes_more_than_was_paid(tmp_path: Path) -> None:
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())

    async def approved(message: str) -> tuple[RunSummary, RunSummary | None]:
        asked = await runtime.start(message)
        if asked.status is not RunStatus.AWAITING_CONFIRM:
            return asked, None
        return asked, await runtime.resume(asked.run_id, approve=True)

    async def scenario() -> None:
        too_much, _ = await approved("OD2610280005 退三万块")
        assert too_much.outcome == "refused" and "599" in (too_much.reply or "")
        asked, done = await approved("OD2610280005 退三百块")
        assert "300 元" in (asked.reply or "")  # the sum approved is in the question
        assert done is not None and "300 元" in (done.reply or "")
        asked, done = await approved("refund OD2610280005 please")
        assert "299 CNY" in (asked.reply or "")  # what is left, not the price again
        assert done is not None and done.status is RunStatus.FINISHED
        again, _ = await approved("OD2610280005 退款")
        assert again.outcome == "refused" and "全部退过" in (again.reply or "")

    asyncio.run(scenario())
    assert _refunded(data, "OD2610280005") == 599.0


def test_two_refunds_approved_together_take_only_what_is_left(tmp_path: Path) -> None:
    """Both were asked before either was approved (each read 599 left): the write
    itself refuses the second, nothing written."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())

    async def scenario() -> list[RunSummary]:
        first = await runtime.start("OD2610280005 退款")
        second = await runtime.start("OD2610280005 退款")
        return [await runtime.resume(r.run_id, approve=True) for r in (first, second)]

    done, refused = asyncio.run(scenario())
    assert done.status is RunStatus.FINISHED and done.outcome == "success"
    assert refused.outcome != "success"
    assert _refunded(data, "OD2610280005") == 599.0


@pytest.mark.parametrize(
    ("message", "asked"),
    [
        ("refund half of OD2610280005", "299.5 CNY"),
        ("OD2610280005 退一半", "299.5 元"),
        ("OD2610280005 退款一半", "299.5 元"),
        ("give me half my money back for OD2610280005", "299.5 CNY"),
        ("refund 20% of OD2610280005", "119.8 CNY"),
        ("OD2610280005 退三分之一", "199.67 元"),
        # a review: the price said alongside was taken for the sum (599, the whole order)
        ("我付了599元，OD2610280005 退一半", "299.5 元"),
        ("refund half of OD2610280005, it cost 599 yuan", "299.5 CNY"),
        # a walkthrough: tenths, Chinese percentages and other fractions fell back to 599
        ("OD2610280005 退三成", "179.7 元"),
        ("OD2610280005 退款百分之二十", "119.8 元"),
        ("OD2610280005 退三分之二", "399.33 元"),
        ("refund two thirds of OD2610280005", "399.33 CNY"),
        ("refund three quarters of OD2610280005", "449.25 CNY"),
        # a review: the tenth alone was read of these (20 %, 10 %), '点五' was dropped,
        # and a hyphen, a full-width ％ or a 的 proposed the whole order
        ("OD2610280005 退两成半", "149.75 元"),
        ("OD2610280005 退一成五", "89.85 元"),
        ("OD2610280005 退百分之二十五点五", "152.75 元"),
        ("refund two-thirds of OD2610280005", "399.33 CNY"),
        ("OD2610280005 退款30％", "179.7 元"),
        ("OD2610280005 退款的百分之二十", "119.8 元"),
    ],
)
def test_a_share_of_the_price_is_refunded_not_the_whole_order(
    message: str, asked: str, tmp_path: Path
) -> None:
    """Found by a walkthrough: "refund half of OD…" proposed the whole order (599 CNY),
    and "OD… 退一半" was not even a refund."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())

    async def scenario() -> None:
        question = await runtime.start(message)
        assert question.status is RunStatus.AWAITING_CONFIRM, question
        assert asked in (question.reply or "")
        done = await runtime.resume(question.run_id, approve=True)
        assert done.status is RunStatus.FINISHED, done

    asyncio.run(scenario())
    assert _refunded(data, "OD2610280005") == float(asked.split()[0])


def test_a_share_after_an_earlier_refund_is_refused_saying_what_is_left(tmp_path: Path) -> None:
    """Half of the price is more than is left after 400 of 599 were refunded: refused with
    what is left, never quietly the rest."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())

    async def scenario() -> RunSummary:
        first = await runtime.start("OD2610280005 退400元")
        await runtime.resume(first.run_id, approve=True)
        return await runtime.start("OD2610280005 退一半")

    half = asyncio.run(scenario())
    assert half.outcome == "refused" and "199" in (half.reply or ""), half
    assert _refunded(data, "OD2610280005") == 400.0


def test_a_share_and_another_amount_are_not_worked_out_into_a_sum(tmp_path: Path) -> None:
    """Half, and 300: which is the sum is not guessed; nothing is proposed or refunded."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())
    both = asyncio.run(runtime.start("OD2610280005 退一半，退300元"))
    assert both.status is not RunStatus.AWAITING_CONFIRM, both
    assert _refunded(data, "OD2610280005") == 0.0


@pytest.mark.parametrize("message", ["OD2610280005 退款 -50元", "OD2610280005 退款 ¥1，500元"])
def test_a_sum_typed_but_not_read_does_not_become_the_whole_order(
    message: str, tmp_path: Path
) -> None:
    """A review: an amount the reader refuses ("-50元", "¥1，500元") read as no amount, and
    the quote proposed all that was left (599). It fails now: a person takes the run."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.status is not RunStatus.AWAITING_CONFIRM, summary
    assert "599" not in (summary.reply or ""), summary.reply
    assert _refunded(data, "OD2610280005") == 0.0


@pytest.mark.parametrize("message", ["OD2610280005 按八折退款", "OD2610280005 退款打八五折"])
def test_a_discount_is_no_share_anyone_guesses(message: str, tmp_path: Path) -> None:
    """八折 may mean refunding 80 % or what the price less 20 % leaves: neither is guessed,
    nor the whole order proposed (a walkthrough found 599 proposed). A person takes it."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.status is RunStatus.HANDED_OFF, summary
    assert _refunded(data, "OD2610280005") == 0.0


@pytest.mark.parametrize(
    "message",
    [
        "OD2610280005 退款了吗",
        "OD2610280005 退款到账了没有",
        "OD2610280005 退款申请通过了吗",
        "OD2610280005 退款审核通过没",
        "退款成功了吗 OD2610280005",
        "OD2610280005 我的退款，怎么还没到账",
        "OD2610280005 退款，到账了吗",
        "OD2610280005 的退款，什么时候到",
        "OD2610280005 退款通过了没有",
        "OD2610280005 退款好了没",
        "OD2610280005 退款怎么样了",
        "OD2610280005 退款批下来了吗",
        "OD2610280005 退款退回来了吗",
        "my refund for the item hasn't arrived OD2610280005",
        "the refund they promised hasn't arrived OD2610280005",
        "my refund still hasn't arrived OD2610280005",
        "my refund has not been processed yet OD2610280005",
        "what's the status of my refund OD2610280005",
        # a review of a first try at the parcel cases below: each proposed 599
        "refund for OD2610280005 arrived yet",
        "did the refund for OD2610280005 arrive",
        "is the refund for OD2610280005 processed",
        "refund for OD2610280005 status",
        "the refund that you approved hasn't arrived OD2610280005",
        "my refund, it hasn't arrived OD2610280005",
        "my refund arrived with the wrong amount OD2610280005",
        # note 38's review: 28 of 46 status questions proposed 599
        "where is my refund OD2610280005",
        "where's my refund for OD2610280005?",
        "I still haven't received my refund for OD2610280005",
        "did you process my refund OD2610280005",
        "did I get my refund for OD2610280005",
        "any update on my refund for OD2610280005",
        "has my refund for OD2610280005 been processed?",
        "when will I get my refund OD2610280005",
        "is my refund on its way OD2610280005",
        "track my refund OD2610280005",
        "OD2610280005 refund 还没到账",
        "refund 到账了吗 OD2610280005",
        # a review of the first refund_status: each still proposed 599
        "wheres my refund OD2610280005",
        "where’s my refund OD2610280005",
        "I didn’t get my refund OD2610280005",
        "status of refund OD2610280005",
        "still waiting for my refund OD2610280005",
        "what happened to my refund OD2610280005",
        "how long will my refund take OD2610280005",
        "still no refund OD2610280005",
        "no refund yet OD2610280005",
        "refund not received yet OD2610280005",
        "refund pending? OD2610280005",
        "I requested a refund for OD2610280005 last week and nothing yet",
        "did you refund OD2610280005?",
        "退款呢 OD2610280005",
        "我的退款到哪了 OD2610280005",
        "退款啥时候到 OD2610280005",
        "退款办好没 OD2610280005",
        "申请的退款有消息吗 OD2610280005",
        "钱退了吗 OD2610280005",
        "查一下退款 OD2610280005",
        "OD2610280005的退款到哪了",
        "怎么还没给我退款 OD2610280005",
        # a second review: each still proposed 599, or asked again
        "i havent got my refund yet OD2610280005",
        "my refund hasnt come yet OD2610280005",
        "where is refund OD2610280005",
        "hows my refund going OD2610280005",
        "OD2610280005 refund done?",
        "when will i get my money back OD2610280005",
        "i never got my money back for OD2610280005",
        "I am yet to receive my refund OD2610280005",
        "can you check if my refund went through OD2610280005",
        "has OD2610280005 been refunded?",
        "I want my refund status OD2610280005",
        "I'd like my refund status OD2610280005",
        "我要退款进度 OD2610280005",
        "我申请退款好几天了 还没到账 OD2610280005",
        "我已经申请退款了，钱还没到 OD2610280005",
        "之前申请了退款，到现在还没到账 OD2610280005",
        "我的退款一直没到 OD2610280005",
        "退款什么情况 OD2610280005",
        "退款还在处理吗 OD2610280005",
        "退款是不是还在审核 OD2610280005",
        "我的退款呢？？ OD2610280005",
        "钱怎么还没退回来 OD2610280005",
        # a third review
        "I requested a refund 10 days ago for OD2610280005, any news",
        "following up on my refund OD2610280005",
        "refund OD2610280005 status pls",
        "did u guys refund me yet OD2610280005",
        "could you check on my refund please OD2610280005",
        "wow, amazing, still no refund. love it. OD2610280005",
        "请问一下我的退款处理到哪一步了 OD2610280005",
        "退款一直显示处理中 OD2610280005",
        "客服说已经给我退款了，但我没收到 OD2610280005",
        "你们说给我退款的 怎么到现在都没有 OD2610280005",
        "帮我查下退款 OD2610280005",
        "我的退款还在审核吗 OD2610280005",
        # a conversation walkthrough: "how long until I can get a refund" asked to confirm one
        "OD2610280005 多久能退款",
        "OD2610280005 什么时候可以退款",
        "多久才能退款 OD2610280005",
        "OD2610280005 几天能退钱",
        # a QA walkthrough: how long a refund takes, asked after the word or in English
        "OD2610280005 refund how long",
        "how many days for the refund of OD2610280005",
        "when can I get a refund for OD2610280005?",
        "how soon will I get my refund OD2610280005",
        "how soon can I get a refund for OD2610280005",
        "how long will it take to get my refund for OD2610280005",
        "refund takes how many days? OD2610280005",
        "OD2610280005 refund timeline?",
        "OD2610280005 退款要几天",
        "OD2610280005 退款需要多久",
        "OD2610280005 退款需要几天",
        "OD2610280005 退款要几个工作日",
        "OD2610280005 退款多少天能到",
        "OD2610280005 多少天能退款",
        # whether there is one: each proposed a refund (a review)
        "any refund on OD2610280005?",
        "is there a refund for OD2610280005",
        "OD2610280005 有退款吗？",
        "有没有退款 OD2610280005",
    ],
)
def test_a_question_about_a_refund_proposes_none(message: str, tmp_path: Path) -> None:
    """A walkthrough and reviews: each proposed a new refund of the whole order (599).

    It is answered from the order's refunds (``refund_status``): none yet, and how to ask.
    """
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.status is RunStatus.FINISHED, summary
    assert summary.intent is not None and summary.intent.label == "refund_status", summary
    reply = summary.reply or ""
    assert "no refund on order OD2610280005" in reply or "还没有退款记录" in reply, reply
    assert _refunded(tmp_path / "data", "OD2610280005") == 0.0


def test_a_question_about_a_refund_made_names_it_and_what_was_refunded(tmp_path: Path) -> None:
    """Two refunds made, then asked about in both languages: the reply names the latest,
    the sum refunded, and nothing more is proposed or refunded."""
    data = tmp_path / "data"
    runtime = Runtime(load_agent(ORDERS, data_dir=data), MemoryStore())

    async def scenario() -> tuple[RunSummary, RunSummary]:
        for message in ("OD2610280005 退三百块", "OD2610280005 退一百块"):
            asked = await runtime.start(message)
            await runtime.resume(asked.run_id, approve=True)
        english = await runtime.start("where is my refund OD2610280005")
        return english, await runtime.start("OD2610280005 我的退款怎么还没到")

    english, chinese = asyncio.run(scenario())
    with sqlite3.connect(data / "orders.db") as db:
        [(refund_id,)] = db.execute("SELECT refund_id FROM refunds WHERE amount_cny = 100")
    for summary in (english, chinese):
        assert summary.status is RunStatus.FINISHED and summary.outcome == "success", summary
        assert summary.intent is not None and summary.intent.label == "refund_status"
        assert refund_id in (summary.reply or ""), summary.reply
    assert "400 CNY refunded so far, and 199 CNY more" in (english.reply or "")
    assert "(100 CNY)" in (english.reply or "")
    assert "已经退款 400 元，还可以退 199 元" in (chinese.reply or "")
    assert "100 元" in (chinese.reply or "")
    assert _refunded(data, "OD2610280005") == 400.0


def test_a_question_about_a_refund_in_full_says_so_on_the_day_it_was_made_there(
    tmp_path: Path,
) -> None:
    """Made at 17:00 UTC on 29 November, the refund was made on the 30th in Shanghai (the
    agent's timezone), where the person counts days: the first reply gave the UTC date."""
    data = tmp_path / "data"
    start = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)
    runtime = Runtime(
        load_agent(ORDERS, data_dir=data), MemoryStore(), effects=FixedEffects(start=start)
    )

    async def scenario() -> RunSummary:
        asked = await runtime.start("refund OD2610280005 please")
        await runtime.resume(asked.run_id, approve=True)
        return await runtime.start("has my refund for OD2610280005 been processed?")

    summary = asyncio.run(scenario())
    assert summary.intent is not None and summary.intent.label == "refund_status"
    assert "refunded in full, 599 CNY" in (summary.reply or ""), summary.reply
    assert "made on 2026-11-30" in (summary.reply or ""), summary.reply
    assert _refunded(data, "OD2610280005") == 599.0


@pytest.mark.parametrize(
    "message", ["where is my refund OD2611250001", "OD2611250001 退款到账了吗"]
)
def test_a_question_about_a_refund_of_an_order_not_shipped_says_to_cancel_it(
    message: str, tmp_path: Path
) -> None:
    """No refund on an order waiting to ship: a cancel pays it back, and the reply says so."""
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.intent is not None and summary.intent.label == "refund_status"
    reply = summary.reply or ""
    assert 'say "cancel OD2611250001"' in reply or "取消订单 OD2611250001" in reply, reply


def test_a_question_about_a_refund_of_a_canceled_order_says_none_is_needed(
    tmp_path: Path,
) -> None:
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start("where is my refund OD2610150006"))
    assert summary.intent is not None and summary.intent.label == "refund_status"
    assert "was canceled" in (summary.reply or ""), summary.reply


@pytest.mark.parametrize(
    "message",
    [
        "我要退款 OD2610280005，上次的换货成功了吗",
        "我要退款 OD2610280005，东西坏了怎么样了",
        "我要退款 OD2610280005 东西坏了没法用",
        "我要退款，东西还没收到 OD2610280005",
        "退款！货还没到 OD2610280005",
        "我要退款，换货进度太慢了 OD2610280005",
        "I want a refund for OD2610280005",
        # note 37: what the parcel did is no question about a refund
        "refund OD2610280005, it arrived half broken",
        "I want a refund for OD2610280005 because it arrived broken",
        "i want a refund for OD2610280005 it arrived broken",
        "I want a refund for OD2610280005, the item never arrived",
        "refund OD2610280005 as the parcel never arrived",
        "I need a refund, OD2610280005 arrived damaged",
        "I want a refund, the item arrived damaged OD2610280005",
        "I'd like to request a refund for OD2610280005 which arrived damaged",
        "please refund OD2610280005 the air fryer has arrived with a crack",
        # a review of the first refund_status: each was taken for a question about a refund
        "I want a refund, my parcel hasn't arrived OD2610280005",
        "I'd like my refund for OD2610280005, it never arrived",
        "can you refund OD2610280005, the item hasn't arrived",
        "please refund OD2610280005, it was never delivered",
        "give me my refund for OD2610280005",
        "send me my refund OD2610280005",
        "I demand my refund OD2610280005",
        "I'm asking for a refund on OD2610280005",
        "please process my refund for OD2610280005",
        "could you process a refund for OD2610280005",
        "I need my refund processed for OD2610280005 today",
        "I want a refund because my order still hasn't arrived OD2610280005",
        "need a refund, where is my package OD2610280005",
        "I want a refund. Why hasn't it arrived? OD2610280005",
        "I haven't received the item, I want my refund OD2610280005",
        "我想退款 OD2610280005 东西还没到",
        "我要 refund 东西还没到 OD2610280005",
        "我要退款 东西还没到 OD2610280005",
        "给我退款，怎么还没发货 OD2610280005",
        "帮我把钱退了 OD2610280005",
        # a second review: each was answered as a question about a refund made
        "OD2610280005 退款 东西状态很差",
        "退款 有视频记录 OD2610280005",
        "refund 东西到了是坏的 OD2610280005",
        "麻烦查一下退款 东西是坏的 OD2610280005",
        "why did you send me a broken one, refund asap OD2610280005",
        "能不能退款 东西到了是坏的 OD2610280005",
        "想退款 OD2610280005",
        "全额退款 货到了就是坏的 OD2610280005",
        "can I have a refund? OD2610280005",
        "OD2610280005 能退款吗",  # may I have one: not "有退款吗", whether there is one
        "OD2610280005 可以有退款吗？",  # a review: read as whether there is one
        "can I get any refund for OD2610280005?",
        "I have a broken air fryer, can I get a refund? OD2610280005",
        "refund for OD2610280005 arrived covered in scratches",
        "OD2610280005 refund, arrived with a dent",
        "where do I apply for a refund? OD2610280005",
        "when it arrived it was broken. can i have a refund? OD2610280005",
        # a third review: each was asked again
        "退了吧 OD2610280005",
        "帮我退一下款 OD2610280005",
        "东西质量太差了，给我退了吧 OD2610280005",
        # a QA walkthrough: asked for in words, then how long it takes
        "我要退款，多久能到账 OD2610280005",
        "我要退款，要几天 OD2610280005",
        "I want a refund, how long will it take? OD2610280005",
        "I want a refund for OD2610280005, how many days will it take",
        "can I have a refund? how long does it take OD2610280005",
        # a review: a bare refund asked for, then how long, was taken for a status question
        "OD2610280005 质量太差，退款，要几天？",
        "退款，几个工作日到？ OD2610280005",
        "refund, how long? OD2610280005",
    ],
)
def test_a_refund_asked_beside_another_clause_is_a_refund(message: str, tmp_path: Path) -> None:
    """A question in another clause is no question about a refund: a first fix of the
    status questions took each of these for one (found by reviews)."""
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.status is RunStatus.AWAITING_CONFIRM, summary
    assert "599" in (summary.reply or ""), summary.reply


@pytest.mark.parametrize(
    ("message", "intent"),
    [
        ("no refund, where is my parcel OD2610280005", "logistics"),
        ("先不退款 看看物流到哪了 OD2610280005", "logistics"),
        ("has my parcel arrived or do I need a refund? OD2610280005", "logistics"),
        ("where is my package, do I need to ask for a refund? OD2610280005", "logistics"),
        ("my refund arrived, thanks. where is my other parcel OD2611200002", "logistics"),
        ("退款到了 谢谢 另一单快递到哪了 OD2611200002", "logistics"),
        (
            "I got the refund for the lamp, now what's the status of my order OD2611100003",
            "query_order",
        ),
        ("cancel OD2611250001, how long does the refund take?", "cancel"),
        ("取消订单 OD2611250001 退款多久到账", "cancel"),
        ("别给我退款，我要东西！快递到哪了 OD2611200002", "logistics"),
        ("please cancel OD2611250001, and refund me", "cancel"),
        (
            "change address of OD2611250001 to 上海市徐汇区漕溪北路100号, where is my refund?",
            "change_address",
        ),
    ],
)
def test_a_refund_beside_another_request_leaves_it_to_that_intent(
    message: str, intent: str, tmp_path: Path
) -> None:
    """A second review: each was taken for a refund (599 proposed) or a question about one."""
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.intent is not None and summary.intent.label == intent, summary
    assert "599" not in (summary.reply or ""), summary.reply


@pytest.mark.parametrize(
    "message",
    [
        "我没说要退款 OD2610280005",
        "谁说我要退款了 OD2610280005",
        "我不是要退款，我想问保修 OD2610280005",
        "I wasn’t asking for a refund OD2610280005",
        "I don't think I want a refund, just checking OD2610280005",
        "nvm no refund OD2610280005",
        "No refund. OD2610280005",
        "refund? no thanks OD2610280005",
        "Is OD2610280005 eligible for a refund?",
    ],
)
def test_no_refund_is_proposed_where_none_is_wanted(message: str, tmp_path: Path) -> None:
    """A third review: each proposed 599 (the eligibility question from the classifier)."""
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.status is not RunStatus.AWAITING_CONFIRM, summary
    assert "599" not in (summary.reply or ""), summary.reply


@pytest.mark.parametrize(
    "message",
    [
        "OD2611200002 退款50元，运费15元我自己出",
        "refund 50 dollars for OD2611200002, I paid 10 shipping",
    ],
)
def test_the_amount_asked_for_beside_another_charge_is_what_it_proposes(
    message: str, tmp_path: Path
) -> None:
    """A review of a first fix for "运费15元我自己出" (proposed as the refund): keeping every
    amount of a message that names a fee from being read proposed the whole order (459)."""
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())
    summary = asyncio.run(runtime.start(message))
    assert summary.status is RunStatus.AWAITING_CONFIRM, summary
    assert "50" in (summary.reply or "") and "459" not in (summary.reply or ""), summary.reply
