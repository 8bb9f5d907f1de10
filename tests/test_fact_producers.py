"""Issue 7, defect 4: the facts a rule reads are produced before the rule is judged.

Statically, every ``facts.x`` read by a business rule or a ``success`` criterion before a
step is published by one of the step's ancestors (or named like a declared entity);
otherwise the plan is ``PLAN_INVALID``. At run time, a step waits for the producers of
what its rules read.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, create_model

from corral import EventType, MemoryStore, Plan, RunStatus, Runtime, Step, StepStatus, tool
from corral.agent import Agent
from corral.config import parse_config
from corral.errors import ConfigInvalidError, PlanInvalidError
from corral.models import ScriptedModel
from corral.planning import PlanContext, validate_plan
from corral.planning.producers import FactRead
from corral.testing import FixedEffects
from corral.tools.registry import ToolRegistry
from corral.verify.expressions import compile_expression, fact_names, read_paths
from tests.helpers import build_agent, corral_cli

CALLS: list[str] = []


class Order(BaseModel):
    order_id: str
    order_status: str


class Cancelled(BaseModel):
    cancelled: bool


@tool
async def get_order(order_id: str) -> Order:
    """Find an order and its status."""
    CALLS.append("get_order")
    # Slower than the gate, so that a rule judged early would see nothing. Its length
    # decides nothing when the step waits for this one (the passing case): it only gives
    # a gate that does not wait the time to run first and refuse.
    await asyncio.sleep(0.05)
    return Order(order_id=order_id, order_status="pending")


@tool
def cancel_order(order_id: str) -> Cancelled:
    """Cancel an order that has not shipped."""
    CALLS.append("cancel_order")
    return Cancelled(cancelled=True)


LOOKUP = {
    "id": "s1",
    "tool": "get_order",
    "args": {"order_id": "$entities.order_id"},
    "facts": {"order_status": "result.order_status"},
}
CANCEL = {"id": "s2", "tool": "cancel_order", "args": {"order_id": "$entities.order_id"}}
RULE = {
    "name": "cancel_only_before_shipping",
    "before_tool": "cancel_order",
    "require": 'facts.order_status == "pending"',
    "refusal": "cannot_cancel",
}
TEMPLATES = {"cannot_cancel": {"zh": "不能取消", "en": "cannot cancel"}}
ORDER_ID = {"order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]}}


STATUS_TOO = {  # the user may say the status: a fact of that name counts as given
    **ORDER_ID,
    "phone": {"kind": "pattern", "patterns": [r"(1\d{10})"]},
    "order_status": {"kind": "vocabulary", "vocabulary": {"pending": "pending"}},
}


def cancel_agent(
    cancel: dict[str, Any],
    entities: dict[str, Any] | None = None,
    lookup: dict[str, Any] = LOOKUP,
    lookup_tool: Any = get_order,
) -> Agent:
    return build_agent(
        [lookup_tool, cancel_order],
        [lookup, cancel],
        entities=entities or ORDER_ID,
        business_rules=[RULE],
        templates=TEMPLATES,
    )


async def go(agent: Agent) -> tuple[Runtime, Any]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    return runtime, await runtime.start("go A1")


# ------------------------------------------------------------------ what an expression reads


def test_read_paths_lists_the_fact_paths_an_expression_reads() -> None:
    expression = compile_expression(
        'facts.order.status == "x" and facts["paid"] and entities.order_id and '
        "facts.items[facts.index].sku and len(facts) > 0 and result.ok"
    )
    assert read_paths(expression) == {("order", "status"), ("paid",), ("items",), ("index",), ()}
    assert fact_names(expression) == {"order", "paid", "items", "index"}
    assert read_paths(expression, "entities") == {("order_id",)}


# ------------------------------------------------------------------ static, at load


def test_a_rule_reading_a_fact_its_step_does_not_depend_on_is_rejected_at_load() -> None:
    with pytest.raises(ConfigInvalidError) as info:
        cancel_agent(CANCEL)
    message = info.value.message
    assert info.value.code.value == "CONFIG_INVALID"
    assert "plan p: s2: business rule cancel_only_before_shipping reads facts.order_status" in (
        message
    )
    assert "s1 publishes it: add it to s2.depends_on" in message


def test_the_same_rule_with_the_dependency_loads_and_runs() -> None:
    agent = cancel_agent({**CANCEL, "depends_on": ["s1"]})
    assert agent.template_graphs[("do", "p")].steps["s2"].waits_for == {"s1"}


def test_a_fact_nobody_publishes_is_named_as_such() -> None:
    rule = {**RULE, "require": "facts.refund_window_open"}
    with pytest.raises(ConfigInvalidError) as info:
        build_agent(
            [get_order, cancel_order],
            [LOOKUP, {**CANCEL, "depends_on": ["s1"]}],
            entities=ORDER_ID,
            business_rules=[rule],
            templates=TEMPLATES,
        )
    assert "reads facts.refund_window_open" in info.value.message
    assert "no step of the plan publishes it" in info.value.message


def test_a_success_criterion_reading_a_fact_of_a_sibling_is_rejected() -> None:
    with pytest.raises(ConfigInvalidError) as info:
        build_agent(
            [get_order, cancel_order],
            [LOOKUP, {**CANCEL, "success": 'result.cancelled and facts.order_status == "x"'}],
            entities=ORDER_ID,
        )
    assert "s2: success reads facts.order_status" in info.value.message


class Both(BaseModel):
    x: int
    y: int


@tool
def first() -> Both:
    return Both(x=1, y=1)


@tool
def second() -> Both:
    return Both(x=1, y=1)


def test_steps_whose_rules_wait_for_each_other_are_rejected() -> None:
    entities = {n: {"kind": "pattern", "patterns": [n + r"=(\d+)"]} for n in ("x", "y")}
    rules = [
        {"name": "r1", "before_tool": "first", "require": "facts.y", "refusal": "no"},
        {"name": "r2", "before_tool": "second", "require": "facts.x", "refusal": "no"},
    ]
    with pytest.raises(ConfigInvalidError) as info:
        build_agent(
            [first, second],
            [
                {"id": "a", "tool": "first", "facts": {"x": "result.x"}},
                {"id": "b", "tool": "second", "facts": {"y": "result.y"}},
            ],
            entities=entities,
            business_rules=rules,
            templates={"no": {"zh": "不", "en": "no"}},
        )
    assert "wait for each other" in info.value.message


# ------------------------------------------------------------------ model plans


MODEL_CONFIG = {
    "name": "model-planned",
    "entities": ORDER_ID,
    "intents": [
        {
            "name": "cancel",
            "rules": [{"keywords": ["cancel"], "confidence": 0.95}],
            "route": "plan",
            "planner": "model",
            "tools": ["get_order", "cancel_order"],
            "reply": "done",
        }
    ],
    "business_rules": [RULE],
    "templates": {"done": {"zh": "好了", "en": "done"}, **TEMPLATES},
}


def model_plan(depends: bool) -> str:
    cancel = {**CANCEL, "depends_on": ["s1"] if depends else []}
    return json.dumps({"steps": [LOOKUP, cancel]})


async def test_a_model_plan_gets_the_same_check() -> None:
    CALLS.clear()
    model = ScriptedModel([model_plan(depends=False), model_plan(depends=True)])
    agent = Agent.build(parse_config(MODEL_CONFIG), [get_order, cancel_order], model=model)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("please cancel A1")
    events = await runtime.events(summary.run_id)
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    assert [c["accepted"] for c in calls] == [False, True]
    reason = calls[0]["reason"]
    assert "s2: business rule cancel_only_before_shipping reads facts.order_status" in reason
    model.assert_complete()
    # The planner is told what the validator will demand, so a good model gets it right.
    system = model.requests[0].messages[0].content
    assert "before cancel_order: business rule cancel_only_before_shipping reads facts " in system
    assert summary.status is RunStatus.FINISHED
    assert CALLS == ["get_order", "cancel_order"]


# ------------------------------------------------------------------ at run time


async def test_a_rule_waits_for_a_concurrent_producer_of_its_fact() -> None:
    """Defect 4: the rule ran before the lookup published the fact, saw nothing, refused.

    ``order_status`` is also a declared entity (the user may say it), so the plan passes
    the static check without a ``depends_on``; the sibling lookup still publishes it.
    """
    CALLS.clear()
    agent = cancel_agent(CANCEL, STATUS_TOO)
    runtime, summary = await go(agent)
    events = await runtime.events(summary.run_id)
    assert summary.status is RunStatus.FINISHED, [e.data for e in events]
    assert CALLS == ["get_order", "cancel_order"]
    order = [
        (e.type, e.data.get("step_id"))
        for e in events
        if e.type in (EventType.STEP_FINISHED, EventType.VERIFIED)
    ]
    assert order.index((EventType.STEP_FINISHED, "s1")) < order.index((EventType.VERIFIED, "s2"))
    assert [s.status for s in summary.steps] == [StepStatus.SUCCEEDED, StepStatus.SUCCEEDED]
    assert agent.template_graphs[("do", "p")].steps["s2"].waits_for == {"s1"}


async def test_a_failed_producer_settles_and_the_rule_then_refuses() -> None:
    CALLS.clear()

    @tool(name="get_order")
    async def missing_order(order_id: str) -> Order | None:
        """Find an order and its status."""
        CALLS.append("get_order")
        return None

    _, summary = await go(cancel_agent(CANCEL, STATUS_TOO, lookup_tool=missing_order))
    assert CALLS == ["get_order"]  # the write never ran on a value nobody produced
    statuses = {s.id: s.status for s in summary.steps}
    assert statuses["s2"] is StepStatus.SKIPPED


async def test_a_producer_that_fails_before_its_tool_runs_releases_the_waiting_step() -> None:
    """The lookup fails at binding (nothing runs): the gated step is still judged, not left
    pending for ever."""
    CALLS.clear()
    lookup = {**LOOKUP, "args": {"order_id": "$entities.phone"}}  # the user gives no phone
    _, summary = await go(cancel_agent(CANCEL, STATUS_TOO, lookup=lookup))
    statuses = {s.id: s.status for s in summary.steps}
    assert statuses == {"s1": StepStatus.FAILED, "s2": StepStatus.SKIPPED}
    assert CALLS == []


# ------------------------------------------------------------------ property: the static check

FACTS = ("f0", "f1", "f2", "f3")
TOOLS = ("t0", "t1", "t2")
Out = create_model("Out", **{f: (int, 0) for f in FACTS})  # type: ignore[call-overload]


def _make_tool(name: str) -> Any:
    def run() -> Any:
        return Out()

    run.__name__ = name
    run.__annotations__ = {"return": Out}
    return tool(run)


REGISTRY = ToolRegistry([_make_tool(name) for name in TOOLS])


@st.composite
def plans(draw: st.DrawFn, unique_producers: bool) -> tuple[list[Step], dict[str, frozenset[str]]]:
    n = draw(st.integers(1, 6))
    owners = {f: draw(st.integers(0, n - 1)) for f in FACTS}
    steps = []
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=i)) if i else set()
        if unique_producers:
            published = [f for f in FACTS if owners[f] == i]
        else:
            published = draw(st.lists(st.sampled_from(FACTS), unique=True, max_size=2))
        steps.append(
            Step(
                id=f"s{i}",
                tool=draw(st.sampled_from(TOOLS)),
                depends_on=[f"s{d}" for d in sorted(deps)],
                facts={f: f"result.{f}" for f in published},
            )
        )
    reads = {t: draw(st.frozensets(st.sampled_from(FACTS), max_size=2)) for t in TOOLS}
    return steps, reads


def _ancestors(steps: list[Step]) -> dict[str, set[str]]:
    by_id = {s.id: s for s in steps}
    found: dict[str, set[str]] = {}
    for step in steps:  # steps only depend on earlier ones
        found[step.id] = set(step.depends_on).union(*(found[d] for d in step.depends_on))
    assert set(found) == set(by_id)
    return found


def _context(reads: dict[str, frozenset[str]], entities: frozenset[str]) -> PlanContext:
    return PlanContext(
        REGISTRY,
        {name: int for name in entities},
        rule_reads={t: (FactRead(f"business rule r_{t}", facts),) for t, facts in reads.items()},
    )


@settings(max_examples=150, deadline=None)
@given(plans(unique_producers=True))
def test_the_check_accepts_exactly_plans_whose_read_facts_have_an_ancestor_producer(
    drawn: tuple[list[Step], dict[str, frozenset[str]]],
) -> None:
    steps, reads = drawn
    ancestors = _ancestors(steps)
    producer = {f: s.id for s in steps for f in s.facts}
    expected = {
        (s.id, f) for s in steps for f in reads[s.tool] if producer.get(f) not in ancestors[s.id]
    }
    try:
        graph = validate_plan(Plan(plan_id="p", steps=steps), _context(reads, frozenset()))
    except PlanInvalidError as exc:
        named = {
            (s.id, f)
            for s in steps
            for f in FACTS
            if any(p.startswith(f"{s.id}: ") and f"reads facts.{f}," in p for p in exc.problems)
        }
        assert named == expected, exc.problems
    else:
        assert expected == set()
        for step in steps:  # every producer waited for is an ancestor: nothing can deadlock
            assert graph.steps[step.id].waits_for <= ancestors[step.id]


@settings(max_examples=150, deadline=None)
@given(plans(unique_producers=False), st.frozensets(st.sampled_from(FACTS), max_size=2))
def test_accepted_plans_never_judge_a_rule_before_its_producers(
    drawn: tuple[list[Step], dict[str, frozenset[str]]], entities: frozenset[str]
) -> None:
    steps, reads = drawn
    ancestors = _ancestors(steps)
    try:
        graph = validate_plan(Plan(plan_id="p", steps=steps), _context(reads, entities))
    except PlanInvalidError as exc:
        assert all("reads facts." in p or "wait for each other" in p for p in exc.problems)
        return
    for step in steps:
        below = {s.id for s in steps if step.id in ancestors[s.id]}
        for fact in reads[step.tool]:
            producers = {s.id for s in steps if fact in s.facts} - {step.id}
            # Read facts come from an ancestor, or from the user (an entity) ...
            assert producers & ancestors[step.id] or fact in entities
            # ... and every producer that may run first is run first (waited for).
            assert producers - below <= graph.steps[step.id].waits_for | ancestors[step.id]
        assert not graph.steps[step.id].waits_for & (below | {step.id})


# ------------------------------------------------------------------ end to end, through the CLI

CLI_TOOLS = """
from pathlib import Path

from corral import ToolPolicy, tool
from tests.test_fact_producers import Cancelled, get_order  # the same lookup as above

MARK = Path(__file__).with_name("cancelled")


@tool(policy=ToolPolicy(kind="write"))
def cancel_order(order_id: str) -> Cancelled:
    \"\"\"Cancel an order that has not shipped.\"\"\"
    MARK.write_text(order_id)
    return Cancelled(cancelled=True)
"""

CLI_AGENT = """
name: cancel-desk
default_language: en
entities:
  order_id: {kind: pattern, patterns: ['(A\\d+)']}
  order_status: {kind: vocabulary, vocabulary: {pending: pending, shipped: shipped}}
intents:
  - name: cancel
    rules: [{keywords: [cancel], confidence: 0.95}]
    route: plan
    plan: cancel
    reply: done
plans:
  cancel:
    steps:
      - id: s1
        tool: get_order
        args: {order_id: $entities.order_id}
        facts: {order_status: result.order_status}
      - id: s2
        tool: cancel_order
        args: {order_id: $entities.order_id}
business_rules:
  - name: cancel_only_before_shipping
    before_tool: cancel_order
    require: facts.order_status == "pending"
    refusal: cannot_cancel
templates:
  done: {zh: 好了, en: done}
  cannot_cancel: {zh: 不能取消, en: cannot cancel}
"""


def _cli_agent(tmp_path: Path, yaml_text: str) -> Path:
    root = tmp_path / "agent"
    root.mkdir()
    (root / "tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    (root / "agent.yaml").write_text(yaml_text, encoding="utf-8")
    return root


def test_cli_a_rule_waits_for_the_lookup_that_publishes_its_fact(tmp_path: Path) -> None:
    root = _cli_agent(tmp_path, CLI_AGENT)
    out = corral_cli(tmp_path / "home", "run", str(root), "cancel A1", "--json").stdout
    data = json.loads(out)
    assert data["status"] == "finished", data
    assert [s["status"] for s in data["steps"]] == ["succeeded", "succeeded"]
    assert (root / "cancelled").read_text() == "A1"


def test_cli_a_rule_without_its_producer_is_config_invalid(tmp_path: Path) -> None:
    no_entity = CLI_AGENT.replace(
        "  order_status: {kind: vocabulary, vocabulary: {pending: pending, shipped: shipped}}\n",
        "",
    )
    root = _cli_agent(tmp_path, no_entity)
    done = corral_cli(tmp_path / "home", "run", str(root), "cancel A1", ok=False)
    err = " ".join(done.stderr.split())  # the console wraps long lines
    assert done.returncode == 2 and "CONFIG_INVALID" in err
    assert "business rule cancel_only_before_shipping reads facts.order_status" in err
    assert "s2" in err and not (root / "cancelled").exists()
