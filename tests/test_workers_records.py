"""What a DBOS step records of an effect is read back as the live outcome was.

A drive derives its events from these records on its first execution and on any
re-execution alike, so a failure read back must be classified exactly as the live one
(code, retryability, proof of no effect, a thread still running, the wait asked for),
and a recorded return must normalise to the very data that was recorded.
"""

from __future__ import annotations

import socket

import pytest
from pydantic import BaseModel

from corral import tool
from corral.errors import (
    BudgetExceededError,
    CorralError,
    ModelTimeoutError,
    ModelUnavailableError,
    ToolFailedError,
    ToolTimeoutError,
    TransientToolError,
)
from corral.runtime.replay import RecordedToolError, recorded_return
from corral.tools.invoke import _normalise_output, failure_record
from corral.tools.spec import ToolSpec
from corral.workers.effects import model_error, model_failure_record

FAILURES: list[BaseException] = [
    TransientToolError("busy", retry_after_s=2.5),
    TransientToolError("refused", applied=False),
    ToolTimeoutError("late", in_flight=True),
    ToolFailedError("no such order"),
    TimeoutError(),
    ConnectionRefusedError("refused"),
    socket.gaierror("no host"),
    ValueError("bad"),
]


@pytest.mark.parametrize("live", FAILURES, ids=lambda e: type(e).__name__)
def test_a_recorded_tool_failure_is_classified_as_the_live_one(live: BaseException) -> None:
    record = failure_record(live)
    assert failure_record(RecordedToolError(**record)) == record


class Out(BaseModel):
    total: int


@tool
def counts() -> int:
    """A value the output model wraps."""
    return 3


@tool
def totals() -> Out:
    """A model of its own."""
    return Out(total=3)


@pytest.mark.parametrize("spec", [counts, totals], ids=["wrapped", "model"])
def test_a_recorded_return_normalises_to_the_recorded_data(spec: ToolSpec) -> None:
    data = _normalise_output(spec, spec.fn())
    assert data is not None
    assert _normalise_output(spec, recorded_return(spec, data)) == data


MODEL_FAILURES: list[CorralError] = [
    ModelUnavailableError("503", retryable=True, retry_after=1.5, status=503, hint="later"),
    ModelUnavailableError("400", retryable=False, status=400),
    ModelTimeoutError("slow"),
    BudgetExceededError("spent"),
]


@pytest.mark.parametrize("live", MODEL_FAILURES, ids=lambda e: f"{e.code.value}-{e.message}")
def test_a_recorded_model_failure_is_raised_again_as_the_live_one(live: CorralError) -> None:
    again = model_error(model_failure_record(live))
    assert type(again) is type(live) and str(again) == str(live)
    assert model_failure_record(again) == model_failure_record(live)
