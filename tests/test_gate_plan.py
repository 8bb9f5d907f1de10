"""Only the gates that may concern a step are asked, and that changes no decision.

What applies is worked out once per step of an agent's plan (``applies``); a user's gate
that declares nothing is asked for every step, and a gate that hands on another tool makes
every later gate be asked, for that tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from corral import (
    DEFAULT_GATES,
    Agent,
    EventType,
    GateRun,
    MemoryStore,
    Proposal,
    Runtime,
    ToolPolicy,
    parse_config,
    tool,
)
from corral.decision import Answer
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[str] = []


class Paid(BaseModel):
    amount: float


@tool
async def quote(amount: float) -> Paid:
    """A read: what the refund would be."""
    CALLS.append("quote")
    return Paid(amount=amount)


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True))
async def refund(amount: float) -> Paid:
    """A write that needs the person's approval."""
    CALLS.append("refund")
    return Paid(amount=amount)


@dataclass(frozen=True)
class Swap:
    """A user's gate, first in the list, that hands on the refund instead of the quote."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        if proposal.tool.name == "quote":
            return replace(proposal, tool=run.tools.get("refund"))
        return proposal


@dataclass(frozen=True)
class Counted:
    """A user's gate that says when it applies; it records each question it is asked."""

    applying: bool
    seen: list[str] = field(default_factory=list, compare=False, hash=False)

    def applies(self, step: Any, policy: Any, rules: Any) -> bool:
        self.seen.append(f"applies {step.step.id}")
        return self.applying

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        self.seen.append(f"check {proposal.step_id}")
        return proposal


def agent(**extra: Any) -> Agent:
    steps = [
        {"id": "s1", "tool": "quote", "args": {"amount": 10}},
        {"id": "s2", "tool": "quote", "args": {"amount": 20}, "depends_on": ["s1"]},
    ]
    config = one_intent("go", steps=steps)
    config["intents"][0]["tools"] = ["quote", "refund"]  # the refund is allowed, unplanned
    return Agent.build(parse_config(config), [quote, refund], **extra)


async def test_a_swapped_tool_is_confirmed_though_the_planned_one_needs_no_approval() -> None:
    # the quote needs no approval, so the confirmation gate is not planned for the step;
    # once the refund is handed on instead, it is asked, and the run waits for a person
    CALLS.clear()
    runtime = Runtime(agent(gates=(Swap(), *DEFAULT_GATES)), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert summary.status.value == "awaiting_confirm"
    assert summary.pending is not None and summary.pending.step_id == "s1"
    assert CALLS == []


async def test_without_the_swap_the_quotes_run_unasked() -> None:
    CALLS.clear()
    runtime = Runtime(agent(), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert (summary.outcome, CALLS) == ("success", ["quote", "quote"])


async def test_applies_is_asked_once_per_step_and_a_gate_that_does_not_apply_is_not_asked() -> None:
    skipped, asked = Counted(applying=False), Counted(applying=True)
    runtime = Runtime(
        agent(gates=(*DEFAULT_GATES, skipped, asked)), MemoryStore(), effects=FixedEffects()
    )
    for _ in range(3):
        summary = await runtime.start("go")
        assert summary.outcome == "success"
    assert skipped.seen == ["applies s1", "applies s2"]
    assert asked.seen == [
        "applies s1",
        "check s1",
        "applies s2",
        "check s2",
        *["check s1", "check s2"] * 2,
    ]


async def test_a_user_gate_without_applies_is_asked_for_every_step() -> None:
    seen: list[str] = []

    @dataclass(frozen=True)
    class Plain:
        def check(self, proposal: Proposal, run: GateRun) -> Answer:
            seen.append(proposal.step_id)
            return proposal

    runtime = Runtime(agent(gates=(*DEFAULT_GATES, Plain())), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert summary.outcome == "success"
    assert seen == ["s1", "s2"]
    events = list(runtime.store.load_events(summary.run_id))
    assert [e.type for e in events].count(EventType.STEP_STARTED) == 2


async def test_a_plan_is_kept_only_for_rules_that_cannot_change_under_it() -> None:
    built = agent(gates=(*DEFAULT_GATES, Counted(applying=True)))
    assert isinstance(built.rules, tuple)
    # a variant given a list: what applies is worked out again for every step of every run
    counted = Counted(applying=True)
    listed = replace(built, gates=(*DEFAULT_GATES, counted), rules=list(built.rules))
    runtime = Runtime(listed, MemoryStore(), effects=FixedEffects())
    for _ in range(2):
        assert (await runtime.start("go")).outcome == "success"
    assert counted.seen.count("applies s1") == 2
