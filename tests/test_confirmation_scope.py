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
from typing import Any

from pydantic import BaseModel

from corral import (
    Agent,
    EventType,
    MemoryStore,
    RunStatus,
    Runtime,
    SqlStore,
    ToolPolicy,
    parse_config,
    tool,
)
from corral.errors import ToolFailedError
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
    assert "step ids ['r'] are already used by the earlier plan" in told
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


def voucher_desk(rewrite: bool) -> tuple[Agent, list[str]]:
    """Refunds by a confirmed step; ``rewrite``: the deploy that pays 599 in vouchers."""
    calls: list[str] = []

    @tool(policy=CONFIRMED_WRITE)
    def refund(amount: str) -> Paid:
        """Refunds ``amount`` to the card."""
        calls.append(f"refund {amount}")
        return Paid(amount=amount)

    @tool(policy=CONFIRMED_WRITE)
    def voucher(amount: str) -> Paid:
        """Pays ``amount`` as a voucher."""
        calls.append(f"voucher {amount}")
        return Paid(amount=amount)

    agent = build_agent(
        [refund, voucher],
        [{"id": "r", "tool": "refund", "args": {"amount": "$entities.amount"}}],
        entities={"amount": {"kind": "pattern", "patterns": [r"(\d+)"]}},
        intent_tools=["refund", "voucher"],
    )
    if rewrite:
        config: dict[str, Any] = agent.config.model_dump()
        config["argument_rewrites"] = [
            {
                "name": "vouchers",
                "tool": "refund",
                "when": 'args.amount == "599"',
                "use_tool": "voucher",
            }
        ]
        agent = Agent.build(parse_config(config), [refund, voucher])
    return agent, calls


async def test_a_yes_does_not_stand_for_a_call_a_deploy_changed_while_the_run_waited() -> None:
    store = MemoryStore()
    before, _ = voucher_desk(rewrite=False)
    asked = await Runtime(before, store, effects=FixedEffects()).start("go 599")
    assert asked.pending is not None and "refund" in asked.pending.prompt
    after, calls = voucher_desk(rewrite=True)
    deployed = Runtime(after, store, effects=FixedEffects())
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
