"""``corral stats`` and ``GET /stats``: how runs ended, where time went, what failed.

One function, ``run_stats``, serves the CLI and the HTTP server. A SQL store answers it
in the database from its stats projection (``corral.store.projection``), never by
folding events in Python; a store without SQL (the in-process memory store, a plugin)
aggregates its runs' facts in Python (``corral.store.figures.aggregate``) with the same
definitions, so both give the same numbers for the same runs.

Definitions (the denominators matter):

- ``runs``: runs created at or after ``since`` (of ``agent``), whatever their status (a
  run counts from its first stored event: every run the runtime stores has one);
  ``ended``: those that reached a final status (finished, failed or handed off).
- ``completion_rate``: ended runs that finished with every step done, over ended runs:
  outcome ``success``, or ``reply`` (answered directly, with no step to do). Paused and
  running runs are in neither part. A business refusal (``refused``), ``not_found``,
  ``unmet``, ``cancelled`` and ``unclear`` (a line nobody understood, typed at a
  confirmation: answered with the confirmation again) and ``repeated`` (a line that asked
  again for the request a confirmation waits for: answered with that confirmation) and
  ``deferred`` (a line that put the confirmation off: "not yet", "我再想想")
  finished but did not complete the task (``by_outcome``).
- ``partial_completion_rate``: ended runs whose outcome is ``partial`` (finished with some
  steps done and only optional ones not done: ``on_failure: continue``), over ended runs.
- ``handoff_rate``: ended runs handed to a person, over ended runs; ``handoff_reasons``
  counts them by error code (``TOOL_FAILED``, ``OUTCOME_UNKNOWN``...).
- ``avg_steps``, ``avg_tool_calls``: per run (every run counted); a tool call is one
  attempt, so a retried step counts each try.
- ``tool_failures``: failed attempts (status ``error``; ``no_result`` is an answer, not a
  failure), by tool and by error code.
- ``stage_p50_ms``/``stage_p95_ms``: percentiles over runs of the time each run spent in a
  stage. The time from one event to the next belongs to the stage of the later event;
  time while the run waited for a person is nobody's. ``tool_p50_ms``/``tool_p95_ms``:
  over attempts. Percentiles are nearest-rank (the ``ceil(p * n)``-th smallest value).
- ``model_calls``, ``tokens`` (provider usage: input = prompt, output = completion) and
  ``cost``: sums over the runs. A rate or an average with nothing to divide by is null.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from corral.store.base import TERMINAL_STATUSES, Store
from corral.store.facts import aware, folded
from corral.store.figures import Figures, aggregate

COMPLETE = ("success", "reply")
"""The outcomes of a run that finished with every step done (``reply``: there was none)."""


class ToolFailures(BaseModel):
    """Failed tool attempts, in all, by tool and by error code."""

    total: int
    by_tool: dict[str, int]
    by_error_code: dict[str, int]


class Tokens(BaseModel):
    """Tokens the models were sent (input) and wrote (output)."""

    input: int
    output: int


class RunStats(BaseModel):
    """The figures of a set of runs; see the module's docstring for each definition."""

    since: datetime | None = None
    agent: str | None = None
    runs: int
    ended: int
    by_status: dict[str, int]
    by_outcome: dict[str, int]
    completion_rate: float | None
    partial_completion_rate: float | None
    handoff_rate: float | None
    handoff_reasons: dict[str, int]
    avg_steps: float | None
    avg_tool_calls: float | None
    tool_calls: dict[str, int] = Field(description="attempts by tool")
    tool_failures: ToolFailures
    stage_p50_ms: dict[str, float]
    stage_p95_ms: dict[str, float]
    tool_p50_ms: dict[str, float]
    tool_p95_ms: dict[str, float]
    model_calls: int
    tokens: Tokens
    cost: float


@runtime_checkable
class FigureSource(Protocol):
    """A store that computes the figures itself (the SQL store, in SQL)."""

    def figures(self, since: datetime | None = None, agent: str | None = None) -> Figures:
        """The figures of the runs created since ``since`` (of ``agent``)."""
        ...


def run_stats(store: Store, *, since: datetime | None = None, agent: str | None = None) -> RunStats:
    """The stats of the runs created at or after ``since`` (of ``agent``) in ``store``.

    ``since`` without a zone is UTC (``corral.observe.window.parse_time`` makes one from
    ``1h`` or an ISO time).
    """
    start = aware(since) if since is not None else None
    if isinstance(store, FigureSource):
        figures = store.figures(start, agent)
    else:
        figures = aggregate(folded(store, start, agent))
    return _report(figures, start, agent)


def _ratio(part: float, whole: int, digits: int = 4) -> float | None:
    return round(part / whole, digits) if whole else None


def _ms(values: dict[str, float]) -> dict[str, float]:
    return {name: round(ms, 3) for name, ms in sorted(values.items())}


def _report(figures: Figures, since: datetime | None, agent: str | None) -> RunStats:
    ended = sum(n for status, n in figures.by_status.items() if status in TERMINAL_STATUSES)
    outcomes = figures.by_outcome
    return RunStats(
        since=since,
        agent=agent,
        runs=figures.runs,
        ended=ended,
        by_status=dict(sorted(figures.by_status.items())),
        by_outcome=dict(sorted(outcomes.items())),
        completion_rate=_ratio(sum(outcomes.get(o, 0) for o in COMPLETE), ended),
        partial_completion_rate=_ratio(outcomes.get("partial", 0), ended),
        handoff_rate=_ratio(figures.by_status.get("handed_off", 0), ended),
        handoff_reasons=dict(sorted(figures.handoff_reasons.items())),
        avg_steps=_ratio(figures.steps, figures.runs, 3),
        avg_tool_calls=_ratio(figures.tool_calls, figures.runs, 3),
        tool_calls=dict(sorted(figures.calls_by_tool.items())),
        tool_failures=ToolFailures(
            total=sum(figures.failures_by_tool.values()),
            by_tool=dict(sorted(figures.failures_by_tool.items())),
            by_error_code=dict(sorted(figures.failures_by_code.items())),
        ),
        stage_p50_ms=_ms(figures.stage_ms.get(50, {})),
        stage_p95_ms=_ms(figures.stage_ms.get(95, {})),
        tool_p50_ms=_ms(figures.tool_ms.get(50, {})),
        tool_p95_ms=_ms(figures.tool_ms.get(95, {})),
        model_calls=figures.model_calls,
        tokens=Tokens(input=figures.input_tokens, output=figures.output_tokens),
        cost=round(figures.cost, 6),
    )
