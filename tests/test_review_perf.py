"""Hostile review of the performance branches: checks a faster path must not skip."""

from __future__ import annotations

from pydantic import BaseModel, model_validator

from corral import ToolContext, ToolStatus, tool
from corral.contracts import ToolResult
from corral.errors import ErrorCode
from corral.testing import FixedEffects
from corral.tools.invoke import invoke_tool, validate_args
from corral.tools.spec import ToolSpec


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
