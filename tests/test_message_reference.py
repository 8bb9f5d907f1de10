"""``$message``: a step's argument bound to the text of the message that started the run.

A desk that files a ticket keeps the customer's own words with it; before, no tool could
see the message (only the entities code pulled out of it), so a ticket had no text.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, MemoryStore, Runtime, parse_config, tool
from corral.contracts import Plan, RunStatus
from corral.errors import ConfigInvalidError, PlanInvalidError
from corral.planning.references import parse_reference
from corral.testing import FixedEffects
from tests.helpers import build_agent


class Filed(BaseModel):
    ticket: str


def _filing(received: list[Any]) -> Any:
    @tool
    def file_ticket(order_id: str, body: str, note: str | None = None) -> Filed:
        received.append((order_id, body, note))
        return Filed(ticket="T1")

    return file_ticket


STEP = {
    "id": "s1",
    "tool": "file_ticket",
    "args": {"order_id": "$entities.order_id", "body": "$message"},
}


def _runtime(received: list[Any], step: dict[str, Any] = STEP, **options: Any) -> Runtime:
    agent = build_agent([_filing(received)], [step], **options)
    return Runtime(agent, MemoryStore(), effects=FixedEffects())


def test_the_tool_gets_the_message_that_started_the_run_in_chinese_and_english() -> None:
    received: list[Any] = []
    runtime = _runtime(received)
    for text in ("go 订单 A12 的打印机卡纸了，一直响", "go: order A7, the screen flickers"):
        assert asyncio.run(runtime.start(text)).status is RunStatus.FINISHED
    assert received == [
        ("A12", "go 订单 A12 的打印机卡纸了，一直响", None),
        ("A7", "go: order A7, the screen flickers", None),
    ]


@pytest.mark.parametrize(
    ("first", "answer", "requires", "bound"),
    [
        # an answer to a question for a value fills the value: the request stays the message
        ("go, the printer jams", "A3", ["order_id"], ("A3", "go, the printer jams", None)),
        # an answer to "what do you mean?" is classified again: it carries the request
        ("hi there", "go: order A7, it flickers", [], ("A7", "go: order A7, it flickers", None)),
    ],
)
def test_after_a_question_the_message_is_the_one_the_run_does(
    first: str, answer: str, requires: list[str], bound: tuple[str, str, None]
) -> None:
    received: list[Any] = []
    runtime = _runtime(received, requires=requires)
    asked = asyncio.run(runtime.start(first))
    assert asked.status is RunStatus.AWAITING_USER
    done = asyncio.run(runtime.resume(asked.run_id, answer=answer))
    assert done.status is RunStatus.FINISHED and received == [bound]


def test_a_run_from_a_plan_needing_the_message_is_refused_before_any_step() -> None:
    """Not after the steps before it acted: a run from a plan has no message."""
    received: list[Any] = []
    first = {"id": "s0", "tool": "file_ticket", "args": {"order_id": "A1", "body": "first"}}
    agent = build_agent([_filing(received)], [first, dict(STEP, depends_on=["s0"])])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    with pytest.raises(PlanInvalidError, match=r"step s1 binds \$message"):
        asyncio.run(runtime.run_plan("p", entities={"order_id": "A1"}))
    assert received == [] and runtime.store.list_runs(10) == []
    optional = dict(STEP, args={"order_id": "$entities.order_id", "body": "x", "note": "$message?"})
    runtime = _runtime(received, optional)
    done = asyncio.run(runtime.run_plan("p", entities={"order_id": "A1"}))
    assert done.status is RunStatus.FINISHED and received == [("A1", "x", None)]


def test_a_callers_plan_binding_the_message_inside_a_list_is_refused_before_any_step() -> None:
    """A caller's own ``Plan`` (validated when it is given, not at load) is read as a
    template is: a ``$message`` nested in a list is found, and nothing runs."""
    received: list[Any] = []

    @tool
    def file_lines(order_id: str, lines: list[str]) -> Filed:
        received.append((order_id, lines))
        return Filed(ticket="T2")

    nested = {"id": "s1", "tool": "file_lines", "args": {"order_id": "A1", "lines": ["x"]}}
    agent = build_agent([file_lines], [nested])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    given = Plan.model_validate(
        {
            "plan_id": "mine",
            "steps": [
                {"id": "a", "tool": "file_lines", "args": {"order_id": "A1", "lines": ["y"]}},
                {
                    "id": "b",
                    "tool": "file_lines",
                    "args": {"order_id": "A1", "lines": ["first", "$message"]},
                    "depends_on": ["a"],
                },
            ],
        }
    )
    with pytest.raises(PlanInvalidError, match=r"step b binds \$message"):
        asyncio.run(runtime.run_plan(given))
    assert received == [] and runtime.store.list_runs(10) == []


def test_a_rewrite_may_not_bind_the_message() -> None:
    """A rewrite's arguments are entities and facts: ``$message`` there is refused at load
    (it was accepted, then failed every matching run)."""
    received: list[Any] = []
    config = build_agent([_filing(received)], [STEP]).config.model_dump()
    config["argument_rewrites"] = [
        {
            "name": "r",
            "tool": "file_ticket",
            "when": 'args.body == "x"',
            "use_tool": "file_ticket",
            "args": {"body": "$message"},
        }
    ]
    with pytest.raises(ConfigInvalidError, match=r"only \$entities and \$facts"):
        Agent.build(parse_config(config), [_filing(received)])


def test_message_is_text_to_the_plan_check() -> None:
    """A ``$message`` bound to a parameter that is not text is refused before any run."""

    @tool
    def count(n: int) -> Filed:
        return Filed(ticket=str(n))

    with pytest.raises(ConfigInvalidError, match=r"\$message is str, but count.n expects int"):
        build_agent([count], [{"id": "s1", "tool": "count", "args": {"n": "$message"}}])


@pytest.mark.parametrize("text", ["$messages", "$message.text", "$message.x?", "$Message"])
def test_only_the_bare_form_is_a_message_reference(text: str) -> None:
    with pytest.raises(ValueError, match="is not a reference"):
        parse_reference(text)


def test_the_reference_forms() -> None:
    plain, optional = parse_reference("$message"), parse_reference("$message?")
    assert plain is not None and (plain.scope, plain.optional) == ("message", False)
    assert optional is not None and optional.optional
