"""The public entry point: start a run, resume a paused or crashed one, read it back.

``Runtime`` ties an agent to a store and an effects boundary. Storage calls run in a
worker thread, never waiting on the event loop: a SQLite save that nothing makes wait is
made in place (``corral.store.in_place``), any other in a thread. A run is persisted when
it pauses, when it ends, and before any write tool runs; in between, events are batched.

One process drives a run at a time. Driving takes the run's lease in the store; a second
``resume`` of a live run gets ``RUN_BUSY`` (or waits), and every save is fenced by the
lease, so a process that lost it appends nothing and enters no tool.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
import logging
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from corral.agent import Agent
from corral.clipping import clip
from corral.contracts import (
    TERMINAL_RUN_STATUSES,
    EventType,
    HandoffPacket,
    Language,
    Plan,
    RouteAction,
    RunStatus,
    RunSummary,
    StepStatus,
)
from corral.decision.priority import PriorityDetector, PriorityFound, run_priority
from corral.effects import Effects, LiveEffects
from corral.errors import (
    CorralError,
    ErrorCode,
    InputTooLargeError,
    InvalidInputError,
    MessageRepeatedError,
    RunBusyError,
    RunNotFoundError,
    RunNotResumableError,
    StoreError,
)
from corral.events import (
    ConfirmationGiven,
    EntitiesMerged,
    Event,
    ModelCall,
    RunStarted,
    UserAnswered,
    UserMessage,
)
from corral.inputs import (
    SEE_RUN,
    require_message_id,
    require_one_input,
    require_session_id,
    require_text,
    require_words,
)
from corral.intent.confirmation import (
    after_a_refusal,
    called_off,
    calls_off_another,
    confirmation_answer,
    defers,
    explicit_yes,
    first_clause,
    may_say_the_action,
    names_another_one,
    on_ones_own,
    says_a_negation,
    says_calling_off,
    switches,
    unsettles_a_yes,
    withdraws,
    withdraws_first,
    yes_beyond_doubt,
    yes_or_no,
)
from corral.intent.entities import answer_language, detect_language, names_entity
from corral.intent.questions import reads_as_question
from corral.intent.repeats import adds_a_request, asks_for_another, holds_back
from corral.observe.redact import redaction_spec
from corral.observe.telemetry import RunTracer, Untraced, tracer_for
from corral.planning.clarification import latest_ambiguity
from corral.runtime.faults import Faults, FaultyEffects
from corral.runtime.follow import (
    last_request,
    may_follow,
    names_its_own_value,
    plans_a_write,
    plans_only_reads,
    request_of,
)
from corral.runtime.inputs import OpenRunInput, check_input, check_step, decided_otherwise
from corral.runtime.journal import Journal
from corral.runtime.loop import RunLoop
from corral.runtime.ownership import Held, Holding, Ownership
from corral.runtime.plan_entry import (
    ENTRY_MESSAGE,
    ENTRY_PLAN,
    check_entities,
    check_no_message,
    check_required,
    resolve_plan,
    start_plan,
)
from corral.runtime.state import RunState, fold
from corral.runtime.stream import StreamItem, Watch, event_stream
from corral.store.base import (
    DEFAULT_LEASE_S,
    CallsInPlace,
    Lease,
    MessageLog,
    RunRecord,
    SavesInPlace,
    SaveWouldWait,
    SessionRecord,
    SessionUpdate,
    SessionUpdater,
    Store,
)
from corral.store.figures import LatencySource
from corral.store.memory import MemoryStore

if TYPE_CHECKING:
    from corral.observe.logs import JsonlLog

logger = logging.getLogger(__name__)

T = TypeVar("T")

IN_PLACE_FIRST_PAUSE_S = 0.0005
"""A save in place that found a lock taken tries again after this, then twice as long..."""
IN_PLACE_PATIENCE_S = 0.05
"""... until it has waited this long: then a store thread waits for the lock (another
process's long write). A write of this process, in a thread, holds it for a millisecond."""

SESSION_TTL = timedelta(days=7)
"""Seed 002: session memory lives 7 days."""
TASK_TTL = timedelta(days=30)
"""Seed 002: task memory (runs and their events) lives 30 days after it last changed."""
SESSION_TURNS = 10
"""Short summaries of this many recent turns are kept per session."""


def summarize_run(state: RunState) -> RunSummary:
    """The ``RunSummary`` of a folded state.

    Validated whole from plain values: pydantic builds the intent and step briefs inside
    the one validation, instead of a Python ``__init__`` per brief (half the cost; the
    same checks and the same summary, ``tests/test_run_row_summary.py``).
    """
    intent = state.intent
    return RunSummary.model_validate(
        {
            "run_id": state.run_id,
            "trace_id": state.trace_id,
            "status": state.status,
            "intent": {
                "label": intent.label,
                "confidence": intent.confidence,
                "source": intent.source,
            }
            if intent
            else None,
            "steps": [
                {
                    "id": s.id,
                    "tool": s.tool_used or s.tool,
                    "status": s.status,
                    "attempts": s.attempts,
                    "duration_ms": s.duration_ms,
                    "error_code": s.error_code,
                }
                for s in state.steps.values()
            ],
            "reply": state.reply,
            "handoff": state.handoff,
            "pending": state.pending,
            "outcome": state.outcome,
            "error_code": state.error_code,
            "signals": list(state.signals),
        }
    )


def summary_record(state: RunState) -> dict[str, Any]:
    """``summarize_run(state)`` as JSON values without its handoff: the run row's summary.

    The same as ``summarize_run(state).model_dump(mode="json", exclude={"handoff"})``
    (a test holds the two together), written out because every save of a run builds it
    and a generic dump costs more than the summary itself.
    """
    intent = state.intent
    return {
        "run_id": state.run_id,
        "trace_id": state.trace_id,
        "status": str(state.status),
        "intent": {
            "label": intent.label,
            "confidence": float(intent.confidence),
            "source": intent.source,
        }
        if intent
        else None,
        "steps": [
            {
                "id": s.id,
                "tool": s.tool_used or s.tool,
                "status": str(s.status),
                "attempts": s.attempts,
                "duration_ms": float(s.duration_ms),
                "error_code": s.error_code,
            }
            for s in state.steps.values()
        ],
        "reply": state.reply,
        "pending": state.pending.model_dump(mode="json") if state.pending else None,
        "outcome": state.outcome,
        "error_code": state.error_code,
        "signals": [signal.model_dump(mode="json") for signal in state.signals],
    }


def run_detail(state: RunState, events: Sequence[Event]) -> dict[str, Any]:
    """A run's summary with its model calls, as JSON values (not yet redacted).

    What ``corral show --json`` prints and ``GET /runs/{id}`` answers, so the two never
    drift apart.
    """
    from corral.observe.logs import model_call_brief

    detail: dict[str, Any] = summarize_run(state).model_dump(mode="json")
    detail["model_calls"] = [
        model_call_brief(e.payload) for e in events if isinstance(e.payload, ModelCall)
    ]
    return detail


def _takes_timeouts(store: LatencySource) -> bool:
    """Whether ``store.tool_latency`` takes ``timeouts_ms`` (a store of corral's own does).

    A store of someone else's may answer the three-argument form that came first: it is
    asked that way, and counts the successes it always counted.
    """
    try:
        parameters = inspect.signature(store.tool_latency).parameters.values()
    except (TypeError, ValueError):  # no signature to read: ask as corral's stores are
        return True
    return any(p.name == "timeouts_ms" or p.kind is p.VAR_KEYWORD for p in parameters)


@dataclass(frozen=True)
class _PerAgent:
    """What every run of one agent reads the same, worked out once per agent."""

    agent: Agent
    ranked: dict[str, float]
    """Its tools that have equivalents, with their timeouts in ms: their observed latency
    is read at a run's start, counting a call cut off at its tool's deadline."""
    priority: PriorityDetector
    redact: dict[str, list[str]]
    """The redaction spec recorded in ``run_started`` (copied into each run)."""
    root: str | None
    """The agent's folder as ``run_started`` records it."""
    model: str | None
    """The configured model's name, when the agent has a model."""
    free_text_answers: bool
    """Whether an entity is asked for in free text (``whole_answer``): only then may a
    request of an intent that does not ``interrupt`` interrupt a question."""

    @classmethod
    def of(cls, agent: Agent) -> _PerAgent:
        tools = agent.tools
        return cls(
            agent,
            {
                s.name: s.policy.timeout_s * 1000
                for s in tools
                if len(tools.equivalents(s.name)) > 1
            },
            PriorityDetector(agent.config.decision.priority_words),
            redaction_spec(agent),
            str(agent.root) if agent.root else None,
            agent.config.model.name if agent.model is not None else None,
            any(spec.whole_answer for spec in agent.config.entities.values()),
        )


class _Saves:
    """A drive's saves before its last: one at a time, so batches are stored in order.

    An object rather than a closure over a lock: a run holds one small object instead of
    a function, its cells and a lock, and the lock is made only when a save is asked for
    (a run that writes nothing before it ends never needs one).
    """

    __slots__ = ("_held", "_journal", "_lock", "_runtime")

    def __init__(self, runtime: Runtime, journal: Journal, held: Held) -> None:
        self._runtime = runtime
        self._journal = journal
        self._held = held
        self._lock: asyncio.Lock | None = None

    async def __call__(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()  # concurrent steps persist; batches stay in order
        held = self._held
        # a save of the run from now on, its wait for the lock too (``_release_lease``)
        with self._runtime._saving_now(held.lease.run_id):
            async with self._lock:
                await self._runtime._persist(self._journal, held.lease)
                if held.lease.new_run:  # its row exists now: from here on, fence strictly
                    held.lease = replace(held.lease, new_run=False)


class Runtime:
    """Runs an agent's requests durably.

    >>> runtime = Runtime(agent, SqlStore.open(".corral/corral.db"))
    >>> summary = await runtime.start("我的打印机坏了，订单号 HD20240501，能换新吗")
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None = None,
        *,
        effects: Effects | None = None,
        log_dir: Path | None = None,
        lease_ttl_s: float = DEFAULT_LEASE_S,
        faults: Faults | None = None,
        tracer: RunTracer | None = None,
        concurrent_steps: bool = True,
        save_retry_s: float = 0.0,
    ) -> None:
        """Tie the agent to a store; ``tracer``: where spans go.

        By default spans go where the agent's ``telemetry:`` block and the ``OTEL_*``
        variables say: nowhere, unless one of them names an exporter. ``Untraced()``
        exports nothing whatever they say.

        ``concurrent_steps=False`` runs a round's independent steps one after another,
        in dispatch order: slower when steps wait on I/O, but the run's effects then come
        in one order whatever their timing, which a durable engine that matches recorded
        steps by position (DBOS, ``corral worker``) needs.

        ``save_retry_s``: how long a save that failed because the store could not be
        reached (``STORE_UNAVAILABLE``) is tried again before the drive fails. A durable
        drive that failed ends for good (nothing drives it again), so a worker waits out
        a store restart; in one process the failure is raised at once and ``corral
        resume`` finishes the run.
        """
        self.agent = agent
        self.store: Store = store if store is not None else MemoryStore()
        self.faults = faults if faults is not None else Faults()
        effects = effects if effects is not None else LiveEffects()
        self.effects: Effects = (
            FaultyEffects(effects, self.faults) if self.faults.active else effects
        )
        self.sampling = agent.config.telemetry.sampling
        self.log: JsonlLog | None = None
        if log_dir is not None:  # the log's module is loaded only for a runtime that logs
            from corral.observe.logs import JsonlLog

            self.log = JsonlLog(log_dir, self.sampling)
        chosen = tracer if tracer is not None else tracer_for(agent.config.telemetry, os.environ)
        self.tracer = None if isinstance(chosen, Untraced) else chosen
        self.ownership = Ownership(self.store, self._io_here, lease_ttl_s, self._release_lease)
        self.concurrent_steps = concurrent_steps
        self.save_retry_s = save_retry_s
        self._store_threads: ThreadPoolExecutor | None = None
        self._in_place: bool | None = None
        """Whether the store's class offers saves in place (``_can_save_in_place``), once asked."""
        self._calls_in_place: bool | None = None
        """Whether it offers its reads and lease calls in place (``_can_call_in_place``)."""
        self._log_beside_store: bool | None = None
        """Whether the log folder is on the store file's file system (``_exported_here``)."""
        self._session_in_save: bool | None = None
        """Whether the store's ``save`` takes a session's update (``_folds_sessions``)."""
        self._saving: dict[str, set[Future[Any]]] = {}
        """Run id -> its saves in the store's threads (a blocking store's): a stopped
        drive may have given up waiting for one, and its lease is released after them."""
        self._saving_lock = threading.Lock()
        """Guards ``_saving``: a save's end is noted in its own thread."""
        self._latency_form: tuple[object, bool] | None = None
        """The store, and whether its ``tool_latency`` takes ``timeouts_ms``."""
        self._sessions = threading.Lock()
        """Serialises this runtime's session updates (read, merge, write), which run in the
        store's threads: two runs of one session ending together must both keep their turn."""
        self._agent_facts: _PerAgent | None = None
        """What every run of ``agent`` reads the same (``_per_agent``)."""
        self._handling: set[tuple[str, str | None, str]] = set()
        """(agent, session id, message id) of the messages this runtime handles now: a
        retry sent while its first try still runs is ``RUN_BUSY``, not a second run."""
        self.replayed_latency: dict[str, dict[str, float]] | None = None
        """Set by a replay: the observed latency the recorded run ranked by, read from its
        ``run_started`` instead of this runtime's store, so the replay chooses the same."""
        self.replaying = False
        """Set by a replay: the recorded inputs are given again as they were, a blank answer
        too (stored before blank input was refused), so the same log takes the same path."""
        self.replayed_start: RunStarted | None = None
        """Set by a replay: the recorded run's ``run_started``. What the session's waiting
        confirmation made of the line (``at_confirmation``, ``repeats_request``) is read
        from it (that run is not in the replay's store), so the same line takes the same
        path."""

    # ------------------------------------------------------------------ public API

    async def aclose(self) -> None:
        """Close the agent's transports and setup (``Agent.aclose``) and the store threads.

        The runtime may be used again afterwards: what it needs is opened again lazily.
        """
        try:
            await self.agent.aclose()
        finally:
            self.release_threads()

    def release_threads(self) -> None:
        """Let the store threads end once their calls have (``aclose`` does it too).

        For a process that ends without ``aclose`` (a server forced to stop skips the
        app's shutdown): an idle store thread would hold its exit. A later store call of
        this runtime opens new threads; copies made by ``with_agent`` share these, so
        release them only once no copy makes store calls any more.
        """
        threads, self._store_threads = self._store_threads, None
        if threads is not None:
            threads.shutdown(wait=False)

    def with_agent(self, agent: Agent) -> Runtime:
        """A runtime like this one for ``agent``, a copy of its agent with other state.

        A durable drive gives it its own tool health this way. The copy shares the store,
        effects, logs, leases and store threads: closing this runtime closes them, and the
        copy needs no closing of its own.
        """
        self._threads()  # made now, so that the copy shares them
        twin = copy.copy(self)
        twin.agent = agent
        twin._agent_facts = None
        return twin

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(
        self,
        message: str,
        *,
        session_id: str | None = None,
        priority: str | None = None,
        message_id: str | None = None,
    ) -> RunSummary:
        """Handle a new user message; continues the session's open question if there is one.

        ``priority``: ``urgent``, ``normal`` or ``budget``, how equivalent tools are ranked;
        by default the message's words decide (``decision.priority_words``).

        ``message_id``: the client's id of this message, unique within the session (or,
        without one, the agent's sessionless runs) for as long as the store keeps its runs
        (a UUID per message; not a counter that starts again when a session expires). A
        message whose id a turn already took is not handled again: the answer is the
        current summary of the run that took it. So a client may retry a request whose
        answer it lost (a timeout, a dropped connection) without a second run, or a
        second "yes" approving whatever the run asks next. Needs a store that keeps ids
        (``MessageLog``: the SQL and memory stores).
        """
        return await self._handle_message(message, session_id, None, priority, None, message_id)

    def stream(
        self,
        message: str,
        *,
        session_id: str | None = None,
        priority: str | None = None,
        message_id: str | None = None,
    ) -> AsyncIterator[StreamItem]:
        """``start``, yielding the run's events as it writes them, then its summary.

        >>> async for item in runtime.stream("我的打印机坏了，订单号 HD20240501，能换新吗"):
        ...     print(item.type if isinstance(item, Event) else item.status)

        Events come in ``seq`` order as the run applies them (before they are stored, so
        a consumer sees progress between durability points). Leaving the loop early
        cancels the run, which stores what it had done; ``resume`` finishes it.
        """
        handling = partial(
            self._handle_message, message, session_id, priority=priority, message_id=message_id
        )
        return event_stream(handling)

    def stream_resume(
        self,
        run_id: str,
        *,
        approve: bool | None = None,
        answer: str | None = None,
        step_id: str | None = None,
        wait_s: float = 0.0,
        call: str | None = None,
    ) -> AsyncIterator[StreamItem]:
        """``resume``, yielding the events this resume writes, then the run's summary."""
        resuming = partial(self._resume, run_id, approve, answer, step_id, wait_s, call=call)
        return event_stream(resuming)

    async def _handle_message(
        self,
        message: str,
        session_id: str | None,
        watch: Watch | None,
        priority: str | None = None,
        run_id: str | None = None,
        message_id: str | None = None,
    ) -> RunSummary:
        """``start``; ``run_id``: the id its enqueuer gave the run (a durable drive's)."""
        self._check_words(message, "the message")
        if session_id is not None:
            require_session_id(session_id)
        if message_id is None:
            return await self._handle_new(message, session_id, watch, priority, run_id, None)
        answered = await self.answer_of_message(
            message, session_id=session_id, message_id=message_id
        )
        if answered is not None:
            return answered
        handling = (self.agent.config.name, session_id, message_id)
        if handling in self._handling:  # its run is not stored yet: no summary to give
            raise RunBusyError(
                f"message {message_id!r} is being handled by an earlier request",
                hint="send it again (the same message_id) once that request is answered: "
                "the answer is then the run it took",
            )
        self._handling.add(handling)
        try:
            return await self._handle_new(message, session_id, watch, priority, run_id, message_id)
        except MessageRepeatedError as repeated:  # another process's try was stored first
            return await self._repeated(repeated.run_id, message_id, message)
        finally:
            self._handling.discard(handling)

    async def _repeated(self, run_id: str, message_id: str, message: str) -> RunSummary:
        """The summary of the run that took ``message_id``, for a message sent again.

        An id sent with another message is a client's mistake (a counter reused, two
        messages under one id), not a retry: ``INVALID_INPUT``, and nothing is handled.
        """
        events = await self.events(run_id)
        said = next(
            (
                e.payload.text
                for e in events
                if isinstance(e.payload, UserMessage | UserAnswered)
                and e.payload.message_id == message_id
            ),
            message,
        )
        if said != message:
            raise InvalidInputError(
                f"message id {message_id!r} was sent with another message (run {run_id})",
                hint="give every message of a session its own id; send a retry unchanged",
            )
        if not events:
            raise RunNotFoundError(f"no run {run_id!r}")
        state = fold(run_id, events)
        summary = summarize_run(state)
        session = await self._session(state.session_id) if state.session_id else None
        open_run = session.open_run_id if session is not None else None
        if session is not None:
            summary, answered = await self._told_beside(summary, session, message, state.language)
            if answered is not None and answered == open_run:  # its reply asked it already
                return summary
        return await self._still_asked(summary, state, open_run)  # as it was answered

    async def _told_beside(
        self, summary: RunSummary, session: SessionRecord, message: str, language: Language
    ) -> tuple[RunSummary, str | None]:
        """``summary`` with the replies its turn gave beside it, for a retry of its message.

        The run a correction declined ("不对，是 OD…", its reply first) and the run whose
        waiting question the turn answered (``UserAnswered.via_run``, its reply after, as
        that turn left it: not what a later turn made of it): the turns beside this run's
        in the session, read from their logs. Also the id of that answered run, if any.
        """
        runs = [str(turn.get("run_id")) for turn in session.turns]
        if summary.run_id not in runs:
            return summary, None
        at = runs.index(summary.run_id)
        replies = [summary.reply]
        answered_run = None
        if at > 0:
            declined = fold(runs[at - 1], await self.events(runs[at - 1]))
            if _declined_by(declined, message) and declined.reply:
                replies.insert(0, self._in_language(declined.reply, language))
        if at + 1 < len(runs):
            events = _until_next_input(await self.events(runs[at + 1]), summary.run_id)
            answered = fold(runs[at + 1], events)
            if answered.answered_via == summary.run_id:
                replies.append(answered.reply)
                answered_run = answered.run_id
        joined = "\n".join(reply for reply in replies if reply)
        if joined == (summary.reply or ""):
            return summary, answered_run
        return summary.model_copy(update={"reply": joined}), answered_run

    async def _asks_another(self, run_id: str, message: str) -> bool:
        """Whether a session's message, typed at ``run_id``'s question, is a new request.

        "我要投诉你们的客服" asked for an order id complains: it starts a run of its own and
        the question waits for its answer, when a rule gives the message an intent that
        ``interrupts`` (config) and the message does not give the value asked for
        (``IntentLayer.another_request``). A withdrawal ("算了") or a yes or no stays the
        question's (but a thanks that reads as a yes, "好的，谢谢", is an intent that only
        replies: answered on its own), as does anything typed at a clarification.

        A request of an intent that does not ``interrupt`` still does at a free-text
        question (``whole_answer``) when it names a value of its own
        (``names_its_own_value``): "取消订单 OD2611280008" asked for the new address is no
        address, and was answered by the question again, the cancellation lost. So is the
        same request of another value asked for "too" ("OD2611280008 也要改地址": a run of
        its own, which asks that order's address, where the question's run was silently
        moved to that order, its own change lost). Elsewhere only an intent that interrupts
        does ("不想要了" asked for a refund's order id is its reason, not a cancel).
        """
        if withdraws(message):
            return False
        intent = self.agent.intent
        other = intent.rule_intent(message)
        spec_of_other = self.agent.config.intent(other) if other is not None else None
        if spec_of_other is None:
            return False
        replies = spec_of_other.route is RouteAction.REPLY
        if yes_or_no(message) is not None and not replies:  # "好的，谢谢" is thanks, not a yes
            return False
        if not spec_of_other.interrupts and not self._per_agent().free_text_answers:
            return False
        state = await self._recorded_state(run_id, "open_question")
        slot = state.pending.slot if state.pending is not None else None
        if slot is None or state.intent is None or state.received_at is None:
            return False
        spec = self.agent.config.entities.get(slot)
        if names_entity(message, slot, spec):  # "记性太差了，订单号忘了": about the question
            return False
        found = intent.entities.extract(message, state.received_at, answering=slot)
        free_text = spec is not None and spec.whole_answer and slot not in found
        held = state.entities
        own = free_text and names_its_own_value(self.agent, spec_of_other.name, found, held)
        # the same request of another value is a run of its own only asked for "too"
        # ("OD2611280008 也要改地址"); "不对，是 OD2611280008 要改地址" or "改地址，OD…"
        # moves the question's run to that order, as before
        same = other == state.intent.label
        if own and (not same or asks_for_another(message)):
            correction = intent.follow_up(message)
            if correction is None or correction.kind != "correction":
                return True
        if not spec_of_other.interrupts:
            return False
        # free text takes almost anything, but a line that a rule reads whole as a thanks, a
        # goodbye or a request for a person is none: "再见" or "转人工" asked for the new
        # address became the address
        on_its_own = replies or spec_of_other.route is RouteAction.HANDOFF
        whole = spec is not None and spec.whole_answer and not on_its_own
        return intent.another_request(message, found, slot, state.intent.label, whole)

    async def _run_of_message(self, session_id: str | None, message_id: str) -> str | None:
        """The run that took ``message_id`` in the session, if one did (a recorded read)."""
        require_message_id(message_id)
        store = self.store
        if not isinstance(store, MessageLog):
            raise InvalidInputError(
                f"this store ({type(store).__name__}) keeps no message ids",
                hint="send the message without message_id, or use SqlStore or MemoryStore",
            )
        read = partial(store.run_of_message, self.agent.config.name, session_id, message_id)
        return await self._recorded_io("message", read, str | None)

    async def _handle_new(
        self,
        message: str,
        session_id: str | None,
        watch: Watch | None,
        priority: str | None,
        run_id: str | None,
        message_id: str | None,
    ) -> RunSummary:
        """``_handle_message`` of a message no turn took: answer, approve, or a new run."""
        limit = self.agent.config.limits.max_message_chars
        if len(message) > limit:
            raise InputTooLargeError(
                f"the message has {len(message)} characters; the limit is {limit}",
                hint="split it, or raise limits.max_message_chars",
            )
        # only a message within the limit is read for its priority words
        found = run_priority(priority, message, self._per_agent().priority)
        session = await self._session(session_id) if session_id else None
        given, at_confirmation, repeats = await self._read_at_open_run(session, message)
        if self.replayed_start is not None:
            replayed = self.replayed_start
            at_confirmation, repeats = replayed.at_confirmation, replayed.repeats_request
        if given is not None and given.corrects and session_id is not None:
            # declined first, saying why; the message is then a new run's, of the session
            # as the decline left it (its last turn the declined request, to follow)
            # a confirmation's no, or the answer that takes a question's request back
            declined = await self._resume(
                given.run_id, given.approve, given.answer, None, 0.0, None, given.said(message)
            )
            session, given = await self._session(session_id), None
            at_confirmation = repeats = False
        else:
            declined = None
        if given is not None:
            return await self._resume(
                given.run_id,
                given.approve,
                given.answer,
                None,
                0.0,
                watch,
                given.said(message),
                message_id=message_id,
            )
        run_id, holding = await self._new_run(run_id)
        async with holding as held:
            # the run's start is written out here, not in a coroutine of its own: a frame
            # that would stay alive, waiting on the drive, for the whole run
            language = detect_language(
                message, _spoken(session) or self.agent.config.default_language
            )
            ranks = self.replayed_latency is not None or self._ranked_tools()
            observed = await self._observed_latency() if ranks else {}
            journal = self._begin(
                run_id,
                session,
                session_id,
                language,
                ENTRY_MESSAGE,
                watch,
                (found, observed),
                at_confirmation=at_confirmation,
                repeats_request=repeats,
            )
            journal.emit("intent", UserMessage(message, message_id))
            self._carry_over(journal, session, message)
            summary = await self._drive(journal, held)
        if declined is None or not declined.reply:
            return summary
        # the person is told the waiting request was dropped, then what the new one asks,
        # in the language of the line that corrected it ("sorry, I meant …")
        told = self._in_language(declined.reply, journal.state.language)
        return summary.model_copy(update={"reply": f"{told}\n{summary.reply or ''}"})

    def _in_language(self, reply: str, language: Language) -> str:
        """``reply`` in ``language`` when it is the plain ``cancelled`` reply in the other."""
        render = self.agent.renderer.render
        if reply in (render("cancelled", {}, "zh"), render("cancelled", {}, "en")):
            return render("cancelled", {}, language)
        return reply

    async def answer_of_message(
        self, message: str, *, session_id: str | None, message_id: str
    ) -> RunSummary | None:
        """What ``start`` answers a message whose ``message_id`` a turn already took.

        The current summary of the run that took it; None when no turn took it yet. An
        id taken by another message is ``INVALID_INPUT``. A server that enqueues drives
        asks this first, as ``start`` does.
        """
        taken = await self._run_of_message(session_id, message_id)
        return None if taken is None else await self._repeated(taken, message_id, message)

    async def open_run_input(self, message: str, *, session_id: str) -> OpenRunInput | None:
        """What ``start(message, session_id=...)`` would give the session's paused run, if any.

        An answer to its question, or a yes or no to its confirmation; None when the
        message starts a run of its own. A server that enqueues drives asks this first, so
        that the drive it enqueues, and the run its answer names, is that run's.
        """
        require_session_id(session_id)
        return await self._given_to_open_run(await self._session(session_id), message)

    async def _given_to_open_run(
        self, session: SessionRecord | None, message: str
    ) -> OpenRunInput | None:
        """``open_run_input`` on the session as read."""
        return (await self._read_at_open_run(session, message, flags=False))[0]

    async def _read_at_open_run(
        self, session: SessionRecord | None, message: str, *, flags: bool = True
    ) -> tuple[OpenRunInput | None, bool, bool]:
        """What ``message`` gives the session's open run, and two flags for a new run.

        The first flag is ``True`` when the open run waits for a confirmation whose prompt
        is the last thing the session was told, asked (``_asked_last``) or reminded of
        below another reply (``_reminded_last``): a new run's ``at_confirmation`` (see
        ``RunStarted``). Once, as the chat does: after the reply to an unclear line
        (outcome ``unclear``), another unclear line is asked about as it always was, and a
        person who keeps asking for a colleague gets one (``limits.max_questions``).
        The second is a new run's ``repeats_request`` (``_repeats_request``). Not
        ``flags``: only what the message gives the open run (both flags ``False``).
        """
        if session is None or not session.open_run_id:
            return None, False, False
        open_run = session.open_run_id
        status = await self._run_status(open_run)
        if status == RunStatus.AWAITING_USER.value and await self._withdrawn_at_question(
            session, open_run, message
        ):  # "算了，帮我查下我的订单": its withdrawal ends the run, then a run of its own
            return OpenRunInput(open_run, answer=message, corrects=True), False, False
        # a new request typed at a question is a run of its own; the question waits
        if status == RunStatus.AWAITING_USER.value and not await self._asks_another(
            open_run, message
        ):
            return OpenRunInput(open_run, answer=message), False, False
        if status != RunStatus.AWAITING_CONFIRM.value:
            return None, False, False
        given = await self._confirmation_input(session, open_run, message)
        if not flags:
            return given, False, False
        agent = self.agent.config.name
        shown_last = _asked_last(session) or _reminded_last(session, agent)
        # a plain yes after an unclear line it may answer as well ("不退了吗", then "对"): the
        # prompt once more, never the desk's "what do you want?" (``_reasked_last``)
        plain_yes = given is None and confirmation_answer(message) is True
        at_confirmation = shown_last and (not _last_outcome(session, "unclear") or plain_yes)
        if given is None and at_confirmation and defers(message):  # "not yet", "我再想想"
            return None, True, True
        repeats = given is None and await self._repeats_request(session, message)
        return given, at_confirmation, repeats

    async def _confirmation_input(
        self, session: SessionRecord, open_run: str, message: str
    ) -> OpenRunInput | None:
        """A yes, a no or a correction to the confirmation ``open_run`` waits for, if any."""
        if _asked_last(session) or _reasked_last(session, self.agent.config.name):
            decided = confirmation_answer(message)
            if decided is True and _yes_may_answer(session) and not yes_beyond_doubt(message):
                return None  # "不退了吗", then "对": the prompt once more
            if decided is None and may_say_the_action(message):  # "确认取消" to "确认取消订单…吗？"
                decided = confirmation_answer(message, await self._prompt_of(open_run))
            if decided is not None:
                return OpenRunInput(open_run, approve=decided)
            if self._corrects(session, message):  # not this one: it is never carried out
                return OpenRunInput(open_run, approve=False, corrects=True)
            if self._switches_request(session, message):  # "算了还是修一下吧": not this one
                return OpenRunInput(open_run, approve=False, corrects=True)
            if await self._replaces_value(open_run, message):  # "refund OD… instead"
                return OpenRunInput(open_run, approve=False, corrects=True)
            if await self._calls_off_by_name(session, open_run, message):  # "改地址的申请取消掉吧"
                return OpenRunInput(open_run, approve=False)
            if await self._withdrawn_for_a_question(session, open_run, message):  # "不用了，物流呢"
                return OpenRunInput(open_run, approve=False, corrects=True)
            if self._refused_for_another(message):  # "不，退50元就行": never carried out
                return OpenRunInput(open_run, approve=False, corrects=True)
        elif _reminded_last(session, self.agent.config.name):
            # not read with the prompt: "好的，确认取消" or "ok, cancel it" there may take up
            # what the reply before it suggested ("cancel OD… instead")
            if explicit_yes(message):
                return OpenRunInput(open_run, approve=True)
            if confirmation_answer(message) is False:  # "不用了", "never mind": safe to take
                return OpenRunInput(open_run, approve=False)
        else:
            return None
        # "还是别取消了", "don't cancel it": the line says it is not the request that waits
        # (its intent's ``unless``); answered "didn't understand", a "好的" after it cancelled.
        # Not a question that says no "no" ("退款政策是什么", "退款会扣运费吗" at a refund's
        # prompt: the ``unless`` says they ask for none, and they declined it); "don't
        # cancel it, where is OD…?" says one
        asked = _open_turn(session, "request")
        if (
            isinstance(asked, str)
            and self.agent.intent.negates(asked, message)
            and (says_a_negation(message) or not reads_as_question(message))
        ):
            # "取消 OD2611250001 的退款", a line that only calls off another order's: not
            # this one ("不要取消了，帮我查下 OD… 的物流" names the other in its question)
            named = called_off(message)
            if named is None and calls_off_another(message):  # "取消上一单的退款"
                return None
            if named is not None:
                # "取消退款" at a cancellation's prompt calls off another thing
                if self.agent.intent.rule_intent(named) not in (None, asked):
                    return None
                waiting = await self._waiting_state(open_run, "negated")
                if waiting is not None and not self._names_the_waiting(
                    named, waiting, message, asked
                ):
                    return None
            # "不要换新，帮我修一下" asks another thing instead: declined, then run
            other = self.agent.intent.rule_intent(message)
            instead = other is not None and other != asked
            return OpenRunInput(open_run, approve=False, corrects=instead)
        return None  # a new request: the confirmation waits

    async def _calls_off_by_name(self, session: SessionRecord, open_run: str, message: str) -> bool:
        """Whether ``message`` calls the waiting request off by its name: a no to it.

        "改地址的申请取消掉吧", "cancel the address change": a line that only calls
        something off (``called_off``), and what it calls off is read by the waiting
        request's own rule. Before, the cancel intent's rule read "取消掉", and the desk
        proposed cancelling the whole order while the address change still waited. Not
        where the request is itself a call-off (to "确认取消订单…吗？", "帮我取消吧" asks for
        it again), nor where the line names a value the waiting run does not hold
        ("取消 OD2611250001 的退款" at another order's refund).
        """
        named = called_off(message)
        asked = _open_turn(session, "request")
        if named is None or not isinstance(asked, str):
            return False
        if self.agent.intent.rule_intent(named) != asked:
            return False
        waiting = await self._waiting_state(open_run, "calls_off")
        if waiting is None or waiting.pending is None or waiting.received_at is None:
            return False
        if says_calling_off(waiting.pending.prompt):
            return False
        return self._names_the_waiting(named, waiting, message, asked)

    async def _replaces_value(self, open_run: str, message: str) -> bool:
        """Whether ``message`` asks the waiting request again, of another value, in its place.

        "refund OD2611100003 instead" or "算了，还是退款 OD2611100003 吧" to "shall I refund
        459 CNY for order OD2611200002?": a switch word (``switches``), a rule that reads
        the waiting run's own intent, and a value the waiting run holds named otherwise.
        The waiting one is declined first: left waiting, the refund of the wrong order
        stayed one "confirm" away beside the right one.
        """
        if not switches(message) or adds_a_request(message):  # "actually, refund OD… too"
            return False
        asked = self.agent.intent.rule_intent(message)
        if asked is None:
            return False
        waiting = await self._waiting_state(open_run, "replaces_value")
        if waiting is None or waiting.received_at is None or request_of(waiting) != asked:
            return False
        held = waiting.entities
        extractor = self.agent.intent.entities
        # "instead of OD…, refund <the waiting order>": the waiting value named as well
        mentioned = extractor.mentions(message, held)
        if any(held[name] in values or len(values) > 1 for name, values in mentioned.items()):
            return False
        named = extractor.extract(message, waiting.received_at)
        return any(name in held and held[name] != value for name, value in named.items())

    async def _repeats_request(self, session: SessionRecord, message: str) -> bool:
        """Whether ``message`` asks again for what the session's open run waits to confirm.

        "换新要多久能到？" or "I want a replacement" while "shall I create the exchange?"
        waits. Before, each such line started a run of its own that asked the same
        confirmation again, and a "确认" to each would have asked for two exchanges of one
        order. Now the new run answers with the waiting confirmation (template
        ``already_waiting``, outcome ``repeated``, then ``waiting_prompt``), and a yes
        after it approves that one.

        Only where nothing says it is another request: a rule (never a guess) reads the
        waiting run's own intent; the run it would start holds the waiting run's values,
        those the line names and those the session carries over ("OD… 发货了吗" between
        them made "帮我取消这个订单" another order's); the line names no value the waiting
        run lacks, nor two of one ("取消 OD… 和 OD…"); and it neither holds the request
        back ("取消换新", "我再考虑一下") nor asks for one more ("另一台也要换新"). Any
        doubt leaves the line a run of its own, as it was.
        """
        open_run = session.open_run_id
        if open_run is None:
            return False
        asked = self.agent.intent.rule_intent(message)
        if asked is None or asks_for_another(message):
            return False
        waiting = await self._waiting_state(open_run, "repeats_request")
        if waiting is None:
            return False
        pending = waiting.pending
        if waiting.agent != self.agent.config.name or waiting.received_at is None:
            return False
        if pending is None or request_of(waiting) != asked or holds_back(message, pending.prompt):
            return False
        route = waiting.route
        # its plan the intent's own, not one a plan rule chose ("查一下 OD…，把状态改成已取消"
        # is a cancellation: "OD… 现在什么情况" after it asks the status)
        if route is None or route.template != self.agent.config.intent(asked).plan:
            return False
        extractor = self.agent.intent.entities
        said = extractor.mentions(message, waiting.entities).values()
        if any(len(set(values)) > 1 for values in said):
            return False
        named = extractor.extract(message, waiting.received_at)
        held = waiting.entities
        if any(name not in held for name in named):
            return False
        # a free-text value is not read back from every line that gives one ("改地址，寄到
        # 北京市…吧" names no address the patterns find): only one named again is the same
        specs = self.agent.config.entities
        free = (name for name in held if name in specs and specs[name].whole_answer)
        if any(named.get(name) != held[name] for name in free):
            return False
        # every value the waiting run holds, the new run would: "我要全额退款" at "退款
        # 229.5 元吗？" would not hold the half (an amount is not carried over), and "a
        # different order" no order at all
        would = {**self._carried(session, message), **named}
        return all(name in would and would[name] == value for name, value in held.items())

    def _switches_request(self, session: SessionRecord, message: str) -> bool:
        """Whether ``message`` puts a request of another intent in place of the one asked.

        "算了还是修一下吧" or "actually just repair it" to "shall I create the exchange?":
        a switch word (``switches``) and a rule that reads another intent whose plan
        writes ("actually, where is my order?" is a question beside it, not instead). The
        exchange is declined first, then the repair runs: left waiting, a "confirm" to the
        reminder under the repair's reply booked the exchange too, two remedies for one
        fault. Only the rules decide the other intent, never a guess.
        """
        if not switches(message):
            return False
        other = self._other_intent(session, message)
        return other is not None and plans_a_write(self.agent, other)

    def _other_intent(self, session: SessionRecord, message: str) -> str | None:
        """The intent a rule reads in ``message``, when it is not the open run's own."""
        other = self.agent.intent.rule_intent(message)
        # the open run's own turn: the last may be a reply to an unclear line since
        asked = _open_turn(session, "intent")
        if other is None or not isinstance(asked, str):
            return None
        spec = self.agent.config.intent(other)
        return None if spec.name == asked or asked in spec.aliases else spec.name

    async def _withdrawn_for_a_question(
        self, session: SessionRecord, open_run: str, message: str
    ) -> bool:
        """Whether ``message`` takes the waiting request back, then asks a question.

        "不取消了，帮我查下物流", "no thanks, where is my parcel?": a withdrawal first
        (``withdraws_first``, read again with the waiting prompt: "不取消了" takes back no
        refund), then what a rule reads as another intent that writes nothing. Before,
        the parcel was looked up and the cancellation just taken back stayed one "确认"
        away, under a reminder. Not for a request that writes: a line that puts one in
        place of the waiting one is ``_switches_request``'s, or a request of its own
        beside it, as before; nor where the line names a value the waiting run holds
        otherwise, or another number (``_names_what_waits``).
        """
        if not withdraws_first(message):
            return False
        other = self._other_intent(session, message)
        if other is None or plans_a_write(self.agent, other):
            return False
        waiting = await self._waiting_state(open_run, "withdrawn")
        if waiting is None or waiting.received_at is None or waiting.pending is None:
            return False
        if not withdraws_first(message, waiting.pending.prompt):  # "不取消了" to a refund
            return False
        return self._names_what_waits(waiting, message)

    async def _withdrawn_at_question(
        self, session: SessionRecord, open_run: str, message: str
    ) -> bool:
        """Whether ``message``, typed at ``open_run``'s question, takes it back, then asks.

        "算了，帮我查下我的订单", "never mind, show me my orders" asked for a refund's order:
        the withdrawal (``withdraws``) ended the run, as it still does, and the request
        after it was lost. Now the run ends and the line is then a run of its own, as
        ``_withdrawn_for_a_question`` does at a confirmation: when a rule reads another
        intent in it whose plan for the line's values writes nothing (``plans_only_reads``:
        "算了，取消吧" reads as an order's cancellation, and only takes the refund back; a
        thanks after "算了" is the withdrawal's). The values are the line's over the
        waiting run's, which the new run may carry: "算了吧，订单状态改为已取消" at an
        order's address question plans that order's cancellation. Not where the line
        names a value the waiting run holds otherwise, nor another number
        (``_names_what_waits``), nor where the person does it themselves ("算了，我自己查").
        """
        if not withdraws(message) or on_ones_own(message):
            return False
        other = self._other_intent(session, message)
        if other is None:
            return False
        waiting = await self._waiting_state(open_run, "withdrawn")
        if waiting is None or waiting.received_at is None:
            return False
        said = self.agent.intent.entities.extract(message, waiting.received_at)
        known = {**waiting.entities, **said}
        return plans_only_reads(self.agent, other, known) and self._names_what_waits(
            waiting, message
        )

    def _names_the_waiting(self, named: str, waiting: RunState, message: str, asked: str) -> bool:
        """Whether a call-off (``named``: what it calls off) names the request that waits.

        What it says before its 的 fits the waiting request (``_qualifier_fits``: not
        "取消耳机的退款申请" at the keyboard's refund), and each value it names is one the
        waiting run holds or its prompt states (``_names_what_waits``, ``others=False``).
        """
        return (
            waiting.pending is not None
            and self._qualifier_fits(named, waiting.pending.prompt, asked)
            and self._names_what_waits(waiting, message, others=False)
        )

    def _qualifier_fits(self, named: str, prompt: str, asked: str) -> bool:
        """Whether what a call-off says of the request before its 的 is the waiting one's.

        Stated by its prompt: "键盘的退款申请", "459 元的退款" at "订单 OD…（机械键盘 K8）…
        确认为这单退款 459 元吗？". Or the request's own name, read by its intent's rule
        ("改地址的申请"), or a pointer ("这个的", "刚才的"). "耳机的" or "老婆的" name
        another, or what no prompt says: not the waiting request. English has no 的.
        """
        qualifier = _qualifier(named)
        if _POINTING.match(qualifier) or qualifier in _unspaced(prompt):
            return True
        return self.agent.intent.rule_intent(qualifier) == asked

    def _names_what_waits(self, waiting: RunState, message: str, *, others: bool = True) -> bool:
        """Whether each value ``message`` names of those ``waiting`` holds is the one it holds.

        And it names nothing else with a number ("取消退款申请 RF7AE…": another refund).
        ``others``: it may name values of what the waiting run does not hold ("不用了，
        OD… 到哪了" names an order at an order's refund, and it may name a date); a
        call-off by name (``_calls_off_by_name``) names only what it holds.
        """
        extractor = self.agent.intent.entities
        if waiting.received_at is None or re.search(r"\d", extractor.without_values(message)[0]):
            return False
        said = extractor.extract(message, waiting.received_at)
        held: Mapping[str, Any] = waiting.entities
        if not others and waiting.pending is not None:
            # what its prompt states is what waits as well: "取消键盘的退款申请" and "取消459元
            # 的退款申请" at "订单 OD…（机械键盘 K8）…确认为这单退款 459 元吗？" (each was read
            # as a refund of its own, proposed beside the waiting one)
            stated = extractor.extract(waiting.pending.prompt, waiting.received_at)
            held = {**stated, **held}
        return all(
            (others or name in held) and _same_value(held.get(name, value), value)
            for name, value in said.items()
        )

    async def _prompt_of(self, run_id: str) -> str | None:
        """The prompt ``run_id`` waits on (a recorded read): a line may say its action again."""
        state = await self._recorded_state(run_id, "confirm_prompt")
        return state.pending.prompt if state.pending is not None else None

    def _follows(self, session: SessionRecord | None) -> str | None:
        """The session's last request a new run's follow-up line may ask again (``follows``)."""
        return last_request(session, self.agent.config.name)

    def _refused_for_another(self, message: str) -> bool:
        """Whether ``message`` says no to the confirmation and asks for another thing.

        "不，退50元就行", "not that one, refund OD…", "不对，是另一个": the no is to what
        was asked, and the rest is a request (or "another one"). The confirmation that
        waited was kept before, and repeated after the new one's answer: a "确认" to that
        reminder carried out both the refund corrected and the one it corrected.
        """
        rest = after_a_refusal(message)
        if rest is None or defers(first_clause(rest)):  # "不，等一下，我问问": it waits
            return False
        if confirmation_answer(rest) is not None:  # "不，确认" is read as it was
            return False
        # a request of its own, or "another one"; not "不，就这个", "no, that's right, go
        # ahead" or "不，我是说确认", a no that says yes after all (read as before)
        return self.agent.intent.rule_intent(rest) is not None or names_another_one(rest)

    def _corrects(self, session: SessionRecord, message: str) -> bool:
        """Whether ``message`` corrects the confirmation the session's open run asked last.

        "不对，是 OD…", "sorry, I meant OD…": declined, then a new run that asks the same
        request of the corrected value. Only where that new run may follow the request
        (``may_follow``); else the message is a run of its own, and the confirmation waits.
        """
        line = self.agent.intent.follow_up(message)
        if line is None or line.kind != "correction":
            return False
        request = self._follows(session)
        return request is not None and may_follow(self.agent, request, line)

    async def _recorded_io(self, name: str, read: Callable[[], T], shape: Any) -> T:
        """``read()`` as a recorded read (``Effects.recorded``), here or in a store thread.

        What a run's events depend on in the store: a re-execution of a durable drive is
        answered what the first execution read. Made here (``_here``) only with effects
        that record nothing (``reads_now``: ``recorded`` is ``read()``): an engine that
        records or replays makes the read itself, or answers it without one.
        """
        if self._reads_now():
            found = self._here(read)
            if found is not _NOT_HERE:
                return cast(T, found)
        return await self._io(self.effects.recorded, name, read, shape)

    async def _session(self, session_id: str) -> SessionRecord | None:
        """The session as a new run reads it."""
        now = self.effects.now()
        read = partial(self.store.get_session, session_id, now)
        return await self._recorded_io("session", read, SessionRecord | None)

    async def _run_status(self, run_id: str) -> str | None:
        """A stored run's status, if it is a run of this agent.

        A session id may be shared by agents (one store, one client): another agent's run
        is not this one's to answer or drive, whichever agent spoke last.
        """

        def read() -> str | None:
            record = self.store.get_run(run_id)
            return record.status if record and record.agent == self.agent.config.name else None

        return await self._recorded_io("run_status", read, str | None)

    async def _new_run(self, given: str | None) -> tuple[str, Holding]:
        """A new run's id (``given``, else a fresh one) and its lease block.

        A run id is given by an enqueuer (a durable drive): a drive executed again after
        its process died finds the run stored, and takes the lease as a resume does (a dead
        owner of this host at once, another once its lease expired).
        """
        if given is None:
            run_id = self.effects.new_id("run")
        elif await self._io_here(self.store.get_run, given) is not None:
            return given, self.ownership.holding(given, self.ownership.ttl_s * 2)
        else:
            run_id = given
        return run_id, self.ownership.holding(run_id, 0.0, new_run=True)

    def _begin(
        self,
        run_id: str,
        session: SessionRecord | None,
        session_id: str | None,
        language: Language,
        entry: str,
        watch: Watch | None = None,
        ranking: tuple[PriorityFound, dict[str, dict[str, float]]] | None = None,
        *,
        at_confirmation: bool = False,
        repeats_request: bool = False,
    ) -> Journal:
        """A new run's journal, opened with ``run_started``; ``entry``: message or plan.

        ``ranking``: the run's priority and the observed latency its choices rank by;
        ``at_confirmation``: the session's open run waits for a confirmation;
        ``repeats_request``: the message asks for that again (``_repeats_request``).
        """
        found, observed = ranking or (PriorityFound("normal", "default"), {})
        journal = Journal(RunState(run_id=run_id), self.effects, watch)
        received_at = self.effects.now()
        facts = self._per_agent()
        journal.emit(
            "run",
            RunStarted(
                trace_id=self.effects.new_id("trace"),
                agent=self.agent.name,
                session_id=session_id,
                agent_root=facts.root,
                model=facts.model,
                received_at=received_at.isoformat(),
                language=language,
                redact=self._redaction_spec(),
                entry=entry,
                priority=found.priority,
                priority_source=found.source,
                observed_latency=observed,
                degraded=self.effects.recorded("degraded", self._degraded, list[str]),
                follows=self._follows(session) if entry == ENTRY_MESSAGE else None,
                at_confirmation=at_confirmation,
                repeats_request=repeats_request,
            ),
        )
        return journal

    def _degraded(self) -> list[str]:
        """The agent's tools that are degraded now (this process's health of them)."""
        return self.agent.health.degraded_among(self.agent.tools.names())

    async def _observed_latency(self) -> dict[str, dict[str, float]]:
        """The observed latency of the agent's tools that have equivalents, for a new run.

        One store query per run start, only for an agent whose tools have equivalents and
        a store that answers it (``LatencySource``); recorded in ``run_started``, so the
        run's choices, its resume and its replay all rank by the same figures.
        """
        if self.replayed_latency is not None:
            return dict(self.replayed_latency)
        names = self._ranked_tools()
        if not names or not isinstance(self.store, LatencySource):
            return {}
        store = self.store
        window = self.agent.config.decision.latency_window

        if self._latency_form is None or self._latency_form[0] is not store:
            self._latency_form = (store, _takes_timeouts(store))  # read once per store
        timeouts = self._latency_form[1]

        def read() -> dict[str, dict[str, float]]:
            if timeouts:
                found = store.tool_latency(self.agent.name, list(names), window, timeouts_ms=names)
            else:  # a store written for the three-argument form: its successes only
                found = store.tool_latency(self.agent.name, list(names), window)
            return {
                name: {"p95_ms": round(latency.p95_ms, 3), "calls": latency.calls}
                for name, latency in sorted(found.items())
            }

        return await self._recorded_io("observed_latency", read, dict[str, dict[str, float]])

    def _per_agent(self) -> _PerAgent:
        """What every run of the agent reads the same: worked out once (the agent is frozen)."""
        agent = self.agent
        if self._agent_facts is None or self._agent_facts.agent is not agent:
            self._agent_facts = _PerAgent.of(agent)
        return self._agent_facts

    def _ranked_tools(self) -> dict[str, float]:
        """The agent's tools that have equivalents, with their timeouts in ms."""
        return self._per_agent().ranked

    def _redaction_spec(self) -> dict[str, list[str]]:
        spec = self._per_agent().redact
        return {"fields": list(spec["fields"]), "patterns": list(spec["patterns"])}

    def _carried(self, session: SessionRecord | None, message: str | None = None) -> dict[str, Any]:
        """The session's entities that carry over to a new run (of ``message``, if one).

        Not one the message says is another (``EntityExtractor.not_carried``: the entity's
        ``carry_unless`` and ``carry_unless_changed``): "另一个订单" is not the order of
        the last turn.
        """
        if session is None or not session.entities:
            return {}
        specs = self.agent.config.entities
        extractor = self.agent.intent.entities
        other = extractor.not_carried(message, session.entities) if message else frozenset()
        return {
            name: value
            for name, value in session.entities.items()
            if name in specs and specs[name].carries_over and name not in other
        }

    def _carry_over(
        self, journal: Journal, session: SessionRecord | None, message: str | None = None
    ) -> None:
        """Record the session's entities that carry over to a new run (of ``message``)."""
        carried = self._carried(session, message)
        if carried:
            journal.emit("intent", EntitiesMerged(carried, "session"))

    async def run_plan(
        self,
        plan: str | Plan,
        *,
        entities: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        intent: str | None = None,
        priority: str | None = None,
    ) -> RunSummary:
        """Run a given plan: a template name from the agent's config, or a ``Plan``.

        No message is classified: the plan is validated as a model plan is (tools,
        binding, cycles, allow-list), then runs with the same confirmations, events,
        budgets and resume as a message-started run. ``entities`` are what
        ``$entities.x`` references read (each declared in the config, of its kind's type).
        An unknown template or an invalid plan raises ``PlanInvalidError`` before any run
        exists; an unknown or ill-typed entity raises ``InvalidArgumentError``, and so
        does an unknown ``priority`` (``urgent``, ``normal`` or ``budget``; default normal).

        >>> summary = await runtime.run_plan("exchange", entities={"order_id": "HD20240501"})
        """
        return await self._run_plan(plan, entities, session_id, intent, priority)

    async def _run_plan(
        self,
        plan: str | Plan,
        entities: Mapping[str, Any] | None,
        session_id: str | None,
        intent: str | None,
        priority: str | None,
        run_id: str | None = None,
    ) -> RunSummary:
        """``run_plan``; ``run_id``: the id its enqueuer gave the run (a durable drive's)."""
        if session_id is not None:
            require_session_id(session_id)
        given = resolve_plan(self.agent, plan, intent)
        checked = check_entities(self.agent, entities or {})
        session = await self._session(session_id) if session_id else None
        check_no_message(given)
        check_required(self.agent, given, checked, self._carried(session))
        found = run_priority(priority, "", self._per_agent().priority)
        observed = await self._observed_latency()
        run_id, holding = await self._new_run(run_id)
        async with holding as held:
            language = self.agent.config.default_language
            journal = self._begin(
                run_id, session, session_id, language, ENTRY_PLAN, None, (found, observed)
            )
            self._carry_over(journal, session)
            if checked:
                journal.emit("intent", EntitiesMerged(checked, "caller"))
            start_plan(journal, given, self.effects)
            return await self._drive(journal, held)

    async def resume(
        self,
        run_id: str,
        *,
        approve: bool | None = None,
        answer: str | None = None,
        step_id: str | None = None,
        wait_s: float = 0.0,
        call: str | None = None,
    ) -> RunSummary:
        """Continue a stored run.

        Approve or reject a pending confirmation, answer a pending question, or (with
        neither) pick up a run whose process died mid-way. While another process drives
        the run this raises ``RunBusyError``, or waits up to ``wait_s`` for it.

        Input is applied to what the caller saw: an approval or answer that another call
        already gave (a double click) returns the run's current summary instead of
        approving or answering whatever the run waits for next. ``step_id`` names the
        confirmation being answered (``summary.pending.step_id``); without it, the one the
        run waited for when this call began. ``call`` (``summary.pending.call``, given with
        ``step_id``) binds the decision to the call the person was shown: if the step asks
        about another one now (a deploy changed its tool or arguments), nothing is decided
        and this raises ``RUN_NOT_RESUMABLE``. Without it, a decision is for whatever the
        step asks when it is applied.
        """
        return await self._resume(run_id, approve, answer, step_id, wait_s, None, call=call)

    async def _resume(
        self,
        run_id: str,
        approve: bool | None,
        answer: str | None,
        step_id: str | None,
        wait_s: float,
        watch: Watch | None,
        said: str | None = None,
        call: str | None = None,
        *,
        message_id: str | None = None,
        via_run: str | None = None,
    ) -> RunSummary:
        """``resume``; ``said``: the session's message that gave ``approve`` (logged first).

        ``message_id``: the id of the session's message that gave the input (``start``).
        ``via_run``: the run that learned ``answer`` (``UserAnswered.via_run``).
        """
        if answer is not None:
            self._check_words(answer, "the answer")
        require_one_input(approve, answer, step_id, call)
        seen = await self._recorded_state(run_id, "log_seen")
        if seen.agent != self.agent.config.name:  # its intents, tools and rules are another's
            raise RunNotFoundError(
                f"run {run_id} belongs to agent {seen.agent!r}, not {self.agent.config.name!r}",
                hint=f"resume it with a runtime of agent {seen.agent!r}",
            )
        if seen.status.terminal:  # it never changes again: answered without taking the
            # run (taking it, a resume beside one that held it was RUN_BUSY, retryable)
            if self._given_already(seen, seen, approve, answer, step_id):
                return summarize_run(seen)
            check_input(seen, approve, answer)  # RUN_NOT_RESUMABLE: it has ended
        async with self.ownership.holding(run_id, wait_s) as held:
            state = await self._recorded_state(run_id, "log")
            if self._given_already(seen, state, approve, answer, step_id):
                if state.status.terminal or state.status in _WAITS_FOR_THE_USER:
                    return summarize_run(state)
                # given before, and the drive that took it died before the run paused or
                # ended (this call holds the run): a retried click picks it up, as a
                # resume with no input does, instead of answering a stale summary
                journal = self._journal_for_input(state, None, None, watch)
                return await self._drive(journal, held)
            if approve is not None and _asked_since(seen, state):
                # a click on what the caller saw (a double click, or one sent while another
                # drive ran) approves nothing asked after it: the run shows what it asks now
                return summarize_run(state)
            check_step(state, step_id, call)
            journal = self._journal_for_input(
                state, approve, answer, watch, said, message_id, via_run
            )
            return await self._drive(journal, held)

    def _check_words(self, text: str, what: str) -> None:
        """``require_words``, or only ``require_text`` for a replay's recorded input."""
        if self.replaying:
            require_text(text, what)
        else:
            require_words(text, what)

    def _given_already(
        self,
        seen: RunState,
        now: RunState,
        approve: bool | None,
        answer: str | None,
        named_step: str | None = None,
    ) -> bool:
        """True when this very input was applied by another call since the caller looked.

        A run that no longer waited when the caller looked counts too, when its last
        decision or answer is this one (a late double click). Conflicting input (a reject
        after an approve) is ``RunNotResumableError``.
        """
        if approve is not None:
            if named_step is not None:
                step_id = named_step
            elif seen.pending is not None and seen.pending.step_id:
                step_id = seen.pending.step_id
            elif now.confirmations:  # decided before the caller looked
                step_id = list(now.confirmations)[-1]
            else:
                return False
            decided = now.confirmations.get(step_id)
            if decided is None or (now.pending is not None and now.pending.step_id == step_id):
                return False
            if decided is not approve:
                raise decided_otherwise(now.run_id, step_id, decided)
            return True
        if answer is not None:
            if seen.status is RunStatus.AWAITING_USER:
                asked = len(seen.messages)
            elif len(now.messages) > 1:  # answered before the caller looked
                asked = len(now.messages) - 1
            else:
                return False
            if len(now.messages) <= asked:
                return False
            if now.messages[asked] != answer:
                if now.status is not RunStatus.AWAITING_USER:  # not a late repeat of the
                    return False  # last answer: check_input says what the run waits for
                raise RunNotResumableError(
                    f"the question of run {now.run_id} was answered",
                    hint=f"a question is answered once; {SEE_RUN}",
                )
            return True
        return False

    def _journal_for_input(
        self,
        state: RunState,
        approve: bool | None,
        answer: str | None,
        watch: Watch | None = None,
        said: str | None = None,
        message_id: str | None = None,
        via_run: str | None = None,
    ) -> Journal:
        """Check the input against what the run waits for and record it.

        ``said``: the message of the session that was read as ``approve`` (``yes_or_no``),
        recorded before the decision so the log shows what the person wrote.
        ``message_id``: that message's id, or the answer's (``start``).
        """
        check_input(state, approve, answer)
        journal = Journal(state, self.effects, watch)
        if state.status is RunStatus.AWAITING_CONFIRM:
            assert approve is not None
            assert state.pending is not None and state.pending.step_id is not None
            if said is not None:
                journal.emit("intent", UserMessage(said, message_id))
            journal.emit("decide", ConfirmationGiven(state.pending.step_id, approve))
            journal.transition(RunStatus.DECIDING, "approved" if approve else "rejected")
        elif state.status is RunStatus.AWAITING_USER:
            assert answer is not None
            limit = self.agent.config.limits.max_message_chars
            if len(answer) > limit:
                raise InputTooLargeError(
                    f"the answer has {len(answer)} characters; the limit is {limit}"
                )
            slot = state.pending.slot if state.pending else None
            spoken = answer_language(answer, state.language)
            changed = spoken if spoken != state.language else None
            journal.emit("intent", UserAnswered(answer, slot, changed, message_id, via_run))
            journal.transition(RunStatus.PARSING, "answer received")
        return journal

    async def summary(self, run_id: str) -> RunSummary:
        """The current summary of a stored run."""
        return summarize_run(await self.load_state(run_id))

    async def events(self, run_id: str) -> list[Event]:
        """Every stored event of a run, in order."""
        return await self._io_here(self.store.load_events, run_id)

    async def load_state(self, run_id: str) -> RunState:
        """The folded state of a stored run."""
        events = await self._io_here(self.store.load_events, run_id)
        if not events:
            raise RunNotFoundError(f"no run {run_id!r}")
        return fold(run_id, events)

    async def _waiting_state(self, run_id: str, name: str) -> RunState | None:
        """``_recorded_state`` of a session's waiting run; ``None``: gone, or the store fails.

        What is read beside a turn (a reminder, a repeat) never fails the turn.
        """
        try:
            return await self._recorded_state(run_id, name)
        except (RunNotFoundError, StoreError):
            return None

    async def _recorded_state(self, run_id: str, name: str) -> RunState:
        """``load_state`` as a recorded read: a re-execution folds the log it saw first.

        What is recorded is the log's length: a log only grows, so the same prefix of it
        is what the first execution read, whatever a dead execution appended since.
        """

        def read() -> list[Event]:
            events = self.store.load_events(run_id)
            seen = self.effects.recorded(name, partial(len, events), int)
            return events[:seen]

        if self._reads_now():  # nothing recorded: the whole log, here when it can be
            events = await self._io_here(self.store.load_events, run_id)
        else:  # what the effects record is theirs to do, in a store thread
            events = await self._io(read)
        if not events:
            raise RunNotFoundError(f"no run {run_id!r}")
        return fold(run_id, events)

    # ------------------------------------------------------------------ internals

    async def _io(self, call: Callable[..., T], *args: Any, saving: str | None = None) -> T:
        """Run a store call off the event loop when it does I/O.

        Store calls have threads of their own, not the default pool that sync tools use:
        tool threads that outlived their timeout must not delay a save or the lease's
        heartbeat. A call that was cancelled is waited for before the cancellation goes on.
        ``saving``: the call is a save of that run (``_release_lease`` orders after it).
        """
        if not self.store.blocking:
            return call(*args)
        # in the caller's context: a recorded read or a clock read there is the drive's own
        context = contextvars.copy_context()
        work = self._threads().submit(context.run, call, *args)
        if saving is not None:
            self._note_saving(saving, work)
        try:
            return await asyncio.wrap_future(work)
        except asyncio.CancelledError:
            # A stop does not stop the thread: a call it found running goes on. Wait for
            # it, so that nothing the stop does next (keep what the run did, release its
            # lease) overtakes a save still in flight. A second cancel gives up on it;
            # the run's lease is then released only after it (``_release_lease``).
            with suppress(Exception):
                await asyncio.wrap_future(work)
            raise

    def _reads_now(self) -> bool:
        """Whether the effects record no read (``reads_now``): one may be made here."""
        return getattr(self.effects, "reads_now", False) is True

    async def _io_here(self, call: Callable[..., T], *args: Any) -> T:
        """``_io`` for a read or a lease call of a run's start or resume: here when it can be.

        Made on this thread when the store can make it without waiting (``CallsInPlace``:
        a SQLite file), else in a store thread as ``_io`` makes it.
        """
        found = self._here(call, *args)
        if found is not _NOT_HERE:
            return cast(T, found)
        return await self._io(call, *args)

    def _here(self, call: Callable[..., T], *args: Any) -> T | _NotHere:
        """``call(*args)`` made on this thread inside the store's ``in_place``, or ``_NOT_HERE``.

        ``_NOT_HERE`` when the store offers no calls in place, or this one would have
        waited (``SaveWouldWait``: nothing was done). ``call`` may use only the store calls
        its ``in_place`` covers (``SqlStore``'s ``IN_PLACE_CALLS``): another would wait. A
        store thread costs more than a read of a run's start (a session, a run's events, a
        lease) on a 2-core machine: a chat turn on SQLite spent about half of what SQLite
        added to it on the hops.
        """
        if self._calls_in_place is None:
            self._calls_in_place = _can_call_in_place(self.store)
        if not self._calls_in_place or getattr(self.store, "calls_in_place", False) is not True:
            return _NOT_HERE
        try:
            with cast(CallsInPlace, self.store).in_place():
                return call(*args)
        except SaveWouldWait:
            return _NOT_HERE

    @contextmanager
    def _saving_now(self, run_id: str) -> Iterator[None]:
        """A save of ``run_id`` for as long as the block runs: its retries, its turn.

        Only for a store whose calls have threads: with one in the loop's own thread, no
        save of a stopped run goes on behind its back.
        """
        if not self.store.blocking:
            yield
            return
        saving: Future[None] = Future()
        self._note_saving(run_id, saving)
        try:
            yield
        finally:
            saving.set_result(None)

    def _note_saving(self, run_id: str, work: Future[Any]) -> None:
        """Keep ``work`` among the run's saves in flight until it ends."""
        with self._saving_lock:
            self._saving.setdefault(run_id, set()).add(work)

        def ended(done: Future[Any]) -> None:
            with self._saving_lock:
                saves = self._saving.get(run_id)
                if saves is not None:
                    saves.discard(done)
                    if not saves:
                        del self._saving[run_id]

        work.add_done_callback(ended)

    async def _release_lease(self, lease: Lease) -> None:
        """Give a drive's lease back, after any save of its run that has not ended yet.

        A stop waits for the save it finds running, but a second stop gives up waiting
        (a server out of time, an ``anyio`` scope that cancels at every turn), and that
        save goes on: in its thread, or in the stop's own shielded save, between retries.
        One that commits after the release takes the lease back (a new run's first save
        inserts it with the run), and the run is ``RUN_BUSY`` until the lease expires.
        Then the release is made once those saves have ended, from a store thread, and
        not waited for: the stop gave up waiting for them. No thread waits meanwhile.
        """
        with self._saving_lock:
            saves = tuple(self._saving.get(lease.run_id, ()))
        if not saves:
            await self._io(self.store.release_lease, lease)
            return
        left = [len(saves)]
        counting = threading.Lock()
        threads = self._threads()  # this one: after ``aclose`` nobody would close a new one

        def ended(_: Future[Any]) -> None:
            with counting:
                left[0] -= 1
                if left[0]:
                    return
            try:
                threads.submit(self._release_quietly, lease)
            except RuntimeError:  # closed (``aclose``, the interpreter's exit): here, then
                self._release_quietly(lease)

        for save in saves:
            save.add_done_callback(ended)

    def _release_quietly(self, lease: Lease) -> None:
        """Release ``lease`` with nobody waiting: a failure is logged, not raised."""
        try:
            self.store.release_lease(lease)
        except StoreError:
            pass  # it expires by itself; the outcome is decided
        except Exception:
            logger.exception("releasing the lease on run %s failed", lease.run_id)

    def _threads(self) -> ThreadPoolExecutor:
        """The store calls' own threads, made on first use."""
        if self._store_threads is None:
            self._store_threads = ThreadPoolExecutor(4, thread_name_prefix="corral-store")
        return self._store_threads

    async def _drive(self, journal: Journal, held: Held) -> RunSummary:
        persist = _Saves(self, journal, held)
        loop = RunLoop(
            self.agent,
            journal,
            self.effects,
            persist,
            earlier_owner_may_live=held.earlier_owner_may_live,
            concurrent_steps=self.concurrent_steps,
        )
        try:
            await loop.drive()
        except asyncio.CancelledError:
            await self._keep_after_cancel(persist)
            held.left_to_expire = self._write_in_flight(journal.state)
            raise
        state = journal.state
        # the session's update goes in the run's last save when the store can (one commit,
        # no hop of its own); made before that save, it reads the clock where it did after
        turn = self._session_turn(state) if state.session_id and self._folds_sessions() else None
        summary = await self._persist(
            journal, held.lease, release=True, session=turn[0] if turn else None
        )
        held.released = True
        summary = summary or summarize_run(state)
        if not state.session_id:
            return summary
        update, merged = turn or self._session_turn(state)
        written = update.written  # by the save that committed, if it could
        if written is None:  # nothing new to save, or a merge that raised there
            await self._io(self._update_session, update)
            written = merged[-1]  # the last merge is the one written
        return await self._still_asked(summary, state, written.open_run_id, answer_known=True)

    async def _still_asked(
        self,
        summary: RunSummary,
        state: RunState,
        open_run: str | None,
        *,
        answer_known: bool = False,
    ) -> RunSummary:
        """``summary``, its reply ending with what another run of the session asks.

        ``open_run``: the run the session's next message reaches; nothing is added when
        there is none, or it is ``state``'s own run.

        A request typed at a question ran on its own (``_asks_another``), and the question
        waits: the next message answers it, so the reply says so, in the run's language
        ("另外，您之前的问题还在等您回复：…"). A confirmation is reminded of the same way
        ("另外，您之前的请求还在等您确认：…（要办的话请回复「确认」）", template
        ``still_to_confirm``), and a yes in so many words right after it ("确认") answers
        it (``_reminded_last``). Without it, nobody was told that a refund proposed before
        still waited, and the "确认" meant for it started a run of its own.
        The reminder is in the question's language, the words it quotes: "Also, … waiting
        for your answer: 好的，麻烦提供一下订单号" read as two languages in one sentence.
        The stored run's reply is its own; the reminder is the session's, and never fails
        the turn it is added to: a waiting run that is gone, or a store that fails now,
        leaves the reply as the run gave it.

        ``answer_known`` (a turn just driven, not one answered again): when ``state``'s
        run learned the value the question asks for ("支付全挂了", asked for the customer
        id, then a complaint that gave it), the question is not asked again: the value is
        the waiting run's answer, and its reply follows this one.
        """
        if open_run is None or open_run == state.run_id:
            return summary
        waiting = await self._waiting_state(open_run, "still_asked")
        if waiting is None:
            return summary
        pending = waiting.pending
        if waiting.status not in _WAITS_FOR_THE_USER or pending is None:
            return summary
        if waiting.agent != self.agent.config.name:
            return summary
        asks = waiting.status is RunStatus.AWAITING_USER  # else a confirmation
        may_answer = answer_known and asks
        answer = self._known_answer(waiting, pending.slot, state) if may_answer else None
        if answer is not None:
            try:
                resumed = await self._resume(
                    open_run, None, answer, None, 0.0, None, via_run=state.run_id
                )
            except CorralError:  # busy elsewhere, or refused: it is asked, as it was
                logger.warning("answering run %s from run %s failed", open_run, state.run_id)
            else:
                joined = "\n".join(reply for reply in (summary.reply, resumed.reply) if reply)
                return summary.model_copy(update={"reply": joined})
        question = {"question": pending.prompt}
        render = self.agent.renderer.render
        if asks:
            template = "still_asked"
        else:  # after "already waiting for your go-ahead", the prompt alone: no "also"
            waits = state.outcome in ("repeated", "deferred")
            template = "waiting_prompt" if waits else "still_to_confirm"
        reminder = render(template, question, waiting.language)
        if template == "waiting_prompt":  # one language, the prompt's, as in a reminder
            reply = f"{render('already_waiting', {}, waiting.language)}\n{reminder}"
        else:
            reply = f"{summary.reply}\n{reminder}" if summary.reply else reminder
        return summary.model_copy(update={"reply": reply})

    def _known_answer(self, waiting: RunState, slot: str | None, state: RunState) -> str | None:
        """The answer to ``waiting``'s question for ``slot`` that ``state``'s run learned.

        Only from a run that understood the customer's own message (not an operator's
        ``run_plan`` in the session) and went on with the value (``_went_on_with_it``):
        not one withdrawn, handed off as still unclear, or that found no such customer,
        nor a value it was given two of ("C10001 和 C20001", then "算了": nothing chosen).
        Its value as text, only when the waiting run reads that text back as the same
        value (an id, a word of a vocabulary): never a value it would read otherwise.
        """
        if state.intent is None or not _went_on_with_it(state):
            return None
        if slot is None or slot in waiting.entities or waiting.received_at is None:
            return None
        mentions = self.agent.intent.entities.mentions
        if slot in latest_ambiguity(mentions, state.messages, [slot]):  # two: none chosen
            return None
        value = state.entities.get(slot)
        if not isinstance(value, str):
            return None
        read = self.agent.intent.entities.extract(value, waiting.received_at, answering=slot)
        return value if read.get(slot) == value else None

    @staticmethod
    async def _keep_after_cancel(persist: Callable[[], Awaitable[None]]) -> None:
        """Store what a cancelled run did (a server stopping, a stream's consumer leaving).

        Only when this run's own task was cancelled: a cancellation that merely travels up
        from a step's task is not a stop. Without this, a stop before the first durability
        point lost the run, and a write that had returned was settled on resume as an
        unknown outcome. A second cancel or a store failure leaves it as a crash would.
        """
        task = asyncio.current_task()
        if task is None or not task.cancelling():
            return
        # a message another try took: that try's run is the one stored, nothing to keep
        with suppress(asyncio.CancelledError, StoreError, MessageRepeatedError):
            await asyncio.shield(persist())

    def _write_in_flight(self, state: RunState) -> bool:
        """Whether a write was entered and not settled: a stop cannot end its thread.

        Its effect may then come after the stop, so a resume must not take "not found"
        for proof that it never acted: the stopped drive leaves its lease to expire.
        """
        return any(
            step.status is StepStatus.RUNNING
            and self.agent.tools.write(step.tool_used or "") is not None
            for step in state.steps.values()
        )

    async def _persist(
        self,
        journal: Journal,
        lease: Lease,
        *,
        release: bool = False,
        session: SessionUpdate | None = None,
    ) -> RunSummary | None:
        """Store the buffered events under the lease (fenced).

        Returns the run's summary after a drive's last save (``release``); ``None`` when
        there was nothing new, and after the saves in between, whose callers discard it
        (the run row's summary is written from the state without it).

        A store failure is re-raised saying what had already happened in the run, so
        nobody is told "failed" about a write that was made.
        """
        events = journal.drain()
        if not events:
            finish = self.store.release_lease if release else self.store.renew_lease
            await self._io(finish, lease)
            return None
        state = journal.state
        summary = summarize_run(state) if release else None
        assert state.received_at is not None
        record = RunRecord(
            run_id=state.run_id,
            trace_id=state.trace_id,
            agent=state.agent,
            session_id=state.session_id,
            status=str(state.status),  # the plain value (``.value`` costs two calls)
            created_at=state.received_at,
            updated_at=events[-1].ts,
            summary=summary_record(state),
        )
        handoff = state.handoff
        if handoff is not None and not any(e.type is EventType.HANDED_OFF for e in events):
            handoff = None  # stored with an earlier batch
        self.faults.hit("before_commit")
        give_up_at: float | None = None
        pause = 0.05
        try:
            while True:
                try:
                    await self._save(record, events, handoff, lease, release, session)
                    return summary
                except StoreError as exc:
                    # the wait reads the real clock, not an effect: it orders nothing
                    now = time.monotonic()
                    if give_up_at is None:
                        give_up_at = now + self.save_retry_s
                    if exc.code is not ErrorCode.STORE_UNAVAILABLE or now + pause > give_up_at:
                        happened = self._happened(state, events)
                        raise exc.with_context(state.run_id, happened) from exc
                await asyncio.sleep(pause)  # the same save again: a repeat stores only what is new
                pause = min(pause * 2, 2.0)
        except BaseException:
            # not stored (or not known to be): a later save (a stop's) must not store the
            # events after these without them, which would leave a hole in the log
            journal.restore(events)
            raise

    def _happened(self, state: RunState, unsaved: Sequence[Event]) -> str:
        """What the run had done before a store failure, and how to finish it.

        A write whose success was not stored is settled on resume: an idempotent one is
        entered again (it finds its effect), one with a reconciler is looked up, and any
        other is handed to a person as ``OUTCOME_UNKNOWN``, so the message says which.

        ``unsaved``: the events the failed save held. A write is entered only once its
        start is stored, so one whose first start is among them was not entered (one
        started again, on a resume, may have been entered before: it still counts). An
        approval or an answer among them may not have been kept. A run whose first save
        failed does not exist to resume: it is started again (its message sent again).
        """
        first_unsaved = unsaved[0].seq if unsaved else state.last_seq + 1
        if first_unsaved == 1:  # no write is entered before its start is stored
            return "the run was never stored and no write had been made: start it again"
        done, started, unsure = [], [], []
        for step in state.steps.values():
            spec = self.agent.tools.write(step.tool_used or step.tool)
            if spec is None or step.status not in (StepStatus.SUCCEEDED, StepStatus.RUNNING):
                continue
            never_stored = step.started_seq is not None and step.started_seq >= first_unsaved
            if step.status is StepStatus.RUNNING and never_stored:
                continue
            if step.status is StepStatus.SUCCEEDED:
                summary = step.result.summary if step.result else "done"
                done.append(f"{spec.name} succeeded ({summary})")
            else:
                started.append(f"{spec.name} was started")
            if not (spec.policy.idempotent or spec.reconcile is not None):
                unsure.append(spec.name)
        finish = f"`corral resume {state.run_id}` finishes the run"
        kinds = {e.type for e in unsaved}
        given = (
            "decision"
            if EventType.CONFIRMATION_GIVEN in kinds
            else "answer"
            if EventType.USER_ANSWERED in kinds
            else None
        )
        if given is not None:
            again = "--approve` (or --reject)" if given == "decision" else "--answer ...`"
            finish = (
                f"the {given} may not have been kept: `corral resume {state.run_id} {again} "
                "gives it again (it is applied once, if it was kept); then "
                f"`corral resume {state.run_id}` finishes the run"
            )
        if unsure:
            finish += (
                f", handing {', '.join(unsure)} to a person to confirm"
                " (it cannot be repeated or looked up safely)"
            )
        if done or started:
            return f"already happened: {'; '.join(done + started)}; {finish}"
        return f"no write had been made; {finish}"

    async def _save(
        self,
        record: RunRecord,
        events: list[Event],
        handoff: HandoffPacket | None,
        lease: Lease,
        release: bool,
        session: SessionUpdate | None = None,
    ) -> None:
        """``_write`` in a store thread, or made here when the store can without waiting.

        What is exported after a save made here (a log, spans) is exported in a thread:
        it reads the run back, writes a file, and may do network I/O.

        A save that finds a lock taken tries again in place, after a pause that doubles,
        for up to ``IN_PLACE_PATIENCE_S``; then a thread waits for the lock. Handing it
        to a thread at once fed itself under load: while that save held the write lock,
        the saves of the runs beside it found it taken and went to threads too, each
        paying for its rows twice (measured: 20 runs in flight, 1.2× the CPU of all
        saves in threads).
        """
        if self._in_place is None:
            self._in_place = _can_save_in_place(self.store)
        if self._in_place and getattr(self.store, "saves_in_place", False) is True:
            store = cast(SavesInPlace, self.store)
            pause, waited = IN_PLACE_FIRST_PAUSE_S, 0.0
            while True:
                try:
                    store.save(
                        record,
                        events,
                        handoff,
                        lease=lease,
                        release=release,
                        wait=False,
                        **_session_given(session),
                    )
                except SaveWouldWait as exc:
                    if not exc.locked or waited >= IN_PLACE_PATIENCE_S:
                        break  # a thread makes it, waiting as long as it takes
                    await asyncio.sleep(pause)  # the real clock: it orders nothing
                    waited, pause = waited + pause, pause * 2
                else:
                    self.faults.hit("after_commit")
                    if self._exports(release) and not self._exported_here(record, events, release):
                        await self._io(self._export, record, events, release, saving=record.run_id)
                    return
        await self._io(
            self._write, record, events, handoff, lease, release, session, saving=record.run_id
        )

    def _write(
        self,
        record: RunRecord,
        events: list[Event],
        handoff: HandoffPacket | None,
        lease: Lease,
        release: bool,
        session: SessionUpdate | None = None,
    ) -> None:
        given = _session_given(session)
        self.store.save(record, events, handoff, lease=lease, release=release, **given)
        self.faults.hit("after_commit")
        self._export(record, events, release)

    def _exported_here(self, record: RunRecord, saved: list[Event], release: bool) -> bool:
        """After a save made here: the run's log written here too, when that is all to export.

        Only for a log folder on the file system of the store's own file: a stalled file
        system stalls the save made here already, so the log adds no stall of its own,
        and a store thread cost more than the export (``docs/performance.md``, "The JSONL
        log"). Spans go to a thread: an exporter may do network I/O where it is called. A
        read of the run's earlier events that would wait (``SaveWouldWait``) sends the
        whole export to a thread; it had written nothing yet.
        """
        if self._spans_due(release):
            return False
        if not self._log_beside_store:  # None: not known yet, a thread's export learns it
            return False
        return self._here(self._export, record, saved, release) is not _NOT_HERE

    def _log_on_store_file_system(self) -> bool:
        """Whether the log folder (or what of it exists) is on the store file's file system.

        In a store thread (``_export``'s first call there): the log's file system may be
        the one that stalls. A folder that cannot be looked at is not beside the store.
        """
        store_file = getattr(self.store, "path", None)
        if self.log is None or not isinstance(store_file, Path):
            return False
        try:
            folder = self.log.folder.absolute()
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent  # made at the first export
            return folder.stat().st_dev == store_file.stat().st_dev
        except OSError:
            return False

    def _exports(self, release: bool) -> bool:
        """Whether a save exports anything: a log, or spans once the drive paused or ended."""
        return self.log is not None or self._spans_due(release)

    def _spans_due(self, release: bool) -> bool:
        """Whether a save exports spans: the drive paused or ended, and a tracer is set."""
        return release and self.tracer is not None

    def _export(self, record: RunRecord, saved: list[Event], release: bool) -> None:
        """After a save of ``saved``: the run's log file, and its spans once it paused or ended.

        Both need the whole run. A run's first save holds all of it, so its log is written
        from those events rather than read back (the read was half of the log's cost: a
        5-step run ~1 ms); spans are still made from the stored events.
        """
        if not self._exports(release):
            return
        if self._log_beside_store is None:  # in a store thread (or for a store without a file)
            self._log_beside_store = self._log_on_store_file_system()
        tracer = self.tracer if self._spans_due(release) else None
        if saved and saved[0].seq == 1 and tracer is None:
            stored = saved  # the run's first save: nothing earlier to read back
        else:
            stored = self.store.load_events(record.run_id)  # earlier stretches too
        if self.log is not None:
            self.log.export(self.store, record.run_id, events=stored)  # repaired if stale
        if tracer is not None:
            tracer.export(stored, self.sampling)

    def _session_turn(self, state: RunState) -> tuple[SessionUpdate, list[SessionRecord]]:
        """The run's turn for its session: the update, and the records its merge made.

        Made in a save, the update says what was written (``written``); made on its own
        (``_update_session``), the last record is. Its ``open_run_id`` is the run the
        session's next message reaches.
        """
        assert state.session_id is not None
        now = self.effects.now()
        # a value the run's latest mention gives two of ("HD20240501 和 HD20250920") was
        # never chosen: the session does not carry either (nor an older one) to a later run
        unsettled = latest_ambiguity(
            self.agent.intent.entities.mentions, state.messages, list(state.entities)
        )
        merged: list[SessionRecord] = []

        def merge(existing: SessionRecord | None) -> SessionRecord:
            # one the request said is another (``carry_unless``: "另一个订单") and did not
            # give again is dropped: kept, the old value came back at the turn after
            dropped = set(unsettled)
            if state.messages and existing is not None:
                held = existing.entities
                withheld = self.agent.intent.entities.not_carried(state.messages[0], held)
                dropped |= {name for name in withheld if name not in state.entities}
            merged.append(_merged_session(state, now, existing, unsettled=frozenset(dropped)))
            return merged[-1]

        return SessionUpdate(state.session_id, now, merge), merged

    def _update_session(self, update: SessionUpdate) -> None:
        """Add a run's turn to its session on its own, after the run's last save.

        In one transaction where the store can; one at a time in this runtime (a store
        that cannot reads, then writes).
        """
        with self._sessions:
            if isinstance(self.store, SessionUpdater):
                self.store.update_session(update.session_id, update.now, update.merge)
            else:
                found = self.store.get_session(update.session_id, update.now)
                self.store.save_session(update.merge(found))

    def _folds_sessions(self) -> bool:
        """Whether the store's ``save`` takes a session's update (``SavesSessions``).

        Asked once, as ``_can_save_in_place`` asks its own question.
        """
        if self._session_in_save is None:
            self._session_in_save = _declares(self.store, "saves_sessions", "session")
        return self._session_in_save and getattr(self.store, "saves_sessions", False) is True


class _NotHere:
    """What ``Runtime._here`` answers when a call was not made here."""


_NOT_HERE = _NotHere()


def _can_call_in_place(store: Store) -> bool:
    """Whether ``store``'s class offers calls in place (``CallsInPlace``): asked once.

    Declared on its class, as ``_can_save_in_place`` asks: a wrapper that hands unknown
    attributes to the store it wraps would answer for methods of its own.
    """
    cls = type(store)
    return getattr(cls, "calls_in_place", None) not in (None, False) and callable(
        getattr(cls, "in_place", None)
    )


def _can_save_in_place(store: Store) -> bool:
    """Whether ``store``'s class offers saves in place (``SavesInPlace``): asked once.

    Declared on its class, with a ``save`` that names ``wait``: a wrapper that hands
    unknown attributes to the store it wraps (``__getattr__``) answers ``saves_in_place``
    for a ``save`` of its own, and a subclass may override ``save`` without ``wait`` (or
    pass it on through ``**kwargs`` to code that may block). Those save in a thread.
    """
    return _declares(store, "saves_in_place", "wait")


def _declares(store: Store, flag: str, parameter: str) -> bool:
    """Whether ``store``'s class sets ``flag`` and its ``save`` names ``parameter``."""
    cls = type(store)
    if getattr(cls, flag, None) in (None, False):
        return False
    try:
        return parameter in inspect.signature(cls.save).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin, a C type)
        return False


def _session_given(session: SessionUpdate | None) -> dict[str, SessionUpdate]:
    """``save``'s ``session`` argument, given only when there is one (``SavesSessions``)."""
    return {} if session is None else {"session": session}


def _spoken(session: SessionRecord | None) -> Language | None:
    """The language of the conversation's last turn, if it said one (older turns did not)."""
    if session is None or not session.turns:
        return None
    language = session.turns[-1].get("language")
    return language if language in ("zh", "en") else None


def _went_on_with_it(state: RunState) -> bool:
    """Whether a run went on with the values it was given (``_known_answer``).

    It succeeded, or its intent goes to a person by design (aftersales' complaint): not
    one withdrawn, refused, handed off as still unclear, or that found no such value.
    """
    if state.status is RunStatus.FINISHED:
        return state.outcome == "success"
    return state.status is RunStatus.HANDED_OFF and state.error_code == ErrorCode.POLICY_HANDOFF


_INPUTS = (EventType.USER_MESSAGE, EventType.USER_ANSWERED, EventType.CONFIRMATION_GIVEN)


def _until_next_input(events: list[Event], via_run: str) -> list[Event]:
    """A run's events up to the next input after the answer ``via_run``'s turn gave it.

    What the run had done when that turn's reply was given (``_told_beside``); all of
    them when no such answer is among them.
    """
    given = next(
        (
            at
            for at, event in enumerate(events)
            if isinstance(event.payload, UserAnswered) and event.payload.via_run == via_run
        ),
        None,
    )
    if given is None:
        return events
    later = (at for at in range(given + 1, len(events)) if events[at].type in _INPUTS)
    return events[: next(later, len(events))]


def _declined_by(state: RunState, message: str) -> bool:
    """Whether the run was declined by ``message`` (a correction's, ``OpenRunInput.corrects``)."""
    said = state.messages[-1] if state.messages else None
    return state.outcome == "cancelled" and said == message and len(state.messages) > 1


def _asked_since(seen: RunState, now: RunState) -> bool:
    """The run waits for a confirmation asked after the caller looked (``seen``)."""
    return now.status is RunStatus.AWAITING_CONFIRM and now.pending_since > seen.last_seq


def _asked_last(session: SessionRecord) -> bool:
    """Whether the session's open run's prompt is the last thing the session was told.

    Only then is a plain yes or no its answer: after another run's reply ("where is my
    other order?", then "ok thanks"), a yes may acknowledge that reply, and must not carry
    out a write proposed before it. There, only a yes in so many words (or a no) answers
    it, after a reminder (``_reminded_last``), or ``resume``.
    """
    return bool(session.turns) and session.turns[-1].get("run_id") == session.open_run_id


def _reasked_last(session: SessionRecord, agent: str) -> bool:
    """Whether the last reply was the open run's prompt again, and nothing else.

    After a line nobody understood (outcome ``unclear``, ``RunStarted.at_confirmation``)
    or one that asked for the waiting request again (``repeated``,
    ``RunStarted.repeats_request``), that turn said "didn't understand" or "already
    waiting" and the prompt, and suggested nothing else: a line after it is read as one
    right after the prompt (``_asked_last``), "确认取消" to "确认取消订单…吗？" too. Not
    after a line that put it off (``deferred``: "not yet", "我再想想"): an "ok" after
    "it still waits" acknowledges it, and only a yes in so many words approves
    (``_reminded_last``; a review of f9484d4: "not yet", then "ok thanks", refunded).
    A plain yes there is taken only after a line it cannot answer (``_yes_may_answer``).
    """
    if session.agent != agent or not session.open_run_id:
        return False
    return _last_outcome(session, "unclear") or _last_outcome(session, "repeated")


def _yes_may_answer(session: SessionRecord) -> bool:
    """Whether the session's last line, which nobody understood, is one a yes may answer.

    A question, a negation or a call-off (``unsettles_a_yes``: "不退了吗", "是不是已经
    发货了", "取消耳机的退款申请" at the keyboard's refund): a plain "对" or "好的" after it
    may say yes to that line, and refunded. Only a yes beyond doubt approves then
    (``yes_beyond_doubt``: "确认", "是的，退吧"), or one that says the prompt's action; a
    plain yes gets the prompt once more. What else a line after it says (a no, a
    correction, another request in its place) is read as right after the prompt.
    """
    return _last_outcome(session, "unclear") and unsettles_a_yes(
        str(session.turns[-1].get("message") or "")
    )


_POINTING = re.compile(r"^(?:我|我们|这|那|该|本|刚才|刚刚|个|笔|单|订单|单子|一|次)*$")
"""A qualifier that points at the waiting request without naming it: "这个", "我刚才",
"这笔订单", "刚刚那个" (a review found these no longer declining)."""


def _qualifier(named: str) -> str:
    """What a call-off says of the request before its 的, without spaces ("" without one)."""
    return _unspaced(named.rpartition("的")[0])


def _unspaced(text: str) -> str:
    """``text`` without its spaces: "459 元" in a prompt is "459元" in a line."""
    return "".join(text.split())


def _same_value(held: Any, said: Any) -> bool:
    """Whether a value a line names is one held: equal, or the same text spaced otherwise.

    "459元" in a line and "459 元" in the prompt that states it.
    """
    if isinstance(held, str) and isinstance(said, str):
        return _unspaced(held) == _unspaced(said)
    return bool(held == said)


def _open_turn(session: SessionRecord, key: str) -> Any:
    """``key`` of the turn of the session's open run, or ``None`` (its turn is gone)."""
    return next((t.get(key) for t in session.turns if t.get("run_id") == session.open_run_id), None)


def _last_outcome(session: SessionRecord, outcome: str) -> bool:
    """Whether the session's last turn ended with ``outcome``."""
    return bool(session.turns) and session.turns[-1].get("outcome") == outcome


def _reminded_last(session: SessionRecord, agent: str) -> bool:
    """Whether the last reply of the session ended with the open run's prompt, as a reminder.

    The last turn is a run of ``agent`` that ended while the open run waited: its reply
    ended with the open run's prompt (``_still_asked``: "…已经发货啦。另外，您之前的
    请求还在等您确认：确认退款 699 元吗？（要办的话请回复「确认」）"). Not after another
    agent's turn (a session id two agents share), which reminds of nothing of this one's.
    The reminder is in the reply ``start`` returns, not in the run's stored one: a client
    that reads the run back (``GET /runs/{id}``) shows none, which is why only a yes in so
    many words (``explicit_yes``) answers the prompt here, never "好的" or "ok thanks". A
    no ("不用了", "never mind") is taken: it writes nothing, and its reply says so.
    """
    if not session.turns or session.agent != agent:
        return False
    last = session.turns[-1]
    ended = last.get("status") in TERMINAL_RUN_STATUSES
    return ended and last.get("run_id") != session.open_run_id


_WAITS_FOR_THE_USER = (RunStatus.AWAITING_USER, RunStatus.AWAITING_CONFIRM)
"""A run of a session in these reads the session's next message: an answer, or a yes or no."""


def _merged_session(
    state: RunState,
    now: datetime,
    existing: SessionRecord | None,
    *,
    unsettled: frozenset[str] = frozenset(),
) -> SessionRecord:
    """The session once the run's turn, entities and open question are added to it."""
    assert state.session_id is not None
    turns = [t for t in (existing.turns if existing else []) if t.get("run_id") != state.run_id]
    turns.append(
        {
            "run_id": state.run_id,
            "message": clip(state.messages[-1], 100) if state.messages else "",
            "intent": state.intent.label if state.intent else None,
            "request": request_of(state),
            "status": state.status.value,
            "reply": clip(state.reply or "", 100),
            "language": state.language,
            "outcome": state.outcome,
        }
    )
    entities = {**(existing.entities if existing else {}), **state.entities}
    entities = {name: value for name, value in entities.items() if name not in unsettled}
    open_run, earlier = _open_runs(state, existing)
    return SessionRecord(
        session_id=state.session_id,
        agent=state.agent,
        turns=turns[-SESSION_TURNS:],
        entities=entities,
        open_run_id=open_run,
        updated_at=now,
        expires_at=now + SESSION_TTL,
        earlier_open_runs=earlier,
    )


MAX_EARLIER_OPEN_RUNS = 5
"""Runs a session keeps waiting under newer ones; an older one is reached by its id only."""


def _open_runs(state: RunState, existing: SessionRecord | None) -> tuple[str | None, list[str]]:
    """The run the session's next message reaches, and those waiting under it.

    A run that waits for the user is the open one; the one it displaced (a request typed at
    a question or a confirmation, which asked something of its own) waits under it. A run
    that ends leaves another that still waits open (a run_plan beside it asks nothing); the
    open run ending hands the session back to the latest run under it.
    """
    before = existing.open_run_id if existing else None
    earlier = [r for r in (existing.earlier_open_runs if existing else []) if r != state.run_id]
    if state.status in _WAITS_FOR_THE_USER:
        if before is not None and before != state.run_id and before not in earlier:
            earlier.append(before)
        return state.run_id, earlier[-MAX_EARLIER_OPEN_RUNS:]
    if before is not None and before != state.run_id:
        return before, earlier
    return (earlier.pop() if earlier else None), earlier
