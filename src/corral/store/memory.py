"""An in-memory store, for tests and benchmarks. Same contract as the SQL store.

By default it keeps every run, as a store should: a caller may read any run it started.
A long-lived process that drives thousands of runs through it and reads each one's
results at once can bound it with ``max_ended_runs``: then only that many finished or
failed runs are kept and older ones are dropped as ``purge`` would drop them (memory, and
the garbage collector's time walking it). Runs that are live, paused or handed off (a
person still has to act on the packet) are never dropped.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from corral.contracts import HandoffPacket
from corral.errors import EventConflictError, LeaseLostError, MessageRepeatedError, RunBusyError
from corral.events import Event, message_ids, tool_attempts
from corral.store.base import TERMINAL_STATUSES, Lease, LeaseHolder, RunRecord, SessionRecord
from corral.store.figures import TIMED_OUT, ToolLatency, latencies, timed

if TYPE_CHECKING:
    from corral.store.base import SessionMerge

DEFAULT_MAX_ENDED_RUNS: int | None = None
"""Ended runs a ``MemoryStore`` keeps by default: every one."""


def _newest_first(run: RunRecord) -> tuple[datetime, str]:
    """The order of the observed-latency window: creation time, then id (as SQL's)."""
    return run.created_at, run.run_id


def _follows(stored: Sequence[Event], events: Sequence[Event]) -> bool:
    """Whether ``events`` have consecutive ``seq`` numbers right after what is stored.

    Then no stored event can conflict and no sort is needed; anything else (a gap, a
    repeat, another order) goes through the full check.
    """
    if not events:
        return True
    first = events[0].seq
    if stored and first <= stored[-1].seq:
        return False
    return [e.seq for e in events] == list(range(first, first + len(events)))


@dataclass
class MemoryStore:
    """Keeps runs in dicts; nothing survives the process.

    With ``max_ended_runs`` set, only that many finished or failed runs are kept (the
    latest); an older one is dropped with its events and lease, as ``purge`` drops one.
    ``None`` (the default) keeps every run.
    """

    runs: dict[str, RunRecord] = field(default_factory=dict)
    events: dict[str, list[Event]] = field(default_factory=dict)
    handoffs: dict[str, HandoffPacket] = field(default_factory=dict)
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    leases: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Run id -> (owner, expiry in Unix time)."""
    blocking: bool = False
    max_ended_runs: int | None = DEFAULT_MAX_ENDED_RUNS
    ended: dict[str, None] = field(default_factory=dict)
    """Ended run ids, oldest first (a dict keeps insertion order)."""
    session_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Held while a session is merged: runtimes sharing this store update from threads."""
    messages: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)
    """(agent, session id or "", message id) -> (run id, seq of the event holding it)."""
    messages_of: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    """Run id -> its keys in ``messages``: dropped with the run, without a scan."""

    def __post_init__(self) -> None:
        if self.max_ended_runs is not None and self.max_ended_runs < 1:
            bound = self.max_ended_runs
            raise ValueError(f"max_ended_runs must be at least 1 or None, not {bound}")

    def save(
        self,
        run: RunRecord,
        events: Sequence[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
    ) -> None:
        """Check the lease, append new events (a taken ``seq`` is a conflict), upsert."""
        if lease is not None:
            self.renew_lease(lease)
        taken = self._message_keys(run, events)  # checked before anything is written
        stored = self.events.get(run.run_id, [])
        if _follows(stored, events):  # the usual case: a journal's batch, nothing to compare
            self.events[run.run_id] = [*stored, *events]
        else:
            self._merge(run.run_id, stored, events)
        self.runs[run.run_id] = run
        for key in taken.keys() - self.messages.keys():
            self.messages_of.setdefault(run.run_id, []).append(key)
        self.messages.update(taken)
        if handoff is not None:
            self.handoffs[run.run_id] = handoff
        if lease is not None and release:
            self.release_lease(lease)
        if run.status in TERMINAL_STATUSES and run.status != "handed_off":
            self._ended(run.run_id)

    def _message_keys(
        self, run: RunRecord, events: Sequence[Event]
    ) -> dict[tuple[str, str, str], tuple[str, int]]:
        """The message ids ``events`` hold; ``MessageRepeatedError`` if another holds one."""
        taken = {}
        for message_id, seq in message_ids(events):
            key = _message_key(run.agent, run.session_id, message_id)
            holder = self.messages.get(key)
            if holder is not None and holder != (run.run_id, seq):
                raise MessageRepeatedError.taken_by(holder[0], message_id)
            taken[key] = (run.run_id, seq)
        return taken

    def run_of_message(self, agent: str, session_id: str | None, message_id: str) -> str | None:
        """The run whose events hold this message id (``MessageLog``), or ``None``."""
        holder = self.messages.get(_message_key(agent, session_id, message_id))
        return holder[0] if holder is not None else None

    def _merge(self, run_id: str, stored: list[Event], events: Sequence[Event]) -> None:
        """Add a batch that overlaps what is stored: a taken ``seq`` must hold the same event."""
        by_seq = {e.seq: e for e in stored}
        for new in events:
            old = by_seq.get(new.seq)
            if old is not None and (old.type, old.stage, old.data) != (
                new.type,
                new.stage,
                new.data,
            ):
                raise EventConflictError(
                    f"event {new.seq} of run {run_id} was already written by another writer"
                )
        fresh = sorted((e for e in events if e.seq not in by_seq), key=lambda e: e.seq)
        if stored and fresh and fresh[0].seq < stored[-1].seq:
            self.events[run_id] = sorted([*stored, *fresh], key=lambda e: e.seq)
        else:
            self.events[run_id] = [*stored, *fresh]

    def _ended(self, run_id: str) -> None:
        """Note an ended run; drop the oldest ended runs beyond ``max_ended_runs``."""
        self.ended.pop(run_id, None)
        self.ended[run_id] = None
        if self.max_ended_runs is None:
            return
        while len(self.ended) > self.max_ended_runs:
            self._drop(next(iter(self.ended)))

    def _drop(self, run_id: str) -> None:
        self.ended.pop(run_id, None)
        self.runs.pop(run_id, None)
        self.events.pop(run_id, None)
        self.handoffs.pop(run_id, None)
        self.leases.pop(run_id, None)
        for key in self.messages_of.pop(run_id, ()):  # a message id goes with its run
            del self.messages[key]

    def acquire_lease(self, lease: Lease, *, replacing: str | None = None) -> str | None:
        """Take the lease unless another live owner holds it; the expired owner replaced."""
        held = self.leases.get(lease.run_id)
        if held is not None and held[0] not in (lease.owner, replacing) and held[1] > time.time():
            raise RunBusyError(f"run {lease.run_id} is being driven by another owner")
        self.leases[lease.run_id] = (lease.owner, time.time() + lease.ttl_s)
        return None if held is None or held[0] in (lease.owner, replacing) else held[0]

    def renew_lease(self, lease: Lease) -> None:
        """Extend the lease, or ``LeaseLostError``."""
        held = self.leases.get(lease.run_id)
        # a new run's lease is made here only until its run exists: after that, no row
        # means its one save released it, and a late heartbeat must not take it again
        creating = held is None and lease.new_run and lease.run_id not in self.runs
        if not creating and (held is None or held[0] != lease.owner or held[1] <= time.time()):
            raise LeaseLostError(f"this owner no longer holds the lease on run {lease.run_id}")
        self.leases[lease.run_id] = (lease.owner, time.time() + lease.ttl_s)

    def release_lease(self, lease: Lease) -> None:
        """Drop the lease if still ours."""
        held = self.leases.get(lease.run_id)
        if held is not None and held[0] == lease.owner:
            del self.leases[lease.run_id]

    def lease_holder(self, run_id: str) -> LeaseHolder | None:
        """The live holder, or ``None``."""
        held = self.leases.get(run_id)
        if held is None or held[1] <= time.time():
            return None
        return LeaseHolder(held[0], held[1] - time.time())

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run row, or ``None``."""
        return self.runs.get(run_id)

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Most recent first."""
        return sorted(self.runs.values(), key=lambda r: r.created_at, reverse=True)[:limit]

    def load_events(self, run_id: str) -> list[Event]:
        """Events in order."""
        return list(self.events.get(run_id, []))

    def get_handoff(self, run_id: str) -> HandoffPacket | None:
        """The handoff packet, if any."""
        return self.handoffs.get(run_id)

    def get_session(self, session_id: str, now: datetime) -> SessionRecord | None:
        """The session unless expired."""
        session = self.sessions.get(session_id)
        return session if session and session.expires_at > now else None

    def save_session(self, session: SessionRecord) -> None:
        """Create or replace."""
        self.sessions[session.session_id] = session

    def update_session(self, session_id: str, now: datetime, merge: SessionMerge) -> None:
        """Replace the session with ``merge`` of it, under ``session_lock``."""
        with self.session_lock:
            self.sessions[session_id] = merge(self.get_session(session_id, now))

    def purge(self, now: datetime, task_ttl: timedelta) -> tuple[int, list[str]]:
        """Drop expired sessions and old ended runs."""
        expired = [sid for sid, s in self.sessions.items() if s.expires_at <= now]
        for sid in expired:
            del self.sessions[sid]
        old = [
            rid
            for rid, r in self.runs.items()
            if r.status in TERMINAL_STATUSES and r.updated_at < now - task_ttl
        ]
        for rid in old:
            self._drop(rid)
        return len(expired), old

    def tool_latency(
        self,
        agent: str,
        tools: Collection[str],
        last: int,
        timeouts_ms: Mapping[str, float] | None = None,
    ) -> dict[str, ToolLatency]:
        """Tool -> its p95 over its ``last`` latest timed calls (``LatencySource``).

        A fold of the runs in memory, newest run first (the SQL store asks SQL instead).
        """
        limits = {name: (timeouts_ms or {}).get(name, math.inf) for name in tools}
        samples: dict[str, list[float]] = {name: [] for name in limits}
        timeouts = dict.fromkeys(limits, 0)  # seen so far: only the latest ``last`` count
        runs = [run for run in self.runs.values() if run.agent == agent]
        for run in sorted(runs, key=_newest_first, reverse=True):
            events = self.events.get(run.run_id, [])
            for attempt in reversed(list(tool_attempts(e.payload for e in events))):
                name = attempt.tool
                if name not in limits or len(samples[name]) >= last:
                    continue
                if attempt.error_code == TIMED_OUT and attempt.status == "error":
                    timeouts[name] += 1
                    if timeouts[name] > last:
                        continue
                if timed(attempt.status, attempt.error_code, attempt.duration_ms, limits[name]):
                    samples[name].append(attempt.duration_ms)
        return latencies(samples)


def _message_key(agent: str, session_id: str | None, message_id: str) -> tuple[str, str, str]:
    """A message id's key in ``MemoryStore.messages`` (no session: "")."""
    return agent, session_id or "", message_id
