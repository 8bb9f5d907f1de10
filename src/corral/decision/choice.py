"""Which equivalent tool a step uses, by the run's priority, and why (seed 001).

The candidates arrive ranked by ``selector.rank_tools`` (health, then the measure the
priority names, then the other, then the plan's tool, then the name). An urgent run
ranks by latency: a tool's observed p95 once it has ``decision.min_observations``
timed calls in the store (successes, and timeouts that took its whole timeout), else its
declared ``latency_ms``. A budget-conscious run
ranks by price (``cost``); a normal one by the agent's ``tool_preference`` (price, unless
the agent says latency).

Scores within ``decision.tie_margin`` of the best are close: among the tools close on the
first measure the second decides, and tools close on both are a tie, which the model
breaks when one is configured (``runtime.modeling.model_tie_break``) and otherwise the
fixed order (the plan's tool, then the name). Nothing jitters: the same figures always
give the same choice, and the figures are read once per run (``run_started``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from corral.config import DecisionConfig
from corral.decision.priority import Priority
from corral.decision.selector import ToolHealth
from corral.tools.spec import ToolSpec

Measure = Literal["latency", "cost"]


def measure_for(priority: Priority, preference: Measure) -> Measure:
    """What ranks the equivalent tools of a run of this priority."""
    if priority == "urgent":
        return "latency"
    if priority == "budget":
        return "cost"
    return preference


def ranking_latency(
    observed: Mapping[str, Mapping[str, float]], min_observations: int
) -> dict[str, float]:
    """Tool -> the observed p95 it is ranked by, for tools observed often enough."""
    return {
        name: figures["p95_ms"]
        for name, figures in observed.items()
        if figures.get("calls", 0) >= min_observations
    }


@dataclass(frozen=True)
class Choice:
    """The candidates in the order they are tried, and why the first one."""

    order: list[ToolSpec]
    reason: str
    """Empty when there was nothing to choose (one healthy equivalent at most)."""
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    tied: list[str] = field(default_factory=list)
    """Tools close on both measures, in the fixed order; two or more: a tie was broken."""

    def by_model(self, name: str | None, margin: float) -> Choice:
        """The tie broken by the model's pick ``name``: first when it is one of ``tied``.

        Any other answer (none, an unknown tool, one the rules did not tie) is ignored
        and the fixed order stands; the reason says which happened.
        """
        if name is None or name not in self.tied:
            answer = "no usable model answer" if name is None else f"model answer {name!r} ignored"
            return Choice(self.order, f"{self.reason}; {answer}", self.scores, self.tied)
        first = next(spec for spec in self.order if spec.name == name)
        rest = [spec for spec in self.order if spec is not first]
        reason = f"tie within {margin * 100:g} %: model chose {name}"
        return Choice([first, *rest], reason, self.scores, self.tied)


@dataclass(frozen=True)
class _Scorer:
    """Reads the two measures of a tool and says them in words."""

    latency: Mapping[str, float]
    observed: Mapping[str, Mapping[str, float]]

    def value(self, spec: ToolSpec, measure: Measure) -> float:
        if measure == "cost":
            return spec.policy.cost
        return self.latency.get(spec.name, spec.policy.latency_ms)

    def scores(self, spec: ToolSpec) -> dict[str, float]:
        calls = self.observed.get(spec.name, {}).get("calls", 0) if spec.name in self.latency else 0
        return {
            "latency_ms": round(self.value(spec, "latency"), 3),
            "cost": spec.policy.cost,
            "observed_calls": calls,
        }

    def words(self, spec: ToolSpec, measure: Measure) -> str:
        if measure == "cost":
            return f"lowest price ({spec.policy.cost:g})"
        millis = round(self.value(spec, "latency"), 1)
        if spec.name in self.latency:
            calls = int(self.observed[spec.name]["calls"])
            return f"lowest p95 (observed {millis:g} ms over {calls} calls)"
        return f"lowest latency (declared {millis:g} ms)"


def _close(value: float, best: float, margin: float) -> bool:
    return value <= best + abs(best) * margin


def choose(
    candidates: list[ToolSpec],
    planned: str,
    peers: Callable[[str], bool],
    health: ToolHealth,
    priority: Priority,
    preference: Measure,
    observed: Mapping[str, Mapping[str, float]],
    config: DecisionConfig,
) -> Choice:
    """Order ``candidates`` (ranked, eligible) for a run of ``priority``.

    ``peers``: whether a candidate is one of the planned tool's declared equivalents (a
    tool found by capability matching keeps its place after them, and is never tied).
    """
    if len(candidates) < 2:
        return Choice(list(candidates), "")  # nothing to choose between
    first = measure_for(priority, preference)
    second: Measure = "cost" if first == "latency" else "latency"
    pool = [s for s in candidates if peers(s.name) and not health.degraded(s.name)]
    if len(pool) < 2:
        return Choice(list(candidates), "")  # nothing to choose between
    scorer = _Scorer(ranking_latency(observed, config.min_observations), observed)
    scores = {spec.name: scorer.scores(spec) for spec in candidates}
    margin = config.tie_margin
    best = min(scorer.value(s, first) for s in pool)
    near = [s for s in pool if _close(scorer.value(s, first), best, margin)]
    best_second = min(scorer.value(s, second) for s in near)
    tied = [s for s in near if _close(scorer.value(s, second), best_second, margin)]
    tied.sort(key=lambda s: (s.name != planned, s.name))
    winner = tied[0]
    percent = f"{margin * 100:g} %"
    if len(tied) > 1:
        why = "the plan's tool" if winner.name == planned else "by name"
        reason = f"tie within {percent}: fixed order chose {winner.name} ({why})"
    elif len(near) > 1:
        reason = f"{priority}: {first} within {percent}, then {scorer.words(winner, second)}"
    else:
        reason = f"{priority}: {scorer.words(winner, first)}"
    order = [winner, *(s for s in candidates if s is not winner)]
    return Choice(order, reason, scores, [s.name for s in tied] if len(tied) > 1 else [])
