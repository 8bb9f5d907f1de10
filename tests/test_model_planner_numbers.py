"""Numbers, dates and booleans in model plans and extraction are grounded, through real runs.

Issue 9: an invented ``amount_cny: 9999`` (an int the user never said) reached the tool,
while the string ``"9999"`` was rejected. Now every literal type is checked after
normalisation: ``300`` is grounded by the user's 三百, a date by their 明天 (at the run's
recorded clock, not the wall clock), a number by a finished step's result.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.errors import ToolFailedError
from corral.models import ModelRequest, ScriptedModel
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[dict[str, Any]] = []
CLOCK = datetime(2025, 3, 10, 9, 0, tzinfo=UTC)  # far from the wall clock: 明天 is 2025-03-11


class Refunded(BaseModel):
    ok: bool


class Quote(BaseModel):
    amount_cny: int


@tool
def refund(order_id: str, amount_cny: int, notify: bool = True) -> Refunded:
    """Refund part of an order."""
    CALLS.append({"refund": order_id, "amount_cny": amount_cny, "notify": notify})
    return Refunded(ok=True)


@tool
def quote(order_id: str) -> Quote:
    """What an order may be refunded."""
    return Quote(amount_cny=128)


@tool
def slow_refund(order_id: str, amount_cny: int) -> Refunded:
    """A refund provider that is down."""
    raise ToolFailedError("provider is down")


@tool
def deliver(order_id: str, day: date) -> Refunded:
    """Deliver an order on a day."""
    CALLS.append({"deliver": order_id, "day": day})
    return Refunded(ok=True)


@tool
def split_refund(order_id: str, amounts_cny: list[int]) -> Refunded:
    """Refund an order in several parts."""
    CALLS.append({"split": order_id, "amounts_cny": amounts_cny})
    return Refunded(ok=True)


@tool
def book(order_id: str, day: str, quantity: str) -> Refunded:
    """Book a delivery of a quantity of an order on a day (as the user's entities hold them)."""
    CALLS.append({"book": order_id, "day": day, "quantity": quantity})
    return Refunded(ok=True)


def steps(*planned: dict[str, Any]) -> str:
    return json.dumps({"steps": list(planned)})


def step(tool_name: str, id_: str = "s1", **args: Any) -> dict[str, Any]:
    return {"id": id_, "tool": tool_name, "args": {"order_id": "$entities.order_id", **args}}


async def run(tools: list[Any], script: list[Any], message: str, **config: Any) -> Any:
    names = [t.name for t in tools]
    model = ScriptedModel(script)
    config_ = parse_config(one_intent("refund", tools=names, **config))
    agent = Agent.build(config_, tools, model=model)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects(start=CLOCK))
    summary = await runtime.start(message)
    events = await runtime.events(summary.run_id)
    model.assert_complete()
    return summary, [e.data for e in events if e.type is EventType.MODEL_CALL]


async def test_an_invented_int_amount_is_re_asked_then_handed_off() -> None:
    CALLS.clear()
    invented = steps(step("refund", amount_cny=9999))
    summary, calls = await run([refund], [invented] * 3, "refund A1 please")
    assert CALLS == []  # never reached the tool
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "PLAN_INVALID"
    assert [c["accepted"] for c in calls] == [False, False, False]
    assert calls[0]["reason"] == (
        "s1.amount_cny: 9999 was not given by the user; use a $entities or $sN.result "
        "reference instead of inventing it"
    )


async def test_an_amount_said_in_chinese_numerals_runs() -> None:
    CALLS.clear()
    summary, calls = await run(
        [refund],
        [steps(step("refund", amount_cny=9999)), steps(step("refund", amount_cny=300))],
        "refund A1, 三百块",
    )
    assert summary.status is RunStatus.FINISHED
    assert CALLS == [{"refund": "A1", "amount_cny": 300, "notify": True}]
    assert [c["accepted"] for c in calls] == [False, True]


async def test_a_boolean_needs_the_default_or_a_stated_no() -> None:
    CALLS.clear()
    quiet = steps(step("refund", amount_cny=300, notify=False))
    loud = steps(step("refund", amount_cny=300, notify=True))  # the default
    summary, calls = await run([refund], [quiet, loud], "refund A1, 300 yuan")
    assert summary.status is RunStatus.FINISHED and CALLS[-1]["notify"] is True
    assert calls[0]["reason"].startswith("s1.notify: False was not given")
    CALLS.clear()
    summary, _ = await run([refund], [quiet], "refund A1, 300 yuan, don't notify me")
    assert summary.status is RunStatus.FINISHED and CALLS[-1]["notify"] is False


async def test_a_date_said_relatively_resolves_at_the_runs_clock() -> None:
    CALLS.clear()
    wall_clock_tomorrow = steps(step("deliver", day="2099-01-01"))
    runs_tomorrow = steps(step("deliver", day="2025-03-11"))
    summary, calls = await run(
        [deliver], [wall_clock_tomorrow, runs_tomorrow], "refund: deliver A1 明天"
    )
    assert summary.status is RunStatus.FINISHED
    assert [c["day"] for c in CALLS] == [date(2025, 3, 11)]
    assert calls[0]["reason"].startswith("s1.day: '2099-01-01' was not given")


async def test_a_replan_may_use_a_number_a_finished_step_returned() -> None:
    CALLS.clear()
    first = steps(
        step("quote"),
        {**step("slow_refund", "s2", amount_cny="$s1.result.amount_cny"), "depends_on": ["s1"]},
    )
    invented = steps({**step("refund", "r1", amount_cny=129), "depends_on": ["s1"]})
    returned = steps({**step("refund", "r1", amount_cny=128), "depends_on": ["s1"]})
    summary, calls = await run(
        [quote, slow_refund, refund], [first, invented, returned], "refund A1"
    )
    assert summary.status is RunStatus.FINISHED
    assert CALLS == [{"refund": "A1", "amount_cny": 128, "notify": True}]
    assert "r1.amount_cny: 129 was not given" in calls[1]["reason"]


async def test_every_number_inside_a_list_is_grounded() -> None:
    CALLS.clear()
    one_invented = steps(step("split_refund", amounts_cny=[100, 999]))
    both_said = steps(step("split_refund", amounts_cny=[100, 200]))
    summary, calls = await run(
        [split_refund], [one_invented, both_said], "refund A1: 100 now, 两百 later"
    )
    assert summary.status is RunStatus.FINISHED
    assert CALLS == [{"split": "A1", "amounts_cny": [100, 200]}]
    assert calls[0]["reason"].startswith("s1.amounts_cny: [100, 999] was not given")


EXTRACTING = {
    "entities": {
        "order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"]},
        "quantity": {"kind": "pattern", "patterns": [r"^\d+$"]},
        "day": {"kind": "pattern", "patterns": [r"^\d{4}-\d{2}-\d{2}$"]},
    },
    "model": {"extract_entities": True},
}


async def test_extraction_keeps_normalised_numbers_and_dates_and_drops_invented_ones() -> None:
    def answer(values: dict[str, str]) -> Any:
        def reply(request: ModelRequest) -> str:
            assert request.purpose == "extract"
            return json.dumps({"entities": values})

        return reply

    plan = steps(step("book", day="$entities.day", quantity="$entities.quantity"))
    kept_script = [answer({"quantity": "3", "day": "2025-03-11"}), plan]
    agent_tools = [book]
    CALLS.clear()
    summary, _ = await run(
        agent_tools, kept_script, "refund: deliver 三件 of A1 明天", **EXTRACTING
    )
    assert summary.status is RunStatus.FINISHED
    assert CALLS == [{"book": "A1", "day": "2025-03-11", "quantity": "3"}]

    model = ScriptedModel([answer({"quantity": "9", "day": "2025-03-12"}), steps()])
    config = parse_config(one_intent("refund", tools=["book"], **EXTRACTING))
    agent = Agent.build(config, agent_tools, model=model)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects(start=CLOCK))
    summary = await runtime.start("refund: deliver 三件 of A1 明天")
    state = await runtime.load_state(summary.run_id)
    rejected = {
        e.data["name"]: e.data["reason"]
        for e in await runtime.events(summary.run_id)
        if e.type is EventType.ENTITY_REJECTED
    }
    assert "quantity" not in state.entities and "day" not in state.entities
    assert rejected == {
        "quantity": "'9' does not appear in the message",
        "day": "'2025-03-12' does not appear in the message",
    }
