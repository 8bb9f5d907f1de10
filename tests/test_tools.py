"""Tools layer: schemas from signatures, validation before the call, envelopes always."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from corral import ErrorCode, ToolContext, ToolPolicy, ToolStatus, tool
from corral.errors import (
    ConfigInvalidError,
    InvalidArgumentError,
    MissingArgumentError,
    ToolFailedError,
    TransientToolError,
)
from corral.testing import FixedEffects
from corral.tools.invoke import Attempt, invoke_tool, validate_args
from corral.tools.policy import LOCAL_COMPUTE, NO_RETRY, RetryPolicy


class Out(BaseModel):
    value: int


def ctx() -> ToolContext:
    return ToolContext(run_id="r", step_id="s1", idempotency_key="k")


def test_signature_becomes_input_schema_and_docstring_the_description() -> None:
    @tool
    def lookup(order_id: str, quantity: int = 1) -> Out:
        """Find an order.

        Details that are not part of the description.
        """
        return Out(value=quantity)

    schema = lookup.input_model.model_json_schema()
    assert schema["required"] == ["order_id"]
    assert schema["properties"]["quantity"]["default"] == 1
    assert lookup.description == "Find an order."
    assert lookup.output_model is Out
    assert lookup.policy == ToolPolicy()


def test_context_parameter_is_not_part_of_the_schema() -> None:
    @tool
    def uses_context(x: int, context: ToolContext) -> Out:
        return Out(value=x)

    assert list(uses_context.input_model.model_fields) == ["x"]
    assert uses_context.context_param == "context"


def test_tool_whose_return_cannot_be_described_is_a_config_error() -> None:
    with pytest.raises(ConfigInvalidError, match="no return annotation"):

        @tool
        def unannotated(x: int):  # type: ignore[no-untyped-def]
            return {}

    with pytest.raises(ConfigInvalidError, match="cannot describe its return annotation"):

        @tool
        def opaque(x: int) -> threading.Lock:
            return threading.Lock()


def test_a_tool_annotated_to_return_none_is_a_config_error() -> None:
    """Found by a walkthrough: ``-> None``, the usual Python write, loaded; every call
    then acted and was reported OUTCOME_UNKNOWN (a read: TOOL_OUTPUT_INVALID)."""
    from corral import ToolPolicy

    def cancel(order_id: str) -> None:
        """Cancel an order."""

    with pytest.raises(ConfigInvalidError, match="annotated '-> None'") as info:
        tool(policy=ToolPolicy(kind="write"))(cancel)
    assert "'-> bool', returning True" in (info.value.hint or "")

    def maybe(order_id: str) -> Out | None:  # None as "not found" still loads
        return None

    assert tool(maybe).may_return_none


def test_unannotated_parameter_is_a_config_error() -> None:
    def bad(x) -> Out:  # type: ignore[no-untyped-def]
        return Out(value=1)

    with pytest.raises(ConfigInvalidError, match="no type annotation"):
        tool(bad)


def test_missing_argument_is_never_guessed() -> None:
    @tool
    def lookup(order_id: str) -> Out:
        raise AssertionError("must not be called")

    with pytest.raises(MissingArgumentError) as info:
        validate_args(lookup, {})
    assert info.value.code is ErrorCode.MISSING_ARGUMENT


def test_wrong_type_and_unknown_argument_are_invalid() -> None:
    @tool
    def lookup(order_id: str, quantity: int) -> Out:
        return Out(value=1)

    with pytest.raises(InvalidArgumentError):
        validate_args(lookup, {"order_id": "A1", "quantity": "many"})
    with pytest.raises(InvalidArgumentError):
        validate_args(lookup, {"order_id": "A1", "quantity": 1, "admin": True})


async def test_timeout_is_retried_with_backoff_and_ends_in_an_envelope() -> None:
    calls = 0
    never = asyncio.Event()  # never set: every attempt times out, however slow the machine

    @tool(policy=ToolPolicy(timeout_s=0.05, retry=RetryPolicy(max_retries=2, backoff_s=(1, 2))))
    async def slow() -> Out:
        nonlocal calls
        calls += 1
        await never.wait()
        return Out(value=1)

    effects = FixedEffects()
    attempts: list[Attempt] = []
    result = await invoke_tool(slow, validate_args(slow, {}), ctx(), effects, attempts.append)
    assert calls == 3
    assert result.status is ToolStatus.ERROR
    assert result.error_code == ErrorCode.TOOL_TIMEOUT.value
    assert result.retryable is True
    assert result.attempts == 3
    assert effects.sleeps == [1, 2]
    assert [a.backoff_s for a in attempts] == [1, 2, None]


async def test_transient_failure_then_success() -> None:
    calls = 0

    @tool
    def flaky() -> Out:
        nonlocal calls
        calls += 1
        if calls < 2:
            raise TransientToolError("503 from upstream")
        return Out(value=7)

    result = await invoke_tool(flaky, validate_args(flaky, {}), ctx(), FixedEffects())
    assert result.status is ToolStatus.SUCCESS
    assert result.data == {"value": 7}
    assert result.attempts == 2


@pytest.mark.parametrize(
    ("exc", "code", "retryable", "calls_expected"),
    [
        (ToolFailedError("order is locked"), "TOOL_FAILED", False, 1),
        (ValueError("boom"), "TOOL_FAILED", False, 1),
        (ConnectionError("reset"), "TOOL_TRANSIENT", True, 3),
    ],
)
async def test_every_exception_becomes_an_envelope(
    exc: Exception, code: str, retryable: bool, calls_expected: int
) -> None:
    calls = 0

    @tool
    def broken() -> Out:
        nonlocal calls
        calls += 1
        raise exc

    result = await invoke_tool(broken, validate_args(broken, {}), ctx(), FixedEffects())
    assert (result.status, result.error_code, result.retryable) == (
        ToolStatus.ERROR,
        code,
        retryable,
    )
    assert calls == calls_expected


async def test_local_compute_is_not_retried() -> None:
    @tool(policy=LOCAL_COMPUTE)
    def compute() -> Out:
        raise ConnectionError("never retried")

    result = await invoke_tool(compute, validate_args(compute, {}), ctx(), FixedEffects())
    assert result.attempts == 1
    assert LOCAL_COMPUTE.timeout_s == 30 and LOCAL_COMPUTE.retry == NO_RETRY


async def test_output_is_validated_and_only_declared_fields_are_kept() -> None:
    @tool
    def leaky() -> Out:
        return {"value": 3, "password": "hunter2"}  # type: ignore[return-value]

    @tool
    def wrong() -> Out:
        return {"value": "three"}  # type: ignore[return-value]

    ok = await invoke_tool(leaky, validate_args(leaky, {}), ctx(), FixedEffects())
    assert ok.data == {"value": 3}
    bad = await invoke_tool(wrong, validate_args(wrong, {}), ctx(), FixedEffects())
    assert bad.error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    assert bad.attempts == 1


async def test_none_means_no_result_only_when_declared() -> None:
    @tool
    def maybe() -> Out | None:
        return None

    @tool
    def never() -> Out:
        return None  # type: ignore[return-value]

    result = await invoke_tool(maybe, validate_args(maybe, {}), ctx(), FixedEffects())
    assert result.status is ToolStatus.NO_RESULT
    result = await invoke_tool(never, validate_args(never, {}), ctx(), FixedEffects())
    assert result.error_code == ErrorCode.TOOL_OUTPUT_INVALID.value


async def test_sync_tools_run_off_the_event_loop() -> None:
    """A sync tool runs in another thread while the loop stays free to run coroutines.

    The tool blocks until a coroutine on the loop releases it, and that coroutine only
    acts once the tool has started. Run on the loop thread, the tool would block the very
    coroutine that must release it: it gives up after a generous guard and reports it.
    """
    loop_thread = threading.get_ident()
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    released = threading.Event()
    tool_threads: list[int] = []

    @tool
    def blocking() -> Out:
        tool_threads.append(threading.get_ident())
        loop.call_soon_threadsafe(started.set)
        return Out(value=1 if released.wait(timeout=10) else 0)

    async def release_once_started() -> None:
        await started.wait()
        released.set()

    effects = FixedEffects()
    result, _ = await asyncio.gather(
        invoke_tool(blocking, validate_args(blocking, {}), ctx(), effects),
        release_once_started(),
    )
    assert result.status is ToolStatus.SUCCESS and result.data == {"value": 1}
    assert len(tool_threads) == 1 and tool_threads[0] != loop_thread


def test_summary_template_uses_output_fields() -> None:
    @tool(summary="value is {value}")
    def f() -> Out:
        return Out(value=1)

    assert f.summarize({"value": 5}) == "value is 5"
    assert f.summarize({}) == "value is ?"
