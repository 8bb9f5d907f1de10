"""A person's approval is for the call they were shown: its step, its tool, its arguments.

On main, a yes to "refund 100" let a replanned "refund 599" run unseen: the model's new
plan reused the failed step's id ("use new step ids" was asked of the model, not checked),
and the yes was looked up by step id alone. The same lookup let a deploy that changed a
step's call (an argument rewrite) run the new call on the yes given for the old one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from corral import (
    Agent,
    EventType,
    MemoryStore,
    RunStatus,
    RunSummary,
    Runtime,
    Sensitive,
    SqlStore,
    ToolPolicy,
    parse_config,
    tool,
)
from corral.errors import ConfigInvalidError, ToolFailedError
from corral.models import ModelRequest, ScriptedModel
from corral.store.base import Store
from corral.testing import FixedEffects
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent
from tests.test_scheduler_events import with_model

CONFIRMED_WRITE = ToolPolicy(kind="write", requires_confirmation=True)


class Paid(BaseModel):
    amount: int | str


def refund_desk() -> tuple[list[int], ToolSpec]:
    """A refund tool that turns down its first call cleanly (nothing happened)."""
    entered: list[int] = []

    @tool(policy=CONFIRMED_WRITE)
    def refund(amount: int) -> Paid:
        """Refunds ``amount``."""
        entered.append(amount)
        if len(entered) == 1:
            raise ToolFailedError("the payment provider refused the refund")
        return Paid(amount=amount)

    return entered, refund


async def test_a_replan_may_not_reuse_a_step_id_so_a_yes_never_carries_to_a_new_call() -> None:
    entered, refund = refund_desk()

    def plan(request: ModelRequest) -> str:
        n = len(model.requests)
        step = {1: ("r", 100), 2: ("r", 599)}.get(n, ("r2", 599))  # the replan reuses r once
        return json.dumps(
            {"steps": [{"id": step[0], "tool": "refund", "args": {"amount": step[1]}}]}
        )

    model = ScriptedModel(function=plan)
    runtime = with_model(
        [refund], [{"id": "r", "tool": "refund", "args": {"amount": 100}}], model, planner="model"
    )
    first = await runtime.start("go: refund 100, or else 599")
    assert first.pending is not None and first.pending.step_id == "r"
    second = await runtime.resume(first.run_id, approve=True)
    assert entered == [100]  # the approved call was entered once, and was refused
    assert len(model.requests) == 3  # the replan, and its repair
    told = model.requests[2].messages[-1].content
    assert "step ids ['r'] are already used by an earlier plan" in told
    assert second.status is RunStatus.AWAITING_CONFIRM  # 599 was never shown: asked
    assert second.pending is not None and second.pending.step_id == "r2"
    requested = [
        e.data
        for e in runtime.store.load_events(first.run_id)
        if e.type is EventType.CONFIRMATION_REQUESTED
    ]
    assert [r["step_id"] for r in requested] == ["r", "r2"]
    # the default prompt shows the call's arguments: what the person approves is seen
    assert first.pending.prompt == "Next I will run refund (amount: 100). Shall I go ahead?"
    assert second.pending.prompt == "Next I will run refund (amount: 599). Shall I go ahead?"
    third = await runtime.resume(first.run_id, approve=True)
    assert third.status is RunStatus.FINISHED
    assert entered == [100, 599]


def payment_tools(
    calls: list[str], policy: ToolPolicy, reconcile: Any = None
) -> tuple[ToolSpec, ToolSpec]:
    """``refund`` and ``voucher`` under ``policy``, each noting its calls in ``calls``."""

    @tool(policy=policy, reconcile=reconcile)
    def refund(amount: str) -> Paid:
        """Refunds ``amount`` to the card."""
        calls.append(f"refund {amount}")
        return Paid(amount=amount)

    @tool(policy=policy)
    def voucher(amount: str) -> Paid:
        """Pays ``amount`` as a voucher."""
        calls.append(f"voucher {amount}")
        return Paid(amount=amount)

    return refund, voucher


def voucher_desk(rewrite: bool) -> tuple[Agent, list[str]]:
    """Refunds by a confirmed step; ``rewrite``: the deploy that pays 599 in vouchers."""
    calls: list[str] = []
    refund, voucher = payment_tools(calls, CONFIRMED_WRITE)
    agent = build_agent(
        [refund, voucher],
        [{"id": "r", "tool": "refund", "args": {"amount": "$entities.amount"}}],
        entities={"amount": {"kind": "pattern", "patterns": [r"(\d+)"]}},
        intent_tools=["refund", "voucher"],
    )
    if rewrite:
        vouchers = {"tool": "refund", "when": 'args.amount == "599"', "use_tool": "voucher"}
        agent = redeployed(agent, argument_rewrites=[{"name": "vouchers", **vouchers}])
    return agent, calls


def redeployed(agent: Agent, **changes: Any) -> Agent:
    """``agent`` after a deploy that changes these keys of its config (the same tools)."""
    config = {**agent.config.model_dump(), **changes}
    return Agent.build(parse_config(config), list(agent.tools))


async def deployed_while_asked() -> tuple[RunSummary, Runtime, list[str]]:
    """A run asking about "refund 599", and a runtime of the deploy that pays in vouchers."""
    store = MemoryStore()
    before, _ = voucher_desk(rewrite=False)
    asked = await Runtime(before, store, effects=FixedEffects()).start("go 599")
    assert asked.pending is not None and "refund" in asked.pending.prompt
    after, calls = voucher_desk(rewrite=True)
    return asked, Runtime(after, store, effects=FixedEffects()), calls


async def test_a_yes_does_not_stand_for_a_call_a_deploy_changed_while_the_run_waited() -> None:
    asked, deployed, calls = await deployed_while_asked()
    again = await deployed.resume(asked.run_id, approve=True)
    assert calls == []  # the voucher was never shown
    assert again.status is RunStatus.AWAITING_CONFIRM
    assert again.pending is not None and "voucher" in again.pending.prompt
    done = await deployed.resume(asked.run_id, approve=True)
    assert done.status is RunStatus.FINISHED
    assert calls == ["voucher 599"]


async def test_a_yes_stands_for_the_same_call_in_another_process() -> None:
    """The call's digest is stable: approving in a new runtime runs what was shown."""
    store = MemoryStore()
    agent, calls = voucher_desk(rewrite=False)
    asked = await Runtime(agent, store, effects=FixedEffects()).start("go 599")
    done = await Runtime(agent, store, effects=FixedEffects()).resume(asked.run_id, approve=True)
    assert done.status is RunStatus.FINISHED
    assert calls == ["refund 599"]
    requested = [
        e for e in store.load_events(asked.run_id) if e.type is EventType.CONFIRMATION_REQUESTED
    ]
    assert len(requested) == 1


async def test_a_second_click_approves_nothing_asked_after_the_caller_looked(
    tmp_path: Path,
) -> None:
    """Two clicks on the refund the person saw: the first meets the deploy's voucher and
    asks about it; the second, which looked before that question, does not approve it."""
    store: Store = SqlStore.open(tmp_path / "corral.db")
    before, _ = voucher_desk(rewrite=False)
    asked = await Runtime(before, store, effects=FixedEffects()).start("go 599")
    after, calls = voucher_desk(rewrite=True)
    deployed = Runtime(after, store, effects=FixedEffects())
    # both look at the run (a store read on its threads) before either drives it; the
    # one that drives second waits for the other
    first = asyncio.create_task(deployed.resume(asked.run_id, approve=True, wait_s=5))
    second = asyncio.create_task(deployed.resume(asked.run_id, approve=True, wait_s=5))
    clicked, clicked_again = await first, await second
    assert calls == []
    for summary in (clicked, clicked_again):
        assert summary.status is RunStatus.AWAITING_CONFIRM
        assert summary.pending is not None and "voucher" in summary.pending.prompt
    done = await deployed.resume(asked.run_id, approve=True)
    assert done.status is RunStatus.FINISHED
    assert calls == ["voucher 599"]


def test_the_default_prompt_shows_the_call_in_either_language_and_cuts_a_long_argument() -> None:
    from corral.reply.render import CALL_CHARS, call_text

    assert call_text("ping", {}, "en") == "ping"
    assert call_text("refund", {"order_id": "OD1", "amount": 599.0}, "zh") == (
        "refund（order_id: OD1、amount: 599）"
    )
    long = call_text("note", {"text": "word " * 500}, "en")
    assert long.startswith("note (text: word word") and len(long) < CALL_CHARS + 40


async def test_a_second_replan_may_not_reuse_an_id_of_the_first_plan() -> None:
    """Found by review: only the plan being replaced was checked, so a second replan could
    take the first plan's ``r`` back, and with it the yes given to that call."""
    entered, refund = refund_desk()

    @tool
    def lookup(n: int) -> Paid:
        """Fails: the second plan fails too."""
        raise ToolFailedError("down")

    def plan(request: ModelRequest) -> str:
        n = len(model.requests)
        steps = {
            1: [{"id": "r", "tool": "refund", "args": {"amount": 100}}],
            2: [{"id": "x", "tool": "lookup", "args": {"n": 1}}],
            3: [{"id": "r", "tool": "refund", "args": {"amount": 100}}],
        }.get(n, [{"id": "r3", "tool": "refund", "args": {"amount": 100}}])
        return json.dumps({"steps": steps})

    model = ScriptedModel(function=plan)
    runtime = with_model(
        [refund, lookup],
        [{"id": "r", "tool": "refund", "args": {"amount": 100}}],
        model,
        planner="model",
    )
    first = await runtime.start("go: refund 100, look up 1")
    second = await runtime.resume(first.run_id, approve=True)
    assert "already used by an earlier plan" in model.requests[3].messages[-1].content
    assert second.status is RunStatus.AWAITING_CONFIRM
    assert second.pending is not None and second.pending.step_id == "r3"
    assert entered == [100]  # the second refund waits for its own yes


def test_a_plan_may_name_the_default_prompt_or_show_the_call_in_its_own() -> None:
    """Found by review: ``{call}`` was no value a plan's confirmation could use."""
    _, refund = refund_desk()
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": 5}}]
    build_agent([refund], steps, plan_extra={"confirm": {"s1": "confirm"}})
    build_agent(
        [refund],
        steps,
        plan_extra={"confirm": {"s1": "mine"}},
        templates={"mine": {"zh": "要执行 {call} 吗？", "en": "Shall I run {call}?"}},
    )


async def _card_check_prompt(**agent_extra: Any) -> str:
    """The prompt a confirmed card check with a ``Sensitive`` card holder asks with."""

    @tool(policy=CONFIRMED_WRITE)
    def verify_card(card_holder: Annotated[str, Sensitive()], amount: int) -> Paid:
        """Checks the card."""
        return Paid(amount=amount)

    agent = build_agent(
        [verify_card],
        [{"id": "v", "tool": "verify_card", "args": {"card_holder": "Zhang San", "amount": 5}}],
        **agent_extra,
    )
    asked = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("go")
    assert asked.pending is not None
    return asked.pending.prompt


async def test_the_default_prompt_never_shows_a_sensitive_argument() -> None:
    """Found by review: ``Sensitive`` values are never shown, but ``{call}`` showed them."""
    assert await _card_check_prompt() == (
        "Next I will run verify_card (card_holder: [REDACTED], amount: 5). Shall I go ahead?"
    )


async def test_a_plan_s_own_prompt_never_shows_a_sensitive_argument_either() -> None:
    """Found by a review: ``{args.card_holder}`` in a plan's own prompt showed the value that
    ``{call}`` hides, to every API client and terminal the prompt reaches."""
    prompt = await _card_check_prompt(
        plan_extra={"confirm": {"v": "mine"}},
        templates={
            "mine": {
                "zh": "确认给 {args.card_holder} 验证 {args.amount} 元吗？",
                "en": "Verify {args.amount} for {args.card_holder}?",
            }
        },
    )
    assert prompt == "Verify 5 for [REDACTED]?"


class Issued(BaseModel):
    card_id: str
    pin: Annotated[str, Sensitive()]


@tool
def issue_card() -> Issued:
    """Issues a card."""
    return Issued(card_id="C1", pin="4321")


@pytest.mark.parametrize(
    ("facts", "shown"),
    [({"pin": "result.pin"}, "{pin}"), ({"card": "result"}, "{card.pin}")],
    ids=["the field", "the whole result"],
)
def test_a_reply_may_not_show_a_fact_from_a_sensitive_field(
    facts: dict[str, str], shown: str
) -> None:
    """Found by a review: a fact published from a ``Sensitive`` output field was said to
    the user by any template that named it ("Done; your code SECRET-TOKEN-9876"), where
    ``Sensitive`` says the value is never shown."""
    step = {"id": "s1", "tool": "issue_card", "args": {}, "facts": facts}
    templates = {"done_reply": {"en": f"Card issued: {shown}"}}
    with pytest.raises(ConfigInvalidError, match="from a Sensitive field: it is never shown"):
        build_agent([issue_card], [step], templates=templates)
    step["facts"] = {**facts, "card_id": "result.card_id"}
    build_agent([issue_card], [step], templates={"done_reply": {"en": "Card {card_id} issued"}})
    step["facts"] = {"card": "result"}  # a part of the whole result that is not the pin
    build_agent([issue_card], [step], templates={"done_reply": {"en": "Card {card.card_id}"}})
    with pytest.raises(ConfigInvalidError, match="Sensitive field"):  # all of it: the pin too
        build_agent([issue_card], [step], templates={"done_reply": {"en": "Card {card}"}})


def refund_by(method: str) -> tuple[Agent, list[str]]:
    """A confirmed refund whose ``method`` is a default the deploy may change."""
    calls: list[str] = []

    @tool(policy=CONFIRMED_WRITE)
    def refund(amount: str, method: str = method) -> Paid:
        """Refunds ``amount`` by ``method``."""
        calls.append(f"{amount} by {method}")
        return Paid(amount=amount)

    steps = [{"id": "r", "tool": "refund", "args": {"amount": "$entities.amount"}}]
    entities = {"amount": {"kind": "pattern", "patterns": [r"(\d+)"]}}
    return build_agent([refund], steps, entities=entities), calls


async def test_a_yes_does_not_stand_for_a_default_a_deploy_changed() -> None:
    """Found by review: the digest left defaults out, so a deploy that made ``method``
    default to a voucher ran the voucher on the yes given to the card."""
    store = MemoryStore()
    before, _ = refund_by("card")
    asked = await Runtime(before, store, effects=FixedEffects()).start("go 599")
    assert asked.pending is not None and "method: card" in asked.pending.prompt
    after, calls = refund_by("voucher")
    deployed = Runtime(after, store, effects=FixedEffects())
    again = await deployed.resume(asked.run_id, approve=True)
    assert calls == [] and again.status is RunStatus.AWAITING_CONFIRM
    assert again.pending is not None and "method: voucher" in again.pending.prompt
    done = await deployed.resume(asked.run_id, approve=True)
    assert done.status is RunStatus.FINISHED and calls == ["599 by voucher"]
