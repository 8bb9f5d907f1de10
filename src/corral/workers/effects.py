"""``DbosEffects``: every effect of a run a DBOS step of the drive's workflow.

A tool call, a model call, the clock, an id and a recorded read each become one step, in
the order the run makes them (``Runtime(concurrent_steps=False)`` keeps that order fixed).
On a re-execution of the workflow (its worker died) DBOS answers every step that had
completed from its record, in order, without running it; the first step that had not
completed runs for real. A tool step in flight when the worker died therefore runs again,
with the same idempotency key (derived from the run and step ids, themselves recorded).

Step outputs are JSON values, turned back into return values or exceptions by the same
code on the first execution and on a re-execution, so both derive identical events. A
tool step never raises: its failure is a record (``failure_record``) raised again as a
``RecordedToolError``, classified as the live exception was.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import BaseModel, TypeAdapter

from corral.effects import LiveEffects
from corral.errors import (
    BudgetExceededError,
    CorralError,
    ErrorCode,
    ModelTimeoutError,
    ModelUnavailableError,
)
from corral.runtime.replay import RecordedToolError, recorded_return
from corral.tools.invoke import _normalise_output, failure_record
from corral.workers.permits import EXPIRED, PermitExpiredError, PermitGate, checked, expired

if TYPE_CHECKING:
    from corral.models.base import Model, ModelRequest, ModelResponse
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec

T = TypeVar("T")

_MODEL_ERRORS: dict[str, type[CorralError]] = {
    "MODEL_UNAVAILABLE": ModelUnavailableError,
    "MODEL_TIMEOUT": ModelTimeoutError,
    "BUDGET_EXCEEDED": BudgetExceededError,
}
"""The failures a model call answers with, by code: recorded, and raised again as such."""


@dataclass(frozen=True, slots=True, repr=False)
class Hidden(Generic[T]):
    """A step's arguments, kept out of every log.

    DBOS writes a cancelled step's call, its arguments with it, in a warning; they hold
    what a run never logs (``Sensitive`` values, the tools' ``deps``, the user's words).
    """

    value: T

    def __repr__(self) -> str:
        return "<arguments hidden>"


@dataclass(repr=False)
class DbosEffects:
    """The real world, each effect recorded as a DBOS step of the running workflow.

    Outside a workflow (no DBOS context) each step just runs, as ``LiveEffects`` would.
    Shown in no log (``repr``): its steps' calls name it, and it holds the live effects.
    """

    live: LiveEffects = field(default_factory=LiveEffects)
    permits: PermitGate | None = None
    """Waits for a rate-limited tool's permit before its step (``permits.Permits.call`` for
    this agent); None: no tool of the agent is limited."""
    _helpers: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="corral-dbos-step")
    )
    """Where a sync step asked for on the event loop's thread runs (DBOS forbids a sync
    step on a thread with a running loop)."""
    _adapters: dict[Any, TypeAdapter[Any]] = field(default_factory=dict)
    _clock: ClockReading | None = None
    """The running drive's clock reading (``for_drive``: one per drive)."""
    _per_drive: bool = False
    _last: ClockReading | None = None
    """The drive's latest clock reading (``_continued``)."""
    _shift: float = 0.0
    """Added to the monotonic readings of this process to continue the drive's clock."""
    _wall_shift: timedelta = timedelta(0)
    """Added to the wall readings of this process: the drive's times never go back."""
    _execution: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This process's executions of workflows: a clock reading taken by another process
    is on another host's clocks (``_continued``)."""
    _entry: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This execution of a drive (``for_drive`` draws one for each): a write that must not
    be entered twice is marked with it before it is entered. Another's mark is a write
    entered by an execution that recorded no outcome: its process died, or a takeover
    gave the drive to a new execution while it ran, in another process or in this one."""

    def _entry_id(self) -> str:
        return self._entry

    def for_drive(self) -> DbosEffects:
        """These effects for one execution of a drive: its own clock and entry mark."""
        return replace(
            self,
            _clock=None,
            _per_drive=True,
            _last=None,
            _shift=0.0,
            _wall_shift=timedelta(0),
            _entry=uuid.uuid4().hex,
        )

    def now(self) -> datetime:
        """The wall clock, read once per stretch between two waits (``_reading``)."""
        reading = self._reading()
        return reading.wall + timedelta(microseconds=reading.reads)

    def monotonic(self) -> float:
        """The monotonic clock, read with ``now`` (``_reading``)."""
        reading = self._reading()
        return reading.mono + reading.reads * 1e-6

    def _reading(self) -> ClockReading:
        """The drive's clock reading, one step for a whole stretch of computation.

        A run reads the clock for every event it writes and around every step it
        measures: as one step each, the clock was 67 of a run's 77 steps (each a row
        written, and a hop to a helper thread), most of a worker's CPU per run. Between two
        waits on the world (a tool, a model, a sleep, a recorded read) a run only
        computes, for a millisecond or so: the reading taken at its first read serves the
        whole stretch, each later read a microsecond on (so times stay strictly
        increasing), and a wait ends the stretch. A re-execution takes the same readings
        at the same points, so it derives the same events. What a run measures across a
        wait (a tool's latency, the run's active time) is the real time; a stretch of
        pure computation (classifying the message) is measured as a few microseconds.
        """
        reading = self._clock
        if reading is None:
            wall, mono, *execution = self._step(
                "corral.clock", _clock_now, self.live, self._execution
            )
            reading = ClockReading(
                datetime.fromisoformat(wall), float(mono), "".join(map(str, execution))
            )
            if self._per_drive:  # shared by concurrent drives, a reading serves one read
                self._clock = self._continued(reading)
        reading.reads += 1
        return reading

    def _continued(self, reading: ClockReading) -> ClockReading:
        """``reading`` on the clocks of the drive's earlier readings.

        A monotonic clock counts from its host's boot: a drive taken over on another host
        replays the dead worker's recorded readings, then takes its own, whose origin is
        another. Read by another process than the last reading, the clock goes on from
        that reading by the wall time between the two, and keeps the shift from then on:
        a write's latency or the run's active time measured across a takeover is not the
        difference of two hosts' boot times. A wall clock behind the last reading's is
        moved on to just after it for the rest of the drive, so the run's event times
        still increase. Derived from recorded readings only, so a re-execution derives
        the same times.
        """
        last, self._last = self._last, reading
        if last is not None and last.execution != reading.execution:
            after = last.wall + timedelta(microseconds=last.reads + 1)
            self._wall_shift = max(after - reading.wall, timedelta(0))
            between = (reading.wall + self._wall_shift - last.wall).total_seconds()
            self._shift = last.mono + between - reading.mono
        reading.wall += self._wall_shift
        reading.mono += self._shift
        return reading

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        """A wait on the world: a tool, a model, a sleep or a recorded read.

        It ends the stretch of computation: the next clock read is a new reading.
        """
        try:
            yield
        finally:
            self._clock = None

    def new_id(self, prefix: str) -> str:
        """A fresh id, as a step: a re-execution gets the same id."""
        return str(self._step("corral.new_id", self.live.new_id, prefix))

    async def sleep(self, seconds: float) -> None:
        """A durable sleep: a re-execution waits only for what is left of it."""
        from dbos import DBOS

        with self._waiting():
            await DBOS.sleep_async(seconds)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """One tool attempt as a step (never retried by DBOS: corral's policy retries)."""
        from dbos import DBOS, StepOptions

        entered: str | None = None
        if not _safe_to_enter_again(spec):  # say which execution enters it, first
            marker = StepOptions(name=f"corral.enter.{spec.name}", retries_allowed=False)
            entered = await DBOS.run_step_async(marker, self._entry_id)
        options = StepOptions(name=f"corral.tool.{spec.name}", retries_allowed=False)
        call = Hidden((spec, args, context, timeout_s, entered))
        step = partial(DBOS.run_step_async, options, self._tool_step, call)
        with self._waiting():
            record = await (step(None) if self.permits is None else self.permits(spec.name, step))
        error = record.get("error")
        if error is not None:
            raise RecordedToolError(**error)
        return recorded_return(spec, record.get("data"))

    async def _tool_step(
        self,
        call: Hidden[tuple[ToolSpec, BaseModel, ToolContext, float, str | None]],
        permit_use_by: float | None,
    ) -> dict[str, Any]:
        """The live call, its outcome as the attempt records it: data, or a failure.

        ``entered``: the execution of the drive that entered a write which must not be
        entered twice (``_entry``). Another one's means that execution died in the write,
        or was taken over while in it: it may or may not have acted, so it is not entered
        again but failed without proof that nothing happened (``OUTCOME_UNKNOWN``: its
        reconciler looks, else a person does), as
        ``corral resume`` settles a write in flight when its process died.

        Nothing is called when the tool's rate-limit permit is too old (``permits.py``):
        checked here, and again on the tool's own thread just before its function runs.
        """
        spec, args, context, timeout_s, entered = call.value
        if entered is not None and entered != self._entry:
            return {"error": failure_record(InterruptedWriteError(spec.name))}
        if permit_use_by is not None:
            if expired(permit_use_by):
                return EXPIRED
            spec = checked(spec, permit_use_by)
        try:
            returned = await self.live.call_tool(spec, args, context, timeout_s)
            return {"data": _normalise_output(spec, returned)}
        except PermitExpiredError:
            return EXPIRED
        except Exception as exc:  # every failure is a record; classified outside the same way
            return {"error": failure_record(exc)}

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """One model call as a step; its response (or its failure) recorded as JSON."""
        from dbos import DBOS, StepOptions

        from corral.models.base import ModelResponse

        options = StepOptions(name="corral.model", retries_allowed=False)
        with self._waiting():
            record = await DBOS.run_step_async(
                options, self._model_step, Hidden((model, request, deadline_s))
            )
        error = record.get("error")
        if error is not None:
            raise model_error(error)
        response: ModelResponse = self._adapter(ModelResponse).validate_python(record["response"])
        return response

    async def _model_step(
        self, call: Hidden[tuple[Model, ModelRequest, float | None]]
    ) -> dict[str, Any]:
        from corral.models.base import ModelResponse

        model, request, deadline_s = call.value
        try:
            response = await self.live.call_model(model, request, deadline_s)
        except (ModelUnavailableError, ModelTimeoutError, BudgetExceededError) as exc:
            return {"error": model_failure_record(exc)}
        return {"response": self._adapter(ModelResponse).dump_python(response, mode="json")}

    def recorded(self, name: str, read: Callable[[], T], shape: Any) -> T:
        """``read()`` as a step whose output is its JSON (``shape`` reads it back)."""
        adapter = self._adapter(shape)
        with self._waiting():
            dumped = self._step(f"corral.read.{name}", _dumped, adapter, read)
        return cast("T", adapter.validate_python(dumped))

    def close(self) -> None:
        """Let the helper threads go."""
        self._helpers.shutdown(wait=False)

    def _adapter(self, shape: Any) -> TypeAdapter[Any]:
        adapter = self._adapters.get(shape)
        if adapter is None:
            adapter = self._adapters[shape] = TypeAdapter(shape)
        return adapter

    def _step(self, name: str, work: Callable[..., Any], *args: Any) -> Any:
        """A sync step: on this thread, or, beside a running event loop, on a helper thread.

        The helper runs in a copy of this context, which shares the workflow's DBOS context
        object: its step counter advances as if the step ran here. The loop waits for it
        (about a millisecond: one row written).
        """
        from dbos import DBOS, StepOptions

        options = StepOptions(name=name, retries_allowed=False)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return DBOS.run_step(options, work, *args)
        context = contextvars.copy_context()
        call = partial(context.run, DBOS.run_step, options, work, *args)
        return self._helpers.submit(call).result()


def _safe_to_enter_again(spec: ToolSpec) -> bool:
    """Whether a call may simply run again after its process died in it (as a retry may).

    An idempotent write may, reconciler or not: its key makes a second entry find the
    first one's effect (``corral resume`` looks a reconciled one up first only to spare the
    call, and enters it again with the same key when the look finds nothing).
    """
    policy = spec.policy
    return policy.kind != "write" or policy.idempotent


class InterruptedWriteError(CorralError):
    """A write whose worker died while it ran: it may or may not have acted."""

    code = ErrorCode.TOOL_FAILED
    retryable = False

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"the worker stopped while {tool} was running; the write may or may not have happened"
        )


@dataclass
class ClockReading:
    """One reading of both clocks, recorded as one step, and how often it was read."""

    wall: datetime
    mono: float
    execution: str = ""
    """The process that took it (``DbosEffects._execution``): one monotonic clock."""
    reads: int = -1
    """Reads served so far, less one: the first read is the reading itself."""


def _clock_now(live: LiveEffects, execution: str) -> tuple[str, float, str]:
    return live.now().isoformat(), live.monotonic(), execution


def _dumped(adapter: TypeAdapter[Any], read: Callable[[], Any]) -> Any:
    return adapter.dump_python(read(), mode="json")


def model_failure_record(exc: CorralError) -> dict[str, Any]:
    """A model call's failure as JSON values (``model_error`` raises it again)."""
    return {
        "code": exc.code.value,
        "message": exc.message,
        "hint": exc.hint,
        "retryable": exc.retryable,
        "retry_after": getattr(exc, "retry_after", None),
        "status": getattr(exc, "status", None),
    }


def model_error(error: dict[str, Any]) -> CorralError:
    """The model call's recorded failure raised again: same class, message and details."""
    code = error["code"]
    if code == "MODEL_UNAVAILABLE":
        return ModelUnavailableError(
            error["message"],
            retryable=error["retryable"],
            retry_after=error["retry_after"],
            status=error["status"],
            hint=error["hint"],
        )
    return _MODEL_ERRORS.get(code, ModelUnavailableError)(error["message"], hint=error["hint"])
