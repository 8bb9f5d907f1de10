"""A check of one's own, before a step or on its result, without touching the scheduler.

A user adds a gate and a verifier through ``Agent.build(gates=..., verifiers=...)`` and
the public names only; each takes effect in a real run, and the log says which refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from corral import (
    DEFAULT_GATES,
    DEFAULT_VERIFIERS,
    Agent,
    EventType,
    GateRun,
    MemoryStore,
    Proposal,
    Refuse,
    Runtime,
    Skip,
    StepOutcome,
    Verdict,
    VerifyRun,
    parse_config,
    tool,
)
from corral.decision import Answer
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[float] = []


class Refunded(BaseModel):
    amount: float
    items: list[str]


@tool
async def refund(amount: float) -> Refunded:
    """Pay the amount back; records each call so a test sees whether it ran."""
    CALLS.append(amount)
    return Refunded(amount=amount, items=[] if amount == 0 else ["mug"])


@dataclass(frozen=True)
class RefundCap:
    """A gate of the user's: no refund above ``limit`` runs."""

    limit: float

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        amount = proposal.args.get("amount", 0)
        if proposal.tool.name == "refund" and amount > self.limit:
            return Refuse("REFUND_CAP", f"{amount:g} is above the cap of {self.limit:g}")
        return proposal


@dataclass(frozen=True)
class HalfOnWeekends:
    """A gate that changes the arguments the next gates and the tool see (placed after
    ``BindArguments``: the arguments are bound there)."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return replace(proposal, args={**proposal.args, "amount": proposal.args["amount"] / 2})


@dataclass(frozen=True)
class SkipAll:
    """A gate that skips every step on purpose, with a reply template."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return Skip("POLICY_HANDOFF", "closed today", "done")


@dataclass(frozen=True)
class SomethingReturned:
    """A verifier of the user's: a refund that returned no items failed."""

    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        items = (outcome.result.data or {}).get("items")
        if items:
            return Verdict(passed=True, check="success", reason="items returned")
        return Verdict(passed=False, check="success", reason="nothing was returned", code="EMPTY")


def agent(amount: float, **extra: Any) -> Agent:
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": amount}}]
    return Agent.build(parse_config(one_intent("go", steps=steps)), [refund], **extra)


async def run(agent: Agent) -> tuple[Any, list[Any]]:
    CALLS.clear()
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    return summary, list(runtime.store.load_events(summary.run_id))


def finished(events: list[Any]) -> Any:
    return next(e for e in events if e.type is EventType.STEP_FINISHED)


async def test_an_added_gate_refuses_a_step_with_its_own_code() -> None:
    capped = agent(500, gates=(*DEFAULT_GATES, RefundCap(limit=100)))
    assert capped.gates[-1] == RefundCap(limit=100)
    summary, events = await run(capped)
    step = finished(events)
    assert (step.data["status"], step.data["error_code"]) == ("failed", "REFUND_CAP")
    assert step.data["reason"] == "500 is above the cap of 100"
    assert CALLS == []  # the tool never ran
    assert summary.outcome == "handoff"
    assert [e.type for e in events if e.type is EventType.STEP_STARTED] == []


async def test_the_same_gate_lets_a_small_refund_through() -> None:
    summary, _ = await run(agent(50, gates=(*DEFAULT_GATES, RefundCap(limit=100))))
    assert (summary.outcome, CALLS) == ("success", [50])


async def test_without_the_gate_the_same_refund_runs() -> None:
    summary, _ = await run(agent(500))
    assert (summary.outcome, CALLS) == ("success", [500])


async def test_a_gate_may_change_the_arguments_the_next_gates_see() -> None:
    # before ValidateArguments, which seals the step (docs/extending.md)
    gates = (*DEFAULT_GATES[:3], HalfOnWeekends(), *DEFAULT_GATES[3:], RefundCap(limit=200))
    summary, events = await run(agent(300, gates=gates))
    assert (summary.outcome, CALLS) == ("success", [150])
    started = next(e for e in events if e.type is EventType.STEP_STARTED)
    assert started.data["args"] == {"amount": 150}


async def test_a_gate_that_skips_records_the_skip() -> None:
    summary, events = await run(agent(5, gates=(SkipAll(),)))
    assert summary.steps[0].status.value == "skipped"
    skipped = [e for e in events if e.type is EventType.STEP_SKIPPED]
    assert [(e.data["code"], e.data["reason"]) for e in skipped] == [
        ("POLICY_HANDOFF", "closed today")
    ]
    assert CALLS == []


async def test_an_added_verifier_fails_a_step_whose_tool_succeeded() -> None:
    checked = agent(0, verifiers=(*DEFAULT_VERIFIERS, SomethingReturned()))
    summary, events = await run(checked)
    step = finished(events)
    assert CALLS == [0]  # the tool ran; the verdict failed it
    assert (step.data["status"], step.data["error_code"]) == ("failed", "EMPTY")
    assert step.data["verdict"]["reason"] == "nothing was returned"
    assert step.stage == "verify"
    assert summary.outcome == "handoff"


async def test_a_passing_verifier_is_recorded_with_the_success() -> None:
    summary, events = await run(agent(7, verifiers=(*DEFAULT_VERIFIERS, SomethingReturned())))
    step = finished(events)
    assert summary.outcome == "success"
    assert step.data["verdict"]["reason"] == "items returned"
    _, plain = await run(agent(7))
    assert finished(plain).data["verdict"] is None  # no criterion declared says nothing
