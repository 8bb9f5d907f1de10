"""The rows ``GET /runs`` shows for runs this server drives that are not saved yet.

A run's row is written at its first save, which a read-only plan makes only at its end:
until then the run lives in the hub alone, and a listing read from the store alone left
out the runs in flight, the ones an operator watches. Their rows are folded from the
hub's events and filtered here as the SQL filters stored rows (``queries.list_runs``
merges the two); there are only as many as the server drives at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from corral.runtime.state import fold
from corral.server.hub import LiveRun
from corral.server.queries import RunFilter
from corral.store.facts import aware


@dataclass(frozen=True)
class LiveRow:
    """A live run's listing row, with what its filters read."""

    run_id: str
    agent: str
    status: str
    intent: str | None
    session_id: str | None
    trace_id: str
    created_at: datetime
    updated_at: datetime

    @property
    def order(self) -> tuple[datetime, str]:
        """Its place in the listing, newest first: the SQL's ``ORDER BY``, descending."""
        return self.created_at, self.run_id

    def matches(self, wanted: RunFilter) -> bool:
        """Whether the listing's filters keep it, as ``run_conditions`` keeps a stored row."""
        equal = {
            wanted.agent: self.agent,
            wanted.status: self.status,
            wanted.intent: self.intent,
            wanted.session_id: self.session_id,
            wanted.trace_id: self.trace_id,
        }
        if any(asked is not None and asked != value for asked, value in equal.items()):
            return False
        if wanted.since is not None and self.created_at < wanted.since:
            return False
        return wanted.until is None or self.created_at < wanted.until


def live_rows(runs: list[LiveRun], wanted: RunFilter) -> list[LiveRow]:
    """The rows of ``runs`` the filters keep, newest first; saved or not (the store says)."""
    rows = []
    for live in runs:
        events = list(live.events)
        if not events or events[0].seq != 1:  # a later drive's: its row was stored before
            continue
        state = fold(live.run_id, events)
        row = LiveRow(
            run_id=live.run_id,
            agent=state.agent,
            status=str(state.status),
            intent=state.intent.label if state.intent is not None else None,
            session_id=state.session_id,
            trace_id=state.trace_id,
            created_at=aware(state.received_at or events[0].ts),
            updated_at=aware(events[-1].ts),
        )
        if row.matches(wanted):
            rows.append(row)
    return sorted(rows, key=lambda row: row.order, reverse=True)
