"""A write declined by its own verb at its confirmation: "我不想换了", "先别换", "别退了".

Before, only a few such phrases were listed ("不换了", "不退了", "别改"): "还是不要换了吧"
or "等等，我不想换了" said to "shall I create the exchange?" was answered "I did not
understand", and the exchange still waited for a yes. A no writes nothing, so reading
one more line as a no is the safe side; no such line may ever read as a yes. At the
exchange's prompt, end to end: ``test_session_confirmation.py``
(``test_a_request_taken_back_at_its_confirmation_rejects_it``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import MemoryStore, RunStatus, Runtime, load_agent
from corral.intent.confirmation import WITHDRAWN, confirmation_answer, withdraws_first
from corral.testing import FixedEffects
from tests.conftest import ORDERS, ROOT
from tests.helpers import corral_cli, exchange_count
from tests.serving import EXCHANGE, client, load, serving

EXCHANGE_PROMPT = "我这就为订单 HD20240501 创建换新单，可以吗？"
REFUND_PROMPT = "确认为这单退款 459 元吗？"

DECLINED_EXCHANGE = [
    "先别换",
    "还是不要换了吧",
    "等等，我不想换了",
    "我不要换新了",
    "别换了",
    "不想换了，谢谢",
    "嗯，不用换了",
]


@pytest.mark.parametrize("line", DECLINED_EXCHANGE)
def test_a_line_declining_the_exchange_by_its_verb_is_a_no(line: str) -> None:
    assert confirmation_answer(line, EXCHANGE_PROMPT) is False
    assert confirmation_answer(line) is False


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


def test_no_declining_phrase_reads_as_a_yes_whatever_opens_or_ends_it() -> None:
    """Each listed phrase, after each word that may open it and with a particle or a
    thanks after it: a no, or no answer (asked again), never a yes."""
    openers = ["", "好的，", "嗯，", "我", "还是", "先", "等等，", "那就", "ok, "]
    endings = ["", "吧", "了", "，谢谢", "!"]
    for phrase in WITHDRAWN:
        for opener in openers:
            for ending in endings:
                line = f"{opener}{phrase}{ending}"
                for prompt in (None, EXCHANGE_PROMPT, REFUND_PROMPT):
                    assert confirmation_answer(line, prompt) is not True, (line, prompt)


def test_a_verb_declines_only_a_prompt_that_asks_it_when_more_follows() -> None:
    """ "不想退了，物流呢" takes a refund back first; said to an exchange it is a question."""
    assert withdraws_first("不想退了，物流到哪了", REFUND_PROMPT)
    assert not withdraws_first("不想退了，物流到哪了", EXCHANGE_PROMPT)
    assert withdraws_first("别换了，物流到哪了", EXCHANGE_PROMPT)


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
    with sqlite3.connect(orders.deps["db"]) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (0,)


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
