"""Fault injection at the effects boundary (issue 11 §1): each fault, and how corral answers.

Every case runs through ``run_suite`` as ``corral eval --faults`` runs it: a fresh agent,
the seeded ``FaultInjector`` around the effects, the fault ledger counting where the tool
is entered. The faults are scripted per call (``at``), so each test knows what struck.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool
from corral.agent import Agent
from corral.contracts import RunSummary
from corral.errors import ConfigInvalidError
from corral.testing.evaluation import EvalCase, EvalSuite, SuiteReport, run_suite
from corral.testing.faults import (
    MODEL_FAULTS,
    FaultLedger,
    FaultProfile,
    FaultSchedule,
    InjectedFault,
    load_profile,
    named_profiles,
    rewrite_answer,
)
from corral.tools.policy import RetryPolicy
from tests.helpers import build_agent

FAST = RetryPolicy(max_retries=2, backoff_s=(0.0,))


class Done(BaseModel):
    ref: str
    amount: int


class World:
    """A business system: effects by key, and each tool's entries counted in its body."""

    def __init__(self) -> None:
        self.effects: dict[str, str] = {}
        self.entered: dict[str, int] = {}

    def enter(self, tool: str) -> None:
        self.entered[tool] = self.entered.get(tool, 0) + 1

    def finder(self, name: str) -> Any:
        """A reconciler for write ``name``: the effect its key left, if any."""

        def find(ctx: ToolContext) -> Done | None:
            ref = self.effects.get(ctx.idempotency_key)
            return Done(ref=ref, amount=1) if ref else None

        find.__name__ = f"find_{name}"
        return find


def agent_for(
    world: World, *, reconciler: bool = True, idempotent: bool = True, finds: bool = True
) -> Agent:
    """``finds=False``: the reconciler looks in the wrong place and never finds the effect."""

    @tool(policy=ToolPolicy(retry=FAST))
    def lookup(order_id: str) -> Done:
        """Find the order."""
        world.enter("lookup")
        return Done(ref=order_id, amount=30)

    def find(ctx: ToolContext) -> Done | None:
        ref = world.effects.get(ctx.idempotency_key) if finds else None
        return Done(ref=ref, amount=30) if ref else None

    @tool(
        policy=ToolPolicy(kind="write", retry=FAST, idempotent=idempotent),
        reconcile=find if reconciler else None,
    )
    def refund(ref: str, amount: int, ctx: ToolContext) -> Done:
        """Refund the order."""
        world.enter("refund")
        world.effects.setdefault(ctx.idempotency_key, f"R-{ref}")
        return Done(ref=world.effects[ctx.idempotency_key], amount=amount)

    steps = [
        {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}},
        {
            "id": "s2",
            "tool": "refund",
            "args": {"ref": "$s1.result.ref", "amount": "$s1.result.amount"},
            "depends_on": ["s1"],
        },
    ]
    return build_agent([lookup, refund], steps, requires=["order_id"])


CASE = EvalCase("refund A1", "core", ["go A1"], None, {"status": "finished"})


async def run_with(agent: Agent, at: dict[str, list[str | None]], **rates: Any) -> SuiteReport:
    profile = FaultProfile(name="test", at=at, **rates)
    return await run_suite(lambda: agent, EvalSuite([CASE], None), faults=profile, seed=7)


def ledger_of(report: SuiteReport) -> FaultLedger:
    transcript = report.results[0].transcript
    assert transcript is not None
    return transcript.ledger


async def test_a_transient_error_is_retried_and_the_tool_entered_once() -> None:
    world = World()
    report = await run_with(agent_for(world), {"lookup": ["transient"]})
    assert report.results[0].passed and world.entered == {"lookup": 1, "refund": 1}
    assert [f.kind for f in ledger_of(report).faults] == ["transient"]
    assert report.reliability.metrics()["recoverability"] == 1.0


async def test_a_timeout_before_a_write_is_looked_up_then_entered_once() -> None:
    world = World()
    report = await run_with(agent_for(world), {"refund": ["timeout_before"]})
    assert report.results[0].passed, report.results[0].problems
    assert world.entered["refund"] == 1 and len(world.effects) == 1
    assert report.reliability.must_be_zero()["duplicate_effects"] == 0


@pytest.mark.parametrize("kind", ["ambiguous", "timeout_after", "malformed"])
async def test_a_write_that_acted_and_failed_is_reconciled_never_entered_again(kind: str) -> None:
    world = World()
    report = await run_with(agent_for(world), {"refund": [kind]})
    assert report.results[0].passed, report.results[0].problems
    assert world.entered["refund"] == 1 and len(world.effects) == 1
    assert report.reliability.must_be_zero() == {
        "duplicate_effects": 0,
        "fabricated_outcomes": 0,
        "invented_arguments": 0,
    }


async def test_without_a_reconciler_an_ambiguous_write_is_unknown_and_claimed_neither_way() -> None:
    world = World()
    report = await run_with(
        agent_for(world, reconciler=False, idempotent=False), {"refund": ["ambiguous"]}
    )
    result = report.results[0]
    assert result.summary.outcome == "unknown" and not result.passed
    assert world.entered["refund"] == 1  # never retried blindly
    assert report.reliability.must_be_zero()["fabricated_outcomes"] == 0


async def test_an_idempotent_write_with_no_reconciler_is_reentered_as_a_replay() -> None:
    """Declared idempotent by key: entered again with its key, it finds its first effect."""
    world = World()
    report = await run_with(agent_for(world, reconciler=False), {"refund": ["ambiguous"]})
    assert report.results[0].passed and world.entered["refund"] == 2 and len(world.effects) == 1
    assert report.reliability.must_be_zero()["duplicate_effects"] == 0
    assert ledger_of(report).replays == 1
    assert report.reliability.faults()["idempotent_replays"] == 1
    assert report.passed_bars()


async def test_a_write_that_is_not_idempotent_entered_twice_is_a_duplicate() -> None:
    """The instrument is honest: a second entry for one key is counted, whoever dedups."""
    world = World()
    agent = agent_for(world, idempotent=False, finds=False)  # its reconciler misses
    report = await run_with(agent, {"refund": ["ambiguous"]})
    assert report.results[0].passed and world.entered["refund"] == 2
    assert report.reliability.must_be_zero()["duplicate_effects"] == 1
    assert ledger_of(report).replays == 0
    assert not report.passed_bars()


async def test_a_permanent_error_is_not_retried_and_not_claimed_done() -> None:
    world = World()
    report = await run_with(agent_for(world), {"lookup": ["permanent"]})
    result = report.results[0]
    assert not result.passed and world.entered == {}
    assert result.summary.steps[0].error_code == "TOOL_FAILED"
    assert report.reliability.must_be_zero()["fabricated_outcomes"] == 0


async def test_a_slow_answer_within_the_timeout_arrives_and_a_slower_one_times_out() -> None:
    world = World()
    quick = await run_with(agent_for(world), {"lookup": ["slow"]}, tools={"slow_s": 0.5})
    assert quick.results[0].passed and world.entered["lookup"] == 1
    world = World()
    late = await run_with(agent_for(world), {"lookup": ["slow"]}, tools={"slow_s": 60})
    assert late.results[0].passed and world.entered["lookup"] == 1  # the retry answered
    assert late.results[0].tool_failures == [("lookup", "TOOL_TIMEOUT")]


async def test_a_crash_after_the_write_acted_resumes_without_entering_it_again() -> None:
    world = World()
    report = await run_with(agent_for(world), {"refund": ["crash"]})
    result = report.results[0]
    assert [f.kind for f in ledger_of(report).faults] == ["crash"]
    assert result.passed, result.problems
    assert world.entered["refund"] == 1 and len(world.effects) == 1
    assert report.reliability.metrics()["recoverability"] == 1.0


async def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    profile = named_profiles()["flaky-30"]
    draws = [
        [FaultSchedule(profile, seed, "case").draw("t", n, profile.tool_rates()) for n in range(40)]
        for seed in (1, 1, 2)
    ]
    assert draws[0] == draws[1] != draws[2]
    struck = sum(d is not None for d in draws[0])
    assert 0 < struck < 40


def test_profiles_are_named_or_read_from_yaml_and_bad_ones_are_config_errors(
    tmp_path: Any,
) -> None:
    assert set(named_profiles()) == {"none", "flaky-10", "flaky-30", "hostile-model", "crashy"}
    assert not load_profile("none").active and load_profile("flaky-10").active
    path = tmp_path / "mine.yaml"
    path.write_text("tools: {transient: 0.2}\nat: {refund: [null, crash]}\n", encoding="utf-8")
    mine = load_profile(str(path))
    assert mine.name == "mine" and mine.tool_rates() == {"transient": 0.2}
    path.write_text("tools: {transient: 0.7, ambiguous: 0.6}\n", encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match=r"add up to 1\.3"):
        load_profile(str(path))
    path.write_text("at: {refund: [meteor]}\n", encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="meteor"):
        load_profile(str(path))
    with pytest.raises(ConfigInvalidError, match="unknown fault profile"):
        load_profile("flaky-99")


PLAN = json.dumps(
    {
        "steps": [
            {"id": "s1", "tool": "lookup", "args": {"order_id": "AB1234567"}},
            {"id": "s2", "tool": "refund", "args": {"date": "2026-11-29"}, "depends_on": ["s1"]},
        ]
    }
)


@pytest.mark.parametrize("kind", MODEL_FAULTS)
def test_every_model_fault_changes_a_plan_answer_or_says_it_does_not_fit(kind: str) -> None:
    changed = rewrite_answer(kind, PLAN, random.Random(1))
    if kind == "contradiction":  # a plan states no outcome to contradict
        assert changed is None
        return
    assert changed is not None and changed != PLAN
    if kind in ("malformed_json", "prose", "empty", "refusal"):
        with pytest.raises(ValueError):
            json.loads(changed)
        return
    steps = json.loads(changed)["steps"]
    if kind == "unknown_tool":
        assert {s["tool"] for s in steps} - {"lookup", "refund"}
    elif kind == "cyclic_plan":
        assert "s2" in steps[0]["depends_on"] and "s1" in steps[1]["depends_on"]
    elif kind == "long_plan":
        assert len(steps) == 40
    elif kind == "invented_ids":
        assert "AB1234567" not in changed and "2026-11-29" not in changed
    else:
        assert steps[0]["args"]["order_id"] == ["AB1234567"]  # a list where a string was


def test_a_reply_or_a_verdict_is_contradicted_and_other_answers_are_left_alone() -> None:
    intent = json.dumps({"label": "refund", "confidence": 0.9})
    assert rewrite_answer("cyclic_plan", intent, random.Random(1)) is None
    assert rewrite_answer("invented_ids", intent, random.Random(1)) is None
    verdict = json.dumps({"passed": True, "reason": "ok"})
    flipped = rewrite_answer("contradiction", verdict, random.Random(1))
    assert flipped is not None and json.loads(flipped)["passed"] is False
    reply = rewrite_answer("contradiction", json.dumps({"text": "没有找到"}), random.Random(1))
    assert reply is not None and "successfully" in json.loads(reply)["text"]


# --------------------------------------------------------------------------- model faults in a run


@tool
def forecast(order_id: str) -> Done:
    """Tomorrow's forecast where an order goes."""
    return Done(ref=order_id, amount=20)


def planned() -> str:
    step = {"id": "s1", "tool": "forecast", "args": {"order_id": "$entities.order_id"}}
    return json.dumps({"steps": [step]})


@pytest.mark.parametrize(
    "kinds",
    [
        ["unknown_tool", "cyclic_plan"],
        ["malformed_json", "prose"],
        ["long_plan", "wrong_types"],
        ["empty", "refusal"],
    ],
)
async def test_a_hostile_planner_is_caught_at_the_boundary_and_nothing_wrong_runs(
    kinds: list[str],
) -> None:
    from corral import parse_config
    from corral.models import ScriptedModel
    from tests.one_intent import one_intent

    model = ScriptedModel(function=lambda _request: planned())
    config = parse_config(one_intent("weather", tools=["forecast"], model={"name": "scripted"}))
    agent = Agent.build(config, [forecast], model=model)
    case = EvalCase("weather A1", "core", ["weather for A1?"], None, {"status": "finished"})
    profile = FaultProfile(name="hostile", at={"model:plan": [*kinds, None]})
    report = await run_suite(lambda: agent, EvalSuite([case], None), faults=profile, seed=1)
    result = report.results[0]
    struck = [f.kind for f in ledger_of(report).faults]
    # a fault either spoils the answer and is re-asked, or does not fit and is not injected
    assert struck and set(struck) <= set(kinds)
    assert result.passed, result.problems
    transcript = result.transcript
    assert transcript is not None and [c.tool for c in transcript.calls] == ["forecast"]
    assert transcript.calls[0].args == {"order_id": "A1"}
    assert report.reliability.must_be_zero()["invented_arguments"] == 0


# --------------------------------------------------------------------------- the instruments


def test_the_must_be_zero_counts_see_what_they_count() -> None:
    """Hand-made transcripts: each count rises exactly when its fault is there."""
    from corral.testing.reliability import CallRecord, ReliabilityReport, Transcript

    ledger = FaultLedger()
    ledger.entries[("refund", "k1")] = 2
    ledger.applied[("refund", "k1")] = 2
    claimed_but_not_done = CallRecord("refund", {"ref": "A1"}, True, "k2", True, claim="applied")
    denied_but_done = CallRecord("refund", {"ref": "A1"}, True, "k1", False, claim="not_applied")
    unsure = CallRecord("refund", {"ref": "A1"}, True, "k3", False, claim="none")
    invented = CallRecord("lookup", {"order_id": "A9", "n": 3}, False, None, True, {"x": "B7"})
    from_tool = CallRecord("lookup", {"order_id": "B7"}, False, None, True)
    transcript = Transcript(
        "c", "core", True, False, ["refund order a1, all 3 of them"],
        [claimed_but_not_done, denied_but_done, unsure, invented, from_tool], ledger=ledger,
    )  # fmt: skip
    counts = ReliabilityReport([transcript]).must_be_zero()
    assert counts == {"duplicate_effects": 1, "fabricated_outcomes": 2, "invented_arguments": 1}


def test_the_metrics_count_faulted_runs_and_backed_claims() -> None:
    from corral.testing.reliability import CallRecord, ReliabilityReport, Transcript

    struck = FaultLedger()
    struck.faults.append(InjectedFault("t", "transient", 1))
    backed = CallRecord("t", {}, False, None, True, claim="applied", checked=True)
    bare = CallRecord("t", {}, False, None, True, claim="applied", checked=False)
    runs = [
        Transcript("a", "core", True, False, [], [backed], ledger=struck, tool_calls=2, wall_s=1.0),
        Transcript("b", "core", False, True, [], [bare], tool_calls=4, wall_s=3.0),
    ]
    metrics = ReliabilityReport(runs).metrics()
    assert metrics["task_success_rate"] == 0.5 and metrics["partial_completion_rate"] == 0.5
    assert metrics["recoverability"] == 1.0 and metrics["verifiability"] == 0.5
    assert metrics["cost"]["tool_calls"] == {"mean": 3.0, "p50": 3.0, "p95": 4.0}
    assert ReliabilityReport(runs[1:]).metrics()["recoverability"] is None


def test_an_equivalent_that_took_over_meets_a_tools_expectation_another_tool_does_not() -> None:
    from corral.testing.evaluation import _check

    groups = {"search": "orders", "search_archive": "orders"}
    case = EvalCase("c", "core", ["go"], None, {"tools": ["search", "reply"]})
    summary = RunSummary(
        run_id="r", trace_id="t", status="finished", intent=None, steps=[], reply=None, handoff=None
    )

    def problems(*by_step: list[str]) -> list[str]:
        flat = [tool for step in by_step for tool in step]
        return _check(case, summary, flat, lambda n: groups.get(n, n), list(by_step))

    assert problems(["search"], ["reply"]) == []
    assert problems(["search", "search_archive"], ["reply"]) == []  # a fallback, one step
    assert problems(["search"], ["delete"], ["reply"]) != []
    assert problems(["reply"]) != []
    twice = EvalCase("c", "core", ["go"], None, {"tools": ["search", "search", "reply"]})
    flat = ["search", "reply"]
    assert _check(twice, summary, flat, lambda n: n, [["search"], ["reply"]]) != []  # a step gone


# --------------------------------------------------------------------------- review findings


async def test_a_crash_stops_the_dead_process_s_other_steps_before_the_resume() -> None:
    """SIGKILL ends every step of the process: a sibling write still running must not
    finish behind the resumed run's back (which would find nothing and enter it again)."""
    import asyncio

    world = World()
    gate = asyncio.Event()

    @tool(policy=ToolPolicy(kind="write", idempotent=True), reconcile=world.finder("pay"))
    async def pay(ctx: ToolContext) -> Done:
        """Take the payment."""
        world.enter("pay")
        world.effects.setdefault(ctx.idempotency_key, "paid")
        gate.set()
        return Done(ref="paid", amount=1)

    @tool(policy=ToolPolicy(kind="write", idempotent=True), reconcile=world.finder("ship"))
    async def ship(ctx: ToolContext) -> Done:
        """Ship the parcel, a little after the payment."""
        world.enter("ship")
        await gate.wait()
        await asyncio.sleep(0.05)  # still working when the process dies
        world.effects.setdefault(ctx.idempotency_key, "shipped")
        return Done(ref="shipped", amount=1)

    steps = [{"id": "s1", "tool": "pay"}, {"id": "s2", "tool": "ship"}]
    agent = build_agent([pay, ship], steps)
    case = EvalCase("both", "core", ["go"], None, {"status": "finished"})
    profile = FaultProfile(name="t", at={"pay": ["crash"]})
    report = await run_suite(lambda: agent, EvalSuite([case], None), faults=profile, seed=1)
    assert report.results[0].passed, report.results[0].problems
    assert sorted(world.effects.values()) == ["paid", "shipped"]
    assert report.reliability.must_be_zero()["duplicate_effects"] == 0


async def test_a_real_write_that_acted_then_failed_is_not_called_fabricated() -> None:
    world = World()

    def find(ctx: ToolContext) -> Done | None:
        ref = world.effects.get(ctx.idempotency_key)
        return Done(ref=ref, amount=1) if ref else None

    @tool(policy=ToolPolicy(kind="write"), reconcile=find)
    def refund(ctx: ToolContext) -> Done:
        """Commits, then the answer is lost (a real ambiguous failure, nothing injected)."""
        world.effects.setdefault(ctx.idempotency_key, "R1")
        raise ConnectionResetError("reset after commit")

    agent = build_agent([refund], [{"id": "s1", "tool": "refund"}])
    case = EvalCase("r", "core", ["go"], None, {"status": "finished"})
    report = await run_suite(lambda: agent, EvalSuite([case], None))
    assert report.results[0].passed and report.passed_bars()
    assert report.reliability.must_be_zero()["fabricated_outcomes"] == 0


async def test_a_retry_after_a_proven_non_effect_is_not_a_duplicate() -> None:
    from corral.errors import TransientToolError

    world = World()

    @tool(policy=ToolPolicy(kind="write", retry=FAST))
    def refund(ctx: ToolContext) -> Done:
        """Refused once before it acted (503), then done."""
        world.enter("refund")
        if world.entered["refund"] == 1:
            raise TransientToolError("503", applied=False)
        world.effects.setdefault(ctx.idempotency_key, "R1")
        return Done(ref="R1", amount=1)

    agent = build_agent([refund], [{"id": "s1", "tool": "refund"}])
    case = EvalCase("r", "core", ["go"], None, {"status": "finished"})
    report = await run_suite(lambda: agent, EvalSuite([case], None))
    assert world.entered["refund"] == 2 and report.results[0].passed
    assert report.reliability.must_be_zero()["duplicate_effects"] == 0


async def test_entering_again_after_a_reconcile_shares_the_retry_budget() -> None:
    world = World()
    report = await run_with(
        agent_for(world), {"refund": ["timeout_before", "transient", "transient", "transient"]}
    )
    events = report.results[0]
    assert not events.passed
    failures = [f for f in events.tool_failures if f[0] == "refund"]
    assert len(failures) == 3  # FAST allows 3 tries in all, lookups between them aside


def test_invented_values_are_matched_as_whole_words_and_empty_text_is_not_one() -> None:
    from corral.testing.reliability import CallRecord, Transcript

    said = ["refund order OD2611100003 please"]
    call = CallRecord(
        "refund", {"order_id": "OD2611100003", "amount": 1, "reason": "d"}, True, "k", True
    )
    assert Transcript("c", "core", True, False, said, [call]).invented() == 2
    blank = CallRecord("refund", {"order_id": "OD2611100003", "note": ""}, True, "k", True)
    assert Transcript("c", "core", True, False, said, [blank]).invented() == 0
    chinese = CallRecord("search", {"product": "打印机"}, False, None, True)
    assert Transcript("c", "core", True, False, ["我的打印机坏了"], [chinese]).invented() == 0


async def test_a_crash_in_a_later_step_resumes_though_an_earlier_sibling_was_cancelled() -> None:
    """The crash cancels the steps still running; one dispatched before the crashing step
    ended first in the run's view, and its cancellation, not the crash, left the run:
    the eval stopped with ``CancelledError`` instead of resuming as a restarted process."""
    import asyncio

    world = World()
    paid = asyncio.Event()

    @tool(policy=ToolPolicy(kind="write", idempotent=True), reconcile=world.finder("ship"))
    async def ship(ctx: ToolContext) -> Done:
        """Ship the parcel; the dead process's call never ends by itself."""
        world.enter("ship")
        if world.entered["ship"] == 1:
            await paid.wait()
            await asyncio.Event().wait()  # still working when the process dies
        world.effects.setdefault(ctx.idempotency_key, "shipped")
        return Done(ref="shipped", amount=1)

    @tool(policy=ToolPolicy(kind="write", idempotent=True), reconcile=world.finder("pay"))
    async def pay(ctx: ToolContext) -> Done:
        """Take the payment (the process dies right after it)."""
        world.enter("pay")
        world.effects.setdefault(ctx.idempotency_key, "paid")
        paid.set()
        return Done(ref="paid", amount=1)

    steps = [{"id": "s1", "tool": "ship"}, {"id": "s2", "tool": "pay"}]
    agent = build_agent([ship, pay], steps)
    case = EvalCase("both", "core", ["go"], None, {"status": "finished"})
    profile = FaultProfile(name="t", at={"pay": ["crash"]})
    report = await run_suite(lambda: agent, EvalSuite([case], None), faults=profile, seed=1)
    assert report.results[0].passed, report.results[0].problems
    assert sorted(world.effects.values()) == ["paid", "shipped"]
    assert report.reliability.must_be_zero()["duplicate_effects"] == 0
