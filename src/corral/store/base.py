"""What the runtime needs from storage: runs, their events, handoffs and sessions.

Every backend (SQLite, PostgreSQL, memory) passes the same conformance tests in
``tests/store/test_conformance.py``. Methods are synchronous; the runtime calls them from
a worker thread so the event loop never blocks on I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from corral.contracts import Event, HandoffPacket


@dataclass(frozen=True)
class RunRecord:
    """A run's row: identity, status and the last summary, for listing without a fold."""

    run_id: str
    trace_id: str
    agent: str
    session_id: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    summary: dict[str, Any] = field(default_factory=dict)


TERMINAL_STATUSES = ("finished", "failed", "handed_off")


@dataclass(frozen=True)
class SessionRecord:
    """A conversation across runs: short turn summaries and what is still open."""

    session_id: str
    agent: str
    turns: list[dict[str, Any]]
    entities: dict[str, Any]
    open_run_id: str | None
    updated_at: datetime
    expires_at: datetime


class Store(Protocol):
    """Durable storage for runs. ``save`` is atomic: the row and its events together."""

    blocking: bool
    """True when calls do I/O: the runtime then calls them from a worker thread."""

    def save(
        self, run: RunRecord, events: Sequence[Event], handoff: HandoffPacket | None = None
    ) -> None:
        """Upsert the run row, append events (ignoring ones already stored), store a handoff."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run row, or ``None``."""
        ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The most recent runs first."""
        ...

    def load_events(self, run_id: str) -> list[Event]:
        """Every event of a run, in ``seq`` order."""
        ...

    def get_handoff(self, run_id: str) -> HandoffPacket | None:
        """The run's handoff packet, if it was handed off."""
        ...

    def get_session(self, session_id: str, now: datetime) -> SessionRecord | None:
        """The session, unless it is unknown or expired at ``now``."""
        ...

    def save_session(self, session: SessionRecord) -> None:
        """Create or replace a session."""
        ...

    def purge(self, now: datetime, task_ttl: timedelta) -> tuple[int, list[str]]:
        """Delete expired sessions, and ended runs (with their events) older than the TTL.

        Returns (sessions deleted, ids of the runs deleted), so that files derived from
        those runs (their JSONL logs) can go too. Paused runs are kept: a person may
        still answer them.
        """
        ...
