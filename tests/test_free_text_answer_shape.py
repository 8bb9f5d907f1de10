"""A request typed at a free-text question is neither its answer nor lost.

Found by a walkthrough (reproduced on main through the API): "OD2611250001 改一下收货地址"
asked for the new address; "我要退款" or "取消订单" typed there became the address
("确认把订单 OD2611250001 的收货地址改成「取消订单」吗？"), and "取消订单 OD2611280008"
was answered with the address question again: the cancellation was lost, silently.

Now a free-text entity declares what every value of it holds (``whole_answer_shape``: an
address names a road, a district or a number), and a line without it is no answer; the
orders demo's refund and cancellation ``interrupt`` a question (a request of their own,
the question waiting for its answer, reminded under their reply).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent, parse_config
from corral.errors import ConfigInvalidError
from corral.testing import FixedEffects
from tests.conftest import ROOT
from tests.helpers import run_cli_json

ORDERS = ROOT / "examples" / "orders"
ASKED = "OD2611250001 改一下收货地址"


def rows(agent: Agent, table: str) -> list[tuple[object, ...]]:
    """What the demo's tools wrote to ``table``."""
    with sqlite3.connect(agent.deps["db"]) as conn:
        return list(conn.execute(f"SELECT * FROM {table}"))


async def asked_for_the_address(tmp_path: Path, session: str) -> tuple[Agent, Runtime, str]:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start(ASKED, session_id=session)
    assert asked.status is RunStatus.AWAITING_USER and asked.pending is not None
    assert asked.pending.slot == "new_address"
    return orders, runtime, asked.run_id


@pytest.mark.parametrize("line", ["取消订单", "我要退款", "I want a refund"])
async def test_a_request_is_never_the_address_to_confirm(tmp_path: Path, line: str) -> None:
    orders, runtime, asked = await asked_for_the_address(tmp_path, "not-an-address")
    said = await runtime.start(line, session_id="not-an-address")
    waiting = await runtime.summary(asked)
    prompt = waiting.pending.prompt if waiting.pending is not None else ""
    assert line not in prompt, prompt  # never "改成「取消订单」吗？"
    assert said.run_id != asked, said  # a request of its own; the question still waits
    assert waiting.status is RunStatus.AWAITING_USER
    await runtime.start("确认", session_id="not-an-address")
    assert rows(orders, "address_changes") == []


async def test_a_cancellation_typed_at_the_question_runs_and_the_question_waits(
    tmp_path: Path,
) -> None:
    orders, runtime, asked = await asked_for_the_address(tmp_path, "cancel-other")
    cancel = await runtime.start("取消订单 OD2611280008", session_id="cancel-other")
    assert cancel.run_id != asked and cancel.status is RunStatus.AWAITING_CONFIRM, cancel
    done = await runtime.start("确认", session_id="cancel-other")
    assert done.run_id == cancel.run_id and done.status is RunStatus.FINISHED
    assert [row[0] for row in rows(orders, "cancellations")] == ["OD2611280008"]
    assert "还在等您回复" in (done.reply or "")  # the address question is reminded
    address = await runtime.start("上海市徐汇区漕溪北路100号", session_id="cancel-other")
    assert address.run_id == asked and address.status is RunStatus.AWAITING_CONFIRM, address


@pytest.mark.parametrize("address", ["物流园路8号", "12 Baker Street, London"])
async def test_an_address_alone_is_still_the_answer(tmp_path: Path, address: str) -> None:
    """What the change must not take ("物流园路8号" reads as the logistics intent)."""
    _, runtime, asked = await asked_for_the_address(tmp_path, "address")
    answered = await runtime.start(address, session_id="address")
    assert answered.run_id == asked and answered.status is RunStatus.AWAITING_CONFIRM
    assert answered.pending is not None and address in answered.pending.prompt


def test_a_bad_shape_is_a_config_error_naming_the_entity() -> None:
    with pytest.raises(ConfigInvalidError, match=r"new_address.*whole_answer_shape"):
        Agent.build(
            parse_config(
                {
                    "name": "shape",
                    "entities": {
                        "new_address": {
                            "kind": "pattern",
                            "whole_answer": True,
                            "whole_answer_shape": "([unclosed",
                        }
                    },
                    "intents": [{"name": "hi", "route": "reply", "reply": "done"}],
                    "templates": {"done": {"zh": "好", "en": "ok"}},
                }
            ),
            [],
        )


def test_corral_run_keeps_the_cancellation_typed_at_the_address_question(tmp_path: Path) -> None:
    """End to end: ``corral run --session`` three times, as the walkthrough did."""
    home, session = tmp_path / "home", ("--session", "s1")
    asked = run_cli_json(home, ORDERS, ASKED, *session)
    assert asked["status"] == "awaiting_user"
    cancel = run_cli_json(home, ORDERS, "取消订单 OD2611280008", *session)
    assert cancel["run_id"] != asked["run_id"] and cancel["status"] == "awaiting_confirm"
    assert "OD2611280008" in cancel["pending"]["prompt"]
