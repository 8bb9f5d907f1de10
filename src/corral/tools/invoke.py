"""Calling a tool: validate, attempt with timeout and backoff, and always end in an envelope.

Nothing raised inside a tool escapes this module: every outcome is a ``ToolResult`` with a
stable error code and a ``retryable`` flag that comes from the kind of failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from corral.contracts import ToolResult, ToolStatus
from corral.errors import (
    CorralError,
    ErrorCode,
    InvalidArgumentError,
    MissingArgumentError,
    ToolOutputInvalidError,
)
from corral.runtime.effects import Effects
from corral.tools.context import ToolContext
from corral.tools.spec import ToolSpec


@dataclass(frozen=True)
class Attempt:
    """One try of one tool call, as recorded in the event log."""

    number: int
    status: ToolStatus
    duration_ms: float
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False
    data: dict[str, Any] | None = None
    backoff_s: float | None = None
    """Seconds waited before the next attempt; ``None`` when there is none."""


AttemptListener = Callable[[Attempt], None]


def validate_args(spec: ToolSpec, raw: dict[str, Any]) -> BaseModel:
    """Validate bound arguments against the tool's input model, before any call.

    A missing required field is ``MISSING_ARGUMENT``: corral never invents a value.
    """
    try:
        return spec.input_model.model_validate(raw)
    except ValidationError as exc:
        missing = [".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "missing"]
        if missing:
            raise MissingArgumentError(
                f"tool {spec.name!r} is missing {', '.join(missing)}",
                hint="ask the user for it, or bind it from an earlier step; it is never guessed",
            ) from None
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidArgumentError(f"tool {spec.name!r}: {problems}") from None


def _normalise_output(spec: ToolSpec, returned: Any) -> dict[str, Any] | None:
    """Keep only the declared fields of a result; ``None`` means no result."""
    if returned is None:
        if spec.may_return_none:
            return None
        raise ToolOutputInvalidError(f"tool {spec.name!r} returned None")
    try:
        model = (
            returned
            if isinstance(returned, spec.output_model)
            else spec.output_model.model_validate(returned)
        )
    except ValidationError as exc:
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned data that does not match "
            f"{spec.output_model.__name__}: {exc.errors()[0]['msg']}"
        ) from None
    return model.model_dump(mode="json")


def _classify(exc: BaseException) -> tuple[str, str, bool]:
    """Map an exception to (code, message, retryable)."""
    if isinstance(exc, CorralError):
        return exc.code.value, exc.message, exc.retryable
    if isinstance(exc, TimeoutError):
        return ErrorCode.TOOL_TIMEOUT.value, "the tool did not answer in time", True
    if isinstance(exc, ConnectionError | OSError):
        return ErrorCode.TOOL_TRANSIENT.value, f"{type(exc).__name__}: {exc}", True
    return ErrorCode.TOOL_FAILED.value, f"{type(exc).__name__}: {exc}", False


async def invoke_tool(
    spec: ToolSpec,
    args: BaseModel,
    context: ToolContext,
    effects: Effects,
    on_attempt: AttemptListener | None = None,
) -> ToolResult:
    """Call a tool with already validated arguments, retrying transient failures.

    Retries follow ``spec.policy.retry``; waits go through ``effects.sleep`` so tests and
    replays do not really wait. Every attempt is reported to ``on_attempt``.
    """
    policy = spec.policy
    total_ms = 0.0
    attempt_no = 0
    while True:
        attempt_no += 1
        started = effects.monotonic()
        code: str | None = None
        message: str | None = None
        retryable = False
        data: dict[str, Any] | None = None
        try:
            returned = await effects.call_tool(spec, args, context, policy.timeout_s)
            data = _normalise_output(spec, returned)
            status = ToolStatus.SUCCESS if data is not None else ToolStatus.NO_RESULT
        except Exception as exc:  # every failure becomes an envelope
            code, message, retryable = _classify(exc)
            status = ToolStatus.ERROR
        duration_ms = (effects.monotonic() - started) * 1000.0
        total_ms += duration_ms
        will_retry = (
            status is ToolStatus.ERROR and retryable and attempt_no <= policy.retry.max_retries
        )
        backoff = policy.retry.delay(attempt_no) if will_retry else None
        if on_attempt is not None:
            on_attempt(
                Attempt(attempt_no, status, duration_ms, code, message, retryable, data, backoff)
            )
        if backoff is None:
            break
        await effects.sleep(backoff)
    summary = spec.summarize(data) if data is not None else (message or "no result")
    return ToolResult(
        tool=spec.name,
        status=status,
        data=data,
        summary=summary[:200],
        error_code=code,
        error_message=message,
        retryable=retryable,
        attempts=attempt_no,
        duration_ms=round(total_ms, 3),
    )
