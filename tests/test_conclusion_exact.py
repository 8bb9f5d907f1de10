"""How a run ends, branch by branch, driven whole through ``Runtime``.

Each test pins what a user and an operator see: the status, the outcome stored in
``run_finished``, the exact reply, and where the reply came from (the ``template`` of the
``reply`` event: a template name, ``step`` for a reply step, ``model``, or ``partial``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from corral import EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.agent import Agent
from corral.errors import TransientToolError
from corral.models import ScriptedModel
from corral.testing import FixedEffects
from corral.tools.builtin import generate_reply
from corral.tools.policy import NO_RETRY, ToolPolicy
from tests.helpers import build_agent
from tests.one_intent import one_intent


class Value(BaseModel):
    value: int


class Check(BaseModel):
    eligible: bool


@tool
def lookup(n: int) -> Value:
    """Look up the order."""
    return Value(value=n)


@tool
def nothing(n: int) -> Value | None:
    """Search the archive."""
    return None


@tool
def broken(n: int) -> Value:
    """Ask the points service."""
    raise ValueError("the points service is down")


@tool
def undocumented(n: int) -> Value:
    raise ValueError("down")


@tool
def check(eligible: bool) -> Check:
    """Check eligibility."""
    return Check(eligible=eligible)


@tool
def check_down(eligible: bool) -> Check:
    """Check eligibility (the service is down)."""
    raise ValueError("the eligibility service is down")


@tool
def write(n: int) -> Value:
    """Write the change."""
    return Value(value=n)


TOOLS = [lookup, nothing, broken, undocumented, check, check_down, write, generate_reply]
TEMPLATES = {
    "no_order": {"zh": "没有这个订单", "en": "No such order."},
    "too_small": {"zh": "太小了", "en": "Too small."},
    "nope": {"zh": "不符合条件", "en": "Not eligible."},
    "other_rule": {"zh": "别的", "en": "Other rule."},
    "found": {"zh": "查到了。", "en": "Found it."},
}


async def run(agent: Agent, message: str = "go") -> tuple[Any, list[Any], Runtime]:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start(message)
    return summary, await runtime.events(summary.run_id), runtime


def ending(events: list[Any]) -> tuple[str, str | None]:
    """(template of the last reply, outcome recorded in run_finished)."""
    replies = [e.data["template"] for e in events if e.type is EventType.REPLY]
    finished = [e.data for e in events if e.type is EventType.RUN_FINISHED]
    assert len(finished) == 1
    return replies[-1], finished[0]["outcome"]


def agent(steps: list[dict[str, Any]], **kwargs: Any) -> Agent:
    return build_agent(
        TOOLS, steps, templates={**TEMPLATES, **kwargs.pop("templates", {})}, **kwargs
    )


# ------------------------------------------------------------------ success


async def test_success_replies_with_the_intents_template() -> None:
    summary, events, _ = await run(agent([{"id": "s1", "tool": "lookup", "args": {"n": 1}}]))
    assert (summary.status, summary.outcome, summary.reply) == (
        RunStatus.FINISHED,
        "success",
        "done",
    )
    assert ending(events) == ("done_reply", "success")


async def test_success_without_an_intent_template_says_done() -> None:
    steps = [{"id": "s1", "tool": "lookup", "args": {"n": 1}}]
    summary, events, _ = await run(agent(steps, reply=None))
    assert (summary.outcome, summary.reply) == ("success", "Done.")
    assert ending(events) == ("done", "success")


async def test_success_replies_with_the_reply_steps_text() -> None:
    steps = [
        {"id": "s1", "tool": "lookup", "args": {"n": 1}},
        {
            "id": "r",
            "tool": "generate_reply",
            "args": {"template": "found"},
            "depends_on": ["s1"],
            "facts": {"reply": "result.text"},
        },
    ]
    summary, events, _ = await run(agent(steps))
    assert (summary.outcome, summary.reply) == ("success", "Found it.")
    assert ending(events) == ("step", "success")


async def test_success_replies_with_the_models_checked_text() -> None:
    steps = [{"id": "s1", "tool": "lookup", "args": {"n": 1}}]
    config = one_intent("go", steps=steps, model={"replies": True, "intent_fallback": False})
    model = ScriptedModel(['{"text": "All set, thank you."}'])
    built = Agent.build(parse_config(config), [lookup], model=model)
    summary, events, _ = await run(built)
    assert (summary.outcome, summary.reply) == ("success", "All set, thank you.")
    assert ending(events) == ("model", "success")


# ------------------------------------------------------------------ a required step failed


async def test_nothing_found_answers_with_the_plans_template() -> None:
    steps = [{"id": "s1", "tool": "nothing", "args": {"n": 1}}]
    summary, events, _ = await run(agent(steps, plan_extra={"on_failure": {"s1": "no_order"}}))
    assert (summary.status, summary.outcome) == (RunStatus.FINISHED, "not_found")
    assert summary.reply == "No such order." and summary.handoff is None
    assert ending(events) == ("no_order", "not_found")


async def test_an_unmet_criterion_answers_with_the_plans_template() -> None:
    steps = [{"id": "s1", "tool": "lookup", "args": {"n": 1}, "success": "result.value > 5"}]
    summary, events, _ = await run(agent(steps, plan_extra={"on_failure": {"s1": "too_small"}}))
    assert (summary.status, summary.outcome) == (RunStatus.FINISHED, "unmet")
    assert summary.reply == "Too small." and summary.handoff is None
    assert ending(events) == ("too_small", "unmet")


async def test_nothing_found_without_a_template_goes_to_a_person() -> None:
    steps = [
        {"id": "s1", "tool": "nothing", "args": {"n": 1}},
        {"id": "s2", "tool": "lookup", "args": {"n": 2}, "depends_on": ["s1"]},
    ]  # another step's template does not answer s1's failure
    summary, _, _ = await run(agent(steps, plan_extra={"on_failure": {"s2": "no_order"}}))
    assert (summary.status, summary.outcome) == (RunStatus.HANDED_OFF, "handoff")
    assert summary.handoff is not None and summary.handoff.reason_code == "NO_RESULT"
    assert summary.handoff.reason == "step s1 (nothing) failed: the tool found nothing"


async def test_an_unmet_criterion_without_a_template_goes_to_a_person() -> None:
    steps = [{"id": "s1", "tool": "lookup", "args": {"n": 1}, "success": "result.value > 5"}]
    summary, _, _ = await run(agent(steps))
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None
    assert summary.handoff.reason_code == "SUCCESS_CRITERIA_FAILED"
    assert summary.handoff.reason.startswith("step s1 (lookup) failed: ")


async def test_a_template_for_nothing_found_does_not_answer_a_broken_tool() -> None:
    steps = [{"id": "s1", "tool": "broken", "args": {"n": 1}}]
    summary, _, _ = await run(agent(steps, plan_extra={"on_failure": {"s1": "no_order"}}))
    assert summary.status is RunStatus.HANDED_OFF and summary.reply != "No such order."
    assert summary.handoff is not None and summary.handoff.reason_code == "TOOL_FAILED"


# ------------------------------------------------------------------ business rules


RULES = [
    {"name": "other", "before_tool": "lookup", "require": "1 == 2", "refusal": "other_rule"},
    {
        "name": "must_be_eligible",
        "before_tool": "write",
        "require": "facts.eligible == true",
        "refusal": "nope",
    },
]


def gated(eligible: bool | None) -> list[dict[str, Any]]:
    """s0 fails; s2 (write) is blocked behind it; s1 publishes ``eligible`` (``None``: fails)."""
    s1: dict[str, Any] = {
        "id": "s1",
        "tool": "check" if eligible is not None else "check_down",
        "args": {"eligible": bool(eligible)},
        "facts": {"eligible": "result.eligible"},
        "on_failure": "continue",
    }
    return [
        {"id": "s0", "tool": "broken", "args": {"n": 0}},
        s1,
        {"id": "s2", "tool": "write", "args": {"n": 2}, "depends_on": ["s0", "s1"]},
    ]


async def test_a_rule_that_skips_a_step_refuses() -> None:
    steps = [
        {
            "id": "s1",
            "tool": "check",
            "args": {"eligible": False},
            "facts": {"eligible": "result.eligible"},
        },
        {"id": "s2", "tool": "write", "args": {"n": 2}, "depends_on": ["s1"]},
    ]
    summary, events, _ = await run(agent(steps, business_rules=RULES[1:]))
    assert (summary.status, summary.outcome, summary.reply) == (
        RunStatus.FINISHED,
        "refused",
        "Not eligible.",
    )
    assert ending(events) == ("nope", "refused")


async def test_a_rule_already_false_for_a_blocked_step_refuses_instead_of_a_handoff() -> None:
    """s2 never ran (s0 failed), but its rule is false from s1's facts: the answer is no."""
    summary, events, _ = await run(agent(gated(False), business_rules=RULES))
    assert (summary.status, summary.outcome, summary.reply) == (
        RunStatus.FINISHED,
        "refused",
        "Not eligible.",
    )
    assert ending(events) == ("nope", "refused")
    verdicts = [e for e in events if e.type is EventType.VERIFIED and e.data["step_id"] == "s2"]
    assert len(verdicts) == 1 and verdicts[0].stage == "verify"
    assert verdicts[0].data == {
        "step_id": "s2",
        "verdict": {
            "passed": False,
            "check": "business_rule",
            "reason": "must_be_eligible: facts.eligible == true is false",
            "code": "BUSINESS_RULE_VIOLATED",
        },
    }


async def test_a_rule_that_holds_for_a_blocked_step_leaves_the_failure_to_a_person() -> None:
    summary, events, _ = await run(agent(gated(True), business_rules=RULES))
    assert (summary.status, summary.outcome) == (RunStatus.HANDED_OFF, "handoff")
    assert summary.handoff is not None and summary.handoff.reason_code == "TOOL_FAILED"
    assert (
        summary.handoff.reason == "step s0 (broken) failed: ValueError: the points service is down"
    )
    assert not [e for e in events if e.type is EventType.VERIFIED and e.data.get("step_id") == "s2"]


async def test_a_rule_that_cannot_be_judged_yet_does_not_refuse() -> None:
    summary, _, _ = await run(agent(gated(None), business_rules=RULES))
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None and summary.handoff.reason.startswith("step s0 (broken)")


# ------------------------------------------------------------------ declined, partial


async def test_a_declined_confirmation_cancels() -> None:
    steps = [{"id": "s1", "tool": "write", "args": {"n": 1}, "requires_confirmation": True}]
    runtime = Runtime(agent(steps), MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    done = await runtime.resume(paused.run_id, approve=False)
    assert (done.status, done.outcome, done.reply) == (
        RunStatus.FINISHED,
        "cancelled",
        "OK, I have left it as it was. Nothing was changed.",
    )
    assert ending(await runtime.events(done.run_id)) == ("cancelled", "cancelled")


def optional(description: str = "") -> list[dict[str, Any]]:
    return [
        {"id": "s1", "tool": "lookup", "args": {"n": 1}, "description": "post it on X."},
        {"id": "s2", "tool": "broken", "args": {"n": 2}, "on_failure": "continue"},
        {
            "id": "s3",
            "tool": "undocumented",
            "args": {"n": 3},
            "on_failure": "continue",
            "description": description,
        },
    ]


async def test_a_partial_reply_names_steps_by_description_tool_docstring_or_tool_name() -> None:
    summary, events, _ = await run(agent(optional()))
    assert (summary.status, summary.outcome) == (RunStatus.FINISHED, "partial")
    assert summary.reply == (
        "Done: post it on X. Not done: Ask the points service, undocumented; "
        "you can try that again later or ask a colleague."
    )
    assert ending(events) == ("partial", "partial")


async def test_a_partial_reply_in_chinese_lists_with_the_chinese_comma() -> None:
    summary, _, _ = await run(agent(optional("积分")), "go 查一下")
    assert summary.reply == (
        "已完成：post it on X。未能完成：Ask the points service、积分，"
        "需要的话可以稍后再试或联系人工客服。"
    )


async def test_a_partial_reply_that_cannot_be_grounded_goes_to_a_person() -> None:
    broken_note = {"partial": {"zh": "{facts.missing}", "en": "{facts.missing} {done}"}}
    summary, events, _ = await run(agent(optional(), templates=broken_note))
    assert (summary.status, summary.outcome) == (RunStatus.HANDED_OFF, "handoff")
    assert summary.handoff is not None and summary.handoff.reason_code == "TEMPLATE_INVALID"
    assert "facts.missing" in summary.handoff.reason
    assert not [e for e in events if e.type is EventType.REPLY and e.data["template"] == "partial"]


# ------------------------------------------------------------------ model plans, unknown outcomes


async def test_a_model_plan_that_finds_nothing_goes_to_a_person() -> None:
    """A model plan has no ``on_failure`` templates to answer with."""
    plan = '{"steps": [{"id": "s1", "tool": "nothing", "args": {"n": 1}}]}'
    config = one_intent("go", tools=["nothing"], model={"intent_fallback": False})
    model = ScriptedModel(function=lambda request: plan)
    agent = Agent.build(parse_config(config), [nothing], model=model)
    summary, _, _ = await run(agent, "go: archive 1")  # n=1 is said, not invented
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.handoff is not None and summary.handoff.reason_code == "NO_RESULT"
    assert summary.handoff.reason == "step s1 (nothing) failed: the tool found nothing"


async def test_an_ambiguous_write_is_not_retried_on_an_equivalent_tool() -> None:
    """The write may have happened: a person is asked, the replica is never tried."""
    replicas: list[int] = []

    @tool(name="primary", policy=ToolPolicy(kind="write", equivalent_group="w", retry=NO_RETRY))
    def primary() -> Value:
        """Write through the primary."""
        raise TransientToolError("503")

    @tool(name="replica", policy=ToolPolicy(kind="write", equivalent_group="w", latency_ms=500))
    def replica() -> Value:
        """Write through the replica."""
        replicas.append(1)
        return Value(value=1)

    built = build_agent([primary, replica], [{"id": "s1", "tool": "primary"}])
    summary, events, _ = await run(built)
    assert (summary.status, summary.outcome) == (RunStatus.HANDED_OFF, "unknown")
    assert summary.handoff is not None and summary.handoff.reason == (
        "step s1 (primary): TOOL_TRANSIENT: 503; the write may or may not have happened"
    )
    assert replicas == []
    assert ending(events) == ("outcome_unknown", "unknown")
