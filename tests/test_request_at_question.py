"""A new request typed at a run's question is a run of its own; the question waits.

On main, a session's message always answered the question its open run asked: asked for
an order id, "我要投诉你们的客服态度太差了" was taken as the answer, the complaint was lost
and the order id was asked for again. Now code decides, from config: a message that does
not give the value asked for, and that a rule gives an intent declared ``interrupts: true``
(the examples' complaints), starts its own run (``IntentLayer.another_request``). The
session keeps the question open (under a newer run that asks something of its own, too),
and the value sent next answers it. Any other message is the answer, as before: intents
whose words also describe an answer ("I can't find it", a question mark) do not interrupt.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from corral import EventType, MemoryStore, RunStatus, Runtime, SqlStore, ToolPolicy
from corral.errors import ConfigInvalidError
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES, ORDERS
from tests.helpers import build_agent
from tests.serving import AUTH, load, serving
from tests.test_confirmation_scope import payment_tools

TRIAGE = ORDERS.parent / "triage"

EXCHANGE_NO_ORDER = "我的打印机上周坏了，能换新吗？"
COMPLAINT = "我要投诉你们的客服态度太差了"


async def intent_of(runtime: Runtime, run_id: str) -> str | None:
    state = await runtime.load_state(run_id)
    return state.intent.label if state.intent else None


async def test_a_complaint_typed_at_a_question_is_handed_off_and_the_question_waits(
    tmp_path: Path,
) -> None:
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(EXCHANGE_NO_ORDER, session_id="s1")
    assert asked.status is RunStatus.AWAITING_USER
    complaint = await runtime.start(COMPLAINT, session_id="s1")
    assert complaint.run_id != asked.run_id
    assert complaint.status is RunStatus.HANDED_OFF
    assert await intent_of(runtime, complaint.run_id) == "投诉"
    # the reply says the question still waits: the next message answers it
    assert complaint.reply is not None and complaint.reply.endswith(
        "另外，您之前的问题还在等您回复：" + (asked.reply or "")
    )
    waiting = await runtime.load_state(asked.run_id)
    assert waiting.status is RunStatus.AWAITING_USER and waiting.messages == [EXCHANGE_NO_ORDER]
    stored = await runtime.load_state(complaint.run_id)  # the run's own reply is kept as is
    assert stored.reply is not None and "另外" not in stored.reply
    answered = await runtime.start("HD20240501", session_id="s1")
    assert answered.run_id == asked.run_id
    assert answered.status is RunStatus.AWAITING_CONFIRM


async def test_in_english_too(tmp_path: Path) -> None:
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("I want a replacement", session_id="e1")
    assert asked.status is RunStatus.AWAITING_USER
    complaint = await runtime.start("I want to make a complaint about your staff", session_id="e1")
    assert complaint.run_id != asked.run_id and complaint.status is RunStatus.HANDED_OFF
    assert "your earlier request is still waiting for your answer" in (complaint.reply or "")
    answered = await runtime.start("HD20240501", session_id="e1")
    assert answered.run_id == asked.run_id


async def test_the_reminder_is_in_the_language_of_the_question_it_quotes(tmp_path: Path) -> None:
    """Found by a review: "…still waiting for your answer: 好的，麻烦提供一下订单号…", a
    sentence in two languages, when a Chinese question waited for an English complaint."""
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(EXCHANGE_NO_ORDER, session_id="m1")
    assert asked.status is RunStatus.AWAITING_USER and asked.reply is not None
    complaint = await runtime.start("I want to make a complaint about your staff", session_id="m1")
    assert complaint.run_id != asked.run_id and complaint.reply is not None
    own, reminder = complaint.reply.rsplit("\n", 1)
    assert "另" not in own  # the complaint's own reply is in English, as it was written
    assert reminder == "另外，您之前的问题还在等您回复：" + asked.reply
    english = await runtime.start("I want a replacement", session_id="m2")
    chinese = await runtime.start(COMPLAINT, session_id="m2")
    assert (chinese.reply or "").endswith(
        "\nAlso, your earlier request is still waiting for your answer: " + (english.reply or "")
    )


async def test_an_answer_that_gives_nothing_and_asks_nothing_else_stays_the_questions(
    tmp_path: Path,
) -> None:
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(EXCHANGE_NO_ORDER, session_id="s2")
    again = await runtime.start("我不记得了", session_id="s2")
    assert again.run_id == asked.run_id and again.status is RunStatus.AWAITING_USER
    withdrawn = await runtime.start("算了不换了", session_id="s2")
    assert withdrawn.run_id == asked.run_id and withdrawn.outcome == "cancelled"


async def test_a_request_that_asks_its_own_question_hands_the_session_back_when_it_ends(
    tmp_path: Path,
) -> None:
    """The stack of open runs is kept by the store (a SQL session row, here)."""
    agent = load(TRIAGE, tmp_path)
    runtime = Runtime(agent, SqlStore.open(tmp_path / "c.db"), effects=FixedEffects())
    billing = await runtime.start("账单多扣了钱", session_id="s3")
    assert billing.status is RunStatus.AWAITING_USER  # which customer?
    complaint = await runtime.start("客服态度太差了，我要投诉", session_id="s3")
    assert complaint.run_id != billing.run_id and complaint.status is RunStatus.AWAITING_USER
    assert await intent_of(runtime, complaint.run_id) == "投诉"
    session = runtime.store.get_session("s3", FixedEffects().now())
    assert session is not None and session.open_run_id == complaint.run_id
    assert session.earlier_open_runs == [billing.run_id]
    first = await runtime.start("C10001", session_id="s3")  # the complaint's question's
    assert first.run_id == complaint.run_id and first.status is RunStatus.FINISHED
    # the bill's question asks what the complaint's answer said: it is not asked again
    # (on main: "另外，您之前的问题还在等您回复：…客户编号", and the customer said it twice)
    assert "还在等您回复" not in (first.reply or ""), first.reply
    bill = await runtime.summary(billing.run_id)
    assert bill.status is RunStatus.FINISHED and bill.outcome == "success"
    assert (first.reply or "").endswith(bill.reply or "-")  # both tickets, in one reply
    assert "服务投诉" in (first.reply or "") and "账单" in (bill.reply or "")
    events = await runtime.events(billing.run_id)
    answers = [e.data["text"] for e in events if e.type is EventType.USER_ANSWERED]
    assert answers == ["C10001"]  # the bill's answer, as its log keeps it
    session = runtime.store.get_session("s3", FixedEffects().now())
    assert session is not None and session.earlier_open_runs == [] and session.open_run_id is None


@pytest.mark.parametrize(
    ("example", "asking", "answer"),
    [
        # found in review of a first version that let any intent's rule interrupt
        (TRIAGE, "账单多扣了钱", "I can't find my customer id"),  # "can't": a fault's word
        (TRIAGE, "账单多扣了钱", "I'm unable to find it right now"),
        (TRIAGE, "我们的支付系统挂了", "客户号是多少？"),  # "?": a question's rule
        (ORDERS, "我要退款", "不想要了"),  # a cancel's words, as the refund's reason
        (AFTERSALES, EXCHANGE_NO_ORDER, "是上周买的打印机，现在不能用了"),  # a repair's words
        (ORDERS, "帮我改一下收货地址 OD2611250001", "北京市朝阳区建国路88号，快递放门口"),
        (AFTERSALES, EXCHANGE_NO_ORDER, "订单号是HD20240501，快点处理不然我投诉"),  # gives it
        # found in review: a complaint's words in an answer that names what was asked
        (AFTERSALES, EXCHANGE_NO_ORDER, "记性太差了，订单号忘了"),
        (AFTERSALES, EXCHANGE_NO_ORDER, "订单号可能在垃圾邮件里，我找一下"),
        (AFTERSALES, "I want a replacement", "Sorry, terrible memory, no order number"),
        (TRIAGE, "账单多扣了钱", "我记性太差，客户编号忘了"),
        (TRIAGE, "账单多扣了钱", "Worst case I'll look it up later, I don't have my customer id"),
    ],
)
async def test_an_answer_in_words_of_an_intent_that_does_not_interrupt_stays_the_questions(
    tmp_path: Path, example: Path, asking: str, answer: str
) -> None:
    runtime = Runtime(load(example, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(asking, session_id="s4")
    assert asked.status is RunStatus.AWAITING_USER
    answered = await runtime.start(answer, session_id="s4")
    assert answered.run_id == asked.run_id


def test_over_http(tmp_path: Path) -> None:
    agent = load(AFTERSALES, tmp_path)
    with (
        serving(agent, home=tmp_path, store=tmp_path / "c.db") as base,
        httpx.Client(base_url=base) as http,
    ):

        def say(message: str) -> dict[str, object]:
            body = {"message": message, "session_id": "h1"}
            answer = http.post("/agents/aftersales/runs", json=body, headers=AUTH)
            assert answer.status_code == 200, answer.text
            summary: dict[str, object] = answer.json()
            return summary

        asked = say(EXCHANGE_NO_ORDER)
        complaint = say(COMPLAINT)
        assert complaint["run_id"] != asked["run_id"]
        assert complaint["status"] == "handed_off"
        answered = say("HD20240501")
        assert answered["run_id"] == asked["run_id"]
        assert answered["status"] == "awaiting_confirm"


async def test_a_retried_request_gets_the_reply_it_got_the_first_time(tmp_path: Path) -> None:
    """Found in review: the retry of a message (its ``message_id``) lost the reminder."""
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    await runtime.start(EXCHANGE_NO_ORDER, session_id="s5", message_id="m1")
    first = await runtime.start(COMPLAINT, session_id="s5", message_id="m2")
    assert "另外，您之前的问题还在等您回复" in (first.reply or "")
    retried = await runtime.start(COMPLAINT, session_id="s5", message_id="m2")
    assert retried.run_id == first.run_id and retried.reply == first.reply


@pytest.mark.parametrize("reminder", ["still_asked", "still_to_confirm"])
def test_a_reminder_template_with_a_run_s_values_is_refused_when_the_agent_loads(
    reminder: str,
) -> None:
    """Found in review: it was rendered after the run was stored, and the request failed."""
    refund, _ = payment_tools([], ToolPolicy(kind="write"))
    templates = {reminder: {"zh": "订单 {order_id}：{question}", "en": "{order_id}: {question}"}}
    with pytest.raises(ConfigInvalidError) as refused:
        build_agent(
            [refund], [{"id": "r", "tool": "refund", "args": {"amount": "1"}}], templates=templates
        )
    assert f"template {reminder!r} may use only {{question}}, not order_id" in (
        refused.value.message
    )


async def test_a_waiting_run_that_is_gone_leaves_the_reply_as_it_was(tmp_path: Path) -> None:
    store = MemoryStore()
    runtime = Runtime(load(AFTERSALES, tmp_path), store, effects=FixedEffects())
    asked = await runtime.start(EXCHANGE_NO_ORDER, session_id="s6")
    del store.events[asked.run_id], store.runs[asked.run_id]  # the session still names it
    complaint = await runtime.start(COMPLAINT, session_id="s6")
    assert complaint.status is RunStatus.HANDED_OFF
    assert complaint.reply == "这个问题我已经转给人工客服，他们会尽快联系您。"


async def test_open_run_input_says_what_start_gives_the_paused_run(tmp_path: Path) -> None:
    """``Runtime.open_run_input``: the rule ``start`` follows, asked without acting on it."""
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    assert await runtime.open_run_input("HD20240501", session_id="s1") is None  # no session
    asked = await runtime.start(EXCHANGE_NO_ORDER, session_id="s1")
    given = await runtime.open_run_input("HD20240501", session_id="s1")
    assert given is not None and (given.run_id, given.answer) == (asked.run_id, "HD20240501")
    assert given.approve is None
    assert await runtime.open_run_input(COMPLAINT, session_id="s1") is None  # its own run
    state = await runtime.load_state(asked.run_id)
    assert state.status is RunStatus.AWAITING_USER and state.answered_slot is None  # untouched
    proposed = await runtime.start("HD20240501", session_id="s1")
    assert proposed.status is RunStatus.AWAITING_CONFIRM
    yes = await runtime.open_run_input("好的", session_id="s1")
    assert yes is not None and (yes.run_id, yes.approve, yes.answer) == (asked.run_id, True, None)
    assert await runtime.open_run_input("我的退款到账了吗", session_id="s1") is None


async def waiting_fault_and_complaint(runtime: Runtime, session_id: str) -> tuple[str, str]:
    """A P0 fault that asks the customer id, under a complaint that asks it too."""
    fault = await runtime.start("支付全挂了", session_id=session_id)
    complaint = await runtime.start("我要投诉你们的客服", session_id=session_id)
    assert fault.status is RunStatus.AWAITING_USER and complaint.status is RunStatus.AWAITING_USER
    return fault.run_id, complaint.run_id


@pytest.mark.parametrize(
    ("lines", "outcome"),
    [
        (["C10001 和 C20001", "算了"], "cancelled"),  # two ids, then withdrawn: none chosen
        (["C99999"], "not_found"),  # no such customer: the fault's question stands
    ],
)
async def test_only_a_value_a_newer_run_succeeded_with_answers_the_waiting_question(
    tmp_path: Path, lines: list[str], outcome: str
) -> None:
    """A review of b8db4c4: a withdrawn complaint's first id filed the fault as P0 and
    paged on-call; an unknown id closed the fault's report as not found."""
    runtime = Runtime(load(TRIAGE, tmp_path), MemoryStore(), effects=FixedEffects())
    fault, complaint = await waiting_fault_and_complaint(runtime, "s")
    for line in lines:
        last = await runtime.start(line, session_id="s")
    assert last.run_id == complaint and last.outcome == outcome, last
    assert "还在等您回复" in (last.reply or "")  # reminded, as before
    assert (await runtime.summary(fault)).status is RunStatus.AWAITING_USER


async def test_an_operators_run_plan_in_the_session_answers_no_customer_question(
    tmp_path: Path,
) -> None:
    runtime = Runtime(load(TRIAGE, tmp_path), MemoryStore(), effects=FixedEffects())
    fault = await runtime.start("支付全挂了", session_id="s")
    filed = await runtime.run_plan("suggestion", entities={"customer_id": "C10001"}, session_id="s")
    assert filed.status is RunStatus.FINISHED and "P0" not in (filed.reply or "")
    assert (await runtime.summary(fault.run_id)).status is RunStatus.AWAITING_USER


async def test_a_waiting_run_busy_elsewhere_is_reminded_and_the_turn_stands(
    tmp_path: Path,
) -> None:
    """A review of b8db4c4: the fault's lease held by another process raised RUN_BUSY
    out of a turn whose complaint was already filed."""
    agent = load(TRIAGE, tmp_path)
    runtime = Runtime(agent, SqlStore.open(tmp_path / "c.db"), effects=FixedEffects())
    other = Runtime(agent, SqlStore.open(tmp_path / "c.db"), effects=FixedEffects())
    fault, complaint = await waiting_fault_and_complaint(runtime, "s")
    async with other.ownership.holding(fault, 0.0):
        filed = await runtime.start("C10001", session_id="s")
    assert filed.run_id == complaint and filed.outcome == "success"
    assert "还在等您回复" in (filed.reply or "")
    assert (await runtime.summary(fault)).status is RunStatus.AWAITING_USER


async def test_a_retry_of_the_turn_that_answered_a_waiting_question_gets_the_same_reply(
    tmp_path: Path,
) -> None:
    """A review of b8db4c4: the retry (its ``message_id``) of the turn that filed the
    complaint and, with its id, the waiting P0 lost the P0's reply: the customer whose
    first answer was lost never learned that on-call was paged."""
    from corral.runtime.replay import replay_run

    agent = load(TRIAGE, tmp_path)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    fault, complaint = await waiting_fault_and_complaint(runtime, "s")
    first = await runtime.start("C10001", session_id="s", message_id="m3")
    assert first.run_id == complaint and "P0" in (first.reply or "")
    retried = await runtime.start("C10001", session_id="s", message_id="m3")
    assert retried.run_id == complaint and retried.reply == first.reply
    answered = [e for e in await runtime.events(fault) if e.type is EventType.USER_ANSWERED]
    assert [(e.data["text"], e.data.get("via_run")) for e in answered] == [("C10001", complaint)]
    report = await replay_run(agent, await runtime.events(fault))
    assert report.same_path, report


async def test_a_question_about_another_order_at_an_address_question_keeps_the_order(
    tmp_path: Path,
) -> None:
    """A walkthrough: "对了 OD2611280008 到哪了？" typed at OD2611250001's address question
    moved the address change to OD2611280008, and a yes wrote it there. It is answered
    on its own (orders' questions interrupt), and the address is still OD2611250001's."""
    runtime = Runtime(load(ORDERS, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("OD2611250001 想改地址", session_id="s")
    assert asked.status is RunStatus.AWAITING_USER
    tracked = await runtime.start("对了 OD2611280008 到哪了？", session_id="s")
    assert tracked.run_id != asked.run_id and "OD2611280008" in (tracked.reply or "")
    assert "还在等您回复" in (tracked.reply or "")
    confirm = await runtime.start("上海市徐汇区漕溪北路100号", session_id="s")
    assert confirm.run_id == asked.run_id and confirm.status is RunStatus.AWAITING_CONFIRM
    assert "OD2611250001" in (confirm.reply or "") and "OD2611280008" not in (confirm.reply or "")


async def test_a_retry_gives_the_turns_reply_not_a_later_one_nor_its_question_twice(
    tmp_path: Path,
) -> None:
    """A review of 7173fb3: the retry of the turn that answered the fault's id question,
    whose reply ended with the fault's next question, repeated that question as a
    reminder; and after a later turn filed the fault, it showed that later ticket."""
    runtime = Runtime(load(TRIAGE, tmp_path), MemoryStore(), effects=FixedEffects())
    fault = await runtime.start("系统全挂了，用不了", session_id="s")
    await runtime.start("我要投诉你们的客服", session_id="s")
    first = await runtime.start("C20002", session_id="s", message_id="m2")
    assert "工单" in (first.reply or "") and "哪个产品" in (first.reply or "")
    assert (await runtime.summary(fault.run_id)).status is RunStatus.AWAITING_USER
    again = await runtime.start("C20002", session_id="s", message_id="m2")
    assert again.reply == first.reply
    filed = await runtime.start("支付", session_id="s", message_id="m3")
    assert filed.run_id == fault.run_id and filed.outcome == "success"
    later = await runtime.start("C20002", session_id="s", message_id="m2")
    assert later.reply == first.reply


async def test_thanks_that_reads_as_a_yes_at_a_question_is_answered_as_thanks(
    tmp_path: Path,
) -> None:
    """A walkthrough: "好的，谢谢" at the customer-id question read as a yes, was asked
    again, and "ok thanks" after it handed the unfiled P0 to a person."""
    runtime = Runtime(load(TRIAGE, tmp_path), MemoryStore(), effects=FixedEffects())
    fault = await runtime.start("支付全挂了", session_id="s")
    for line in ("好的，谢谢", "ok thanks"):
        thanked = await runtime.start(line, session_id="s")
        assert thanked.run_id != fault.run_id and thanked.status is RunStatus.FINISHED
        assert "还在" in (thanked.reply or "") or "waiting" in (thanked.reply or "")
    filed = await runtime.start("C10001", session_id="s")
    assert filed.run_id == fault.run_id and "P0" in (filed.reply or "")


async def test_the_asked_id_beside_a_complaints_words_answers_the_question(
    tmp_path: Path,
) -> None:
    """A review of a first version that ran such a line as a complaint: "C20002，我没有要
    投诉，就是系统挂了" filed a complaint ticket, and its product was lost to the fault."""
    runtime = Runtime(load(TRIAGE, tmp_path), MemoryStore(), effects=FixedEffects())
    for session in ("s", "t"):
        await runtime.start("登录一直失败", session_id=session)
    said = await runtime.start("C20002，我没有要投诉，就是系统挂了", session_id="s")
    given = await runtime.start("C20003，登录体验太差了一直失败", session_id="t")
    for answered in (said, given):
        assert await intent_of(runtime, answered.run_id) == "故障", answered
        assert (answered.reply or "").count("已为您创建工单") == 1
