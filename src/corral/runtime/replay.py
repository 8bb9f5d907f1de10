"""Deterministic replay: run a stored conversation again from its log alone.

The user's inputs (message, answers, confirmations) are taken from the log and fed in the
same order; model calls are answered by a ``ReplayModel``; tool calls by the recorded
outcomes (data or error code) of the same step and attempt; the clock starts where the
recorded run started. The new event log is then compared with the old one, ignoring what
is expected to differ (times, durations, ids), and the first divergence is reported.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from corral.contracts import EventType, RunStatus
from corral.decision.selector import ToolHealth
from corral.effects import FixedEffects
from corral.errors import (
    ConfigInvalidError,
    CorralError,
    ErrorCode,
    ReplayDivergedError,
    RunNotFoundError,
)
from corral.events import (
    ConfirmationGiven,
    EntitiesMerged,
    Event,
    FactRejected,
    FactWritten,
    Reply,
    RunStarted,
    StepStarted,
    ToolAttempt,
    UserAnswered,
    UserMessage,
    tool_attempts,
    unfolded,
)
from corral.models.replay import ReplayModel
from corral.store.base import SessionRecord
from corral.store.memory import MemoryStore
from corral.tools.builtin import generate_reply
from corral.tools.outputs import VALUE_FIELD

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec


class RecordedToolError(CorralError):
    """A tool failure as the recorded run saw it: same code, same retryability."""

    def __init__(
        self,
        code: str,
        message: str,
        retryable: bool,
        applied: bool | None = None,
        in_flight: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code) if code in ErrorCode.__members__ else ErrorCode.TOOL_FAILED
        self.retryable = retryable
        self.applied = applied
        """Whether the recorded failure proved the effect did not happen (writes)."""
        self.in_flight = in_flight
        self.retry_after_s = retry_after_s
        """How long the service asked to wait before a retry, when it said."""


def recorded_return(spec: ToolSpec, data: dict[str, Any] | None) -> Any:
    """What a tool returned, from the data recorded of it (``ToolAttempt.data``).

    Normalised again by the caller as a live return is, it gives the same data: a value
    the output model wraps is unwrapped first.
    """
    if data is not None and spec.wrapped:
        return data.get(VALUE_FIELD)
    return data


@dataclass
class ReplayEffects(FixedEffects):
    """Effects answering tool calls from the recorded attempts of each step.

    A call is answered only when it is the recorded one: the same tool, with the same
    arguments as the step started with. Anything else diverges; the tool is never called,
    except corral's ``generate_reply``, which is code over the agent's templates, not a
    service: it runs again, so a replay checks today's wording.
    """

    attempts: dict[tuple[str, int], ToolAttempt] = field(default_factory=dict)
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Step id -> the arguments the recorded run started it with."""
    seen: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @classmethod
    def from_events(cls, events: list[Event]) -> ReplayEffects:
        """Effects for replaying ``events``: their clock start, tool attempts and arguments."""
        started = events[0].payload
        assert isinstance(started, RunStarted)
        payloads = [e.payload for e in events]
        return cls(
            start=datetime.fromisoformat(started.received_at),
            attempts={(p.step_id, p.attempt): p for p in tool_attempts(payloads)},
            arguments={p.step_id: p.args or {} for p in payloads if isinstance(p, StepStarted)},
        )

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """The recorded outcome of this step's next attempt."""
        step = context.step_id
        self.seen[step] += 1
        number = self.seen[step]
        recorded = self.attempts.get((step, number))
        if recorded is None or recorded.tool != spec.name:
            raise ReplayDivergedError(
                f"step {step} attempt {number} of {spec.name} was never recorded"
            )
        if not self._same_arguments(spec, args, step):
            raise ReplayDivergedError(
                f"step {step} attempt {number} called {spec.name} with other arguments "
                "than the recorded run"
            )
        if recorded.status == "success" and spec.fn is generate_reply.fn:
            # corral's own reply, rendered again from today's templates over the facts:
            # a changed wording shows as a divergence (the reply's text is compared)
            return await super().call_tool(spec, args, context, timeout_s)
        if recorded.status == "error":
            raise RecordedToolError(
                recorded.error_code or "TOOL_FAILED",
                recorded.error_message or "recorded failure",
                recorded.retryable,
                recorded.applied,
                recorded.in_flight,
            )
        return recorded_return(spec, recorded.data)

    def _same_arguments(self, spec: ToolSpec, args: BaseModel, step_id: str) -> bool:
        """Whether ``args`` are what the recorded step was started with, once validated."""
        try:  # no recorded start (None) does not validate either
            before = spec.input_model.model_validate(self.arguments.get(step_id))
        except ValidationError:
            return False
        return bool(before.model_dump(mode="json") == args.model_dump(mode="json"))


SIGNATURE_FIELDS = ("type", "step_id", "tool", "status", "to", "error_code", "code", "reply")
"""The names of ``signature``'s items, in order (to say what differed)."""


def signature(event: Event) -> tuple[Any, ...]:
    """What must be equal between a run and its replay (named by ``SIGNATURE_FIELDS``)."""
    payload = event.payload
    return (
        event.type.value,
        getattr(payload, "step_id", None),
        getattr(payload, "tool", None),
        getattr(payload, "status", None),
        getattr(payload, "to", None),
        getattr(payload, "error_code", None),
        getattr(payload, "code", None),
        payload.text if isinstance(payload, Reply) else None,
    )


@dataclass(frozen=True)
class ReplayReport:
    """Whether the replay took the same path, and where it first did not."""

    same_path: bool
    original_events: int
    replayed_events: int
    divergence_index: int | None = None
    original: tuple[Any, ...] | None = None
    replayed: tuple[Any, ...] | None = None
    error: str | None = None


async def replay_run(agent: Agent, events: list[Event]) -> ReplayReport:
    """Replay a recorded run with ``agent`` and compare the paths."""
    return compare(events, *await replay_events(agent, events))


_INPUTS = (EventType.USER_MESSAGE, EventType.USER_ANSWERED, EventType.CONFIRMATION_GIVEN)
"""What a person gave a recorded run; a message after the first is a session's yes or no."""


async def replay_events(agent: Agent, events: list[Event]) -> tuple[list[Event], str | None]:
    """Replay a recorded run with ``agent``: the new log, and the error that stopped it."""
    from corral.observe.telemetry import Untraced
    from corral.runtime.plan_entry import recorded_entry
    from corral.runtime.runtime import Runtime

    if not events or events[0].type is not EventType.RUN_STARTED:
        raise RunNotFoundError("the log has no run_started event")
    effects = ReplayEffects.from_events(events)
    started = events[0].payload
    assert isinstance(started, RunStarted)
    if started.agent != agent.config.name:  # another agent's intents and tools: no replay
        raise ConfigInvalidError(
            f"the run was started by agent {started.agent!r}, not {agent.config.name!r}",
            hint=f"replay it with agent {started.agent!r}",
        )
    after = agent.health.degrade_after  # the tools' health as the run began
    health = ToolHealth(dict.fromkeys(started.degraded, after), after)
    replayed_agent = dataclasses.replace(
        agent, model=ReplayModel.from_events(events), health=health
    )
    runtime = Runtime(replayed_agent, MemoryStore(), effects=effects, tracer=Untraced())
    runtime.replayed_latency = started.observed_latency  # rank by the recorded figures
    runtime.replaying = True  # the recorded inputs as they were, however they were checked
    runtime.replayed_start = started  # what the session's waiting run made of the line
    session_id = started.session_id
    if session_id is not None:  # what the session carried into the run, carried again
        runtime.store.save_session(_session_as_met(agent, effects.now(), started, events))
    given = recorded_entry(events)
    inputs = [e for e in events if e.type in _INPUTS]
    kinds = [e.type for e in inputs]
    if given is None and EventType.USER_MESSAGE in kinds:  # the first message started it
        inputs = inputs[kinds.index(EventType.USER_MESSAGE) + 1 :]
    error = None
    run_id = None
    try:
        if given is not None:  # started by ``run_plan``: the same plan and entities again
            summary = await runtime.run_plan(
                given[0], entities=given[1], priority=started.priority, session_id=session_id
            )
        else:
            first = next((e.payload for e in events if isinstance(e.payload, UserMessage)), None)
            if first is None:
                raise RunNotFoundError("the log has no message that started the run")
            summary = await runtime.start(
                first.text, priority=started.priority, session_id=session_id
            )
        run_id = summary.run_id
        said: str | None = None  # a session's message read as the decision that follows it
        for event in inputs:
            answer = event.payload
            if isinstance(answer, UserMessage):
                said = answer.text
            elif isinstance(answer, UserAnswered):
                summary = await runtime._resume(
                    run_id, None, answer.text, None, 0.0, None, via_run=answer.via_run
                )
            elif isinstance(answer, ConfirmationGiven):
                approve = answer.approved
                summary = await runtime._resume(run_id, approve, None, None, 0.0, None, said)
                said = None
    except CorralError as exc:
        error = str(exc)
    return (await runtime.events(run_id) if run_id else []), error


def _session_as_met(
    agent: Agent, now: datetime, started: RunStarted, events: list[Event]
) -> SessionRecord:
    """The session as the recorded run found it, as far as the run's events depend on it.

    The entities it carried in (the run's ``entities_merged`` from the session; the agent's
    ``carry_unless`` filters them again, as it did), and the language the run was answered
    in as the last turn's (a message that says none is answered in it). No open run: a
    message that answered one was recorded as that run's, not as a new run's first.
    Without it a replay of any run that carried a value started without it, and diverged.
    """
    from corral.runtime.runtime import SESSION_TTL

    carried = next(
        (
            e.payload.entities
            for e in events
            if isinstance(e.payload, EntitiesMerged) and e.payload.origin == "session"
        ),
        {},
    )
    assert started.session_id is not None
    return SessionRecord(
        session_id=started.session_id,
        agent=agent.config.name,
        turns=[{"language": started.language, **_followed_turn(started)}],
        entities=dict(carried),
        open_run_id=None,
        updated_at=now,
        expires_at=now + SESSION_TTL,
    )


def _followed_turn(started: RunStarted) -> dict[str, str]:
    """The last turn's request the run followed (``RunStarted.follows``), as a turn says it."""
    if started.follows is None:
        return {}
    return {"request": started.follows, "status": RunStatus.FINISHED.value}


def _lane(event: Event) -> str:
    """Concurrent steps interleave freely; each step's own events must keep their order."""
    payload = event.payload
    if isinstance(payload, FactWritten | FactRejected):
        return f"step:{payload.origin}"
    step_id = getattr(payload, "step_id", None)
    return f"step:{step_id}" if step_id else "run"


_FOLDED = frozenset({EventType.TOOL_SELECTED, EventType.VERIFIED})
"""Left out of the comparison: logs before format 2 record every pick and verdict, newer
ones only those with something of their own; what they decided shows in the attempts,
``step_finished`` and ``step_skipped`` events, which are compared."""


def _lanes(events: list[Event]) -> dict[str, list[tuple[int, tuple[Any, ...]]]]:
    """Each lane's signatures, with the index in ``events`` of the event each comes from.

    An attempt that a ``step_finished`` stands for has that event's index.
    """
    lanes: dict[str, list[tuple[int, tuple[Any, ...]]]] = defaultdict(list)
    for index, event in enumerate(events):
        for seen in unfolded((event,)):
            if seen.type not in _FOLDED:
                lanes[_lane(seen)].append((index, signature(seen)))
    return lanes


def compare(old: list[Event], new: list[Event], error: str | None = None) -> ReplayReport:
    """Compare two logs lane by lane (the run's own events, then each step's).

    Each attempt is compared as an event of its own, whether it has one or its
    ``step_finished`` stands for it (``unfolded``): a log written before ``sole_attempt``
    replays the same as one after.
    """
    lanes_old = _lanes(old)
    lanes_new = _lanes(new)
    first: tuple[int, tuple[Any, ...] | None, tuple[Any, ...] | None] | None = None
    for lane in sorted(set(lanes_old) | set(lanes_new)):
        a, b = lanes_old.get(lane, []), lanes_new.get(lane, [])
        for position in range(max(len(a), len(b))):
            left = a[position] if position < len(a) else None
            right = b[position] if position < len(b) else None
            if left is None or right is None or left[1] != right[1]:
                index = left[0] if left else (right[0] if right else 0)
                candidate = (index, left[1] if left else None, right[1] if right else None)
                if first is None or candidate[0] < first[0]:
                    first = candidate
                break
    if first is None and error is None:
        return ReplayReport(True, len(old), len(new))
    index, recorded, replayed = first if first else (len(old), None, None)
    return ReplayReport(False, len(old), len(new), index, recorded, replayed, error)
