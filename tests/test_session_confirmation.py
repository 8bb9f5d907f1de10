"""The next message of a session answers its run's confirmation when it is a plain yes or no.

Found by a walkthrough: ``好的`` sent through ``corral run --session`` or ``POST
/agents/{agent}/runs`` with the session of a run that waited for a confirmation started a
new run, which asked to clarify; the confirmation waited until the session expired.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, RunSummary, Runtime
from corral.events import UserMessage
from corral.intent.confirmation import confirmation_answer, defers, explicit_yes, yes_or_no
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES, ROOT
from tests.helpers import corral_cli, exchange_count
from tests.serving import EXCHANGE, client, load, serving
from tests.test_declining_by_verb import DECLINED_EXCHANGE

CHIT_CHAT = "Hello! Nice weather today, isn't it?"


def said(runtime: Runtime, run_id: str) -> list[str]:
    """What the person wrote to the run, in order."""
    events = runtime.store.load_events(run_id)
    return [e.payload.text for e in events if isinstance(e.payload, UserMessage)]


async def test_a_plain_yes_approves_the_confirmation_it_answers(aftersales: Agent) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-yes")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    done = await runtime.start("好的，换吧", session_id="chat-yes")
    assert done.run_id == paused.run_id
    assert done.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1  # counted by the tool itself
    assert said(runtime, done.run_id) == [EXCHANGE, "好的，换吧"]  # the log shows the yes
    session = runtime.store.get_session("chat-yes", FixedEffects().now())
    assert session is not None and session.open_run_id is None
    later = await runtime.start("好的", session_id="chat-yes")  # nothing waits any more
    assert later.run_id != paused.run_id
    assert exchange_count(aftersales) == 1


async def test_a_plain_no_rejects_it_and_nothing_is_written(aftersales: Agent) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-no")
    rejected = await runtime.start("no thanks", session_id="chat-no")
    assert rejected.run_id == paused.run_id
    assert rejected.status is not RunStatus.AWAITING_CONFIRM
    state = await runtime.load_state(paused.run_id)
    assert list(state.confirmations.values()) == [False]
    assert exchange_count(aftersales) == 0


REMINDER = "另外，您之前的请求还在等您确认："


async def test_a_reply_of_another_run_reminds_of_the_confirmation_and_a_confirm_answers(
    aftersales: Agent,
) -> None:
    """Found by a walkthrough: a message answered by another run of the session (a
    question about another order) left the confirmation waiting without a word, and the
    "确认" meant for it started a run of its own. That reply now ends with the prompt
    (``still_to_confirm``), and a yes in so many words after it approves."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-aside")
    assert paused.pending is not None
    aside = await runtime.start(CHIT_CHAT, session_id="chat-aside")
    assert aside.run_id != paused.run_id
    assert f"{REMINDER}{paused.pending.prompt}（要办的话请回复「确认」）" in (aside.reply or "")
    assert exchange_count(aftersales) == 0
    done = await runtime.start("确认", session_id="chat-aside")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1  # counted by the tool itself
    assert said(runtime, paused.run_id) == [EXCHANGE, "确认"]


@pytest.mark.parametrize("line", ["ok thanks", "好的", "好的，谢谢", "哦", "嗯", "ok"])
async def test_after_the_reminder_a_line_that_may_answer_the_other_reply_decides_nothing(
    aftersales: Agent, line: str
) -> None:
    """A review: after another run's reply, "ok thanks" or "好的" may acknowledge that
    reply, or take up what it suggested: it carried out the write proposed before it.
    Such a line is a message of its own, its reply reminds again, and the write waits."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-ack")
    await runtime.start(CHIT_CHAT, session_id="chat-ack")
    other = await runtime.start(line, session_id="chat-ack")
    assert other.run_id != paused.run_id
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM
    assert exchange_count(aftersales) == 0
    if other.status is not RunStatus.AWAITING_USER:  # its own question is asked first
        assert REMINDER in (other.reply or "")


@pytest.mark.parametrize("line", ["不用了", "算了", "never mind", "no"])
async def test_a_no_after_the_reminder_declines_and_nothing_is_written(
    aftersales: Agent, line: str
) -> None:
    """A walkthrough: "不用了" or "never mind" after the reminder got "didn't understand",
    and the exchange kept waiting. A no writes nothing, so it is taken there."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-no-after")
    await runtime.start(CHIT_CHAT, session_id="chat-no-after")
    declined = await runtime.start(line, session_id="chat-no-after")
    assert declined.run_id == paused.run_id and declined.status is RunStatus.FINISHED
    assert declined.outcome == "cancelled" and exchange_count(aftersales) == 0


@pytest.mark.parametrize("line", ["好的，确认退款", "ok, confirm the refund"])
async def test_a_yes_that_names_the_refund_after_the_reminder_approves_the_one_reminded(
    line: str, tmp_path: Path
) -> None:
    """A walkthrough: "好的，确认退款" after a tracking reply that reminded of a refund of
    OD2611100003 was no yes, and started a refund of the tracked order, OD2611200002."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("OD2611100003 退款", session_id="named")
    await runtime.start("OD2611200002到哪了", session_id="named")
    done = await runtime.start(line, session_id="named")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    with sqlite3.connect(orders.deps["db"]) as conn:
        made = conn.execute("SELECT order_id FROM refunds").fetchall()
    assert made == [("OD2611100003",)]


async def test_a_yes_after_another_agent_s_reply_approves_nothing(
    aftersales: Agent, tmp_path: Path
) -> None:
    """Found by review: "ok" after a reply of another run carried out the write proposed
    before it. Another agent's reply (a session id two agents share) does not remind of
    this agent's confirmation, so no yes after it answers it, not even "确认": the
    confirmation is then answered by ``resume``."""
    from corral import load_agent

    store, effects = MemoryStore(), FixedEffects()
    runtime = Runtime(aftersales, store, effects=effects)
    paused = await runtime.start(EXCHANGE, session_id="two-desks")
    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    aside = await Runtime(orders, store, effects=effects).start(
        "查一下订单 OD2611200002", session_id="two-desks"
    )
    assert "确认" not in (aside.reply or "")
    thanks = await runtime.start("确认", session_id="two-desks")
    assert thanks.run_id != paused.run_id
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM
    assert exchange_count(aftersales) == 0
    done = await runtime.resume(paused.run_id, approve=True)  # said where it is meant
    assert done.status is RunStatus.FINISHED and exchange_count(aftersales) == 1


async def test_a_refund_waits_through_a_tracking_question_and_a_yes_makes_it(
    tmp_path: Path,
) -> None:
    """The walkthrough's conversation: a refund proposed, a parcel tracked, then "确认退款"."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("OD2611100003 退款", session_id="refund")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    tracked = await runtime.start("OD2611200002到哪了", session_id="refund")
    assert "已经发货" in (tracked.reply or "") and REMINDER in (tracked.reply or "")
    assert "699" in (tracked.reply or "")  # the amount asked is quoted again
    done = await runtime.start("确认退款", session_id="refund")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    with sqlite3.connect(orders.deps["db"]) as conn:
        made = conn.execute("SELECT order_id, amount_cny FROM refunds").fetchall()
    assert made == [("OD2611100003", 699.0)]


async def test_a_correction_after_another_reply_corrects_that_reply_s_request(
    tmp_path: Path,
) -> None:
    """A review: "不对，是 OD2611200002" after a tracking reply that reminded of a refund
    declined the refund of OD2611100003 and proposed one of OD2611200002. It corrects
    what was asked last (the tracking): the refund waits, untouched."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("OD2611100003 退款", session_id="fix")
    await runtime.start("OD2611250001到哪了", session_id="fix")
    corrected = await runtime.start("不对，是 OD2611200002", session_id="fix")
    assert corrected.run_id != paused.run_id
    assert "这次先不办了" not in (corrected.reply or "") and "459" not in (corrected.reply or "")
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM


def test_over_http_a_reply_read_back_shows_no_reminder_and_a_plain_yes_approves_nothing(
    tmp_path: Path,
) -> None:
    """A review: a client that sends with ``wait: false`` reads the reply back from the
    run, which holds no reminder; "好的" after it carried out the refund nobody was
    reminded of. Only "确认" answers there (``explicit_yes``)."""
    from tests.serving import load
    from tests.workers_support import until

    agent = load(ROOT / "examples" / "orders", tmp_path / "home")
    with serving(agent, home=tmp_path / "home") as url, client(url) as http:
        post = "/agents/orders/runs"
        body = {"session_id": "web-r"}
        paused = http.post(post, json={**body, "message": "OD2611100003 退款"}).json()
        assert paused["status"] == "awaiting_confirm"
        queued = http.post(post, json={**body, "message": "OD2611200002到哪了", "wait": False})
        assert queued.status_code == 202
        aside = f"/runs/{queued.json()['run_id']}"
        until(lambda: http.get(aside).json()["status"] == "finished", "the aside to end")
        read_back = http.get(aside).json()
        assert "已经发货" in str(read_back["reply"]) and REMINDER not in str(read_back["reply"])
        ok = http.post(post, json={**body, "message": "好的"}).json()
        assert ok["run_id"] != paused["run_id"]
        assert http.get(f"/runs/{paused['run_id']}").json()["status"] == "awaiting_confirm"
    with sqlite3.connect(agent.deps["db"]) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (0,)


@pytest.mark.parametrize(
    "line",
    [
        "好，我再考虑一下",  # decides nothing
        "确定？",
        "ok?",
        "yes?",
        "对吧？",
        "嗯？",
        "好的，不要吧",
        "好的，改天吧",
        "对吧",  # "right?" without its question mark (found by review)
        "是吧",
        "没错吧",  # "it is right, isn't it?" (found on main: it approved)
        "订单号没错吧",
        "好" * 300,
    ],
)
async def test_a_question_or_a_line_deciding_nothing_is_no_yes(
    aftersales: Agent, line: str
) -> None:
    """Found by review and a walkthrough: "确定？" ("are you sure?"), "嗯？" ("huh?"),
    "好，算了吧" ("OK, forget it") and 300 characters of 好 read as yes, and approved."""
    assert yes_or_no(line) is None
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-q")
    other = await runtime.start(line, session_id="chat-q")
    assert other.run_id != paused.run_id  # a message of its own
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM
    assert exchange_count(aftersales) == 0


async def test_another_agent_sharing_the_session_id_leaves_the_run_alone(
    aftersales: Agent, tmp_path: Path
) -> None:
    """Found by review: a yes to another agent with the same session id tried to drive
    this agent's run ("no intent named ...")."""
    from corral import load_agent

    store, effects = MemoryStore(), FixedEffects()  # one id counter: no id taken twice
    paused = await Runtime(aftersales, store, effects=effects).start(EXCHANGE, session_id="shared")
    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    other = await Runtime(orders, store, effects=effects).start("ok", session_id="shared")
    assert other.run_id != paused.run_id
    assert exchange_count(aftersales) == 0


async def test_without_a_session_a_yes_is_a_message_of_its_own(aftersales: Agent) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE)
    other = await runtime.start("好的")
    assert other.run_id != paused.run_id
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM
    assert exchange_count(aftersales) == 0


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("好的", True),
        ("不用了", False),
        ("yes please", True),
        ("对了，运费谁出？", None),
        # found by a walkthrough: naming what is approved was no yes, and started a new
        # refund run for the full amount ("退 100 元" had been asked)
        ("确认退款", True),
        ("confirm the refund", True),
        ("确认一下订单号是不是对的", None),
        ("confirm whether it shipped", None),
        ("确认取消", None),  # said to "refund 699?", it may cancel the refund
        # found by review: a confirm word followed by anything else approved the write
        ("approve later", None),
        ("确认错了", None),
        ("确认退50", None),
        ("确认退款金额", None),
        ("确认稍后", None),
        ("confirm 50", None),
        ("confirm it please", True),
        # found by a conversation walkthrough: each of these was asked again, and a
        # customer who agreed three times was handed to a person
        ("好的谢谢", True),  # Chinese runs its thanks into the yes
        ("不用谢谢", False),
        ("是的 😊", True),
        ("好的🙏", True),
        ("嗯嗯", True),
        ("可以的", True),
        ("没错", True),
        ("confirmed", True),
        ("先不要", False),
        ("👍", None),  # a mood alone is no answer
        ("对不起", None),  # 对 run into something other than thanks
        ("好不好", None),
        # found by a conversation walkthrough: the request taken back at its confirmation
        # was a new message ("I did not understand"), and the refund still waited for a yes
        ("算了不退了", False),
        ("算了", False),
        ("不要了", False),
        ("never mind", False),
        ("forget it, I'll keep it", False),
        ("算了，还是换吧", None),  # goes on to answer: asked again
        ("算了？", None),
        # a review: what follows a withdrawal may be a yes, or a request of its own; the
        # cancellation was read as a no and answered "已取消" with the order still live
        ("不需要了，取消", None),
        ("算了，换吧", None),
        ("不要了，帮我退吧", None),
        ("never mind, go ahead", None),
        ("forget it, just do it", None),
        ("算了不退了，帮我查一下 OD2611200002 的物流", None),
        ("不取消了", False),  # to "cancel order OD…?": it stays
        ("算了不退了吧", False),
        # found by a walkthrough: a withdrawal after a word that opens it, or said with
        # 先 ("for now"), was a new message ("I did not understand") and the refund waited
        ("算了，先不退了", False),
        ("先不退了", False),
        ("那算了", False),
        ("那就算了吧", False),
        ("还是算了", False),
        ("嗯，算了", False),
        ("好，算了吧", False),  # "OK, forget it": no yes (a review), and a no
        ("算了吧", False),
        ("算了，不退", False),
        ("actually never mind", False),
        ("oh, never mind", False),
        ("well, forget it", False),
        ("no, never mind", False),
        ("ok never mind", False),
        ("还是修一下吧", None),  # another request in its place (``switches``)
        ("那还是退吧", None),
        ("actually, go ahead", None),
        ("先别确认", None),  # not now: asked again, not declined
        ("oh no, never mind", False),
        # a review: after a yes word, "nothing to change" may be a go-ahead: asked again
        ("好的，不用改了", None),
        ("好的不用改了", None),
        ("嗯，不改了", None),
        # found by a walkthrough: yes words run together were no answer, a new run took
        # the session, and the customer's "确认" after it no longer reached the refund
        ("嗯确认", True),
        ("嗯嗯好的", True),
        ("好的好的", True),
        ("好滴", True),
        ("yes pls", True),
        ("好贵", None),  # 好 run into something other than a yes
        ("好不要", None),
        ("确认不了", None),
        # a review: run together with 是, 对 or 行, it asks, concedes or goes on
        ("嗯是吧", None),
        ("嗯对吧", None),
        ("好是好", None),
        ("行行好", None),
        ("好的对了", None),
        # a walkthrough: a yes, then the confirm words naming what it approves
        ("好的，确认退款", True),
        ("ok, confirm the refund", True),
        ("好的，确认取消", None),  # to "refund 699?" it may cancel the refund
        # a review: a question mark anywhere asks ("确定？！" cancelled an order)
        ("确定？！", None),
        ("ok?!", None),
        ("是的？😅", None),
        ("好吧，取消吧", None),  # to "refund 699?" it may cancel the refund: it refunded
        # found on main: a yes word then 吧 asks ("it is right, isn't it?"), and a
        # cancellation was carried out on "订单号没错吧"
        ("没错吧", None),
        ("对的吧", None),
        ("是的吧", None),
        ("没问题吧", None),
        ("地址对吧", None),
        ("订单号没错吧", None),
        ("嗯，没错吧", None),
        ("好吧", True),  # 吧 after a go-ahead urges it on
        ("行吧", True),
        ("地址没错", True),
        # a review: 吧 after a space or 了 asks all the same, and 是嘛 is "really?"
        ("订单号没错 吧", None),
        ("对的 吧", None),
        ("订单号对了吧", None),
        ("金额没错了吧", None),
        ("是嘛", None),
        # ... and a tag question beside a confirm word in so many words is a yes
        ("没错吧，确认", True),
        ("确认，没错吧", True),
        # a dash parts words as a comma does ("好的——确认" ran into one word, no answer)
        ("好的——确认", True),
        ("不用了—谢谢", False),
        ("yes—please", True),
        # laughter after a yes may brush the question off: asked again ("嗯嗯哈哈" made
        # the exchange); one 哈 is a particle ("好哈")
        ("嗯嗯哈哈", None),
        ("好的哈哈", None),
        ("好哈", True),
    ],
)
def test_the_reader_is_the_library_s_and_the_chat_s(line: str, meant: bool | None) -> None:
    from corral.cli.conversation import confirmation_answer as chat_reader

    assert confirmation_answer(line) is meant
    if yes_or_no(line) is not None:  # a withdrawal is only read where no yes or no is
        assert yes_or_no(line) is meant
    assert chat_reader is confirmation_answer  # one reader: the chat and the session agree


@pytest.mark.parametrize(
    ("line", "explicit"),
    [
        ("确认", True),
        ("确定，退吧", True),
        ("是的，确认", True),
        ("确认退款", True),
        ("confirm the refund", True),
        ("yes, go ahead", True),
        ("Confirm.", True),
        ("好的", False),
        ("好的谢谢", False),
        ("ok thanks", False),
        ("哦", False),
        ("yes", False),
        ("确认？", False),  # a question
        ("确认不了", False),
        ("不确认", False),
    ],
)
def test_a_yes_in_so_many_words(line: str, explicit: bool) -> None:
    assert explicit_yes(line) is explicit


CANCEL_ZH = "确认取消订单 OD2611250001（无线耳机 AirSound Pro）吗？取消后钱会原路退回。"
CANCEL_EN = "Cancel order OD2611250001 (AirSound Pro wireless earphones)? The money goes back."
REFUND_ZH = "订单 OD2611100003（跑步鞋 Run 3）现在是已完成，确认为这单退款 699 元吗？"
REFUND_EN = "Order OD2611100003 (Run 3 running shoes) is completed. Shall I refund 699 CNY?"


@pytest.mark.parametrize(
    ("line", "prompt", "meant"),
    [
        ("确认取消", CANCEL_ZH, True),
        ("好的，确认取消", CANCEL_ZH, True),
        ("确认取消订单", CANCEL_ZH, True),
        ("yes, cancel it", CANCEL_EN, True),
        ("cancel the order please", CANCEL_EN, True),
        ("确认取消", REFUND_ZH, None),  # to "refund 699?" it may cancel the refund
        ("cancel", CANCEL_EN, None),  # alone it may take the request back
        ("确认取消吗", CANCEL_ZH, None),  # a question
        ("yes, cancel it", REFUND_ZH, None),
        ("确认不取消", CANCEL_ZH, None),
        # a review: after a yes, the action word alone; whole words only; few verbs
        ("好吧，取消吧", CANCEL_ZH, True),
        ("好吧，取消吧", REFUND_ZH, None),  # was a yes ("取消吧" urged it on): refunded
        ("确认取", CANCEL_ZH, None),
        ("对吧，确认取消", CANCEL_ZH, None),
        ("cancel that", CANCEL_EN, None),  # as often "scratch that"
        ("order it", "Order OD2611100003 is completed. Shall I refund 699 CNY?", None),
        ("yes, refund it", "Order OD2611100003 is completed. Shall I refund 699 CNY?", True),
        # a walkthrough: "cancel" to "Shall I refund 699 CNY?" asked to cancel the order
        ("cancel", REFUND_EN, False),
        ("no, cancel it", REFUND_EN, False),
        ("cancel the refund", REFUND_EN, False),
        ("取消吧", REFUND_ZH, False),
        ("取消退款", REFUND_ZH, False),
        ("cancel the order", REFUND_EN, None),  # a request of its own
        ("取消订单", REFUND_ZH, None),
        ("取消", CANCEL_ZH, None),  # to a cancellation it may mean either
    ],
)
def test_a_line_that_says_the_prompt_s_action_again_is_a_yes_to_it(
    line: str, prompt: str, meant: bool | None
) -> None:
    """A walkthrough: "确认取消" to "确认取消订单 OD…吗？", the likeliest answer to it, got
    "didn't understand", and the cancellation was then out of reach."""
    assert confirmation_answer(line) is None  # without the prompt, no answer
    assert confirmation_answer(line, prompt) is meant


@pytest.mark.parametrize("line", ["好的，确认取消", "ok, cancel it"])
async def test_after_a_reminder_saying_an_action_again_approves_nothing(
    line: str, tmp_path: Path
) -> None:
    """A review: the reply before the reminder suggested cancelling another order ("说「取消
    订单 OD2611280008」就行"), and "好的，确认取消" then cancelled the reminded one."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    english = line.isascii()
    paused = await runtime.start(
        "cancel order OD2611250001" if english else "取消订单 OD2611250001", session_id="r"
    )
    await runtime.start(
        "any refund on OD2611280008?" if english else "OD2611280008 退款了吗", session_id="r"
    )
    await runtime.start(line, session_id="r")
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM
    with sqlite3.connect(orders.deps["db"]) as conn:
        assert conn.execute("SELECT count(*) FROM cancellations").fetchone() == (0,)


async def orders_waiting(
    tmp_path: Path, english: bool, asked: tuple[str, str]
) -> tuple[Agent, Runtime, RunSummary]:
    """The orders example, its request ``asked`` (English, Chinese) waiting for a yes."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(asked[0] if english else asked[1], session_id="own-words")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    return orders, runtime, paused


@pytest.mark.parametrize("line", ["确认取消", "yes, cancel it"])
async def test_confirming_a_cancellation_in_its_own_words_cancels_it(
    line: str, tmp_path: Path
) -> None:
    asked = ("cancel OD2611280008", "取消 OD2611280008")
    orders, runtime, paused = await orders_waiting(tmp_path, line.isascii(), asked)
    done = await runtime.start(line, session_id="own-words")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    with sqlite3.connect(orders.deps["db"]) as conn:
        made = conn.execute("SELECT order_id FROM cancellations").fetchall()
    assert made == [("OD2611280008",)]


@pytest.mark.parametrize(
    "line",
    # a walkthrough: after a word that opens it, or said with 先, it was a new message;
    # declined by its verb ("我不想换了", "先别换"), it was "I did not understand"
    [
        *("算了不换了", "那就算了吧", "还是算了", "先不换了", "嗯，算了", "actually never mind"),
        *DECLINED_EXCHANGE,
    ],
)
async def test_a_request_taken_back_at_its_confirmation_rejects_it(
    aftersales: Agent, line: str
) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-back")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    back = await runtime.start(line, session_id="chat-back")
    assert back.run_id == paused.run_id and back.outcome == "cancelled", back
    state = await runtime.load_state(paused.run_id)
    assert list(state.confirmations.values()) == [False]
    assert exchange_count(aftersales) == 0


def test_corral_run_with_a_session_approves_with_a_yes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = corral_cli(home, "run", str(AFTERSALES), EXCHANGE, "--session", "s1", "--json")
    paused = json.loads(first.stdout)
    assert paused["status"] == "awaiting_confirm"
    second = corral_cli(home, "run", str(AFTERSALES), "是的", "--session", "s1", "--json")
    done = json.loads(second.stdout)
    assert done["run_id"] == paused["run_id"]
    assert done["status"] == "finished"
    listed = corral_cli(home, "runs", "--json")
    assert len(json.loads(listed.stdout)) == 1  # no second run


def test_corral_run_reminds_of_the_confirmation_and_takes_the_yes_after_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    first = corral_cli(home, "run", str(AFTERSALES), EXCHANGE, "--session", "s1", "--json")
    paused = json.loads(first.stdout)
    aside = corral_cli(home, "run", str(AFTERSALES), CHIT_CHAT, "--session", "s1", "--json")
    assert paused["pending"]["prompt"] in json.loads(aside.stdout)["reply"]
    yes = corral_cli(home, "run", str(AFTERSALES), "确认", "--session", "s1", "--json")
    done = json.loads(yes.stdout)
    assert done["run_id"] == paused["run_id"] and done["status"] == "finished"
    assert len(json.loads(corral_cli(home, "runs", "--json").stdout)) == 2


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Agent]]:
    agent = load(AFTERSALES, tmp_path / "home")
    with serving(agent, home=tmp_path / "home") as url:
        yield url, agent


def test_the_http_api_takes_a_yes_in_the_session_as_the_approval(
    served: tuple[str, Agent],
) -> None:
    base, agent = served
    with client(base) as http:
        body = {"message": EXCHANGE, "session_id": "web-1"}
        paused = http.post("/agents/aftersales/runs", json=body).json()
        assert paused["status"] == "awaiting_confirm"
        yes = {"message": "OK", "session_id": "web-1"}
        done = http.post("/agents/aftersales/runs", json=yes)
        assert done.status_code == 200
        assert done.json()["run_id"] == paused["run_id"]
        assert done.json()["status"] == "finished"
        assert exchange_count(agent) == 1
        runs = http.get("/runs", params={"session_id": "web-1"}).json()["runs"]
        assert [r["run_id"] for r in runs] == [paused["run_id"]]


async def test_another_agent_that_spoke_last_does_not_take_the_open_question(
    aftersales: Agent, tmp_path: Path
) -> None:
    """Found by review: the open run's agent was taken from the session's last speaker,
    so after another agent's run, that agent answered (and drove, with its own plan and
    its write) the first agent's open question."""
    from corral import load_agent

    store, effects = MemoryStore(), FixedEffects()
    first = Runtime(aftersales, store, effects=effects)
    asked = await first.start("保修多久", session_id="mixed")
    assert asked.status is RunStatus.AWAITING_USER
    orders = Runtime(
        load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders"),
        store,
        effects=effects,
    )
    one = await orders.start("查一下订单 OD2611200002", session_id="mixed")
    two = await orders.start("查一下订单 OD2611050004", session_id="mixed")
    assert asked.run_id not in (one.run_id, two.run_id)
    assert (await first.summary(asked.run_id)).status is RunStatus.AWAITING_USER
    answered = await first.start("打印机", session_id="mixed")  # its own agent still can
    assert answered.run_id == asked.run_id


async def test_confirming_by_name_approves_the_amount_asked(tmp_path: Path) -> None:
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("退 100 元 OD2611100003", session_id="named")
    assert paused.status is RunStatus.AWAITING_CONFIRM and "100" in (paused.reply or "")
    done = await runtime.start("确认退款", session_id="named")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    assert "100" in (done.reply or "")


async def test_an_order_never_chosen_between_two_is_not_carried_over(aftersales: Agent) -> None:
    """Found by a walkthrough: "订单HD20240501和HD20250920都坏了" was asked "which one?",
    never answered, and a later run of the session used HD20240501 without asking."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("换新，订单HD20240501和HD20250920都坏了", session_id="two")
    assert asked.status is RunStatus.AWAITING_USER
    for line in ("I want an exchange", "打印机卡纸了"):
        gone = await runtime.start(line, session_id="two")
    assert gone.run_id == asked.run_id and gone.status is RunStatus.HANDED_OFF
    session = runtime.store.get_session("two", FixedEffects().now())
    assert session is not None and "order_id" not in session.entities
    later = await runtime.start("打印机卡纸了", session_id="two")
    assert later.status is RunStatus.AWAITING_USER  # asks which order, guesses none
    assert "order_id" not in (await runtime.load_state(later.run_id)).entities


async def test_a_yes_run_into_its_thanks_approves_the_sessions_write(aftersales: Agent) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="chat-thanks")
    done = await runtime.start("好的谢谢", session_id="chat-thanks")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1


async def test_a_cancel_said_after_a_withdrawal_word_is_no_no_to_the_cancellation(
    tmp_path: Path,
) -> None:
    """A review: "不需要了，取消" said to "确认取消订单 OD2611280008…吗？" was read as a
    no, and answered "已取消" while the order stayed pending."""
    from corral import load_agent
    from tests.conftest import ORDERS

    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
    paused = await runtime.start("取消订单 OD2611280008", session_id="c")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    said = await runtime.start("不需要了，取消", session_id="c")
    assert said.run_id != paused.run_id  # not taken as the decision: asked, not guessed
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    ("asked", "line"),
    [("OD2611100003 我要退款", "取消"), ("I want a refund for OD2611100003", "cancel")],
)
async def test_cancel_said_to_a_refund_s_prompt_calls_the_refund_off(
    asked: str, line: str, tmp_path: Path
) -> None:
    """A walkthrough: "cancel" to "Shall I refund 699 CNY?" started a cancellation of the
    (completed) order, refused, and the refund kept waiting."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(asked, session_id="call-off")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    off = await runtime.start(line, session_id="call-off")
    assert off.run_id == paused.run_id and off.outcome == "cancelled", off
    with sqlite3.connect(orders.deps["db"]) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM cancellations").fetchone() == (0,)


@pytest.mark.parametrize(
    ("asked", "switch"),
    [
        (EXCHANGE, "算了还是修一下吧"),
        ("I want a replacement for my printer HD20240501", "actually just repair it"),
        ("I want a replacement for my printer HD20240501", "no wait, actually just repair it"),
        (EXCHANGE, "不如修一下吧"),  # review: 不 was read past as a no, and 如 left
        ("I want a replacement for my printer HD20240501", "repair it instead"),
    ],
)
async def test_switching_to_another_request_declines_the_one_asked(
    aftersales: Agent, asked: str, switch: str
) -> None:
    """A walkthrough: "actually just repair it" to "shall I create the exchange?" booked
    the repair and left the exchange waiting, reminded; the "confirm" after the reminder
    then made the exchange too, two remedies for one fault."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(asked, session_id="switch")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    repaired = await runtime.start(switch, session_id="switch")
    assert repaired.run_id != paused.run_id and repaired.outcome == "success", repaired
    assert (await runtime.summary(paused.run_id)).outcome == "cancelled"
    with sqlite3.connect(aftersales.deps["db"]) as conn:
        assert conn.execute("SELECT order_id FROM repairs").fetchall() == [("HD20240501",)]
    await runtime.start("confirm" if switch.isascii() else "确认", session_id="switch")
    assert exchange_count(aftersales) == 0  # counted by the tool's own table


async def test_a_switch_word_to_the_same_request_is_no_switch(aftersales: Agent) -> None:
    """ "还是换新吧" to the exchange's own prompt asks for what is asked: it stays waiting."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="same")
    await runtime.start("还是换新吧", session_id="same")
    assert (await runtime.summary(paused.run_id)).outcome != "cancelled"


async def test_a_switch_after_the_reply_to_an_unclear_line_declines_the_one_asked(
    aftersales: Agent,
) -> None:
    """Review: after "didn't understand" (the last turn has no intent), "算了还是修一下吧"
    booked the repair and left the exchange waiting; "确认" then made it too."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="after-unclear")
    assert (await runtime.start("嗯嗯那个", session_id="after-unclear")).outcome == "unclear"
    await runtime.start("算了还是修一下吧", session_id="after-unclear")
    assert (await runtime.summary(paused.run_id)).outcome == "cancelled"
    await runtime.start("确认", session_id="after-unclear")
    assert exchange_count(aftersales) == 0


@pytest.mark.parametrize(
    ("asked", "line"),
    [
        ("I want a replacement for my printer HD20240501", "actually, how long is the warranty?"),
        ("I want a replacement for my printer HD20240501", "还是坏了，黑屏"),  # "still broken"
        ("I want a replacement for my printer HD20240501", "rather, how long is the warranty?"),
    ],
)
async def test_a_question_or_still_is_no_switch(aftersales: Agent, asked: str, line: str) -> None:
    """Review: "actually, how long is the warranty?" (a question beside the exchange) and
    "还是坏了" (还是: "still") declined the exchange the customer was asked about."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(asked, session_id="no-switch")
    await runtime.start(line, session_id="no-switch")
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    "line", ["actually, where is my order OD2611200002?", "还是想问一下 OD2611200002 的物流"]
)
async def test_a_read_beside_a_refund_is_no_switch(line: str, tmp_path: Path) -> None:
    """Review: a question about another order, opened with "actually" or 还是, declined
    the refund waiting for a yes: only a request that writes takes its place."""
    from corral import load_agent

    orders = load_agent(ROOT / "examples" / "orders", data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("I want a refund for OD2611100003", session_id="read")
    await runtime.start(line, session_id="read")
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("not yet", True),
        ("Not now.", True),
        ("wait", True),
        ("hold on please", True),
        ("ok, let me think about it", True),
        ("先别确认", True),
        ("我再想想吧", True),
        ("好，我再考虑一下", True),
        ("等等", True),
        ("晚点再说", True),
        ("等等，我说错了，是 OD2611100003", False),  # a correction
        ("wait, what's the fee?", False),  # a question
        ("not yet shipped", False),
        ("先不退了", False),  # a no: ``confirmation_answer``
        ("好的", False),
    ],
)
def test_defers(line: str, meant: bool) -> None:
    assert defers(line) is meant


@pytest.mark.parametrize("line", ["not yet", "我再想想"])
async def test_a_confirmation_put_off_waits_and_is_said_to_wait(line: str, tmp_path: Path) -> None:
    """A walkthrough: "not yet" to "Shall I refund 459 CNY?" was a message of its own, the
    classifier took it for a tracking question (0.87), and the tracking was looked up.
    Now it runs nothing, the reply says the request still waits, and a yes approves it."""
    english = line.isascii()
    asked = ("refund OD2611200002", "OD2611200002 退款")
    orders, runtime, paused = await orders_waiting(tmp_path, english, asked)
    put_off = await runtime.start(line, session_id="own-words")
    assert put_off.run_id != paused.run_id and put_off.outcome == "deferred"
    assert put_off.steps == []
    waits = "still waiting for your go-ahead" if english else "还在等您确认"
    assert put_off.reply is not None and waits in put_off.reply and "459" in put_off.reply
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM
    # a review of f9484d4: an "ok" after "it still waits" acknowledges it, and refunded
    await runtime.start("ok thanks" if english else "好的", session_id="own-words")
    with sqlite3.connect(orders.deps["db"]) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (0,)
    done = await runtime.start("confirm" if english else "确认", session_id="own-words")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    with sqlite3.connect(orders.deps["db"]) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (1,)
