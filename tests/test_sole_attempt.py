"""A step whose tool succeeded at its first and only attempt logs no ``tool_attempt``.

Its ``step_finished`` stands for that attempt (``sole_attempt``). Every reader of attempts
must read the same from such a log as from the log older corral wrote for the same run,
with a ``tool_attempt`` before every ``step_finished``: the state, the spans, the tool
figures behind ``corral stats`` and the latency ranking, and replay. Any other attempt (a
retry, a failure) keeps its event.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import EventType, MemoryStore, RunStatus, Runtime, SqlStore, tool
from corral.errors import TransientToolError
from corral.events import (
    Event,
    OutcomeReconciled,
    StepFinished,
    StepStarted,
    ToolAttempt,
    unfolded,
)
from corral.observe.spans import run_spans
from corral.observe.stats import run_stats
from corral.runtime.journal import Journal
from corral.runtime.replay import compare, replay_run
from corral.runtime.state import RunState, StepState, fold
from corral.store.facts import event_facts
from corral.testing import FixedEffects
from corral.tools.policy import RetryPolicy, ToolPolicy
from tests.helpers import build_agent


class Value(BaseModel):
    value: int


@tool
def double(n: int) -> Value:
    return Value(value=n * 2)


STEPS = [
    {"id": "a", "tool": "double", "args": {"n": 1}},
    {"id": "b", "tool": "double", "args": {"n": 2}},
    {"id": "c", "tool": "double", "args": {"n": 3}, "depends_on": ["a", "b"]},
]


async def run(tools: list[Any], steps: list[dict[str, Any]]) -> tuple[Runtime, list[Event]]:
    runtime = Runtime(build_agent(tools, steps), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED
    return runtime, runtime.store.load_events(summary.run_id)


def as_older_corral_wrote_it(events: list[Event]) -> list[Event]:
    """The same run as corral before ``sole_attempt`` logged it: an attempt event before
    each step's end, whose output it holds (``output_attempt``), numbered anew."""
    older = []
    for event in unfolded(events):
        payload = event.payload
        if isinstance(payload, StepFinished) and payload.sole_attempt:
            payload = dataclasses.replace(payload, sole_attempt=False, output_attempt=1)
        older.append(
            Event(event.run_id, len(older) + 1, event.ts, event.type, event.stage, payload=payload)
        )
    return older


async def test_a_step_that_succeeded_at_once_has_no_attempt_event_of_its_own() -> None:
    _, events = await run([double], STEPS)
    kinds = [e.type for e in events]
    assert EventType.TOOL_ATTEMPT not in kinds
    # a and b run side by side, each in a thread of its own (``double`` is sync): which
    # ends first is the threads' (b did, once, on a loaded machine under Python 3.13)
    ends = sorted(
        (e.payload for e in events if isinstance(e.payload, StepFinished)),
        key=lambda end: end.step_id,
    )
    assert [(end.step_id, end.sole_attempt, end.output_attempt) for end in ends] == [
        ("a", True, None),
        ("b", True, None),
        ("c", True, None),
    ]
    assert [end.result.data for end in ends if end.result] == [
        {"value": 2},
        {"value": 4},
        {"value": 6},
    ]
    assert [e.payload.step_id for e in events if isinstance(e.payload, StepFinished)][-1] == "c"


async def test_a_retried_step_still_logs_each_attempt() -> None:
    calls: list[int] = []

    @tool(name="flaky", policy=ToolPolicy(retry=RetryPolicy(2, (0.5, 0.5))))
    def flaky(n: int) -> Value:
        calls.append(n)
        if len(calls) == 1:
            raise TransientToolError("503", applied=False)
        return Value(value=n)

    _, events = await run([flaky], [{"id": "s", "tool": "flaky", "args": {"n": 7}}])
    attempts = [e.payload for e in events if isinstance(e.payload, ToolAttempt)]
    assert [(a.attempt, a.status) for a in attempts] == [(1, "error"), (2, "success")]
    assert attempts[1].data == {"value": 7}  # the output, stored once: with its attempt
    [end] = [e.payload for e in events if isinstance(e.payload, StepFinished)]
    assert (end.sole_attempt, end.output_attempt) == (False, 2)
    state = fold(events[0].run_id, events)
    assert (state.steps["s"].attempts, state.tool_calls) == (2, 2)


async def test_a_failed_call_keeps_its_attempt_event() -> None:
    @tool(name="broken")
    def broken(n: int) -> Value:
        raise ValueError("boom")

    _, events = await run_failing(broken)
    attempts = [e.payload for e in events if isinstance(e.payload, ToolAttempt)]
    assert [(a.attempt, a.status, a.error_code) for a in attempts] == [(1, "error", "TOOL_FAILED")]
    [end] = [e.payload for e in events if isinstance(e.payload, StepFinished)]
    assert end.sole_attempt is False


async def run_failing(broken: Any) -> tuple[Runtime, list[Event]]:
    runtime = Runtime(
        build_agent([broken], [{"id": "s", "tool": "broken", "args": {"n": 1}}]),
        MemoryStore(),
        effects=FixedEffects(),
    )
    summary = await runtime.start("go")
    return runtime, runtime.store.load_events(summary.run_id)


async def test_a_folded_log_reads_as_the_older_log_of_the_same_run() -> None:
    """State, spans, tool figures and replay: the same from either form of the log."""
    runtime, events = await run([double], STEPS)
    older = as_older_corral_wrote_it(events)
    assert len(older) == len(events) + 3
    assert [e.type for e in older].count(EventType.TOOL_ATTEMPT) == 3

    run_id = events[0].run_id
    new_state, old_state = fold(run_id, events), fold(run_id, older)
    assert new_state.tool_calls == old_state.tool_calls == 3
    assert {k: s.attempts for k, s in new_state.steps.items()} == {"a": 1, "b": 1, "c": 1}
    for sid, step in new_state.steps.items():
        before = old_state.steps[sid]
        assert (step.attempts, step.status, step.result, step.tool_used, step.duration_ms) == (
            before.attempts,
            before.status,
            before.result,
            before.tool_used,
            before.duration_ms,
        )

    def shape(spans: list[Any]) -> list[tuple[Any, ...]]:
        named = {span.key: span.name for span in spans}
        return sorted(
            (
                span.name,
                named.get(span.parent or ""),
                span.start,
                span.end,
                span.error,
                *sorted(span.attributes.items()),
            )
            for span in spans
        )

    new_spans, old_spans = run_spans(events), run_spans(older)
    assert shape(new_spans) == shape(old_spans)
    tool_spans = [s for s in new_spans if s.name == "execute_tool double"]
    assert [s.attributes["corral.attempt"] for s in tool_spans] == [1, 1, 1]
    assert {named.name for named in new_spans if named.key in {s.parent for s in tool_spans}} == {
        "step a",
        "step b",
        "step c",
    }

    def tools(log: list[Event]) -> list[tuple[str, str, str | None, float]]:
        return [(t.tool, t.status, t.error_code, t.duration_ms) for t in event_facts(log).tools]

    assert tools(events) == tools(older) and len(tools(events)) == 3

    # replay: the new log against itself and against the older form, either way round
    assert (await replay_run(runtime.agent, events)).same_path
    assert (await replay_run(runtime.agent, older)).same_path
    assert compare(older, events).same_path and compare(events, older).same_path


async def test_observed_latency_and_stats_count_a_folded_attempt_as_a_call(
    tmp_path: Path,
) -> None:
    """The p95 a run ranks equivalent tools by, and the tool figures of ``corral stats``,
    read the attempts that step ends stand for: the same as from the older log."""
    runtime, events = await run([double], STEPS)
    record = runtime.store.get_run(events[0].run_id)
    assert record is not None
    found = []
    for name, log in (("new", events), ("older", as_older_corral_wrote_it(events))):
        for store in (MemoryStore(), SqlStore.open(tmp_path / f"{name}.db")):
            store.save(record, log)
            latency = store.tool_latency(record.agent, ["double"], 10)
            stats = run_stats(store)
            found.append((latency, stats.tool_calls, stats.avg_tool_calls))
    assert found[0][0]["double"].calls == 3 and found[0][1] == {"double": 3}
    assert all(other == found[0] for other in found[1:])


async def test_a_sole_attempt_is_stored_small_and_read_back_whole(tmp_path: Path) -> None:
    """Format 5: a sole attempt's step end leaves out its result's status, its tool (the
    step's, named by its step_started) and its duration (the step's); reading puts them
    back, so the events read are the events written."""
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(build_agent([double], STEPS), store, effects=FixedEffects())
    summary = await runtime.start("go")
    with sqlite3.connect(tmp_path / "corral.db") as db:
        rows = [
            json.loads(data)
            for (data,) in db.execute(
                "SELECT data FROM corral_events WHERE run_id = ? ORDER BY seq", (summary.run_id,)
            )
        ]
    ends = [row for row in rows if row.get("sole_attempt")]
    assert len(ends) == 3
    assert all(set(end["result"]) == {"data", "summary"} for end in ends)
    read = SqlStore.open(tmp_path / "corral.db").load_events(summary.run_id)
    written = [e for e in read if isinstance(e.payload, StepFinished)]
    assert [(e.payload.result.tool, e.payload.result.status.value) for e in written] == [
        ("double", "success")
    ] * 3
    assert all(e.payload.result.duration_ms == e.payload.duration_ms for e in written)
    assert fold(summary.run_id, read).steps["c"].result == (
        (await runtime.load_state(summary.run_id)).steps["c"].result
    )


def held_journal() -> tuple[Journal, ToolAttempt]:
    """A journal of a run with one step running, whose first attempt succeeded (held)."""
    state = RunState(run_id="run_x")
    state.steps["s"] = StepState("s", "double")
    journal = Journal(state, FixedEffects())
    journal.emit("execute", StepStarted("s", "double", {"n": 1}))
    attempt = ToolAttempt("s", "double", 1, "success", 0.5, data={"value": 2})
    journal.hold("s", "double", lambda: attempt)
    return journal, attempt


def test_a_held_attempt_counts_at_once_and_is_stored_at_a_durability_point() -> None:
    journal, attempt = held_journal()
    assert journal.state.tool_calls == 1  # the budget sees the call as soon as it is made
    batch = journal.drain()  # e.g. a concurrent write is about to be entered
    assert [e.payload for e in batch][-1] == attempt
    assert (journal.state.tool_calls, journal.state.steps["s"].attempts) == (1, 1)
    assert journal.fold("s", "double") is False  # its step_finished no longer stands for it


def test_a_held_attempt_comes_before_any_later_event_of_its_step() -> None:
    journal, attempt = held_journal()
    journal.emit("verify", OutcomeReconciled("s", "find", "double", "applied"))
    payloads = [e.payload for e in journal.drain()]
    assert [type(p) for p in payloads] == [StepStarted, ToolAttempt, OutcomeReconciled]
    assert payloads[1] == attempt
    assert journal.state.tool_calls == 1


def test_a_held_attempt_is_folded_into_its_steps_end() -> None:
    journal, _ = held_journal()
    assert journal.fold("s", "double") is True
    journal.emit("execute", StepFinished("s", "succeeded", None, sole_attempt=True))
    assert [type(e.payload) for e in journal.drain()] == [StepStarted, StepFinished]
    assert (journal.state.tool_calls, journal.state.steps["s"].attempts) == (1, 1)
