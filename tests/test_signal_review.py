"""Review of signals, the long-plan confirmation and priorities: the cases users hit.

Each test here failed before its fix: a negation softened by a degree word read as
urgent, a guessed value after an unhelpful answer to "which one?", a replan repeating a
finished write, ``budget_low`` skipping a step a required step needs, and a replan
growing past the confirmation limit without a person seeing it.
"""

from __future__ import annotations

import pytest

from corral import Agent, RunStatus, parse_config
from corral.config import PriorityWords
from corral.decision.priority import detect_priority
from tests.test_signals import CITY_AGENT, city_agent, forecast_tool, runtime_for

WORDS = PriorityWords()


@pytest.mark.parametrize(
    ("message", "priority"),
    [
        ("不是很急但要便宜", "budget"),
        ("不是很着急", "normal"),
        ("没有那么急", "normal"),
        ("不是太急，便宜点", "budget"),
        ("也不算急", "normal"),
        ("不怎么急", "normal"),
        ("not very urgent, the cheapest please", "budget"),
        ("not that urgent", "normal"),
        ("not so urgent", "normal"),
        # full-width letters from a Chinese input method
        ("ＡＳＡＰ！", "urgent"),
        ("Ｃｈｅａｐｅｓｔ please", "budget"),
        # a degree word alone is no negation
        ("这是急事", "urgent"),
        ("very urgent", "urgent"),
        ("really cheap", "budget"),
        ("it's also urgent", "urgent"),
    ],
)
def test_a_softened_negation_is_still_a_negation(message: str, priority: str) -> None:
    assert detect_priority(message, WORDS).priority == priority


# --------------------------------------------------------------------------- need_clarification


async def test_an_answer_naming_no_value_leaves_the_ambiguity_open_never_a_guess() -> None:
    """ "Which city: Shanghai, Beijing?" answered "the second one" is asked again, then a
    person takes over; the forecast is never run for the first city found."""
    calls: list[str] = []
    runtime = runtime_for(city_agent(calls))
    summary = await runtime.start("weather in shanghai or beijing tomorrow?")
    assert summary.status is RunStatus.AWAITING_USER
    again = await runtime.resume(summary.run_id, answer="the second one")
    assert again.status is RunStatus.AWAITING_USER and calls == []
    assert again.reply == "Which city do you mean: Shanghai, Beijing?"
    last = await runtime.resume(summary.run_id, answer="whichever")
    assert last.status is RunStatus.HANDED_OFF and last.error_code == "MISSING_ARGUMENT"
    assert calls == []
    assert [(s.kind, s.outcome) for s in last.signals] == [("need_clarification", "ask")] * 2 + [
        ("need_clarification", "handoff")
    ]


async def test_an_answer_naming_one_value_settles_it_and_one_city_in_two_scripts_is_one() -> None:
    calls: list[str] = []
    runtime = runtime_for(city_agent(calls))
    summary = await runtime.start("weather in shanghai or beijing tomorrow?")
    done = await runtime.resume(summary.run_id, answer="the second: Beijing")
    assert done.status is RunStatus.FINISHED and calls == ["Beijing"]
    city = {"kind": "vocabulary", "vocabulary": {"上海": "Shanghai", "shanghai": "Shanghai"}}
    config = parse_config({**CITY_AGENT, "entities": {"city": city}})
    agent = Agent.build(config, [forecast_tool(calls)])
    both = await runtime_for(agent).start("weather in 上海 (Shanghai) tomorrow?")
    assert both.status is RunStatus.FINISHED and both.signals == []
    assert calls == ["Beijing", "Shanghai"]
