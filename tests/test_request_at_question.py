"""A new request typed at a run's question is a run of its own; the question waits.

On main, a session's message always answered the question its open run asked: asked for
an order id, "我要投诉你们的客服态度太差了" was taken as the answer, the complaint was lost
and the order id was asked for again. Now code decides (``IntentLayer.another_request``):
a message that does not give the value asked for and that a rule of another intent matches
with confidence starts its own run. The session keeps the question open (under a newer
run that asks something of its own, too), and the order id sent next answers it.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from corral import MemoryStore, RunStatus, Runtime, SqlStore
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.serving import AUTH, load, serving

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
    waiting = await runtime.load_state(asked.run_id)
    assert waiting.status is RunStatus.AWAITING_USER and waiting.messages == [EXCHANGE_NO_ORDER]
    answered = await runtime.start("HD20240501", session_id="s1")
    assert answered.run_id == asked.run_id
    assert answered.status is RunStatus.AWAITING_CONFIRM


async def test_in_english_too(tmp_path: Path) -> None:
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("I want a replacement", session_id="e1")
    assert asked.status is RunStatus.AWAITING_USER
    complaint = await runtime.start("I want to make a complaint about your staff", session_id="e1")
    assert complaint.run_id != asked.run_id and complaint.status is RunStatus.HANDED_OFF
    answered = await runtime.start("HD20240501", session_id="e1")
    assert answered.run_id == asked.run_id


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
    agent = load(AFTERSALES, tmp_path)
    runtime = Runtime(agent, SqlStore.open(tmp_path / "c.db"), effects=FixedEffects())
    exchange = await runtime.start(EXCHANGE_NO_ORDER, session_id="s3")
    repair = await runtime.start("另外我的笔记本电脑也坏了，想报修", session_id="s3")
    assert repair.run_id != exchange.run_id and repair.status is RunStatus.AWAITING_USER
    assert await intent_of(runtime, repair.run_id) == "报修"
    session = runtime.store.get_session("s3", FixedEffects().now())
    assert session is not None and session.open_run_id == repair.run_id
    assert session.earlier_open_runs == [exchange.run_id]
    first = await runtime.start("HD20240501", session_id="s3")  # the repair's question's
    assert first.run_id == repair.run_id and first.status.terminal
    second = await runtime.start("HD20240501", session_id="s3")  # the exchange's, again open
    assert second.run_id == exchange.run_id
    assert second.status is RunStatus.AWAITING_CONFIRM
    session = runtime.store.get_session("s3", FixedEffects().now())
    assert session is not None and session.earlier_open_runs == []


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
