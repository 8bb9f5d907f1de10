"""Hostile review of the performance branches: checks a faster path must not skip."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, model_validator

from corral import (
    DEFAULT_GATES,
    Agent,
    GateRun,
    MemoryStore,
    Proposal,
    RunStatus,
    Runtime,
    ToolContext,
    ToolStatus,
    tool,
)
from corral.contracts import ToolResult
from corral.decision import Answer
from corral.decision.builtin_gates import BindArguments, BudgetGate
from corral.errors import ErrorCode
from corral.models import ScriptedModel
from corral.store.facts import event_facts
from corral.testing import FixedEffects
from corral.tools.invoke import invoke_tool, validate_args
from corral.tools.spec import ToolSpec
from tests import test_gate_plan as gate_plan
from tests.helpers import build_agent


class Span(BaseModel):
    """A model whose invariant is checked by a model validator (it runs on instances too)."""

    low: int
    high: int

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.low > self.high:
            raise ValueError("low above high")
        return self


async def _call(spec: ToolSpec) -> ToolResult:
    context = ToolContext(run_id="r", step_id="s1", idempotency_key="k")
    return await invoke_tool(spec, validate_args(spec, {}), context, FixedEffects())


async def test_an_exact_instance_still_meets_its_models_own_validator() -> None:
    """Validation ran a model validator on an instance: a changed instance was refused."""

    @tool
    def widened() -> Span:
        span = Span(low=1, high=2)
        span.low = 9  # no validate_assignment: only validating the result catches it
        return span

    result = await _call(widened)
    assert result.status is ToolStatus.ERROR
    assert result.error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    assert "low above high" in (result.error_message or "")


class SlowTools(FixedEffects):
    """A clock on which every tool call takes five seconds."""

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        self._now = (self._now or self.start) + timedelta(seconds=5)
        return await super().call_tool(spec, args, context, timeout_s)


class Value(BaseModel):
    value: int


@tool
def slow(n: int) -> Value:
    return Value(value=n)


async def _stage_ms(step: dict[str, Any], model: ScriptedModel | None) -> dict[str, float]:
    config = build_agent([slow], [step], intent_tools=["slow"]).config
    runtime = Runtime(Agent.build(config, [slow], model=model), MemoryStore(), effects=SlowTools())
    summary = await runtime.start("go")
    return event_facts(runtime.store.load_events(summary.run_id)).stage_ms


async def test_a_judges_wait_does_not_take_the_tools_time() -> None:
    """The tool's five seconds are the execute stage's, as when its attempt had an event."""
    model = ScriptedModel(['{"passed": true, "reason": "fine"}'])
    step = {"id": "s1", "tool": "slow", "args": {"n": 1}, "judge": "small"}
    stage_ms = await _stage_ms(step, model)
    assert stage_ms["execute"] >= 5000
    assert stage_ms["judge"] < 5000


async def test_a_failed_verdict_does_not_take_the_tools_time() -> None:
    """A step_finished in the verify stage: the tool's time before it is still execute's."""
    step = {"id": "s1", "tool": "slow", "args": {"n": 1}, "success": "result.value == 2"}
    stage_ms = await _stage_ms(step, None)
    assert stage_ms["execute"] >= 5000
    assert stage_ms.get("verify", 0.0) < 5000


@dataclass(frozen=True)
class QuietSeal:
    """A user's sealing gate that says it never changes a step (``applies`` False)."""

    seals: ClassVar[bool] = True

    def applies(self, step: Any, policy: Any, rules: Any) -> bool:
        return False

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return proposal


@dataclass(frozen=True)
class Bump:
    """A gate after the seal that hands on other arguments: it must fail the step."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return replace(proposal, args={**proposal.args, "amount": 999})


async def test_a_sealing_gate_that_does_not_apply_still_seals_the_step() -> None:
    """Passing a step on is what seals it: a gate after the seal may not change it."""
    gate_plan.CALLS.clear()
    gates = (BudgetGate(), BindArguments(), QuietSeal(), Bump(), *DEFAULT_GATES[2:])
    runtime = Runtime(gate_plan.agent(gates=gates), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.steps[0].error_code == ErrorCode.EXTENSION_FAILED.value
    assert gate_plan.CALLS == []
