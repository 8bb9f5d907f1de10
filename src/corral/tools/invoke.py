"""Calling a tool: validate, attempt with timeout and backoff, and always end in an envelope.

Nothing raised inside a tool escapes this module: every outcome is a ``ToolResult`` with a
stable error code and a ``retryable`` flag that comes from the kind of failure.

A write is never retried blindly. It is retried only when the failure proves its effect
did not happen, or when the tool is idempotent by key and has no reconciler; any other
failure ends with the code ``OUTCOME_UNKNOWN``, which the tool's reconciler (if any)
settles. A write that may have acted is thus entered again only after its reconciler has
looked and found nothing: exactly once, counted where the tool is entered.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from corral.clipping import clip
from corral.contracts import ToolResult, ToolStatus
from corral.effects import Effects
from corral.errors import (
    CorralError,
    ErrorCode,
    InvalidArgumentError,
    MissingArgumentError,
    ToolFailedError,
    ToolOutputInvalidError,
    said,
)
from corral.inputs import lone_surrogate_at, unicode_safe
from corral.json_values import all_finite, dumps, finite_or_none
from corral.tools.context import ToolContext
from corral.tools.outputs import VALUE_FIELD
from corral.tools.spec import ToolSpec
from corral.validation import validation_messages, validation_problems


@dataclass(slots=True)
class Attempt:
    """One try of one tool call, as recorded in the event log.

    A value: nothing changes one once made. It is not ``frozen`` because one is made on
    every call, and a frozen dataclass sets each of its ten fields through a call.
    """

    number: int
    status: ToolStatus
    duration_ms: float
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False
    data: dict[str, Any] | None = None
    backoff_s: float | None = None
    """Seconds waited before the next attempt; ``None`` when there is none."""
    applied: bool | None = None
    """For a failed attempt: ``False`` when the failure proves the effect did not happen,
    ``None`` when it may have happened."""
    in_flight: bool = False
    """The tool may still be running (a sync tool's thread outlived its timeout)."""


AttemptListener = Callable[[Attempt], None]


def validate_args(spec: ToolSpec, raw: dict[str, Any]) -> BaseModel:
    """Validate bound arguments against the tool's input model, before any call.

    A missing required field is ``MISSING_ARGUMENT``: corral never invents a value.
    """
    try:
        validated: BaseModel = spec.input_model.__pydantic_validator__.validate_python(raw)
        return validated  # model_validate's own call, without its wrapper
    except ValidationError as exc:
        missing = [".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "missing"]
        if missing:
            raise MissingArgumentError(
                f"tool {spec.name!r} is missing {', '.join(missing)}",
                hint="ask the user for it, or bind it from an earlier step; it is never guessed",
            ) from None
        problems = validation_problems(exc, 5)
        raise InvalidArgumentError(f"tool {spec.name!r}: {problems}") from None


def failed_result(tool: str, code: str, message: str, attempts: int = 0) -> ToolResult:
    """The envelope of a call that failed with ``code`` (by default before any attempt)."""
    return ToolResult(
        tool=tool,
        status=ToolStatus.ERROR,
        error_code=code,
        error_message=message,
        summary=clip(message, 200),
        attempts=attempts,
    )


def _normalise_output(spec: ToolSpec, returned: Any) -> dict[str, Any] | None:
    """Keep only the declared fields of a result; ``None`` means no result."""
    if returned is None:
        if spec.may_return_none:
            return None
        raise ToolOutputInvalidError(f"tool {spec.name!r} returned None")
    model = _validated_output(spec, returned)
    # Dumped as the declared model, not as the instance's own class: an instance of a
    # subclass would otherwise add its extra fields (a password, say) to the result.
    try:
        dumped: dict[str, Any] = spec.output_adapter.serializer.to_python(model, mode="json")
    except ValueError as exc:  # nested past the serializer's depth (a few hundred levels)
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned a result that cannot be written as JSON: {exc}"
            if "depth" not in str(exc)
            else f"tool {spec.name!r} returned a result that nests too deep"
        ) from None
    if spec.may_key_by_other_than_text and _lost_a_key(
        spec.output_adapter.serializer.to_python(model), dumped
    ):
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned a mapping whose keys are one key as JSON text "
            "(1 and '1', say): a value would be lost",
            hint="key the mapping by text, each key once",
        )
    broken = lone_surrogate_at(dumped)
    if broken is not None:  # no store, log or HTTP answer could hold the run that kept it
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned text that is not valid Unicode (a lone surrogate) "
            f"at {broken}",
            hint="decode the service's bytes as UTF-8 (errors='replace') in the tool",
        )
    if spec.may_be_long:
        _check_length(spec, dumped)
    if spec.may_hold_float and not all_finite(dumped):
        return _finite(spec, dumped)
    return dumped


def _lost_a_key(python: Any, written: Any) -> bool:
    """Whether a mapping keyed by other than text lost a key as JSON (``1`` and ``"1"``).

    Only a mapping with a key that is not ``str`` can: text keys are written as they are,
    and a serializer that leaves one out in JSON (a redaction) is its own business. The
    dumps are walked side by side, by key where it is text (a serializer may reorder), by
    position in sequences of one length; a value whose shape a serializer changed (a
    mapping written as a string) is not judged.
    """
    if isinstance(python, dict) and isinstance(written, dict):
        if len(written) < len(python) and any(not isinstance(k, str) for k in python):
            return True
        return any(
            _lost_a_key(value, written[key])
            for key, value in python.items()
            if isinstance(key, str) and key in written
        )
    if isinstance(python, list | tuple) and isinstance(written, list):
        return len(python) == len(written) and any(
            _lost_a_key(a, b) for a, b in zip(python, written, strict=True)
        )
    return False


def _check_length(spec: ToolSpec, dumped: dict[str, Any]) -> None:
    """``TOOL_OUTPUT_INVALID`` for a result longer than the tool's policy allows."""
    limit = spec.policy.max_output_chars
    size = len(dumps(dumped))
    if size > limit:
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned {size:,} characters of JSON; the limit is {limit:,}",
            hint="return less (a page, a summary), or raise policy.max_output_chars",
        )


def _finite(spec: ToolSpec, dumped: dict[str, Any]) -> dict[str, Any]:
    """A result holding NaN or an infinity, with ``None`` for each where its type allows it.

    JSON holds neither: stored, each would read back as ``null``, so the run that used it
    and a replay of the run would differ. Where ``None`` fits (``float | None``: how a
    data frame says "missing") the live run gets it too; anywhere else the result is
    refused (``TOOL_OUTPUT_INVALID``).
    """
    nulled = finite_or_none(dumped)
    try:
        spec.output_model.__pydantic_validator__.validate_python(nulled)
    except ValidationError:
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned a number that is not finite (NaN or an infinity) "
            "where None is not allowed: JSON cannot hold it"
        ) from None
    return nulled  # type: ignore[no-any-return]


def _validated_output(spec: ToolSpec, returned: Any) -> BaseModel:
    """``returned`` validated against the tool's output model (``ToolOutputInvalidError``).

    An instance of that model (or of a subclass) is validated by its values, not handed
    back as it is (pydantic's ``revalidate_instances="never"``): one whose field was set to
    a value of another type after it was made (``order.amount = "lots"``), or one made by
    ``model_construct`` without its required fields, would be a result, its facts read by
    rules and replies, that no validation saw.
    """
    validator = spec.output_model.__pydantic_validator__  # model_validate's, without its wrapper
    by_name = False  # a mapping the tool built is read by the fields' aliases, as ever
    if spec.wrapped:
        returned = {VALUE_FIELD: returned}
    elif isinstance(returned, spec.output_model):
        returned, by_name = _own_values(spec.output_model, returned), True
    try:
        model: BaseModel = validator.validate_python(returned, by_name=by_name)
    except ValidationError as exc:
        raise ToolOutputInvalidError(
            f"tool {spec.name!r} returned data that does not match "
            f"{getattr(spec.returns, '__name__', spec.returns)}: {validation_messages(exc, 1)}"
        ) from None
    return model


def _own_values(declared: type[BaseModel], instance: BaseModel) -> dict[str, Any]:
    """The values of ``instance`` for the fields ``declared`` has, by field name.

    A subclass's own fields are left out (the result is the declared model's), and an
    instance that allows extra fields keeps those it holds.
    """
    values = instance.__dict__
    if type(instance) is not declared:
        values = {name: values[name] for name in declared.model_fields if name in values}
    extra = instance.__pydantic_extra__
    return {**values, **extra} if extra else values


NOT_CONNECTED: tuple[type[BaseException], ...] = (ConnectionRefusedError, socket.gaierror)
"""Failures that prove a request was never sent: the connection was refused, or the host
name did not resolve. Other connection errors (reset, broken pipe, timeout) may come after
the request was sent. A tool on another HTTP client maps its own "could not connect"
error (e.g. ``httpx.ConnectError``) to ``TransientToolError(..., applied=False)``."""


def effect_applied(exc: BaseException) -> bool | None:
    """``False`` when a failure proves that the tool's effect did not happen, else ``None``.

    Proof is: an exception that says so (``applied=False``, as ``TransientToolError``
    takes), a connection that was never established (``NOT_CONNECTED``), or a permanent
    failure the tool raised on purpose (``ToolFailedError``: raise it only when nothing
    was changed). A timeout, a generic error or an invalid output proves nothing.
    """
    if getattr(exc, "applied", None) is False:
        return False
    if isinstance(exc, (*NOT_CONNECTED, ToolFailedError)):
        return False
    return None


def failure_record(exc: BaseException) -> dict[str, Any]:
    """A tool's failure as JSON values: what an attempt records of it.

    A ``RecordedToolError`` built from them is classified the same way again (code,
    retryability, proof of no effect, a thread still running, the wait asked for).
    """
    code, message, retryable = _classify(exc)
    return {
        "code": code,
        "message": unicode_safe(message),  # an exception's text may quote what broke it
        "retryable": retryable,
        "applied": effect_applied(exc),
        "in_flight": bool(getattr(exc, "in_flight", False)),
        "retry_after_s": getattr(exc, "retry_after_s", None),
    }


def _classify(exc: BaseException) -> tuple[str, str, bool]:
    """Map an exception to (code, message, retryable)."""
    if isinstance(exc, CorralError):
        return exc.code.value, exc.message, exc.retryable
    if isinstance(exc, TimeoutError):
        return ErrorCode.TOOL_TIMEOUT.value, "the tool did not answer in time", True
    if isinstance(exc, ConnectionError | OSError):
        return ErrorCode.TOOL_TRANSIENT.value, f"{type(exc).__name__}: {said(exc)}", True
    return ErrorCode.TOOL_FAILED.value, f"{type(exc).__name__}: {said(exc)}", False


def retry_after_cap(spec: ToolSpec) -> float:
    """The longest ``Retry-After`` a retry waits for: the tool's timeout or longest backoff.

    A service asking for longer is not retried within the run: the call ends (still
    ``retryable``), and the decision layer may turn to an equivalent tool.
    """
    return max(spec.policy.timeout_s, *spec.policy.retry.backoff_s, 0.0)


def _honour_retry_after(
    spec: ToolSpec, backoff: float, retry_after: float, message: str | None
) -> tuple[float | None, str | None]:
    """The wait before the next try when the service said how long: at least that long."""
    if retry_after > retry_after_cap(spec):
        asked = f"the service asks to wait {retry_after:g} s, more than {spec.name} waits"
        return None, f"{message}; {asked}" if message else asked
    return max(backoff, retry_after), message


async def invoke_tool(
    spec: ToolSpec,
    args: BaseModel,
    context: ToolContext,
    effects: Effects,
    on_attempt: AttemptListener | None = None,
    first_attempt: int = 1,
    retries_spent: int = 0,
) -> ToolResult:
    """Call a tool with already validated arguments, retrying transient failures.

    ``retries_spent``: retries of this call already made before (a write entered again
    after its reconciler proved it had not acted): they count against the same budget.

    Retries follow ``spec.policy.retry``; waits go through ``effects.sleep`` so tests and
    replays do not really wait. Every attempt is reported to ``on_attempt``, numbered from
    ``first_attempt``. A write that failed without proof that nothing happened is not
    retried (unless idempotent with no reconciler to ask first) and ends as
    ``OUTCOME_UNKNOWN``.
    """
    policy = spec.policy
    blind_retry_safe = policy.kind != "write" or (policy.idempotent and spec.reconcile is None)
    total_ms = 0.0
    attempt_no = 0
    while True:
        attempt_no += 1
        started = effects.monotonic()
        code: str | None = None
        message: str | None = None
        retryable = False
        applied: bool | None = None
        in_flight = False
        retry_after: float | None = None
        data: dict[str, Any] | None = None
        try:
            returned = await effects.call_tool(spec, args, context, policy.timeout_s)
            data = _normalise_output(spec, returned)
            status = ToolStatus.SUCCESS if data is not None else ToolStatus.NO_RESULT
        except Exception as exc:  # every failure becomes an envelope
            failure = failure_record(exc)
            code, message, retryable = failure["code"], failure["message"], failure["retryable"]
            applied, in_flight = failure["applied"], failure["in_flight"]
            retry_after = failure["retry_after_s"]
            status = ToolStatus.ERROR
        duration_ms = (effects.monotonic() - started) * 1000.0
        total_ms += duration_ms
        will_retry = (
            status is ToolStatus.ERROR
            and retryable
            and attempt_no + retries_spent <= policy.retry.max_retries
            and not in_flight  # never two runs of one tool at once
            and (blind_retry_safe or applied is False)
        )
        backoff = policy.retry.delay(attempt_no + retries_spent) if will_retry else None
        if backoff is not None and retry_after is not None:
            backoff, message = _honour_retry_after(spec, backoff, retry_after, message)
        if on_attempt is not None:
            on_attempt(
                Attempt(
                    first_attempt + attempt_no - 1,
                    status,
                    duration_ms,
                    code,
                    message,
                    retryable,
                    data,
                    backoff,
                    applied,
                    in_flight,
                )
            )
        if backoff is None:
            break
        await effects.sleep(backoff)
    if status is ToolStatus.ERROR and policy.kind == "write" and applied is not False:
        message = f"{code}: {message}; the write may or may not have happened"
        code, retryable = ErrorCode.OUTCOME_UNKNOWN.value, False
    summary = spec.summarize(data) if data is not None else (message or "no result")
    return ToolResult.made(  # every value typed here: not validated again
        spec.name,
        status,
        data,
        clip(summary, 200),
        code,
        message,
        retryable,
        attempt_no,
        round(total_ms, 3),
    )


async def reconcile(
    spec: ToolSpec,
    args: dict[str, Any],
    context: ToolContext,
    effects: Effects,
    unknown: ToolResult,
    cause: str,
    on_attempt: AttemptListener | None = None,
    first_attempt: int = 1,
    *,
    not_found_proves: bool = True,
) -> ToolResult:
    """Settle a write whose outcome is unknown with its reconciler (``spec.reconcile``).

    Found: the write succeeded, with the reconciler's data. ``None``: the write provably
    did not happen, so the step fails with ``cause``, the code of the write's own failure
    (``TOOL_TIMEOUT``, ``TOOL_TRANSIENT``...). A reconciler error, or
    no reconciler, leaves ``unknown`` as it is. "Not found" proves the write did not happen
    only if it can no longer run (not a thread that outlived its timeout, nor a process
    that is only presumed dead): otherwise pass ``not_found_proves=False``.
    """
    finder = spec.reconcile
    if finder is None:
        return unknown
    given = {k: v for k, v in args.items() if k in finder.input_model.model_fields}
    try:
        validated = validate_args(finder, given)
    except CorralError:
        return unknown
    found = await invoke_tool(finder, validated, context, effects, on_attempt, first_attempt)
    attempts = unknown.attempts + found.attempts
    duration_ms = round(unknown.duration_ms + found.duration_ms, 3)
    if found.status is ToolStatus.ERROR:
        return unknown.model_copy(update={"attempts": attempts, "duration_ms": duration_ms})
    if found.data is not None:  # a success: the only status that carries data
        return ToolResult(
            tool=spec.name,
            status=ToolStatus.SUCCESS,
            data=found.data,
            summary=clip(spec.summarize(found.data), 200),
            attempts=attempts,
            duration_ms=duration_ms,
        )
    if not not_found_proves:
        return unknown.model_copy(update={"attempts": attempts, "duration_ms": duration_ms})
    message = f"{spec.name} failed ({cause}) and {finder.name} found no effect: not applied"
    return failed_result(spec.name, cause, message, attempts).model_copy(
        update={"duration_ms": duration_ms}
    )
