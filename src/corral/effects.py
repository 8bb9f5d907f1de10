"""The effects boundary: the only door through which nondeterminism enters a run.

The clock, ids, sleeps and tool calls all pass through an ``Effects`` object. The run
loop records what came back in its event log, so a run is a deterministic function of
that log: it can be resumed, replayed as a regression test, or hosted by a durable
engine (each ``call_tool`` can become a durable step of DBOS or Temporal).

It sits at the top of the package, beside ``contracts`` and ``errors``, because every
layer that waits or calls out (tools, runtime, testing) depends on it and it on none of
them: the names it uses from ``tools`` and ``models`` are for type checking only.
``LiveEffects`` is the real world; ``FixedEffects`` a deterministic one for tests and
replay.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from corral.deadlines import Deadlines
from corral.eager import resume
from corral.errors import BudgetExceededError, CorralError, ToolTimeoutError
from corral.inputs import unicode_safe, unicode_safe_value

if TYPE_CHECKING:
    from corral.models.base import Model, ModelRequest, ModelResponse
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec

T = TypeVar("T")


class Effects(Protocol):
    """Everything nondeterministic that a run may do."""

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for durations."""
        ...

    def new_id(self, prefix: str) -> str:
        """A fresh unique id such as ``run_019ad3f2a1b03f2a...``."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait (retry backoff)."""
        ...

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """Run one tool attempt; raises ``TimeoutError`` or ``ToolTimeoutError`` when late."""
        ...

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """Ask a model once; raises ``ModelUnavailableError`` or ``ModelTimeoutError``.

        ``deadline_s``: what is left of the run's wall-clock budget. A call that would
        start with none left, or is still waiting when it runs out, raises
        ``BudgetExceededError`` (and is cancelled).
        """
        ...

    def recorded(self, name: str, read: Callable[[], T], shape: Any) -> T:
        """``read()``, a read of the world a run's events depend on (a session, a log).

        A durable engine records what it returned (as JSON of type ``shape``), so that a
        re-execution of the run sees what the first execution saw; elsewhere it is just
        ``read()``. ``name`` says what was read. Sync: a store thread calls it too.

        Effects whose ``recorded`` is just ``read()`` may say so with ``reads_now = True``
        (optional): the runtime then makes such a read without calling ``recorded``, on
        its own thread where the store allows it. Without it, every read goes through
        ``recorded``.
        """
        ...


async def _completed(model: Model, request: ModelRequest) -> ModelResponse:
    """``model.complete(request)``; a corral error it raises has its words made safe."""
    try:
        return await model.complete(request)
    except CorralError as exc:
        exc.message = unicode_safe(exc.message)
        exc.hint = unicode_safe(exc.hint) if exc.hint is not None else None
        raise


def _unicode_safe(response: ModelResponse) -> ModelResponse:
    """``response`` with its text and meta ``inputs.unicode_safe``."""
    text, meta = unicode_safe(response.text), unicode_safe_value(response.meta)
    if text is response.text and meta == response.meta:
        return response
    return dataclasses.replace(response, text=text, meta=meta)


def _own_recorded(effects: object, cls: type) -> bool:
    """Whether ``effects`` has ``cls``'s ``recorded``: not a subclass's, nor one set on it."""
    return getattr(type(effects), "recorded", None) is getattr(cls, "recorded", None) and (
        "recorded" not in vars(effects)
    )


class ToolExited(RuntimeError):
    """A tool (or a library it called) called ``sys.exit``: the tool's failure.

    ``SystemExit`` would otherwise leave the tool's thread or task as the process's own
    exit: the run stopped with a bare ``CancelledError`` and stayed ``executing``.
    Whether it acted before is unknown, as for any failure that proves nothing.
    """

    def __init__(self, exit_: SystemExit) -> None:
        super().__init__(f"the tool called sys.exit({exit_.code!r})")


def _without_exit(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` in a worker thread, with ``sys.exit`` as ``ToolExited``."""
    try:
        return fn(**kwargs)
    except SystemExit as exc:
        raise ToolExited(exc) from None


def _retrieve(work: asyncio.Future[Any]) -> None:
    """Collect a finished worker's exception.

    A timed-out thread's late failure is then not reported as never retrieved.
    """
    if not work.cancelled():
        work.exception()


TIME_ORDERED = frozenset({"run"})
"""The id prefixes ``LiveEffects`` starts with the time (``run_019ad3f2a1b0`` + 16 random).

A run's id leads the key of every row a save writes (the run, its events, its facts). Ids
that grow with time put those rows at the right edge of each index, as UUIDv7 does; random
ids land each save on a random leaf page of four B-trees, which on a store larger than its
cache means pages read and rewritten (``docs/performance.md``). Ids sort roughly by
creation, on the clock of the host that made each (nothing relies on it: listings sort by
``created_at``). A trace id keeps 16 random digits: they are half its OTel id.
"""


@dataclass
class LiveEffects:
    """The real world: system clock, random ids, real sleeps, real tool calls."""

    _deadlines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False, compare=False
    )
    """The watcher of tool deadlines on each event loop that calls tools: loops may take
    turns (threads, ``asyncio.run`` per turn); one that goes away takes its entry along."""

    def _deadlines_of(self, loop: asyncio.AbstractEventLoop) -> Deadlines:
        """The one deadline watcher of ``loop``."""
        deadlines = self._deadlines.get(loop)
        if deadlines is None:
            deadlines = self._deadlines[loop] = Deadlines()
        return deadlines

    def now(self) -> datetime:
        """Wall-clock time in UTC."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """``time.perf_counter``."""
        return time.perf_counter()

    def new_id(self, prefix: str) -> str:
        """``prefix_`` plus 16 random hex digits; a run's id starts with the time.

        Eight random bytes as hex: the same form as a uuid4's first 16 digits (64 random
        bits rather than 60), without building a ``UUID`` three times a run. A run's id
        (``TIME_ORDERED``) puts the Unix time in milliseconds first, as 12 hex digits.
        """
        if prefix in TIME_ORDERED:
            return f"{prefix}_{time.time_ns() // 1_000_000:012x}{os.urandom(8).hex()}"
        return f"{prefix}_{os.urandom(8).hex()}"

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """Call the tool with its validated arguments; sync tools run in a worker thread.

        An async tool is cancelled at its timeout. A thread cannot be stopped: a sync write
        that timed out is given as long again to end. If it ends then, its result (or its
        exception) is the outcome; if not, ``ToolTimeoutError(in_flight=True)`` says the
        thread may still act, and the outcome stays unknown.
        """
        kwargs = args.__dict__  # the validated fields, by name (extras live apart)
        if spec.context_param:  # a copy: the model's own fields stay as they were
            kwargs = {**kwargs, spec.context_param: context}
        if spec.is_async:
            # Its first step runs at once: a tool that answers without waiting for anything
            # (a cache, a computation) ends there, and no deadline is watched for it; none
            # could have interrupted that step anyway. One that waits goes on under a
            # deadline counted from before its first step, as asyncio.timeout's, watched
            # by the loop's one ``Deadlines`` (no timer per call).
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            call = spec.fn(**kwargs)
            try:
                waiting = call.send(None)
            except StopIteration as done:
                return done.value
            except SystemExit as exc:
                raise ToolExited(exc) from None
            watch = self._deadlines_of(loop).watch(loop, deadline)  # cancels the tool
            try:
                returned = await resume(call, waiting)
            except BaseException as exc:
                watch.close(exc)  # TimeoutError when it was the deadline that cancelled it
                if isinstance(exc, SystemExit):
                    raise ToolExited(exc) from None
                raise
            watch.close(None)
            return returned
        work = asyncio.ensure_future(asyncio.to_thread(_without_exit, spec.fn, kwargs))
        work.add_done_callback(_retrieve)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(work)  # the thread runs on; keep its future
        except TimeoutError:
            if spec.policy.kind != "write":
                raise
        return await self.late_write(spec, work, timeout_s)

    async def late_write(self, spec: ToolSpec, work: asyncio.Future[Any], timeout_s: float) -> Any:
        """Give a sync write that missed its timeout as long again to end.

        Its own method so that a test can tell the moment a write became late (and let
        its thread answer then) instead of guessing it from a clock.
        """
        done, _ = await asyncio.wait({work}, timeout=timeout_s)
        if done:  # it ended late: what it returned (or raised) is the known outcome
            return work.result()
        raise ToolTimeoutError(
            f"{spec.name} did not answer in {timeout_s:g} s; its thread is still running",
            in_flight=True,
        )

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """Ask the model, within what is left of the wall-clock budget.

        Its answer, and the words of its failure, come back ``unicode_safe``: a lone
        surrogate in them (a server's broken decoding) could be neither recorded nor
        shown, and the run would be lost.
        """
        if deadline_s is None:
            return _unicode_safe(await _completed(model, request))
        if deadline_s <= 0:
            raise BudgetExceededError("the wall-clock budget was used up before the model call")
        try:
            async with asyncio.timeout(deadline_s) as window:
                return _unicode_safe(await _completed(model, request))
        except TimeoutError:
            if not window.expired():
                raise
        raise BudgetExceededError(
            f"the wall-clock budget ran out during the model call ({deadline_s:.3g} s were left)"
        )

    def recorded(self, name: str, read: Callable[[], T], shape: Any) -> T:
        """Read now: nothing is recorded outside a durable engine."""
        return read()

    @property
    def reads_now(self) -> bool:
        """``recorded`` is ``read()`` (``Effects.recorded``), unless it was replaced."""
        return _own_recorded(self, LiveEffects)


@dataclass
class FixedEffects:
    """Effects whose clock starts at ``start`` and whose ids count up.

    Tool calls still really run (through ``LiveEffects``), so tests exercise real tools;
    ``sleeps`` records every backoff instead of waiting.
    """

    start: datetime = field(default_factory=lambda: datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    tick: timedelta = timedelta(milliseconds=1)
    sleeps: list[float] = field(default_factory=list)
    _counter: int = 0
    _now: datetime | None = None
    _live: LiveEffects = field(default_factory=LiveEffects)

    def now(self) -> datetime:
        """The fixed clock, advanced by ``tick`` on every read."""
        self._now = (self._now or self.start) + self.tick
        return self._now

    def monotonic(self) -> float:
        """Real monotonic time, so durations are still measured."""
        return self._live.monotonic()

    def new_id(self, prefix: str) -> str:
        """``prefix_000001``, ``prefix_000002``, ..."""
        self._counter += 1
        return f"{prefix}_{self._counter:06d}"

    async def sleep(self, seconds: float) -> None:
        """Record the wait; do not wait."""
        self.sleeps.append(seconds)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """Really call the tool."""
        return await self._live.call_tool(spec, args, context, timeout_s)

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """Really ask the model (a ScriptedModel in most tests), within the deadline."""
        return await self._live.call_model(model, request, deadline_s)

    def recorded(self, name: str, read: Callable[[], T], shape: Any) -> T:
        """Read now."""
        return read()

    @property
    def reads_now(self) -> bool:
        """``recorded`` is ``read()`` (``Effects.recorded``), unless it was replaced."""
        return _own_recorded(self, FixedEffects)


@dataclass
class WrappedEffects:
    """Passes every effect to ``inner``: a wrapper overrides only what it changes.

    Fault injection (crash points, ``corral.testing.faults``) wraps the effects a run was
    given this way, so the clock, ids and sleeps stay the wrapped ones.
    """

    inner: Effects

    def now(self) -> datetime:
        """The wrapped clock."""
        return self.inner.now()

    def monotonic(self) -> float:
        """The wrapped monotonic clock."""
        return self.inner.monotonic()

    def new_id(self, prefix: str) -> str:
        """The wrapped id source."""
        return self.inner.new_id(prefix)

    async def sleep(self, seconds: float) -> None:
        """The wrapped sleep."""
        await self.inner.sleep(seconds)

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """The wrapped tool call."""
        return await self.inner.call_tool(spec, args, context, timeout_s)

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """The wrapped model call."""
        return await self.inner.call_model(model, request, deadline_s)

    def recorded(self, name: str, read: Callable[[], T], shape: Any) -> T:
        """The wrapped read."""
        return self.inner.recorded(name, read, shape)

    @property
    def reads_now(self) -> bool:
        """As the wrapped effects say, unless a wrapper changed ``recorded``."""
        return (
            _own_recorded(self, WrappedEffects) and getattr(self.inner, "reads_now", False) is True
        )
