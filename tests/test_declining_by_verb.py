"""A write declined by its own verb at its confirmation: "我不想换了", "先别换", "别退了".

Before, only a few such phrases were listed ("不换了", "不退了", "别改"): "还是不要换了吧"
or "等等，我不想换了" said to "shall I create the exchange?" was answered "I did not
understand", and the exchange still waited for a yes. A no writes nothing, so reading
one more line as a no is the safe side; no such line may ever read as a yes. At the
exchange's prompt, end to end: ``test_session_confirmation.py``
(``test_a_request_taken_back_at_its_confirmation_rejects_it``)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent
from corral.intent.confirmation import WITHDRAWN, confirmation_answer
from corral.testing import FixedEffects
from tests.conftest import ORDERS, ROOT
from tests.helpers import corral_cli, exchange_count
from tests.serving import EXCHANGE, client, load, serving

EXCHANGE_PROMPT = "我这就为订单 HD20240501 创建换新单，可以吗？"
REFUND_PROMPT = "确认为这单退款 459 元吗？"
CANCEL_PROMPT = "确认取消订单 OD2611280008 吗？取消后将退款 459 元。"
ADDRESS_PROMPT = "确认把订单 OD2611280008 的收货地址改成上海市浦东新区 100 号吗？"

DECLINED_EXCHANGE = [
    "先别换",
    "还是不要换了吧",
    "等等，我不想换了",
    "我不要换新了",
    "别换了",
    "不想换了，谢谢",
    "嗯，不用换了",
]


def _orders(tmp_path: Path) -> tuple[Agent, Runtime]:
    """The orders example on its own data, and a runtime of it on an in-memory store."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    return orders, Runtime(orders, MemoryStore(), effects=FixedEffects())


def _rows(orders: Agent, ledger: str) -> int:
    """The rows of one of the orders example's ledgers: what its write tools made."""
    with sqlite3.connect(orders.deps["db"]) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {ledger}").fetchone()[0])


@pytest.mark.parametrize("line", DECLINED_EXCHANGE)
def test_a_line_declining_the_exchange_by_its_verb_is_a_no(line: str) -> None:
    assert confirmation_answer(line, EXCHANGE_PROMPT) is False


@pytest.mark.parametrize(
    "line",
    [
        "不想换了，还是退款吧",  # another request in its place: not a plain no
        "别换了，帮我修一下吧",
        "我不想换了吗",  # a question
        "不要换地址",  # another thing
        "不换新的话怎么办",
    ],
)
def test_a_decline_that_goes_on_is_no_plain_no(line: str) -> None:
    assert confirmation_answer(line, EXCHANGE_PROMPT) is None


DECLINING = [
    f"{negation}{verb}"
    for negation in ("不要", "不想", "不用", "不需要", "别", "不", "别再")
    for verb in ("换", "换新", "换货", "退", "退款", "退货", "改", "修改", "修", "维修", "取消")
]


def test_no_declining_line_reads_as_a_yes_whatever_opens_or_ends_it() -> None:
    """A negation and a verb, after each word that may open it and with a particle or a
    thanks after it, said to each prompt: a no, or no answer (asked again), never a yes."""
    openers = ["", "好的，", "嗯，", "我", "还是", "先", "等等，", "那就", "ok, "]
    endings = ["", "了", "吧", "了吧", "，谢谢", "!", "地址", "，确认"]
    for phrase in [*DECLINING, *WITHDRAWN]:
        for opener in openers:
            for ending in endings:
                line = f"{opener}{phrase}{ending}"
                for prompt in (None, EXCHANGE_PROMPT, REFUND_PROMPT, CANCEL_PROMPT):
                    assert confirmation_answer(line, prompt) is not True, (line, prompt)


@pytest.mark.parametrize(
    ("line", "prompt"),
    [
        ("不要退款", EXCHANGE_PROMPT),  # another action: "not that one, this one"
        ("不用修", EXCHANGE_PROMPT),
        ("不想退了", EXCHANGE_PROMPT),
        ("不用换", REFUND_PROMPT),
        ("不要换新", REFUND_PROMPT),
        ("别取消", REFUND_PROMPT),  # "don't call it off" may say go on
        ("不要取消", EXCHANGE_PROMPT),
        ("好的，不用改了", ADDRESS_PROMPT),  # "nothing to change" may be a go-ahead
        ("不想换了呢", EXCHANGE_PROMPT),  # may ask
        ("不用换了嘛", EXCHANGE_PROMPT),
    ],
)
def test_a_decline_of_what_the_prompt_does_not_ask_is_no_answer(line: str, prompt: str) -> None:
    """A review: each cancelled the write that waited, which the line did not decline."""
    assert confirmation_answer(line, prompt) is None


def test_a_decline_by_verb_needs_the_prompt_to_read_it() -> None:
    """Without the prompt, "不想换了" may decline another thing than what waits."""
    assert confirmation_answer("我不想换了") is None
    assert confirmation_answer("我不想换了", EXCHANGE_PROMPT) is False


@pytest.mark.parametrize("line", ["我不想退了", "别退款了", "还是不用退了吧", "不要退了"])
async def test_declining_a_refund_by_its_verb_cancels_it(line: str, tmp_path: Path) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    store = MemoryStore()
    runtime = Runtime(orders, store, effects=FixedEffects())
    paused = await runtime.start("OD2611200002 退款", session_id="refund")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    back = await runtime.start(line, session_id="refund")
    assert back.run_id == paused.run_id and back.outcome == "cancelled", back
    tools_called = [e.data.get("tool") for e in store.load_events(paused.run_id)]
    assert "request_refund" not in tools_called
    assert _rows(orders, "refunds") == 0


def test_over_http_a_decline_by_its_verb_cancels_the_waiting_exchange(tmp_path: Path) -> None:
    agent = load(ROOT / "examples" / "aftersales", tmp_path / "home")
    with serving(agent, home=tmp_path / "home") as url, client(url) as http:
        post = "/agents/aftersales/runs"
        paused = http.post(post, json={"session_id": "web", "message": EXCHANGE}).json()
        assert paused["status"] == "awaiting_confirm"
        back = http.post(post, json={"session_id": "web", "message": "等等，我不想换了"}).json()
        assert back["run_id"] == paused["run_id"]
        assert back["status"] == "finished" and back["outcome"] == "cancelled", back
    assert exchange_count(agent) == 0


def test_in_the_cli_chat_a_decline_by_its_verb_cancels_the_exchange(tmp_path: Path) -> None:
    home = tmp_path / "home"
    said = f"{EXCHANGE}\n我不想换了\n/quit\n"
    aftersales = str(ROOT / "examples" / "aftersales")
    done = corral_cli(home, "chat", aftersales, "--session", "c1", stdin=said)
    out = done.stdout
    assert "state: awaiting_confirm" in out and "state: finished" in out, out
    assert "没有做任何改动" in out and "已经建好" not in out
    assert "请回答" not in out  # not asked again


@pytest.mark.parametrize(
    "line",
    [
        "还是留着吧",
        "no, keep it",
        "actually keep it",
        "I changed my mind",
        "wait, I changed my mind",
        "我改主意了",
    ],
)
async def test_keeping_it_or_a_changed_mind_calls_the_cancellation_off(
    line: str, tmp_path: Path
) -> None:
    """A walkthrough: each was "I did not understand", and the order's cancellation still
    waited for a yes."""
    orders, runtime = _orders(tmp_path)
    paused = await runtime.start("取消 OD2611280008", session_id="keep")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    back = await runtime.start(line, session_id="keep")
    assert back.run_id == paused.run_id and back.outcome == "cancelled", back
    assert _rows(orders, "cancellations") == 0


@pytest.mark.parametrize("line", ["keep it?", "我还要", "wait, go ahead", "我改主意了，还是取消吧"])
def test_a_keep_that_asks_or_goes_on_is_no_answer(line: str) -> None:
    assert confirmation_answer(line, CANCEL_PROMPT) is not False


ADDRESS_ASKED = [
    "我不想改地址了",
    "还是用原来的地址吧",
    "I don't want to change the address",
    "please keep the old address",
    "取消OD2611280008的改地址申请",  # the run's own order
    # a walkthrough: each was taken as the new address
    "用原来的地址就行",
    "不，用原来的地址",
    "地址不变",
    "还是用原来的地址啦",
    # a review of ef719b6: each was proposed as the address
    "不不，用原来的地址",
    "地址不变就行",
    "地址不变，谢谢你",
    # a re-read of e8593f9: a stutter's second 不 was taken for one turning the no around
    "不不想改地址了",
    # found on main: "要不…吧", "就…" and "just" left a word beside the no; each was
    # proposed as the new address
    "要不用原来的地址吧",
    "就用原来的地址",
    "那就用原来的地址吧",
    "just use the old address",
]


@pytest.mark.parametrize("line", ADDRESS_ASKED)
async def test_asked_for_the_new_address_a_line_taking_the_change_back_cancels_it(
    line: str, tmp_path: Path
) -> None:
    """A walkthrough: each was taken as the new address, and "确认把收货地址改成「我不想
    改地址了」吗？" waited for a yes that would have written it."""
    orders, runtime = _orders(tmp_path)
    asked = await runtime.start("OD2611280008 改地址", session_id="addr")
    assert asked.status is RunStatus.AWAITING_USER
    back = await runtime.start(line, session_id="addr")
    assert back.run_id == asked.run_id and back.outcome == "cancelled", back
    assert _rows(orders, "address_changes") == 0


@pytest.mark.parametrize(
    "line",
    # "要不…吧" ("how about…"): a review of 434088b read its 不 as refusing the old address
    [
        "还是用原来的地址吧",
        "keep the old address",
        "原地址就行",
        "要不用原来的地址吧",
        "要不发原地址吧",
    ],
)
async def test_at_the_change_s_confirmation_keeping_the_old_address_declines_it(
    line: str, tmp_path: Path
) -> None:
    orders, runtime = _orders(tmp_path)
    await runtime.start("OD2611280008 改地址", session_id="addr")
    paused = await runtime.start("上海市浦东新区世纪大道100号", session_id="addr")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    back = await runtime.start(line, session_id="addr")
    assert back.run_id == paused.run_id and back.outcome == "cancelled", back
    assert _rows(orders, "address_changes") == 0


async def test_asked_for_the_address_a_negation_with_another_request_keeps_that_request(
    tmp_path: Path,
) -> None:
    """ "不想改地址了，OD2611250001 到哪了": the tracking is answered, not lost."""
    _, runtime = _orders(tmp_path)
    await runtime.start("OD2611280008 改地址", session_id="addr")
    back = await runtime.start("不想改地址了，OD2611250001 到哪了", session_id="addr")
    assert "AirSound" in (back.reply or ""), back


SENT_TO = {
    "别送到原来的地址，送到上海市徐汇区漕溪北路100号": "上海市徐汇区漕溪北路100号",
    "地址不用改成公司的，寄到家里：北京市朝阳区建国路1号": "家里：北京市朝阳区建国路1号",
}
"""The lines whose "送到…" / "寄到…" opening a clause names the address proposed."""


@pytest.mark.parametrize(
    "line",
    [
        # a review: each gives or asks for a new address beside its no, and was cancelled
        "别送到原来的地址，送到上海市徐汇区漕溪北路100号",
        "不用原来的地址了，上海市徐汇区漕溪北路100号",
        "北京市朝阳区建国路1号，别用原地址",
        "送到之前的地址：上海市徐汇区漕溪北路100号",
        "地址不用改成公司的，寄到家里：北京市朝阳区建国路1号",
        "keep the old address, no wait, 12 Main St",
        "use the same address as my other order: 12 Main St",
        "用原来的地址不好吧",  # a review of f5da641: it refuses the old address
    ],
)
async def test_asked_for_the_new_address_a_no_beside_an_address_is_still_the_answer(
    line: str, tmp_path: Path
) -> None:
    """Proposed as the address, as before: the confirmation shows the line for a yes (or
    the place its "送到…" / "寄到…" names)."""
    orders, runtime = _orders(tmp_path)
    await runtime.start("OD2611280008 改地址", session_id="addr")
    back = await runtime.start(line, session_id="addr")
    proposed, reply = SENT_TO.get(line, line), back.reply or ""
    assert back.status is RunStatus.AWAITING_CONFIRM, back
    assert f"「{proposed}」" in reply or f'"{proposed}"' in reply, reply
    assert _rows(orders, "address_changes") == 0


@pytest.mark.parametrize(
    "line",
    [
        "别用之前的地址",
        "发到之前的地址",  # someone who moved may mean the new one (a review)
        "use my current address",
        # a review of f5da641: each refuses the old address, and was cancelled
        "不用原来的地址",
        "不送到原来的地址",
        # a review of 079f67b: read as keeping the old address, and cancelled
        "不要用原来的地址",
        "不想用原来的地址",
    ],
)
async def test_asked_for_the_new_address_a_no_that_names_no_address_asks_again(
    line: str, tmp_path: Path
) -> None:
    """Each refuses the old address, or names an address without giving it: the line was
    proposed whole as the new address, and a yes wrote 「不用原来的地址」 into the order.
    It is asked for again (``not_an_answer``), and the address sent next is proposed."""
    orders, runtime = _orders(tmp_path)
    asked = await runtime.start("OD2611280008 改地址", session_id="addr")
    back = await runtime.start(line, session_id="addr")
    assert back.run_id == asked.run_id and back.status is RunStatus.AWAITING_USER, back
    assert back.pending is not None and back.pending.slot == "new_address"
    given = await runtime.start("上海市徐汇区漕溪北路100号", session_id="addr")
    assert given.status is RunStatus.AWAITING_CONFIRM, given
    assert "上海市徐汇区漕溪北路100号" in (given.reply or ""), given.reply
    assert _rows(orders, "address_changes") == 0


@pytest.mark.parametrize(
    "line", ["取消OD2611250001的改地址申请", "cancel the address change for OD2611250001"]
)
async def test_asked_for_the_new_address_calling_off_another_order_s_change_keeps_this_one(
    line: str, tmp_path: Path
) -> None:
    """A review: said of OD2611250001 while OD2611280008's change asked for its address,
    each cancelled OD2611280008's change. The question is asked again, as before."""
    _, runtime = _orders(tmp_path)
    asked = await runtime.start("OD2611280008 改地址", session_id="addr")
    back = await runtime.start(line, session_id="addr")
    assert back.run_id == asked.run_id and back.status is RunStatus.AWAITING_USER, back
    assert back.outcome != "cancelled"


async def test_asked_for_the_order_a_restated_request_is_not_taken_back(tmp_path: Path) -> None:
    """A review: "不是要退款，是要退货" to "which order?" cancelled the refund and return."""
    _, runtime = _orders(tmp_path)
    asked = await runtime.start("我要退款", session_id="which")
    assert asked.status is RunStatus.AWAITING_USER
    back = await runtime.start("不是要退款，是要退货", session_id="which")
    assert back.outcome != "cancelled", back


@pytest.mark.parametrize(
    "line",
    [
        # a review of f5da641: "地址不变" read at the start of a longer line took these out
        "OD2611280008 地址不变，只把门牌号改成502室",
        "OD2611280008 收货地址不变更的话能改电话吗",
    ],
)
def test_the_address_kept_only_as_the_whole_line_negates_the_change(
    line: str, tmp_path: Path
) -> None:
    orders, _ = _orders(tmp_path)
    assert not orders.intent.only_negates("change_address", line)
    assert orders.intent.understand(line, datetime.now(UTC)).label == "change_address"


def test_the_address_kept_as_the_whole_line_with_thanks_negates_the_change(
    tmp_path: Path,
) -> None:
    orders, _ = _orders(tmp_path)
    assert orders.intent.only_negates("change_address", "地址不变啦，谢谢")


@pytest.mark.parametrize(
    "line",
    [
        # a re-read of e8593f9: the old address refused was read as kept, and vetoed the
        # change; the request went unanswered (no intent)
        "OD2611280008 不用原来的地址了，改到上海市浦东新区世纪大道100号",
        "OD2611280008 不送原来的地址了",
        "OD2611280008 别用原来的地址",
    ],
)
def test_a_new_message_refusing_the_old_address_asks_for_the_change(
    line: str, tmp_path: Path
) -> None:
    orders, _ = _orders(tmp_path)
    assert orders.intent.understand(line, datetime.now(UTC)).label == "change_address"


async def test_refusing_the_old_address_with_a_new_one_asks_to_confirm_it(tmp_path: Path) -> None:
    orders, runtime = _orders(tmp_path)
    line = "OD2611280008 不用原来的地址了，改到上海市浦东新区世纪大道100号"
    asked = await runtime.start(line, session_id="addr")
    assert asked.status is RunStatus.AWAITING_CONFIRM, asked
    assert "「上海市浦东新区世纪大道100号」" in (asked.reply or "")
    assert _rows(orders, "address_changes") == 0


@pytest.mark.parametrize(
    ("line", "address"),
    [
        # a re-read of e8593f9: each was proposed whole, "不，送到" and all, and a yes
        # wrote it as the delivery address
        ("不，送到上海市浦东新区世纪大道100号", "上海市浦东新区世纪大道100号"),
        ("请寄到北京市朝阳区建国路1号", "北京市朝阳区建国路1号"),
        ("发到上海市徐汇区漕溪北路100号吧", "上海市徐汇区漕溪北路100号"),
        ("送到上海市浦东新区世纪大道100号哈哈", "上海市浦东新区世纪大道100号"),
        ("寄到北京市朝阳区建国路1号呗", "北京市朝阳区建国路1号"),
        # a review of 079f67b: a pointer before it, or a question word in a place's name,
        # proposed the whole line
        ("送到这个地址，上海市浦东新区世纪大道100号", "上海市浦东新区世纪大道100号"),
        ("送到上海市哪吒路10号", "上海市哪吒路10号"),
        ("送到北京市朝阳区多少号大院3号楼", "北京市朝阳区多少号大院3号楼"),
        ("送到上海市长宁区多长路1号", "上海市长宁区多长路1号"),
    ],
)
async def test_asked_for_the_new_address_the_place_it_is_sent_to_is_written(
    line: str, address: str, tmp_path: Path
) -> None:
    orders, runtime = _orders(tmp_path)
    await runtime.start("OD2611280008 改地址", session_id="addr")
    proposed = await runtime.start(line, session_id="addr")
    assert f"「{address}」" in (proposed.reply or ""), proposed
    await runtime.start("确认", session_id="addr")
    with sqlite3.connect(orders.deps["db"]) as conn:
        written = conn.execute("SELECT order_id, new_address FROM address_changes").fetchall()
    assert written == [("OD2611280008", address)]


@pytest.mark.parametrize(
    "line",
    [
        "OD2611250001 送到公司前台了吗",  # a question: nothing is sent there
        "OD2611250001 什么时候送到上海市浦东新区",
        "东西没寄到北京市朝阳区建国路1号",
        # a review of 87abd24: each was taken as a new address (and carried into a
        # change of address asked for next)
        "OD2611280008 送到家里需要多久",
        "OD2611280008 寄到北京要几天",
        "OD2611280008 寄到哪个地址了",
        "寄到公司前台可以不",
        "发到付款时填的地址",  # an address it names, not gives
    ],
)
def test_a_question_about_where_it_goes_names_no_new_address(line: str, tmp_path: Path) -> None:
    orders, _ = _orders(tmp_path)
    assert "new_address" not in orders.intent.entities.extract(line, datetime.now(UTC))


async def test_a_question_about_delivery_gives_no_address_to_the_change_asked_next(
    tmp_path: Path,
) -> None:
    """A review of 87abd24: "家里需要多久" was carried into the change and a yes wrote it."""
    orders, runtime = _orders(tmp_path)
    await runtime.start("OD2611280008 送到家里需要多久", session_id="carry")
    asked = await runtime.start("那帮我改地址", session_id="carry")
    assert asked.status is RunStatus.AWAITING_USER, asked
    assert _rows(orders, "address_changes") == 0
