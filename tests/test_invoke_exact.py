"""Tool calls, pinned exactly: messages, hints, envelopes, attempts, durations, reconciling.

A tool's envelope (``ToolResult``) and its attempts are written to the event log and
shown in replies and ``corral logs``: each field is asserted whole, with a scripted
monotonic clock so durations are exact, not merely positive.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, Runtime, ToolContext, ToolPolicy, ToolStatus, tool
from corral.contracts import ToolResult
from corral.effects import LiveEffects
from corral.errors import (
    InvalidArgumentError,
    MissingArgumentError,
    ToolFailedError,
    ToolTimeoutError,
    TransientToolError,
)
from corral.testing import FixedEffects
from corral.tools.invoke import (
    Attempt,
    effect_applied,
    failed_result,
    invoke_tool,
    reconcile,
    validate_args,
)
from corral.tools.policy import RetryPolicy
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent

INT_MSG = "Input should be a valid integer, unable to parse string as an integer"


@dataclass
class ScriptedClock(FixedEffects):
    """Fixed effects whose monotonic clock reads ``times`` in turn: exact durations."""

    times: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.times.pop(0)


class Out(BaseModel):
    value: int


class Dated(BaseModel):
    when: date


class Secret(Out):
    """A subclass a tool may return for ``Out``: its extra field must never leave the tool."""

    password: str


class Address(BaseModel):
    street: str
    city: str


class Text(BaseModel):
    text: str


class Ref(BaseModel):
    ref: str


def ctx() -> ToolContext:
    return ToolContext(run_id="r", step_id="s1", idempotency_key="k")


async def call(spec: ToolSpec, effects: FixedEffects | None = None, **kwargs: Any) -> ToolResult:
    return await invoke_tool(
        spec, validate_args(spec, {}), ctx(), effects or FixedEffects(), **kwargs
    )


# ------------------------------------------------------------------ validate_args


def test_a_missing_argument_names_every_missing_field_and_says_it_is_never_guessed() -> None:
    @tool
    def lookup(order_id: str, quantity: int, note: str = "") -> Out:
        raise AssertionError("must not be called")

    with pytest.raises(MissingArgumentError) as info:
        validate_args(lookup, {"note": "x"})
    assert info.value.message == "tool 'lookup' is missing order_id, quantity"
    assert info.value.hint == (
        "ask the user for it, or bind it from an earlier step; it is never guessed"
    )


def test_a_missing_nested_field_is_named_by_its_path() -> None:
    @tool
    def reship(address: Address) -> Out:
        raise AssertionError("must not be called")

    with pytest.raises(MissingArgumentError) as info:
        validate_args(reship, {"address": {"street": "Main St 1"}})
    assert info.value.message == "tool 'reship' is missing address.city"


def test_invalid_arguments_list_the_first_five_problems_with_their_paths() -> None:
    @tool
    def many(a: int, b: int, c: int, d: int, e: int, f: list[int]) -> Out:
        raise AssertionError("must not be called")

    raw = {"a": "x", "b": "x", "c": "x", "d": "x", "e": "x", "f": ["x"]}
    with pytest.raises(InvalidArgumentError) as info:
        validate_args(many, raw)
    assert info.value.message == "tool 'many': " + "; ".join(
        f"{name}: {INT_MSG}" for name in "abcde"
    )
    with pytest.raises(InvalidArgumentError) as nested:
        validate_args(many, {**{k: 1 for k in "abcde"}, "f": [1, "x"], "admin": True})
    assert nested.value.message == (
        f"tool 'many': f.1: {INT_MSG}; admin: Extra inputs are not permitted"
    )


# ------------------------------------------------------------------ failed_result


def test_a_result_that_failed_before_any_attempt_counts_none_and_summarises_200_chars() -> None:
    message = "word " * 39 + "wordsmith and more" + " tail" * 20  # 200 falls inside a word
    result = failed_result("t", "MISSING_ARGUMENT", message)
    assert result == ToolResult(
        tool="t",
        status=ToolStatus.ERROR,
        error_code="MISSING_ARGUMENT",
        error_message=message,
        summary="word " * 39 + "wordsmith",  # cut at 200, moved on to the end of the word
        attempts=0,
    )
    assert failed_result("t", "TOOL_FAILED", "short", attempts=3).attempts == 3


# ------------------------------------------------------------------ outputs


async def test_output_problems_say_what_the_tool_returned() -> None:
    @tool
    def none() -> Out:
        return None  # type: ignore[return-value]

    @tool
    def wrong() -> Out:
        return {"value": "three"}  # type: ignore[return-value]

    assert (await call(none)).error_message == "tool 'none' returned None"
    assert (await call(wrong)).error_message == (
        f"tool 'wrong' returned data that does not match Out: {INT_MSG}"
    )


async def test_no_result_is_summarised_as_such() -> None:
    @tool
    def maybe() -> Out | None:
        return None

    result = await call(maybe)
    assert (result.status, result.data, result.summary) == (ToolStatus.NO_RESULT, None, "no result")
    assert (result.error_code, result.error_message) == (None, None)


async def test_output_data_is_json_ready() -> None:
    @tool
    def dated() -> Dated:
        return Dated(when=date(2024, 5, 1))

    assert (await call(dated)).data == {"when": "2024-05-01"}


async def test_an_instance_of_a_subclass_keeps_only_the_declared_fields() -> None:
    @tool
    def leaky() -> Out:
        return Secret(value=3, password="hunter2")

    result = await call(leaky)
    assert result.data == {"value": 3}
    assert result.summary == "leaky: value=3"


async def test_a_subclass_field_never_reaches_the_event_log_or_the_reply() -> None:
    """The same defect through a whole run: the password was logged and summarised."""

    @tool
    def account() -> Out:
        return Secret(value=3, password="hunter2")

    runtime = Runtime(build_agent([account], [{"id": "s", "tool": "account"}]), MemoryStore())
    summary = await runtime.start("go")
    assert summary.outcome == "success"
    logged = json.dumps([e.as_json() for e in runtime.store.load_events(summary.run_id)])
    assert '"value": 3' in logged
    assert "hunter2" not in logged and "password" not in logged
    assert "hunter2" not in summary.reply


# ------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (TimeoutError(), "TOOL_TIMEOUT", "the tool did not answer in time"),
        (ConnectionResetError("reset"), "TOOL_TRANSIENT", "ConnectionResetError: reset"),
        (OSError("disk"), "TOOL_TRANSIENT", "OSError: disk"),
        (ValueError("boom"), "TOOL_FAILED", "ValueError: boom"),
        (ToolFailedError("order is locked"), "TOOL_FAILED", "order is locked"),
    ],
)
async def test_each_failure_has_its_code_and_a_message_naming_it(
    exc: Exception, code: str, message: str
) -> None:
    @tool(policy=ToolPolicy(retry=RetryPolicy(max_retries=0, backoff_s=())))
    def broken() -> Out:
        raise exc

    result = await call(broken)
    assert (result.error_code, result.error_message, result.summary) == (code, message, message)


@pytest.mark.parametrize(
    ("exc", "applied"),
    [
        (ConnectionRefusedError("refused"), False),
        (socket.gaierror("no such host"), False),
        (ToolFailedError("locked"), False),
        (TransientToolError("503", applied=False), False),
        (TransientToolError("503"), None),
        (ConnectionResetError("reset"), None),
        (TimeoutError(), None),
        (ValueError("boom"), None),
    ],
)
def test_only_proof_says_an_effect_did_not_happen(exc: Exception, applied: bool | None) -> None:
    assert effect_applied(exc) is applied


async def test_a_write_that_failed_without_proof_is_unknown_and_says_why() -> None:
    @tool(policy=ToolPolicy(kind="write", retry=RetryPolicy(max_retries=2, backoff_s=(0.0,))))
    def pay() -> Out:
        raise ValueError("boom")

    result = await call(pay)
    message = "TOOL_FAILED: ValueError: boom; the write may or may not have happened"
    assert (result.error_code, result.error_message, result.summary) == (
        "OUTCOME_UNKNOWN",
        message,
        message,
    )
    assert (result.retryable, result.attempts) == (False, 1)


@pytest.mark.parametrize(
    ("failure", "idempotent", "calls_expected", "code"),
    [
        (TransientToolError("503"), False, 1, "OUTCOME_UNKNOWN"),
        (TransientToolError("503"), True, 3, "OUTCOME_UNKNOWN"),
        (TransientToolError("503", applied=False), False, 3, "TOOL_TRANSIENT"),
    ],
)
async def test_a_write_is_retried_only_when_idempotent_or_proved_not_applied(
    failure: TransientToolError, idempotent: bool, calls_expected: int, code: str
) -> None:
    calls = 0
    retry = RetryPolicy(max_retries=2, backoff_s=(0.0,))

    @tool(policy=ToolPolicy(kind="write", retry=retry, idempotent=idempotent))
    def pay() -> Out:
        nonlocal calls
        calls += 1
        raise failure

    attempts: list[Attempt] = []
    result = await call(pay, on_attempt=attempts.append)
    assert (calls, result.attempts, result.error_code) == (calls_expected, calls_expected, code)
    assert [(a.error_code, a.error_message, a.applied) for a in attempts] == [
        ("TOOL_TRANSIENT", "503", failure.applied)
    ] * calls_expected


class GivesUpAtOnce(LiveEffects):
    """Live effects that stop waiting for a late sync write at once: its thread runs on."""

    async def late_write(self, spec: ToolSpec, work: Any, timeout_s: float) -> Any:
        raise ToolTimeoutError(f"{spec.name} is still running", in_flight=True)


async def test_a_write_whose_thread_may_still_run_is_never_called_again() -> None:
    """Even idempotent and timed out: a second call would run beside the first."""
    calls = 0
    release = threading.Event()

    @tool(
        policy=ToolPolicy(
            kind="write",
            timeout_s=0.01,
            idempotent=True,
            retry=RetryPolicy(max_retries=2, backoff_s=(0.0,)),
        )
    )
    def pay() -> Out:
        nonlocal calls
        calls += 1
        release.wait(30)  # blocks until the test has its answer: never ends in time
        return Out(value=1)

    attempts: list[Attempt] = []
    effects = FixedEffects(_live=GivesUpAtOnce())
    try:
        result = await call(pay, effects, on_attempt=attempts.append)
    finally:
        release.set()
    assert calls == 1 and effects.sleeps == []
    assert [(a.in_flight, a.applied, a.backoff_s) for a in attempts] == [(True, None, None)]
    assert (result.error_code, result.attempts) == ("OUTCOME_UNKNOWN", 1)


async def test_the_tool_gets_the_context_of_its_call() -> None:
    @tool
    def keyed(ctx: ToolContext) -> Text:
        return Text(text=f"{ctx.run_id}/{ctx.step_id}/{ctx.idempotency_key}")

    assert (await call(keyed)).data == {"text": "r/s1/k"}


# ------------------------------------------------------------------ attempts and envelopes


async def test_a_success_is_one_clean_attempt_with_an_exact_duration() -> None:
    @tool
    def ok() -> Out:
        return Out(value=1)

    attempts: list[Attempt] = []
    effects = ScriptedClock(times=[10.0, 10.0012344])
    result = await call(ok, effects, on_attempt=attempts.append)
    assert attempts == [
        Attempt(1, ToolStatus.SUCCESS, pytest.approx(1.2344), None, None, False, {"value": 1})
    ]
    assert (attempts[0].applied, attempts[0].in_flight, attempts[0].backoff_s) == (
        None,
        False,
        None,
    )
    assert result == ToolResult(
        tool="ok",
        status=ToolStatus.SUCCESS,
        data={"value": 1},
        summary="ok: value=1",
        attempts=1,
        duration_ms=1.234,
    )


async def test_retries_add_their_durations_and_number_attempts_from_first_attempt() -> None:
    calls = 0

    @tool(policy=ToolPolicy(retry=RetryPolicy(max_retries=2, backoff_s=(0.5,))))
    def flaky() -> Out:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TransientToolError("503")
        return Out(value=2)

    attempts: list[Attempt] = []
    effects = ScriptedClock(times=[0.0, 0.00123441, 5.0, 5.00100002])
    result = await call(flaky, effects, on_attempt=attempts.append, first_attempt=4)
    assert [(a.number, a.status, a.error_code, a.backoff_s) for a in attempts] == [
        (4, ToolStatus.ERROR, "TOOL_TRANSIENT", 0.5),
        (5, ToolStatus.SUCCESS, None, None),
    ]
    assert effects.sleeps == [0.5]
    assert (result.attempts, result.duration_ms) == (2, 2.234)


async def test_a_long_summary_is_cut_at_200_characters() -> None:
    @tool(summary="{text}")
    def long() -> Text:
        return Text(text="a " * 100 + "b" * 20)

    @tool(policy=ToolPolicy(retry=RetryPolicy(max_retries=0, backoff_s=())))
    def fails_long() -> Text:
        raise ToolFailedError("e " * 100 + "fg")

    assert (await call(long)).summary == "a " * 100  # at 200, between two words
    failed = await call(fails_long)
    assert failed.summary == "e " * 100
    assert failed.error_message == "e " * 100 + "fg"


# ------------------------------------------------------------------ reconcile


class Finder:
    """A reconciler whose answer the test sets: found, not found, or an error."""

    def __init__(self) -> None:
        self.answer: Ref | None = Ref(ref="R1")
        self.error: Exception | None = None

    def find(self, ctx: ToolContext) -> Ref | None:
        if self.error is not None:
            raise self.error
        return self.answer if ctx.idempotency_key == "k" else None


def write_with(finder: Finder, summary: str | None = None) -> ToolSpec:
    @tool(
        policy=ToolPolicy(kind="write", retry=RetryPolicy(max_retries=0, backoff_s=())),
        reconcile=finder.find,
        summary=summary,
    )
    def cancel_order(order_id: str, ctx: ToolContext) -> Ref:
        raise AssertionError("reconcile never calls the write")

    return cancel_order


UNKNOWN = ToolResult(
    tool="cancel_order",
    status=ToolStatus.ERROR,
    error_code="OUTCOME_UNKNOWN",
    error_message="TOOL_TIMEOUT: the tool did not answer in time; the write may or may not "
    "have happened",
    attempts=2,
    duration_ms=1.23441,
)


async def settle(
    write: ToolSpec, attempts: list[Attempt] | None = None, **kwargs: Any
) -> ToolResult:
    effects = ScriptedClock(times=[0.0, 0.00100002])
    return await reconcile(
        write,
        {"order_id": "A1"},
        ctx(),
        effects,
        UNKNOWN,
        "TOOL_TIMEOUT",
        None if attempts is None else attempts.append,
        **kwargs,
    )


async def test_a_found_effect_settles_the_write_with_all_attempts_counted() -> None:
    finder = Finder()
    attempts: list[Attempt] = []
    result = await settle(write_with(finder), attempts)
    assert result == ToolResult(
        tool="cancel_order",
        status=ToolStatus.SUCCESS,
        data={"ref": "R1"},
        summary="cancel_order: ref=R1",
        attempts=3,
        duration_ms=2.234,
    )
    assert [(a.number, a.status) for a in attempts] == [(1, ToolStatus.SUCCESS)]
    numbered: list[Attempt] = []
    await settle(write_with(finder), numbered, first_attempt=3)
    assert [a.number for a in numbered] == [3]


async def test_a_found_effect_with_a_long_summary_is_cut_at_200_characters() -> None:
    finder = Finder()
    finder.answer = Ref(ref="r " * 100 + "st")
    result = await settle(write_with(finder, summary="{ref}"))
    assert result.summary == "r " * 100


async def test_no_effect_found_proves_the_write_did_not_happen() -> None:
    finder = Finder()
    finder.answer = None
    result = await settle(write_with(finder))
    message = "cancel_order failed (TOOL_TIMEOUT) and find found no effect: not applied"
    assert result == ToolResult(
        tool="cancel_order",
        status=ToolStatus.ERROR,
        error_code="TOOL_TIMEOUT",
        error_message=message,
        summary=message,
        attempts=3,
        duration_ms=2.234,
    )


async def test_no_effect_found_proves_nothing_while_the_write_may_still_run() -> None:
    finder = Finder()
    finder.answer = None
    result = await settle(write_with(finder), not_found_proves=False)
    assert result == UNKNOWN.model_copy(update={"attempts": 3, "duration_ms": 2.234})


async def test_a_reconciler_error_leaves_the_outcome_unknown_with_its_attempts_counted() -> None:
    finder = Finder()
    finder.error = ValueError("lookup down")
    result = await settle(write_with(finder))
    assert result == UNKNOWN.model_copy(update={"attempts": 3, "duration_ms": 2.234})
