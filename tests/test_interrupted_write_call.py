"""A write the process died in is entered again only as the call it died in.

An idempotent write whose outcome is unknown is entered again with the same idempotency
key, so that a business system that saw the first call answers the second with its
effect. On main a deploy made while the run was interrupted (an argument rewrite that pays
599 as a voucher, or 499 instead) changed the call that was entered again: another tool,
or another key, which no business system could tell from a new payment. The refund the
process died in may have been paid, and the voucher was paid as well. Now the step is
handed to a person as ``OUTCOME_UNKNOWN``, saying which call may have acted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import Field

from corral import (
    Agent,
    MemoryStore,
    RunStatus,
    RunSummary,
    Runtime,
    StepStatus,
    ToolContext,
    ToolPolicy,
    tool,
)
from corral.errors import RunNotResumableError, ToolFailedError
from corral.testing import FixedEffects
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent
from tests.test_confirmation_scope import Paid, payment_tools, redeployed
from tests.test_runtime import Crash, CrashAfterWrite

IDEMPOTENT_WRITE = ToolPolicy(kind="write", idempotent=True)


def paying_desk(
    paid: list[str],
    rewrite: dict[str, Any] | None = None,
    reconcile: Callable[[ToolContext], Paid | None] | None = None,
) -> Agent:
    """A refund of 599; ``rewrite``: the argument rewrite a deploy adds; ``reconcile``: the
    refund's reconciler."""

    refund, voucher = payment_tools(paid, IDEMPOTENT_WRITE, reconcile)
    agent = build_agent(
        [refund, voucher],
        [{"id": "w", "tool": "refund", "args": {"amount": "599"}}],
        intent_tools=["refund", "voucher"],
    )
    if rewrite is None:
        return agent
    return redeployed(agent, argument_rewrites=[{"name": "deployed", "tool": "refund", **rewrite}])


async def killed_in_the_refund(paid: list[str]) -> tuple[MemoryStore, str]:
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(paying_desk(paid), store, effects=CrashAfterWrite()).start("go")
    assert paid == ["refund 599"]
    return store, store.list_runs(1)[0].run_id


@pytest.mark.parametrize(
    "rewrite",
    [
        {"when": 'args.amount == "599"', "use_tool": "voucher"},  # another tool, the same key
        {"when": 'args.amount == "599"', "use_tool": "refund", "args": {"amount": "499"}},
    ],
    ids=["another tool", "other arguments"],
)
async def test_a_deploy_that_changed_the_call_hands_the_interrupted_write_to_a_person(
    rewrite: dict[str, Any],
) -> None:
    paid: list[str] = []
    store, run_id = await killed_in_the_refund(paid)
    deployed = Runtime(paying_desk(paid, rewrite), store, effects=FixedEffects())
    summary = await deployed.resume(run_id)
    assert paid == ["refund 599"]  # nothing paid on top of what may have been
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.error_code == "OUTCOME_UNKNOWN" and summary.outcome == "unknown"
    assert summary.steps[0].status is StepStatus.UNKNOWN
    assert summary.handoff is not None
    assert "refund" in summary.handoff.reason and "may" in summary.handoff.reason
    with pytest.raises(RunNotResumableError):  # it ended: a second resume pays nothing
        await deployed.resume(run_id)
    assert paid == ["refund 599"]


async def test_the_same_call_is_entered_again_on_its_key_after_a_deploy() -> None:
    """A rewrite that does not apply to the call leaves it as it was: entered again."""
    paid: list[str] = []
    store, run_id = await killed_in_the_refund(paid)
    unrelated = {"when": 'args.amount == "1"', "use_tool": "voucher"}
    deployed = Runtime(paying_desk(paid, unrelated), store, effects=FixedEffects())
    summary = await deployed.resume(run_id)
    assert summary.status is RunStatus.FINISHED
    assert paid == ["refund 599", "refund 599"]  # the same call, with the same key


async def test_a_write_its_reconciler_proved_had_not_acted_may_be_called_otherwise() -> None:
    """Nothing was paid (the reconciler looked): the deploy's call is a first payment."""
    paid: list[str] = []
    looked: list[str] = []
    store, run_id = await killed_in_the_refund(paid)
    paid.clear()  # the business system never saw it (the process died before the call left)

    def find(ctx: ToolContext) -> Paid | None:
        looked.append(ctx.idempotency_key)
        return None

    voucher = {"when": 'args.amount == "599"', "use_tool": "voucher"}
    deployed = paying_desk(paid, voucher, reconcile=find)
    summary = await Runtime(deployed, store, effects=FixedEffects()).resume(run_id)
    assert len(looked) == 1
    assert summary.status is RunStatus.FINISHED, summary
    assert paid == ["voucher 599"]


def pay_desk(
    paid: list[str], preference: str, refuse_again: bool = False, grouped: bool = True
) -> Agent:
    """``card`` and ``voucher``, equivalents, ranked by ``preference`` (``latency``: card
    first, ``cost``: voucher first); ``refuse_again``: card refuses a key it saw;
    ``grouped=False``: the two are no equivalents."""

    def member(name: str, latency_ms: int, cost: float) -> ToolSpec:
        policy = ToolPolicy(
            kind="write",
            idempotent=True,
            equivalent_group="pay" if grouped else None,
            latency_ms=latency_ms,
            cost=cost,
        )

        @tool(name=name, policy=policy)
        def pay(amount: str) -> Paid:
            """Pays ``amount``."""
            if refuse_again and paid and name == "card":
                raise ToolFailedError("idempotency key already used")
            paid.append(f"{name} {amount}")
            return Paid(amount=amount)

        return pay

    tools = [member("card", 10, 5.0), member("voucher", 50, 1.0)]
    base = build_agent(
        tools,
        [{"id": "w", "tool": "card", "args": {"amount": "599"}}],
        intent_tools=["card", "voucher"],
    )
    return redeployed(base, tool_preference=preference)


async def interrupted(agent: Agent) -> tuple[MemoryStore, str]:
    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(agent, store, effects=CrashAfterWrite()).start("go")
    return store, store.list_runs(1)[0].run_id


async def test_a_write_that_died_in_an_equivalent_tool_is_entered_again_as_that_tool() -> None:
    """Nothing deployed: the process died in the voucher (ranked first), entered again."""
    paid: list[str] = []
    store, run_id = await interrupted(pay_desk(paid, "cost"))
    assert paid == ["voucher 599"]
    summary = await Runtime(pay_desk(paid, "cost"), store, effects=FixedEffects()).resume(run_id)
    assert summary.status is RunStatus.FINISHED, summary.handoff
    assert paid == ["voucher 599", "voucher 599"]  # the same call, on its key


async def test_a_deploy_that_ranks_another_equivalent_first_does_not_pay_with_it() -> None:
    paid: list[str] = []
    store, run_id = await interrupted(pay_desk(paid, "latency"))
    assert paid == ["card 599"]
    summary = await Runtime(pay_desk(paid, "cost"), store, effects=FixedEffects()).resume(run_id)
    assert summary.status is RunStatus.FINISHED, summary.handoff
    assert paid == ["card 599", "card 599"]  # the card again, on its key; never the voucher


async def test_a_write_entered_again_that_fails_cleanly_is_unknown_and_no_tool_follows() -> None:
    """The card refuses the key it saw: the first call may have acted; no voucher is paid."""
    paid: list[str] = []
    agent = pay_desk(paid, "latency", refuse_again=True)
    store, run_id = await interrupted(agent)
    summary = await Runtime(agent, store, effects=FixedEffects()).resume(run_id)
    assert paid == ["card 599"]
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.error_code == "OUTCOME_UNKNOWN" and summary.outcome == "unknown"
    assert summary.steps[0].status is StepStatus.UNKNOWN
    assert summary.handoff is not None and "key already used" in summary.handoff.reason


def assert_handed_off_unknown(summary: RunSummary, why: str) -> None:
    assert summary.status is RunStatus.HANDED_OFF and summary.outcome == "unknown", summary
    assert summary.error_code == "OUTCOME_UNKNOWN"
    assert summary.steps[0].status is StepStatus.UNKNOWN
    assert summary.handoff is not None and "may have acted" in summary.handoff.reason
    assert why in summary.handoff.reason


async def test_a_rule_a_deploy_added_does_not_end_an_interrupted_write_as_refused() -> None:
    """The refund may have been paid: a rule that now refuses it is no clean refusal."""
    paid: list[str] = []
    store, run_id = await killed_in_the_refund(paid)
    cap = {"before_tool": "refund", "require": 'args.amount != "599"', "refusal": "done_reply"}
    ruled = redeployed(paying_desk(paid), business_rules=[{"name": "cap", **cap}])
    summary = await Runtime(ruled, store, effects=FixedEffects()).resume(run_id)
    assert paid == ["refund 599"]
    assert_handed_off_unknown(summary, "BUSINESS_RULE_VIOLATED")


@pytest.mark.parametrize("on_failure", ["handoff", "continue"])
async def test_arguments_that_no_longer_validate_leave_an_interrupted_write_unknown(
    on_failure: str,
) -> None:
    paid: list[str] = []

    def desk(capped: bool) -> Agent:
        if capped:  # a deploy capped the amount

            @tool(policy=IDEMPOTENT_WRITE)
            def refund(amount: Annotated[str, Field(max_length=2)]) -> Paid:
                """Refunds ``amount``, two digits at most."""
                paid.append(f"refund {amount}")
                return Paid(amount=amount)

        else:

            @tool(policy=IDEMPOTENT_WRITE)
            def refund(amount: str) -> Paid:
                """Refunds ``amount``."""
                paid.append(f"refund {amount}")
                return Paid(amount=amount)

        amount = {"amount": "$entities.amount"}
        step = {"id": "w", "tool": "refund", "args": amount, "on_failure": on_failure}
        entities = {"amount": {"kind": "pattern", "patterns": [r"(\d+)"]}}
        return build_agent([refund], [step], entities=entities, intent_tools=["refund"])

    store = MemoryStore()
    with pytest.raises(Crash):
        await Runtime(desk(capped=False), store, effects=CrashAfterWrite()).start("go 599")
    run_id = store.list_runs(1)[0].run_id
    capped = desk(capped=True)
    summary = await Runtime(capped, store, effects=FixedEffects()).resume(run_id)
    assert paid == ["refund 599"]
    assert_handed_off_unknown(summary, "INVALID_ARGUMENT")


async def test_a_deploy_that_parts_the_equivalents_hands_off_a_write_died_in_the_other() -> None:
    """The process died in the voucher, the card's equivalent then; a deploy made the two
    tools apart: the card is no longer that call, and nothing is paid again."""
    paid: list[str] = []
    store, run_id = await interrupted(pay_desk(paid, "cost"))
    apart = pay_desk(paid, "cost", grouped=False)
    summary = await Runtime(apart, store, effects=FixedEffects()).resume(run_id)
    assert paid == ["voucher 599"]
    assert_handed_off_unknown(summary, "voucher")
