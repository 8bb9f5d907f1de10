"""Two values of an entity the plan needs are asked about, whether ``requires`` names it or not.

Found on main: "查一下OD2611250001和OD2611200002" answered OD2611250001 only, and said
nothing of the other. ``query_order`` requires no order id (it also lists orders by
time), so only ``requires`` was checked for two values; its ``order_detail`` plan reads
``$entities.order_id`` and took the first. A line naming two orders to ``logistics``,
which requires one, was asked "which one?" all along.
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
    # ``$entities.order_date?``: read when given, never asked about
    assert agent.template_entities["order_search"] == ()


@pytest.mark.parametrize(
    "line", ["查一下OD2611250001和OD2611200002", "look up OD2611250001 and OD2611200002"]
)
def test_two_orders_asked_about_are_asked_which(tmp_path: Path, line: str) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        asked = await runtime.start(line, session_id="s")
        assert asked.status is RunStatus.AWAITING_USER, asked
        assert asked.intent is not None and asked.intent.label == "query_order"
        assert "OD2611250001" in (asked.reply or "") and "OD2611200002" in (asked.reply or "")
        answered = await runtime.start("OD2611200002", session_id="s")
        assert answered.status is RunStatus.FINISHED, answered
        assert "OD2611200002" in (answered.reply or "")
        assert "OD2611250001" not in (answered.reply or "")

    asyncio.run(talk())


def test_signal_words_a_plan_reads_optionally_may_be_several(tmp_path: Path) -> None:
    # triage's fault plan reads ``$entities.degraded_words?``: "slow" and "some users"
    # both say it is degraded, and asking which would be absurd
    agent = load_agent(ROOT / "examples" / "triage", data_dir=tmp_path)

    async def talk() -> None:
        runtime = Runtime(agent, MemoryStore())
        done = await runtime.start("C10003 SMS delivery is slow for some users")
        assert done.status is RunStatus.FINISHED, done

    asyncio.run(talk())
