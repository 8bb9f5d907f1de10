"""An in-memory store, for tests and benchmarks. Same contract as the SQL store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from corral.contracts import Event, HandoffPacket
from corral.store.base import TERMINAL_STATUSES, RunRecord, SessionRecord


@dataclass
class MemoryStore:
    """Keeps everything in dicts; nothing survives the process."""

    runs: dict[str, RunRecord] = field(default_factory=dict)
    events: dict[str, list[Event]] = field(default_factory=dict)
    handoffs: dict[str, HandoffPacket] = field(default_factory=dict)
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    blocking: bool = False

    def save(
        self, run: RunRecord, events: Sequence[Event], handoff: HandoffPacket | None = None
    ) -> None:
        """Upsert the run, append new events, keep the handoff."""
        self.runs[run.run_id] = run
        stored = self.events.setdefault(run.run_id, [])
        last = stored[-1].seq if stored else 0
        stored.extend(e for e in events if e.seq > last)
        if handoff is not None:
            self.handoffs[run.run_id] = handoff

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
            self.runs.pop(rid)
            self.events.pop(rid, None)
            self.handoffs.pop(rid, None)
        return len(expired), old
