"""Eval suites: conversations with expected outcomes, run through the public Runtime.

A suite is YAML: ``now`` (the fixed clock, optional) and ``cases``. A case is either long
form (``name, tier, messages, approve, expect: {intent, status, outcome, reply_contains,
tools, source}``) or short form (``m: message`` plus the expectations inline); either may
``arrange`` its world first (``corral.testing.arrange``: a fault armed in a service). Tiers follow
seed 003: ``core`` must pass 100 %, ``regular`` at least 95 %, ``exploratory`` only records
its failure modes.

The report gives the seed 004 metrics: completion rate (and, apart, the partial-completion
rate of runs where an optional step failed), average steps, and the tool failure
distribution.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from corral.agent import Agent
from corral.contracts import IntentSource, RunOutcome, RunStatus, RunSummary
from corral.effects import Effects, FixedEffects, LiveEffects
from corral.errors import ConfigInvalidError, ErrorCode, InvalidInputError
from corral.events import (
    Event,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolAttempt,
    ToolSelected,
)
from corral.hashing import stable_hash
from corral.inputs import is_blank, require_text
from corral.observe.telemetry import Untraced
from corral.runtime.runtime import Runtime
from corral.safe_yaml import read_yaml_file
from corral.store.base import RunRecord
from corral.store.memory import MemoryStore
from corral.testing.arrange import Arrangement, arrange, parse_arrange
from corral.testing.faults import (
    FaultInjector,
    FaultLedger,
    FaultProfile,
    FaultSchedule,
    SimulatedCrash,
)
from corral.testing.reliability import ReliabilityReport, Transcript, transcript_from_events
from corral.validation import validation_problems

_Checked = TypeVar("_Checked", bound=BaseModel)

TIER_BARS = {"core": 1.0, "regular": 0.95, "exploratory": 0.0}


@dataclass(frozen=True)
class EvalCase:
    """One conversation and what must come out of it."""

    name: str
    tier: str
    messages: list[str]
    approve: bool | None
    expect: dict[str, Any]
    arrange: tuple[Arrangement, ...] = field(default=(), kw_only=True)
    """Requests made before the first message (a fault armed in a service the agent uses)."""


@dataclass(frozen=True)
class EvalSuite:
    """The cases and the clock they run at."""

    cases: list[EvalCase]
    now: datetime | None
    path: Path | None = None
    """The file it was read from, named in its errors."""


@dataclass
class CaseResult:
    """What one case did, and what was wrong with it."""

    case: EvalCase
    problems: list[str]
    summary: RunSummary
    tools: list[str]
    tool_failures: list[tuple[str, str]] = field(default_factory=list)
    transcript: Transcript | None = None
    """The case for the reliability metrics (every run it made, and the fault ledger)."""

    @property
    def passed(self) -> bool:
        """True when every expectation held."""
        return not self.problems


@dataclass
class SuiteReport:
    """Pass rates per tier, and the seed 004 metrics."""

    results: list[CaseResult]

    def pass_rate(self, tier: str | None = None) -> float:
        """Share of (tier's) cases that passed."""
        chosen = [r for r in self.results if tier is None or r.case.tier == tier]
        return sum(r.passed for r in chosen) / len(chosen) if chosen else 1.0

    def _share(self, chosen: list[CaseResult]) -> float:
        return len(chosen) / len(self.results) if self.results else 0.0

    @property
    def completion_rate(self) -> float:
        """Share of runs the agent carried fully to the user's answer.

        Not handed off, not failed, and not a partial completion (an optional step failed).
        """
        return self._share(
            [
                r
                for r in self.results
                if r.summary.status not in (RunStatus.HANDED_OFF, RunStatus.FAILED)
                and r.summary.outcome != "partial"
            ]
        )

    @property
    def partial_completion_rate(self) -> float:
        """Share of runs that finished with only part of the plan done (outcome ``partial``)."""
        return self._share([r for r in self.results if r.summary.outcome == "partial"])

    @property
    def outcomes(self) -> Counter[str]:
        """How runs ended: outcome (``success``, ``partial``, ``unknown``...) -> runs."""
        return Counter(r.summary.outcome or r.summary.status.value for r in self.results)

    @property
    def average_steps(self) -> float:
        """Mean number of tool steps that ran per case."""
        return statistics.fmean(len(r.tools) for r in self.results) if self.results else 0.0

    @property
    def tool_failures(self) -> Counter[tuple[str, str]]:
        """(tool, error code) -> failed attempts."""
        return Counter(f for r in self.results for f in r.tool_failures)

    def tiers_met(self) -> bool:
        """Whether every tier reached its bar."""
        tiers = {r.case.tier for r in self.results}
        return all(self.pass_rate(t) >= TIER_BARS.get(t, 0.0) for t in tiers)

    @property
    def reliability(self) -> ReliabilityReport:
        """The seed 003 metrics and the must-be-zero counts over every case."""
        return ReliabilityReport([r.transcript for r in self.results if r.transcript])

    def passed_bars(self) -> bool:
        """Tiers met and every must-be-zero count zero: what ``corral eval`` exits 0 on."""
        return self.tiers_met() and not any(self.reliability.must_be_zero().values())

    def as_json(self) -> dict[str, Any]:
        """Figures and failures, JSON-ready."""
        tiers = sorted({r.case.tier for r in self.results})
        reliability = self.reliability
        return {
            "cases": len(self.results),
            "pass_rate": round(self.pass_rate(), 4),
            "tiers": {t: round(self.pass_rate(t), 4) for t in tiers},
            "tiers_met": self.tiers_met(),
            "completion_rate": round(self.completion_rate, 4),
            "partial_completion_rate": round(self.partial_completion_rate, 4),
            "outcomes": dict(sorted(self.outcomes.items())),
            "average_steps": round(self.average_steps, 2),
            "tool_failures": {f"{t}:{c}": n for (t, c), n in self.tool_failures.items()},
            "metrics": reliability.metrics(),
            "must_be_zero": reliability.must_be_zero(),
            "faults": reliability.faults(),
            "failures": [
                {"case": r.case.name, "tier": r.case.tier, "problems": r.problems}
                for r in self.results
                if not r.passed
            ],
            "results": [
                {
                    "case": r.case.name,
                    "tier": r.case.tier,
                    "passed": r.passed,
                    "outcome": r.summary.outcome or r.summary.status.value,
                }
                for r in self.results
            ],
        }


Tier = Literal["core", "regular", "exploratory"]


def _said(text: str) -> str:
    """Refuse what the runtime would refuse mid-suite, after earlier cases ran.

    A blank message (blank as the runtime reads it) or one that is no valid text (a lone
    surrogate).
    """
    if is_blank(text):
        raise ValueError("is blank: a case's messages and answers are text a user sends")
    try:
        require_text(text)
    except InvalidInputError:
        raise ValueError("is not valid Unicode text (it holds a lone surrogate)") from None
    return text


Message = Annotated[str, AfterValidator(_said)]
"""A message or an answer, as a user types it: text, never a number YAML read, never a
string taken for a list of characters, never blank."""


class Expectations(BaseModel):
    """What a case expects; a name left out is not checked. A typo is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")

    intent: str | None = None
    status: RunStatus | None = None
    outcome: RunOutcome | None = None
    reply_contains: StrictStr | StrictInt | StrictFloat | None = None
    """Text, or a number as YAML reads one; not ``yes`` (YAML's true)."""
    tools: list[str] | None = None
    source: IntentSource | None = None

    @field_validator("status", "tools", "reply_contains", "source", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        """Refuse a null that could never pass, or crashed the check.

        A run always has a status, and an intent a source (``none`` when nothing was
        recognised); ``tools: null`` crashed. ``intent: null`` (nothing recognised) and
        ``outcome: null`` are expectations of their own, and stay allowed.
        """
        if value is None:
            raise ValueError("null is no expectation: leave the key out")
        return value

    def given(self) -> dict[str, Any]:
        """The expectations written, as ``_check`` reads them."""
        return self.model_dump(mode="json", exclude_unset=True)


_EXPECT_KEYS = tuple(Expectations.model_fields)
"""The names a case may expect (a recorded case's ``expect`` takes the same)."""


class _CaseFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    tier: Tier = "regular"
    approve: bool | None = None
    arrange: Any = None


class ShortCase(_CaseFields, Expectations):
    """``{m: message, then: [answers], ...expectations}``: one line per case."""

    m: Message
    then: list[Message] = []


class LongCase(_CaseFields):
    """``{name, messages: [...], expect: {...}}``."""

    name: str
    messages: list[Message] = Field(min_length=1)
    expect: Expectations = Expectations()


class SuiteFile(BaseModel):
    """The file: the clock the cases run at, and at least one case."""

    model_config = ConfigDict(extra="forbid")

    now: Annotated[datetime, Strict()] | str | None = None
    """An ISO time (YAML may have read it as a time already); never a number."""
    cases: list[dict[str, Any]] = Field(min_length=1)


def checked(model: type[_Checked], raw: Any, where: str) -> _Checked:
    """``raw`` as ``model``, or ``CONFIG_INVALID`` saying where and what is wrong."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigInvalidError(
            f"{where}: {validation_problems(exc, 3, root='the case')}",
            hint="docs/testing.md describes an eval suite's cases",
        ) from None


def _case(raw: dict[str, Any], index: int, path: Path) -> EvalCase:
    label = raw.get("name") or raw.get("m") or f"#{index}"
    where = f"{path}: eval case {str(label)[:40]!r}"
    if "m" in raw:
        short = checked(ShortCase, raw, where)
        expect = short.model_dump(mode="json", include=set(_EXPECT_KEYS), exclude_unset=True)
        messages = [short.m, *short.then]
        name = short.name or f"{index:03d} {short.m[:40]}"
        tier, approve, arrange_raw = short.tier, short.approve, short.arrange
    else:
        long = checked(LongCase, raw, where)
        expect, messages, name = long.expect.given(), list(long.messages), long.name
        tier, approve, arrange_raw = long.tier, long.approve, long.arrange
    arranged = parse_arrange(arrange_raw, name)
    return EvalCase(name, tier, messages, approve, expect, arrange=arranged)


def load_suite(path: Path) -> EvalSuite:
    """Read and check a suite file: every case, before any runs (``CONFIG_INVALID``).

    A suite that checks nothing is refused too (no cases, an unknown tier, whose bar
    would be 0): a gate that cannot fail is worse than none.
    """
    from corral.testing.recorded import recorded_case  # builds on this module

    data = checked(SuiteFile, read_yaml_file(path) or {}, f"eval suite {path}")
    cases: list[EvalCase] = []
    for i, raw in enumerate(data.cases, start=1):
        if "recorded" in raw:
            cases.append(recorded_case(raw, i, path))
        else:
            cases.append(_case(raw, i, path))
    counted = Counter(case.name for case in cases)
    repeated = sorted(name for name, times in counted.items() if times > 1)
    if repeated:  # results, failures and a baseline's comparison are keyed by name
        raise ConfigInvalidError(
            f"eval suite {path}: two or more cases are named {', '.join(map(repr, repeated))}",
            hint="give each case a name of its own",
        )
    now = data.now
    if isinstance(now, str):
        try:
            now = datetime.fromisoformat(now)
        except ValueError:
            raise ConfigInvalidError(
                f"eval suite {path}: now: {now!r} is not an ISO time (2026-11-29T10:00:00+08:00)"
            ) from None
    return EvalSuite(cases, now, path)


def check_names(suite: EvalSuite, agent: Agent) -> None:
    """Refuse a suite that expects an intent or a tool ``agent`` does not declare.

    Nor a recorded run of another agent, whose replay could only diverge. Such a case
    could never pass: a typo (``order_staus``) or a renamed intent would be
    reported as the agent's failure, case by case, after every case ran, instead of as
    the suite's mistake before any did (``CONFIG_INVALID``).
    """
    from corral.testing.recorded import RecordedCase  # builds on this module

    intents = {spec.name for spec in agent.config.intents}
    wrong: list[str] = []
    for case in suite.cases:
        if isinstance(case, RecordedCase) and case.events:  # another agent's run replays nothing
            started = case.events[0].payload
            if isinstance(started, RunStarted) and started.agent != agent.config.name:
                wrong.append(f"{case.name!r} is a run of agent {started.agent!r}")
        expect = case.expect
        intent = expect.get("intent")
        if intent is not None and intent not in intents:
            wrong.append(f"{case.name!r} expects intent {intent!r}")
        unknown = [tool for tool in expect.get("tools") or () if tool not in agent.tools]
        if unknown:
            wrong.append(f"{case.name!r} expects tools {unknown}")
    if wrong:
        where = f"eval suite {suite.path}" if suite.path else "the eval suite"
        shown = "; ".join(wrong[:5]) + (f"; and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        raise ConfigInvalidError(
            f"{where}: it does not fit agent {agent.config.name!r}: {shown}",
            hint=(
                f"its intents: {', '.join(sorted(intents))}; "
                f"its tools: {', '.join(agent.tools.names())}"
            ),
        )


def _stood_in(by_step: list[list[str]], expected: list[str], group: Callable[[str], str]) -> bool:
    """Whether each step was served by the expected tool or equivalents that took over.

    ``by_step``: each step's tools, the planned one then its fallbacks. A fault met and
    recovered by a declared equivalent (same ``equivalent_group``) is not a wrong path; a
    missing step, or another tool, still is. So is an equivalent picked first: the step
    must start with the expected tool, or "urgent picks the fast search" could never fail.
    """
    steps = [tools for tools in by_step if tools]
    return len(steps) == len(expected) and all(
        tools[0] == want and all(group(tool) == group(want) for tool in tools[1:])
        for tools, want in zip(steps, expected, strict=True)
    )


def _check(
    case: EvalCase,
    summary: RunSummary,
    tools: list[str],
    group: Callable[[str], str] = str,
    by_step: list[list[str]] | None = None,
) -> list[str]:
    expect, problems = case.expect, []
    label = summary.intent.label if summary.intent else None
    if "intent" in expect and label != expect["intent"]:
        problems.append(f"intent {label!r}, expected {expect['intent']!r}")
    if "source" in expect and (summary.intent is None or summary.intent.source != expect["source"]):
        problems.append(
            f"intent source {summary.intent.source if summary.intent else None!r}, "
            f"expected {expect['source']!r}"
        )
    if "status" in expect and summary.status.value != expect["status"]:
        problems.append(f"status {summary.status.value!r}, expected {expect['status']!r}")
    if "outcome" in expect and summary.outcome != expect["outcome"]:
        problems.append(f"outcome {summary.outcome!r}, expected {expect['outcome']!r}")
    if "reply_contains" in expect and str(expect["reply_contains"]) not in (summary.reply or ""):
        problems.append(f"reply {summary.reply!r} lacks {expect['reply_contains']!r}")
    if (
        "tools" in expect
        and tools != expect["tools"]
        and not (by_step and _stood_in(by_step, list(expect["tools"]), group))
    ):
        problems.append(f"tools {tools}, expected {expect['tools']}")
    return problems


async def run_case(
    runtime: Runtime, case: EvalCase, ledger: FaultLedger | None = None
) -> CaseResult:
    """Play one conversation: the first message, answers to questions, then the approval.

    A run whose process "dies" (an injected ``SimulatedCrash``) is resumed from its store
    by a fresh ``Runtime``, as a restarted process would; ``ledger`` is what the fault
    injector saw (an empty one when no faults are injected). A recorded case
    (``corral.testing.recorded``) is replayed from its log instead.
    """
    from corral.testing.recorded import RecordedCase, replay_case  # builds on this module

    if isinstance(case, RecordedCase):
        return await replay_case(runtime.agent, case)
    started = time.perf_counter()
    runs: list[str] = []
    await arrange(case.arrange, runtime.agent.deps, case.name)

    # the conversation's session, as a chat client keeps one: what a turn found (an
    # order, a product) carries over to the next request as it would in production
    session = "eval-" + stable_hash(case.name)

    async def send(message: str | None, run_id: str | None) -> RunSummary:
        """A new message, an answer to ``run_id``'s question, or (``None``) the approval."""
        if run_id is None:
            return await runtime.start(message or "", session_id=session)
        if message is None:
            return await runtime.resume(run_id, approve=case.approve)
        return await runtime.resume(run_id, answer=message)

    async def turn(message: str | None, run_id: str | None = None) -> RunSummary:
        """``send``; a process that dies in it is followed by a new one, as in production.

        The new one resumes the run the crash left mid-way. Where the crash came before
        anything of the request was stored (a new run that read before it wrote, an answer
        whose run still waits for it), the client sends the request again.
        """
        nonlocal runtime
        try:
            summary = await send(message, run_id)
        except SimulatedCrash:  # the process died: a new one takes over from the store
            effects = runtime.effects
            reborn = effects.reborn() if isinstance(effects, FaultInjector) else effects
            runtime = Runtime(runtime.agent, runtime.store, effects=reborn, tracer=Untraced())
            crashed = _last_run(runtime, run_id, runs)
            if crashed is None or (crashed.run_id == run_id and crashed.status in _WAITING):
                summary = await send(message, run_id)
            else:
                summary = await runtime.resume(crashed.run_id)
        if summary.run_id not in runs:
            runs.append(summary.run_id)
        return summary

    summary = await turn(case.messages[0])
    for message in case.messages[1:]:
        waiting = summary.status is RunStatus.AWAITING_USER
        summary = await turn(message, summary.run_id if waiting else None)
    if case.approve is not None and summary.status is RunStatus.AWAITING_CONFIRM:
        summary = await turn(None, summary.run_id)
    events = [e for run_id in runs for e in await runtime.events(run_id)]
    last = [e for e in events if e.run_id == summary.run_id]
    by_step = tools_by_step(last)
    tools = [tool for step in by_step for tool in step]
    failures = [
        (e.payload.tool, e.payload.error_code or ErrorCode.TOOL_FAILED.value)
        for e in last
        if isinstance(e.payload, ToolAttempt) and e.payload.status == "error"
    ]
    problems = _check(case, summary, tools, _equivalence(runtime.agent), by_step)
    transcript = transcript_from_events(
        events,
        case=case.name,
        tier=case.tier,
        passed=not problems,
        partial=summary.outcome == "partial",
        writes=frozenset(s.name for s in runtime.agent.tools if s.policy.kind == "write"),
        ledger=ledger or FaultLedger(),
        wall_s=time.perf_counter() - started,
    )
    return CaseResult(case, problems, summary, tools, failures, transcript)


def _equivalence(agent: Agent) -> Callable[[str], str]:
    """Tool name -> its ``equivalent_group`` (or itself): what may stand in for it."""
    groups = {spec.name: spec.policy.equivalent_group or spec.name for spec in agent.tools}
    return lambda name: groups.get(name, name)


_WAITING = frozenset({RunStatus.AWAITING_USER.value, RunStatus.AWAITING_CONFIRM.value})


def _last_run(runtime: Runtime, run_id: str | None, earlier: list[str]) -> RunRecord | None:
    """The run a crash interrupted: ``run_id``'s, or one this turn started, not ended.

    ``None`` when there is none: a run that reads before it writes is first stored when
    it pauses or ends, so a crash in one of its reads leaves nothing to resume, and the
    client sends its message again. A run of an ``earlier`` turn (one waiting for a
    confirmation) is none of this turn's.
    """
    for record in runtime.store.list_runs(limit=5):
        ours = record.run_id == run_id or record.run_id not in earlier
        if ours and not RunStatus(record.status).terminal:
            return record
    return None


def tools_selected(events: list[Event]) -> list[str]:
    """The tools chosen, step by step in dispatch order, each step's fallbacks after it."""
    return [tool for step in tools_by_step(events) for tool in step]


def tools_by_step(events: list[Event]) -> list[list[str]]:
    """Each started step's tools, in dispatch order: the planned one, then its fallbacks.

    A plain pick of the planned tool has no ``tool_selected`` event of its own (format 2):
    it is the tool the step started with, unless no tool was eligible at all.
    """
    chosen: dict[str, list[ToolSelected]] = {}
    planned: dict[str, str] = {}
    refused: set[str] = set()
    for event in events:
        payload = event.payload
        if isinstance(payload, StepStarted) and payload.args is not None:
            planned[payload.step_id] = payload.tool
            chosen[payload.step_id] = []
        elif isinstance(payload, ToolSelected) and payload.step_id in chosen:
            chosen[payload.step_id].append(payload)
        elif (
            isinstance(payload, StepFinished)
            and payload.error_code == ErrorCode.NO_ELIGIBLE_TOOL.value
        ):
            refused.add(payload.step_id)
    steps: list[list[str]] = []
    for step_id, picks in chosen.items():
        first_recorded = bool(picks) and not picks[0].reason.startswith("fallback")
        tools = [] if step_id in refused or first_recorded else [planned[step_id]]
        steps.append([*tools, *(pick.tool for pick in picks)])
    return steps


async def run_suite(
    make_agent: Callable[[], Agent],
    suite: EvalSuite,
    effects: Callable[[], Effects] | None = None,
    *,
    faults: FaultProfile | None = None,
    seed: int = 0,
    jobs: int = 1,
    on_case: Callable[[CaseResult], None] | None = None,
) -> SuiteReport:
    """Run every case on a fresh agent and a fresh in-memory store.

    A fresh agent means fresh business data (a case that cancels an order does not change
    the next case's world); the suite's clock, when it has one, makes dates repeatable.
    ``faults`` strikes each case as the seeded schedule says (``corral.testing.faults``):
    the same case meets the same faults in every run with the same ``seed``. ``jobs``
    cases run at once; the report keeps the suite's order. ``on_case`` hears of each case
    as it ends (a progress bar).
    """

    def make_effects() -> Effects:
        if effects is not None:
            return effects()
        return FixedEffects(start=suite.now) if suite.now else LiveEffects()

    gate = asyncio.Semaphore(max(1, jobs))
    first = make_agent()  # the first case's: the suite is checked against it before any runs
    try:
        check_names(suite, first)
    except ConfigInvalidError:
        await first.aclose()
        raise
    spare = [first]

    async def one(case: EvalCase) -> CaseResult:
        async with gate:
            ledger = FaultLedger()  # counts every write entry, with faults or without
            schedule = FaultSchedule(faults or FaultProfile(name="none"), seed, case.name)
            chosen = FaultInjector(make_effects(), schedule, ledger)
            agent = spare.pop() if spare else make_agent()
            runtime = Runtime(agent, MemoryStore(), effects=chosen, tracer=Untraced())
            async with runtime:
                result = await run_case(runtime, case, ledger)
        if on_case is not None:
            on_case(result)
        return result

    return SuiteReport(list(await asyncio.gather(*(one(case) for case in suite.cases))))
