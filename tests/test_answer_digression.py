"""A session's message that is a request of another task is that task, not the answer.

On main, "我的退款到账了吗 OD2610280005" answering a cancel's "which order?" went on with
the cancel, and "查一下订单 OD2610280005 的物流" answering a change of address's "which
order?" went on to ask for the new address: the session's open question took any message
as its answer. Now another planned intent's rules decide such a message: it starts a run
of its own, and the open run keeps waiting (the session's next message answers it). An
answer that only names the value (or says thanks) goes on with the task, and so does a
free-text value that merely contains another intent's words ("物流园路8号").
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent, parse_config, tool
from corral.contracts import RunSummary
from tests.conftest import ORDERS


def converse(agent: Agent, *messages: str) -> list[RunSummary]:
    """Each message in turn, in one session, as the HTTP API and `corral chat` send them."""
    runtime = Runtime(agent, MemoryStore())

    async def talk() -> list[RunSummary]:
        return [await runtime.start(text, session_id="s1") for text in messages]

    return asyncio.run(talk())


def label(summary: RunSummary) -> str | None:
    return summary.intent.label if summary.intent else None


@pytest.mark.parametrize(
    ("first", "answer", "intent", "shown"),
    [
        ("我要取消订单", "我的退款到账了吗 OD2610280005", "refund_status", "还没有退款记录"),
        ("cancel my order", "where is my refund for OD2610280005?", "refund_status", "no refund"),
        ("我要改地址", "查一下订单 OD2610280005 的物流", "logistics", "签收"),
        ("我要退款", "OD2610280005 物流到哪了", "logistics", "签收"),
        ("change the address of OD2611250001", "has it shipped?", "logistics", "waiting"),
    ],
)
def test_an_answer_that_asks_for_another_task_is_that_task(
    tmp_path: Path, first: str, answer: str, intent: str, shown: str
) -> None:
    agent = load_agent(ORDERS, data_dir=tmp_path / "shop")
    asked, answered = converse(agent, first, answer)
    assert asked.status is RunStatus.AWAITING_USER
    assert answered.run_id != asked.run_id  # a run of its own
    assert label(answered) == intent
    assert answered.status is RunStatus.FINISHED
    assert shown in (answered.reply or "")


def test_the_open_question_still_takes_the_next_message(tmp_path: Path) -> None:
    agent = load_agent(ORDERS, data_dir=tmp_path / "shop")
    asked, refund, answered = converse(
        agent, "我要取消订单", "我的退款到账了吗 OD2610280005", "OD2611250001"
    )
    assert label(refund) == "refund_status"
    assert answered.run_id == asked.run_id and label(answered) == "cancel"
    assert answered.status is RunStatus.AWAITING_CONFIRM
    assert "OD2611250001" in (answered.reply or "")


@pytest.mark.parametrize(
    ("first", "answer", "intent"),
    [
        ("我要取消订单", "OD2611250001", "cancel"),
        ("我要取消订单", "OD2611250001 谢谢", "cancel"),
        ("我要取消订单", "OD2611250001，帮我取消", "cancel"),
        ("cancel my order", "it's OD2611250001", "cancel"),
        ("我要改地址 OD2611250001", "物流园路8号", "change_address"),
        ("我要改地址 OD2611250001", "退款路3号", "change_address"),
        ("change the address of OD2611250001", "12 Refund Street, Springfield", "change_address"),
    ],
)
def test_an_answer_that_gives_the_value_goes_on_with_the_task(
    tmp_path: Path, first: str, answer: str, intent: str
) -> None:
    agent = load_agent(ORDERS, data_dir=tmp_path / "shop")
    asked, answered = converse(agent, first, answer)
    assert asked.status is RunStatus.AWAITING_USER
    assert label(answered) == intent
    assert answered.status is RunStatus.AWAITING_CONFIRM  # the cancel or the new address


class Ok(BaseModel):
    ok: bool


def desk() -> Agent:
    """A cancel that asks for the order; a status check; thanks that only reply."""

    @tool
    def cancel(order_id: str) -> Ok:
        """Cancels the order."""
        return Ok(ok=True)

    @tool
    def status(order_id: str) -> Ok:
        """Looks the order up."""
        return Ok(ok=True)

    def intent(name: str, words: list[str], **more: Any) -> dict[str, Any]:
        return {"name": name, "rules": [{"keywords": words, "confidence": 0.95}], **more}

    config = parse_config(
        {
            "name": "desk",
            "entities": {"order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]}},
            "intents": [
                intent("cancel", ["cancel"], plan="cancel", requires=["order_id"], reply="done"),
                intent("status", ["status"], plan="status", requires=["order_id"], reply="done"),
                intent("thanks", ["thanks"], route="reply", reply="welcome"),
            ],
            "plans": {
                "cancel": {
                    "steps": [
                        {"id": "c", "tool": "cancel", "args": {"order_id": "$entities.order_id"}}
                    ]
                },
                "status": {
                    "steps": [
                        {"id": "s", "tool": "status", "args": {"order_id": "$entities.order_id"}}
                    ]
                },
            },
            "templates": {
                "done": {"zh": "好了", "en": "done"},
                "welcome": {"zh": "不客气", "en": "you're welcome"},
            },
        }
    )
    return Agent.build(config, [cancel, status])


def test_a_reply_only_intent_never_takes_a_tasks_answer_away() -> None:
    asked, answered = converse(desk(), "cancel my order", "A12, thanks")
    assert asked.status is RunStatus.AWAITING_USER
    assert label(answered) == "cancel"
    assert [s.tool for s in answered.steps] == ["cancel"]


def test_another_planned_intents_request_is_that_intent_and_nothing_of_the_first_runs() -> None:
    runtime = Runtime(desk(), MemoryStore())

    async def talk() -> None:
        asked = await runtime.start("cancel my order", session_id="s1")
        answered = await runtime.start("what is the status of A12", session_id="s1")
        assert asked.status is RunStatus.AWAITING_USER
        assert label(answered) == "status"
        assert [s.tool for s in answered.steps] == ["status"]
        still = await runtime.load_state(asked.run_id)  # no cancel was entered
        assert still.status is RunStatus.AWAITING_USER and not still.steps

    asyncio.run(talk())
