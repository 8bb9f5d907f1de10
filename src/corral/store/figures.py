"""The raw figures of a set of runs, and how they are aggregated without SQL.

``Figures`` is what a store answers for ``corral stats``: counts, sums and percentiles,
before any rate is divided out (``corral.observe.stats`` does that, once, for every
store). The SQL store computes it in the database (``corral.store.projection``); a store
without SQL (the memory store, a plugin) folds its runs' facts with ``aggregate``. Both
use the same percentile, ``rank``, so they agree to the millisecond.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from corral.errors import ErrorCode
from corral.store.facts import EventFacts, RunFacts

PERCENTILES = (50, 95)
"""The percentiles stats report, in per cent."""

NO_CODE = "none"
"""The key of failures that carry no error code."""


def rank(count: int, percent: int) -> int:
    """The 1-based rank of the ``percent`` percentile of ``count`` sorted values.

    Nearest rank: ``ceil(percent * count / 100)``, in integers so that SQL can say the
    same (``(percent * n + 99) / 100``) on SQLite and PostgreSQL alike.
    """
    return (percent * count + 99) // 100


@dataclass
class Figures:
    """Counts and sums over runs; percentiles per stage and per tool, in milliseconds."""

    runs: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_outcome: dict[str, int] = field(default_factory=dict)
    handoff_reasons: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    calls_by_tool: dict[str, int] = field(default_factory=dict)
    failures_by_tool: dict[str, int] = field(default_factory=dict)
    failures_by_code: dict[str, int] = field(default_factory=dict)
    stage_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    """Percent -> stage -> milliseconds."""
    tool_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    """Percent -> tool -> milliseconds."""


def percentiles(samples: dict[str, list[float]]) -> dict[int, dict[str, float]]:
    """Percent -> name -> the value at that rank of the name's sorted samples."""
    out: dict[int, dict[str, float]] = {p: {} for p in PERCENTILES}
    for name, values in samples.items():
        ordered = sorted(values)
        for percent in PERCENTILES:
            out[percent][name] = ordered[rank(len(ordered), percent) - 1]
    return out


def aggregate(runs: Iterable[tuple[RunFacts, EventFacts]]) -> Figures:
    """The figures of runs given with all their facts (each run's events in one batch)."""
    figures = Figures()
    status: Counter[str] = Counter()
    outcome: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    by_tool: Counter[str] = Counter()
    by_code: Counter[str] = Counter()
    stage_samples: dict[str, list[float]] = {}
    tool_samples: dict[str, list[float]] = {}
    for run, facts in runs:
        figures.runs += 1
        status[run.status] += 1
        if run.outcome is not None:
            outcome[run.outcome] += 1
        if run.status == "handed_off":
            reasons[run.error_code or NO_CODE] += 1
        figures.steps += run.steps
        figures.tool_calls += len(facts.tools)
        figures.model_calls += facts.model_calls
        figures.input_tokens += facts.input_tokens
        figures.output_tokens += facts.output_tokens
        figures.cost += facts.cost
        for stage, ms in facts.stage_ms.items():
            stage_samples.setdefault(stage, []).append(ms)
        for attempt in facts.tools:
            calls[attempt.tool] += 1
            if attempt.timed:
                tool_samples.setdefault(attempt.tool, []).append(attempt.duration_ms)
            if attempt.status == "error":
                by_tool[attempt.tool] += 1
                by_code[attempt.error_code or NO_CODE] += 1
    figures.by_status = dict(status)
    figures.by_outcome = dict(outcome)
    figures.handoff_reasons = dict(reasons)
    figures.calls_by_tool = dict(calls)
    figures.failures_by_tool = dict(by_tool)
    figures.failures_by_code = dict(by_code)
    figures.stage_ms = percentiles(stage_samples)
    figures.tool_ms = percentiles(tool_samples)
    return figures


@dataclass(frozen=True)
class ToolLatency:
    """A tool's observed latency: the p95 of its latest timed calls, and how many."""

    p95_ms: float
    calls: int


TIMED_OUT: str = ErrorCode.TOOL_TIMEOUT.value
"""The code of an attempt that did not answer in time (corral's deadline, or the tool's own)."""

WHOLE_TIMEOUT = 0.95
"""A timed-out call counts as a latency sample when it took at least this share of its
tool's timeout: it used up the deadline corral gave it (the clocks that start the
deadline and the attempt's duration are read a moment apart). A tool's own, shorter
timeout (a 50 ms connect timeout inside it) says no more of how long the tool takes than
any other failure, and is left out."""


def timed(status: str, error_code: str | None, duration_ms: float, timeout_ms: float) -> bool:
    """Whether a tool attempt says how long the tool takes: a success, or a whole timeout.

    ``timeout_ms``: the tool's timeout, or ``inf`` to count successes only. A call cut off
    at its deadline took at least that long; leaving it out made a tool that often times
    out look fast to urgent runs.
    """
    if status == "success":
        return True
    return (
        status == "error" and error_code == TIMED_OUT and duration_ms >= timeout_ms * WHOLE_TIMEOUT
    )


@runtime_checkable
class LatencySource(Protocol):
    """A store that answers the observed latency of tools (SQL in SQL, memory by a fold).

    The decision layer ranks equivalent tools of an urgent run by it, so that latency is
    observed rather than declared by hand; a store without it leaves the declared one.
    """

    def tool_latency(
        self,
        agent: str,
        tools: Collection[str],
        last: int,
        timeouts_ms: Mapping[str, float] | None = None,
    ) -> dict[str, ToolLatency]:
        """Tool -> its p95 over its ``last`` latest timed calls in ``agent``'s runs.

        Timed (``timed``): successes, and calls that ran out of a tool's whole timeout in
        ``timeouts_ms`` (tool -> its timeout); a tool not in it counts its successes only.
        """
        ...


def latencies(samples: Mapping[str, Sequence[float]]) -> dict[str, ToolLatency]:
    """Tool -> the p95 (nearest rank, as stats reports it) of its samples."""
    out: dict[str, ToolLatency] = {}
    for name, values in samples.items():
        if values:
            ordered = sorted(values)
            out[name] = ToolLatency(ordered[rank(len(ordered), 95) - 1], len(ordered))
    return out
