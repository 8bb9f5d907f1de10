"""Review 10b: a user's gate or verifier, placed as docs/extending.md says.

A gate appended after ``DEFAULT_GATES`` may return a changed proposal (the docs show
``dataclasses.replace(proposal, tool=..., args=...)``); the person approved the arguments
the ``Confirmation`` gate showed, so those and only those may reach a write.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from pydantic import BaseModel

from corral import (
    DEFAULT_GATES,
    DEFAULT_VERIFIERS,
    Agent,
    GateRun,
    Hold,
    MemoryStore,
    Proposal,
    Runtime,
    Skip,
    StepOutcome,
    Stop,
    ToolPolicy,
    Verdict,
    VerifyRun,
    parse_config,
    tool,
)
from corral.decision import Answer
from corral.errors import ConfigInvalidError
from corral.testing import FixedEffects
from tests.one_intent import one_intent
from tests.test_gates_and_verifiers import RefundCap  # docs/extending.md's gate

CALLS: list[float] = []


class Refunded(BaseModel):
    amount: float


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True))
async def refund(amount: float) -> Refunded:
    """Pay the amount back (needs the person's approval)."""
    CALLS.append(amount)
    return Refunded(amount=amount)


@dataclass(frozen=True)
class Inflate:
    """A user's gate at the end of the list that changes the arguments."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return replace(proposal, args={"amount": proposal.args["amount"] * 100})


@dataclass(frozen=True)
class Broken:
    """A user's gate with a bug."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        raise KeyError("oops")


@dataclass(frozen=True)
class BrokenVerifier:
    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        raise ValueError("verifier bug")


def agent(**extra: Any) -> Agent:
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": 10}}]
    return Agent.build(parse_config(one_intent("go", steps=steps)), [refund], **extra)


async def test_a_gate_after_confirmation_cannot_change_approved_arguments() -> None:
    CALLS.clear()
    runtime = Runtime(
        agent(gates=(*DEFAULT_GATES, Inflate())), MemoryStore(), effects=FixedEffects()
    )
    asked = await runtime.start("go")
    assert asked.status.value == "awaiting_confirm"
    assert asked.pending is not None and asked.pending.step_id == "s1"
    summary = await runtime.resume(asked.run_id, approve=True)
    # the person approved a refund of 10; 1000 must not be paid without asking again
    assert CALLS == [], f"the tool ran with {CALLS}, approved was 10"
    assert (summary.status.value, summary.error_code) == ("handed_off", "EXTENSION_FAILED")


async def test_a_raising_gate_ends_with_a_corral_error_not_a_raw_exception() -> None:
    CALLS.clear()
    runtime = Runtime(
        agent(gates=(Broken(), *DEFAULT_GATES)), MemoryStore(), effects=FixedEffects()
    )
    summary = await runtime.start("go")  # a KeyError in the gate must not escape raw
    assert CALLS == []
    assert (summary.status.value, summary.error_code) == ("handed_off", "EXTENSION_FAILED")
    events = await runtime.events(summary.run_id)
    failed = next(e for e in events if e.type.value == "step_finished")
    assert "gate Broken raised KeyError" in failed.data["reason"]


async def test_a_raising_verifier_ends_with_a_corral_error_not_a_raw_exception() -> None:
    CALLS.clear()
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": 10}}]
    agent_ = Agent.build(
        parse_config(one_intent("go", steps=steps)),
        [refund],
        verifiers=(*DEFAULT_VERIFIERS, BrokenVerifier()),
    )
    runtime = Runtime(agent_, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("go")
    summary = await runtime.resume(asked.run_id, approve=True)  # must not raise raw
    assert CALLS == [10]  # the write ran once; its verifier's bug fails the step's check
    assert summary.steps[0].error_code == "EXTENSION_FAILED"
    assert summary.status.value == "handed_off"


@dataclass(frozen=True)
class HoldAlways:
    """A user's gate that holds the step (``Hold()``: "it awaits a person") without
    pausing the run for anyone."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return Hold()


@dataclass(frozen=True)
class ForgetsToReturn:
    """A user's gate missing a ``return proposal`` on one branch (returns ``None``)."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        if proposal.args.get("amount", 0) > 10**6:
            return proposal
        return None  # type: ignore[return-value]


@dataclass(frozen=True)
class AsyncGate:
    """A gate written like a verifier (``async def check``): its answer is a coroutine."""

    async def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return proposal


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_async_gate_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigInvalidError, match="AsyncGate"):
        agent(gates=(*DEFAULT_GATES, AsyncGate()))


@pytest.mark.parametrize("gate", [HoldAlways(), ForgetsToReturn()])
async def test_a_step_no_gate_let_through_never_ends_the_run_as_a_success(gate: Any) -> None:
    CALLS.clear()
    gates = (*DEFAULT_GATES[:2], gate, *DEFAULT_GATES[2:])
    runtime = Runtime(agent(gates=gates), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert CALLS == []
    # the refund never ran and nobody was asked: the run must not say it succeeded
    assert (summary.status.value, summary.error_code) == ("handed_off", "EXTENSION_FAILED")


@dataclass(frozen=True)
class ClosedToday:
    """A user's gate that skips on purpose, with the reply that explains why (the docs:
    "``template`` is the reply that explains why")."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return Skip("CLOSED", "the refund desk is closed today", "closed")


async def test_a_user_skip_replies_with_its_template_not_a_success() -> None:
    CALLS.clear()
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": 10}}]
    templates = {
        "done": {"en": "Refund issued", "zh": "好了"},
        "closed": {"en": "Closed today, sorry", "zh": "今天关门"},
    }
    config = parse_config(one_intent("go", steps=steps, templates=templates))
    agent_ = Agent.build(config, [refund], gates=(ClosedToday(), *DEFAULT_GATES))
    runtime = Runtime(agent_, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert CALLS == []
    assert summary.steps[0].status.value == "skipped"
    # the person is told the refund was issued, and the run counts as a success
    assert (summary.reply, summary.outcome) != ("Refund issued", "success")
    assert summary.reply == "Closed today, sorry"


@dataclass(frozen=True)
class StopWithOwnCode:
    """``Stop`` with a code of the user's own, as ``Refuse`` accepts one."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return Stop("maintenance window", "MAINTENANCE")  # type: ignore[arg-type]


async def test_a_stop_with_a_users_code_is_a_handoff_not_an_attribute_error() -> None:
    runtime = Runtime(
        agent(gates=(StopWithOwnCode(), *DEFAULT_GATES)), MemoryStore(), effects=FixedEffects()
    )
    summary = await runtime.start("go")  # AttributeError: 'str' object has no attribute 'value'
    assert summary.status.value == "handed_off"


class AnswersAValue:
    """A user's verifier that answers something other than a ``Verdict`` or ``None``."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize("answer", [False, True, "passed", {"passed": False}])
async def test_a_verifier_answering_no_verdict_fails_the_check_with_a_code(answer: object) -> None:
    """It used to crash the run with a raw ``AttributeError`` ('bool' object has no
    attribute 'passed'), leaving the run stored as executing."""
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": 10}}]
    agent_ = Agent.build(
        parse_config(one_intent("go", steps=steps)),
        [refund],
        verifiers=(*DEFAULT_VERIFIERS, AnswersAValue(answer)),
    )
    runtime = Runtime(agent_, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("go")
    summary = await runtime.resume(asked.run_id, approve=True)
    assert summary.steps[0].error_code == "EXTENSION_FAILED"
    assert summary.status.value == "handed_off"
    events = await runtime.events(summary.run_id)
    failed = next(e for e in events if e.type.value == "step_finished")
    assert f"verifier AnswersAValue answered {answer!r}" in failed.data["reason"]


class Items(BaseModel):
    items: list[str]


@tool
def find_items(order: str) -> Items:
    """Items to refund (none)."""
    return Items(items=[])


class SomethingReturned:
    """docs/extending.md's verifier, as written there (its own code, ``EMPTY``)."""

    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        if (outcome.result.data or {}).get("items"):
            return Verdict(passed=True, check="success", reason="items returned")
        return Verdict(passed=False, check="success", reason="nothing returned", code="EMPTY")


def _items_agent(on_failure: bool) -> Agent:
    config = one_intent("go", steps=[{"id": "s1", "tool": "find_items", "args": {"order": "A"}}])
    if on_failure:
        config["plans"]["p"]["on_failure"] = {"s1": "nothing"}
        config["templates"]["nothing"] = {"zh": "没有可退的", "en": "Nothing to refund."}
    verifiers = (*DEFAULT_VERIFIERS, SomethingReturned())
    return Agent.build(parse_config(config), [find_items], verifiers=verifiers)


async def test_a_verifier_with_its_own_code_gets_the_plans_answer_for_an_unmet_check() -> None:
    """Found by a walkthrough: the docs' verifier (``code="EMPTY"``) skipped the plan's
    ``on_failure`` answer, and the run was handed off as TOOL_FAILED, the tool fine."""
    runtime = Runtime(_items_agent(True), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert (summary.status.value, summary.outcome) == ("finished", "unmet"), summary
    assert summary.reply == "Nothing to refund."
    assert summary.steps[0].error_code == "EMPTY"  # the step keeps the verifier's code


async def test_without_an_answer_an_unmet_check_of_its_own_hands_off_as_one() -> None:
    runtime = Runtime(_items_agent(False), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert (summary.status.value, summary.error_code) == ("handed_off", "SUCCESS_CRITERIA_FAILED")
    packet = runtime.store.get_handoff(summary.run_id)
    assert packet is not None and packet.reason_code == "SUCCESS_CRITERIA_FAILED"


async def test_a_gates_own_refusal_hands_off_as_a_policys_not_a_tool_failure() -> None:
    """Found by a walkthrough: the docs' ``RefundCap`` (no ``stop``) handed the run off
    as TOOL_FAILED, though the tool was never entered."""
    CALLS.clear()
    steps = [{"id": "s1", "tool": "refund", "args": {"amount": 500}}]
    built = Agent.build(
        parse_config(one_intent("go", steps=steps)),
        [refund],
        gates=(*DEFAULT_GATES, RefundCap(limit=100)),
    )
    runtime = Runtime(built, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    if summary.status.value == "awaiting_confirm":
        summary = await runtime.resume(summary.run_id, approve=True)
    assert CALLS == []
    assert summary.steps[0].error_code == "REFUND_CAP"
    assert (summary.status.value, summary.error_code) == ("handed_off", "POLICY_HANDOFF")
