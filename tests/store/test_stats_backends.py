"""Stats on every backend: stage and tool percentiles of runs saved at known times.

Each run is saved in two parts around a pause, as the runtime saves one, so the figures
also prove that a save adds to what earlier saves wrote and that a person's wait counts
for no stage. PostgreSQL runs with CORRAL_TEST_PG_URL (its runs are told apart by agent).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from corral import Event, EventType
from corral.observe.stats import run_stats
from corral.store.base import RunRecord, Store

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def ms(n: float) -> timedelta:
    return timedelta(milliseconds=n)


def timed_run(store: Store, agent: str, scale: int, *, died_in_a_call: bool = False) -> str:
    """A run saved in two parts around a pause, at known times (``scale`` multiplies them).

    intent: 10 ms; run: 10 ms + 20 ms; execute: 50 ms; the minute it waited: nobody's.
    ``died_in_a_call``: a call the process died in comes first, as a resume records it
    (``interrupted``, no duration).
    """
    rid = f"run_{uuid.uuid4().hex[:16]}"
    start = T0 + timedelta(minutes=scale)

    def event(
        seq: int, at: timedelta, kind: EventType, stage: str, data: dict[str, object]
    ) -> Event:
        return Event(rid, seq, start + at, kind, stage, data=data)

    started = {
        "trace_id": f"trace_{rid}",
        "agent": agent,
        "received_at": start.isoformat(),
        "language": "en",
    }
    first = [
        event(1, ms(0), EventType.RUN_STARTED, "run", started),
        event(2, ms(10 * scale), EventType.USER_MESSAGE, "intent", {"text": "go"}),
        event(
            3,
            ms(20 * scale),
            EventType.STATUS_CHANGED,
            "run",
            {"from": "parsing", "to": "awaiting_user"},
        ),
    ]
    later = timedelta(minutes=1)
    attempt = {
        "step_id": "s1",
        "tool": "lookup",
        "attempt": 1,
        "status": "error",
        "duration_ms": 45.0 * scale,
        "error_code": "TOOL_TIMEOUT",
    }
    died = {
        "step_id": "s1",
        "tool": "lookup",
        "attempt": 1,
        "status": "error",
        "error_code": "OUTCOME_UNKNOWN",
        "interrupted": True,
    }
    second = [
        event(4, later, EventType.USER_ANSWERED, "intent", {"text": "A1"}),
        *([event(5, later, EventType.TOOL_ATTEMPT, "execute", died)] if died_in_a_call else []),
        event(6, later + ms(50 * scale), EventType.TOOL_ATTEMPT, "execute", attempt),
        event(
            7,
            later + ms(70 * scale),
            EventType.RUN_FINISHED,
            "run",
            {"status": "failed", "outcome": "failed", "error_code": "TOOL_TIMEOUT"},
        ),
    ]

    def row(status: str, at: datetime, summary: dict[str, object]) -> RunRecord:
        return RunRecord(rid, f"trace_{rid}", agent, None, status, start, at, summary)

    store.save(row("awaiting_user", first[-1].ts, {"status": "awaiting_user"}), first)
    summary = {"status": "failed", "outcome": "failed", "error_code": "TOOL_TIMEOUT"}
    store.save(row("failed", second[-1].ts, summary), second)
    return rid


def test_stage_and_tool_percentiles_are_exact(store: Store) -> None:
    agent = f"timed_{uuid.uuid4().hex[:8]}"  # a shared PostgreSQL holds other tests' runs
    for scale in (1, 2, 3):
        timed_run(store, agent, scale)
    report = run_stats(store, agent=agent)
    assert report.runs == 3 and report.by_status == {"failed": 3}
    # per run: intent 10s, run 30s, execute 50s (s = scale); nearest rank of 3 values:
    # p50 is the 2nd, p95 the 3rd
    assert report.stage_p50_ms == {"execute": 100.0, "intent": 20.0, "run": 60.0}
    assert report.stage_p95_ms == {"execute": 150.0, "intent": 30.0, "run": 90.0}
    assert report.tool_p50_ms == {"lookup": 90.0} and report.tool_p95_ms == {"lookup": 135.0}
    assert report.tool_failures.by_error_code == {"TOOL_TIMEOUT": 3}
    assert report.completion_rate == 0.0 and report.handoff_rate == 0.0


def test_a_call_the_process_died_in_is_a_call_and_a_failure_but_no_latency(store: Store) -> None:
    """Recorded with no duration, it counted as a 0 ms sample: a tool whose calls killed
    the process looked faster for it (p50 90 -> 45 ms here)."""
    agent = f"timed_{uuid.uuid4().hex[:8]}"
    for scale in (1, 2, 3):
        timed_run(store, agent, scale, died_in_a_call=scale < 3)
    report = run_stats(store, agent=agent)
    assert report.tool_calls == {"lookup": 5}
    assert report.tool_failures.by_error_code == {"TOOL_TIMEOUT": 3, "OUTCOME_UNKNOWN": 2}
    assert report.tool_p50_ms == {"lookup": 90.0} and report.tool_p95_ms == {"lookup": 135.0}


def test_a_since_window_selects_by_creation_time(store: Store) -> None:
    agent = f"timed_{uuid.uuid4().hex[:8]}"
    for scale in (1, 2, 3):  # created at T0 + 1, 2 and 3 minutes
        timed_run(store, agent, scale)
    assert run_stats(store, agent=agent, since=T0 + timedelta(minutes=2)).runs == 2
    assert run_stats(store, agent=agent, since=T0 + timedelta(minutes=4)).runs == 0
