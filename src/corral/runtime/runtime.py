"""The public entry point: start a run, resume a paused or crashed one, read it back.

``Runtime`` ties an agent to a store and an effects boundary. Storage calls run in a
worker thread, never on the event loop. A run is persisted when it pauses, when it ends,
and before any write tool runs; in between, events are batched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from corral.agent import Agent
from corral.contracts import (
    Event,
    EventType,
    HandoffPacket,
    IntentBrief,
    RunStatus,
    RunSummary,
    StepBrief,
)
from corral.errors import InputTooLargeError, RunNotFoundError, RunNotResumableError
from corral.inputs import require_text
from corral.intent.entities import detect_language
from corral.observe.logs import JsonlLog
from corral.observe.redact import redaction_spec
from corral.runtime.effects import Effects, LiveEffects
from corral.runtime.journal import Journal
from corral.runtime.loop import RunLoop
from corral.runtime.state import RunState, fold
from corral.store.base import RunRecord, SessionRecord, Store
from corral.store.memory import MemoryStore

T = TypeVar("T")

SESSION_TTL = timedelta(days=7)
"""Seed 002: session memory lives 7 days."""
TASK_TTL = timedelta(days=30)
"""Seed 002: task memory (runs and their events) lives 30 days after it last changed."""
SESSION_TURNS = 10
"""Short summaries of this many recent turns are kept per session."""


def summarize_run(state: RunState) -> RunSummary:
    """The ``RunSummary`` of a folded state."""
    intent = state.intent
    return RunSummary(
        run_id=state.run_id,
        trace_id=state.trace_id,
        status=state.status,
        intent=IntentBrief(label=intent.label, confidence=intent.confidence, source=intent.source)
        if intent
        else None,
        steps=[
            StepBrief(
                id=s.id,
                tool=s.tool_used or s.tool,
                status=s.status,
                attempts=s.attempts,
                duration_ms=s.duration_ms,
                error_code=s.error_code,
            )
            for s in state.steps.values()
        ],
        reply=state.reply,
        handoff=state.handoff,
        pending=state.pending,
        outcome=state.outcome,
    )


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
    ) -> None:
        self.agent = agent
        self.store: Store = store if store is not None else MemoryStore()
        self.effects: Effects = effects if effects is not None else LiveEffects()
        self.log = JsonlLog(log_dir) if log_dir is not None else None

    # ------------------------------------------------------------------ public API

    async def start(self, message: str, *, session_id: str | None = None) -> RunSummary:
        """Handle a new user message; continues the session's open question if there is one."""
        require_text(message, "the message")
        if session_id is not None:
            require_text(session_id, "the session id")
        limit = self.agent.config.limits.max_message_chars
        if len(message) > limit:
            raise InputTooLargeError(
                f"the message has {len(message)} characters; the limit is {limit}",
                hint="split it, or raise limits.max_message_chars",
            )
        session = None
        if session_id:
            session = await self._io(self.store.get_session, session_id, self.effects.now())
            if session and session.open_run_id:
                record = await self._io(self.store.get_run, session.open_run_id)
                if record and record.status == RunStatus.AWAITING_USER.value:
                    return await self.resume(session.open_run_id, answer=message)
        run_id = self.effects.new_id("run")
        state = RunState(run_id=run_id)
        journal = Journal(state, self.effects)
        received_at = self.effects.now()
        journal.emit(
            EventType.RUN_STARTED,
            "run",
            trace_id=self.effects.new_id("trace"),
            agent=self.agent.name,
            session_id=session_id,
            agent_root=str(self.agent.root) if self.agent.root else None,
            received_at=received_at.isoformat(),
            language=detect_language(message, self.agent.config.default_language),
            redact=redaction_spec(self.agent),
        )
        journal.emit(EventType.USER_MESSAGE, "intent", text=message)
        if session is not None:
            carried = {
                name: value
                for name, value in session.entities.items()
                if name in self.agent.config.entities
                and self.agent.config.entities[name].carries_over
            }
            if carried:
                journal.emit(
                    EventType.ENTITIES_MERGED, "intent", entities=carried, origin="session"
                )
        return await self._drive(journal)

    async def resume(
        self, run_id: str, *, approve: bool | None = None, answer: str | None = None
    ) -> RunSummary:
        """Continue a stored run.

        Approve or reject a pending confirmation, answer a pending question, or (with
        neither) pick up a run whose process died mid-way.
        """
        if answer is not None:
            require_text(answer, "the answer")
        events = await self._io(self.store.load_events, run_id)
        if not events:
            raise RunNotFoundError(f"no run {run_id!r}", hint="list runs with `corral runs`")
        state = fold(run_id, events)
        journal = Journal(state, self.effects)
        status = state.status
        if status.terminal:
            raise RunNotResumableError(f"run {run_id} has already ended ({status.value})")
        if status is RunStatus.AWAITING_CONFIRM:
            if approve is None or answer is not None:
                raise RunNotResumableError(
                    f"run {run_id} waits for a confirmation",
                    hint="resume with --approve or --reject",
                )
            assert state.pending is not None and state.pending.step_id is not None
            journal.emit(
                EventType.CONFIRMATION_GIVEN,
                "decide",
                step_id=state.pending.step_id,
                approved=approve,
            )
            journal.transition(RunStatus.DECIDING, "approved" if approve else "rejected")
        elif status is RunStatus.AWAITING_USER:
            if answer is None or approve is not None:
                raise RunNotResumableError(
                    f"run {run_id} waits for an answer", hint="resume with --answer TEXT"
                )
            limit = self.agent.config.limits.max_message_chars
            if len(answer) > limit:
                raise InputTooLargeError(
                    f"the answer has {len(answer)} characters; the limit is {limit}"
                )
            slot = state.pending.slot if state.pending else None
            journal.emit(EventType.USER_ANSWERED, "intent", text=answer, slot=slot)
            journal.transition(RunStatus.PARSING, "answer received")
        elif approve is not None or answer is not None:
            raise RunNotResumableError(
                f"run {run_id} is not waiting for input "
                f"({status.value}); resume it without arguments"
            )
        return await self._drive(journal)

    async def summary(self, run_id: str) -> RunSummary:
        """The current summary of a stored run."""
        return summarize_run(await self.load_state(run_id))

    async def events(self, run_id: str) -> list[Event]:
        """Every stored event of a run, in order."""
        return await self._io(self.store.load_events, run_id)

    async def load_state(self, run_id: str) -> RunState:
        """The folded state of a stored run."""
        events = await self._io(self.store.load_events, run_id)
        if not events:
            raise RunNotFoundError(f"no run {run_id!r}")
        return fold(run_id, events)

    # ------------------------------------------------------------------ internals

    async def _io(self, call: Callable[..., T], *args: Any) -> T:
        """Run a store call off the event loop when it does I/O."""
        if self.store.blocking:
            return await asyncio.to_thread(call, *args)
        return call(*args)

    async def _drive(self, journal: Journal) -> RunSummary:
        async def persist() -> None:
            await self._persist(journal)

        loop = RunLoop(self.agent, journal, self.effects, persist)
        await loop.drive()
        summary = await self._persist(journal)
        state = journal.state
        if state.session_id:
            await self._io(self._update_session, state)
        return summary or summarize_run(state)

    async def _persist(self, journal: Journal) -> RunSummary | None:
        """Store the buffered events; returns the summary it stored (``None``: nothing new)."""
        events = journal.drain()
        if not events:
            return None
        state = journal.state
        summary = summarize_run(state)
        assert state.received_at is not None
        record = RunRecord(
            run_id=state.run_id,
            trace_id=state.trace_id,
            agent=state.agent,
            session_id=state.session_id,
            status=state.status.value,
            created_at=state.received_at,
            updated_at=events[-1].ts,
            summary=summary.model_dump(mode="json", exclude={"handoff"}),
        )
        handoff = state.handoff if any(e.type is EventType.HANDED_OFF for e in events) else None
        await self._io(self._write, record, events, handoff, state.trace_id)
        return summary

    def _write(
        self,
        record: RunRecord,
        events: list[Event],
        handoff: HandoffPacket | None,
        trace_id: str,
    ) -> None:
        self.store.save(record, events, handoff)
        if self.log is not None:
            self.log.export(self.store, record.run_id)  # derived from the store, repaired

    def _update_session(self, state: RunState) -> None:
        assert state.session_id is not None
        now = self.effects.now()
        existing = self.store.get_session(state.session_id, now)
        turns = list(existing.turns) if existing else []
        turns = [t for t in turns if t.get("run_id") != state.run_id]
        turns.append(
            {
                "run_id": state.run_id,
                "message": state.messages[-1][:100] if state.messages else "",
                "intent": state.intent.label if state.intent else None,
                "status": state.status.value,
                "reply": (state.reply or "")[:100],
            }
        )
        entities = {**(existing.entities if existing else {}), **state.entities}
        open_run = state.run_id if state.status is RunStatus.AWAITING_USER else None
        self.store.save_session(
            SessionRecord(
                session_id=state.session_id,
                agent=state.agent,
                turns=turns[-SESSION_TURNS:],
                entities=entities,
                open_run_id=open_run,
                updated_at=now,
                expires_at=now + SESSION_TTL,
            )
        )
