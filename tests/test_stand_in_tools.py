"""A tool that stands in for the planned one passes the gates that tool would have met.

The gates run once per step, for the planned tool: its business rules, its confirmation.
An equivalent tool the ranking puts first, or one tried after the planned one failed, is
another tool: a rule declared before it, or an approval it asks for, must hold for it too,
and a read step never turns into a write. Review finding ("fallback tools skip the gates").
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from corral import EventType, MemoryStore, Proposal, Refuse, Runtime, StepStatus, tool
from corral.testing import FixedEffects
from corral.tools.policy import ToolPolicy
from tests.helpers import build_agent


class Paid(BaseModel):
    amount: float


def _gateways(calls: list[str], **second: Any) -> list[Any]:
    """``gateway_a`` is down; ``gateway_b`` is its equivalent, slower (so tried second)."""

    @tool(name="gateway_a", policy=ToolPolicy(equivalent_group="refund", latency_ms=10))
    def gateway_a(amount: float) -> Paid:
        calls.append("gateway_a")
        raise ValueError("gateway a is down")

    @tool(
        name="gateway_b",
        policy=ToolPolicy(equivalent_group="refund", latency_ms=20, **second),
    )
    def gateway_b(amount: float) -> Paid:
        calls.append("gateway_b")
        return Paid(amount=amount)

    return [gateway_a, gateway_b]


class NotB:
    """A user's gate: ``gateway_b`` is closed today."""

    def check(self, proposal: Proposal, run: Any) -> Any:
        if proposal.tool.name == "gateway_b":
            return Refuse("B_CLOSED", "gateway b is closed today")
        return proposal


def events_of(runtime: Runtime, run_id: str, kind: EventType) -> list[dict[str, Any]]:
    return [e.data for e in runtime.store.load_events(run_id) if e.type is kind]  # type: ignore[attr-defined]


async def test_a_stand_in_that_needs_approval_the_step_did_not_ask_for_is_not_called() -> None:
    calls: list[str] = []
    tools = _gateways(calls, requires_confirmation=True)
    agent = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 50}}])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == ["gateway_a"]  # never gateway_b: nobody approved it
    assert summary.steps[0].status is StepStatus.FAILED
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)
    assert [s["tool"] for s in selected] == ["gateway_a"]
    assert selected[0]["excluded"] == {
        "gateway_b": "asks for the person's approval, which this step did not ask for"
    }


async def test_a_stand_in_is_called_when_the_step_itself_was_approved() -> None:
    calls: list[str] = []
    tools = _gateways(calls, requires_confirmation=True)
    steps = [
        {"id": "s1", "tool": "gateway_a", "args": {"amount": 50}, "requires_confirmation": True}
    ]
    runtime = Runtime(build_agent(tools, steps), MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("go")
    assert paused.status.value == "awaiting_confirm"
    summary = await runtime.resume(paused.run_id, approve=True)
    assert calls == ["gateway_a", "gateway_b"]
    assert summary.steps[0].status is StepStatus.SUCCEEDED


async def test_a_business_rule_declared_before_a_stand_in_is_checked_before_it_runs() -> None:
    calls: list[str] = []
    rule = {
        "name": "b_limit",
        "before_tool": "gateway_b",
        "require": "entities.amount <= 100",
        "refusal": "too_much",
    }
    agent = build_agent(
        _gateways(calls),
        [{"id": "s1", "tool": "gateway_a", "args": {"amount": "$entities.amount"}}],
        entities={"amount": {"kind": "amount"}},
        business_rules=[rule],
        templates={"too_much": {"zh": "金额过大", "en": "too much"}},
    )
    for amount, expected_calls, status in [
        (500, ["gateway_a"], StepStatus.FAILED),
        (50, ["gateway_a", "gateway_b"], StepStatus.SUCCEEDED),
    ]:
        calls.clear()
        runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
        summary = await runtime.run_plan("p", entities={"amount": amount})
        assert calls == expected_calls, amount
        assert summary.steps[0].status is status
        verdicts = events_of(runtime, summary.run_id, EventType.VERIFIED)
        assert [(v["verdict"]["check"], v["verdict"]["passed"]) for v in verdicts] == [
            ("business_rule", amount <= 100)
        ]


async def test_a_read_step_never_falls_back_to_a_write() -> None:
    calls: list[str] = []
    tools = _gateways(calls, kind="write", idempotent=True)
    agent = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == ["gateway_a"]
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)
    assert selected[0]["excluded"] == {
        "gateway_b": "a write cannot stand in for a step that writes nothing"
    }


async def test_a_step_whose_only_tool_left_is_kept_out_by_its_rule_is_skipped_by_it() -> None:
    """As a rule on the planned tool would: skipped, replying with the rule's refusal
    (review: it failed and handed the run off)."""
    from corral import parse_config
    from corral.agent import Agent

    calls: list[str] = []
    tools = _gateways(calls)
    rule = {"name": "b_limit", "before_tool": "gateway_b", "require": "1 == 2", "refusal": "no"}
    base = build_agent(
        tools,
        [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}],
        business_rules=[rule],
        templates={"no": {"zh": "不行", "en": "no"}},
    )
    constrained = {**base.config.model_dump(), "tool_constraints": {"gateway_a": "1 == 2"}}
    agent = Agent.build(parse_config(constrained), tools)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == []  # gateway_a is constrained out, gateway_b kept out by its rule
    assert summary.steps[0].status is StepStatus.SKIPPED
    assert summary.steps[0].error_code == "BUSINESS_RULE_VIOLATED"
    assert summary.handoff is None
    assert summary.reply == "no"  # the rule's refusal, in the message's language


async def test_the_agents_own_gates_keep_a_stand_in_out_and_the_log_names_what_ran() -> None:
    """A gate of the user's that refuses ``gateway_b`` refuses it as a stand-in too
    (review: only the business rules were asked), and the next tool's selection names the
    tool that actually ran before it."""
    from corral import DEFAULT_GATES

    calls: list[str] = []

    @tool(name="gateway_c", policy=ToolPolicy(equivalent_group="refund", latency_ms=30))
    def gateway_c(amount: float) -> Paid:
        calls.append("gateway_c")
        return Paid(amount=amount)

    tools = [*_gateways(calls), gateway_c]
    base = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}])
    from corral.agent import Agent

    agent = Agent.build(base.config, tools, gates=(*DEFAULT_GATES, NotB()))
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == ["gateway_a", "gateway_c"]
    assert summary.steps[0].status is StepStatus.SUCCEEDED
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)
    assert [(s["tool"], s["reason"]) for s in selected] == [
        ("gateway_c", "fallback after gateway_a")
    ]


async def test_a_gate_placed_before_validation_is_asked_for_a_stand_in_too() -> None:
    """A user's gate anywhere in the order is asked, not only those after the sealing
    gate (review: one placed first was skipped for stand-ins). One that passes on an equal
    proposal (a normalizer) lets the stand-in run; one that refuses keeps it out."""
    from corral import DEFAULT_GATES
    from corral.agent import Agent

    asked: list[str] = []

    class Normalize:
        def check(self, proposal: Proposal, run: Any) -> Any:
            asked.append(proposal.tool.name)
            return Proposal(proposal.step, proposal.tool, dict(proposal.args))

    calls: list[str] = []
    tools = _gateways(calls)
    base = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}])

    agent = Agent.build(base.config, tools, gates=(Normalize(), *DEFAULT_GATES))
    summary = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("go")
    assert calls == ["gateway_a", "gateway_b"]
    assert asked == ["gateway_a", "gateway_b"]
    assert summary.steps[0].status is StepStatus.SUCCEEDED

    calls.clear()
    agent = Agent.build(base.config, tools, gates=(NotB(), *DEFAULT_GATES))
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert calls == ["gateway_a"]  # gateway_b never ran: the first gate refuses it
    assert summary.steps[0].status is StepStatus.FAILED
    selected = events_of(runtime, summary.run_id, EventType.TOOL_SELECTED)
    assert selected == []  # no stand-in was selected


async def test_a_gate_that_changes_arguments_before_validation_does_it_once_for_a_stand_in() -> (
    None
):
    """The stand-in is called with the arguments the planned tool got: a gate before
    ``ValidateArguments`` that converts them in place is asked for its verdict on a copy,
    not allowed to convert them a second time (review: 5 became 500, then 50 000)."""
    from corral import DEFAULT_GATES
    from corral.agent import Agent

    class ToCents:
        def check(self, proposal: Proposal, run: Any) -> Any:
            proposal.args["amount"] *= 100
            return proposal

    sent: list[float] = []

    @tool(name="gateway_a", policy=ToolPolicy(equivalent_group="refund", latency_ms=10))
    def gateway_a(amount: float) -> Paid:
        sent.append(amount)
        raise ValueError("gateway a is down")

    @tool(name="gateway_b", policy=ToolPolicy(equivalent_group="refund", latency_ms=20))
    def gateway_b(amount: float) -> Paid:
        sent.append(amount)
        return Paid(amount=amount)

    tools = [gateway_a, gateway_b]
    base = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}])
    gates = (*DEFAULT_GATES[:3], ToCents(), *DEFAULT_GATES[3:])
    agent = Agent.build(base.config, tools, gates=gates)
    summary = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("go")
    assert sent == [500.0, 500.0]
    assert summary.steps[0].status is StepStatus.SUCCEEDED


def test_arguments_that_cannot_be_copied_keep_a_stand_in_out_without_a_crash() -> None:
    """Each gate gets a copy of the arguments; one that cannot be made is the gate's
    failure (``EXTENSION_FAILED``), not an exception out of the run (review)."""
    import threading

    from corral import DEFAULT_GATES
    from corral.decision.builtin_gates import stand_in_answer

    class Anything:
        def check(self, proposal: Proposal, run: Any) -> Any:
            return proposal

    tools = _gateways([])
    step: Any = object()
    proposal = Proposal(step, tools[1], {"amount": 5, "lock": threading.Lock()})
    answer = stand_in_answer((*DEFAULT_GATES[:3], Anything()), proposal, None)  # type: ignore[arg-type]
    assert isinstance(answer, Refuse) and answer.code == "EXTENSION_FAILED"
    assert "Anything raised" in answer.reason


async def test_a_gate_before_validation_that_sends_a_stand_in_elsewhere_keeps_it_out() -> None:
    from corral import DEFAULT_GATES
    from corral.agent import Agent

    calls: list[str] = []
    tools = _gateways(calls)

    class BToA:
        def check(self, proposal: Proposal, run: Any) -> Any:
            if proposal.tool.name == "gateway_b":
                return Proposal(proposal.step, tools[0], proposal.args)
            return proposal

    base = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}])
    agent = Agent.build(base.config, tools, gates=(BToA(), *DEFAULT_GATES))
    summary = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("go")
    assert calls == ["gateway_a"]
    assert summary.steps[0].status is StepStatus.FAILED


async def test_a_step_whose_every_stand_in_a_gate_refused_hands_off_as_a_policys() -> None:
    """Review of f74fe7a: the planned tool kept out (a constraint) and its one stand-in
    refused by the agent's own gate: no tool was entered, so the handoff is the
    policy's (POLICY_HANDOFF), not TOOL_FAILED."""
    from corral import DEFAULT_GATES
    from corral.agent import Agent

    calls: list[str] = []
    tools = _gateways(calls)
    base = build_agent(tools, [{"id": "s1", "tool": "gateway_a", "args": {"amount": 5}}])
    config = base.config.model_copy(update={"tool_constraints": {"gateway_a": "false"}})
    agent = Agent.build(config, tools, gates=(NotB(), *DEFAULT_GATES))
    summary = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("go")
    assert calls == []
    assert summary.steps[0].error_code == "B_CLOSED"
    assert (summary.status.value, summary.error_code) == ("handed_off", "POLICY_HANDOFF")
