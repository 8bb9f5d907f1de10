"""A reply or prompt template naming a value no run can have is refused at load.

The defect (reproduced through ``corral run``/``resume``): ``renewed: "已续借，{renewal_id}"``
where the step publishes ``renewal`` loaded fine; every renewal then wrote, failed to
render its reply, and was handed to a person, the customer told it went to one. A typo in
a refusal did the same to a refusal, and one in a confirmation prompt silently replaced
it with the generic "run renew_loan?", hiding what the person approved.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from corral import Agent, ToolPolicy, parse_config, tool
from corral.errors import ConfigInvalidError
from corral.tools.builtin import generate_reply


class Renewal(BaseModel):
    renewal: str
    fines: float


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True))
def renew(loan_id: str) -> Renewal:
    """Renew a loan."""
    return Renewal(renewal=f"R-{loan_id}", fines=0.0)


def config(**changes: Any) -> dict[str, Any]:
    """A loans desk whose templates ``changes`` replace (or add to)."""
    return {
        "name": "loans",
        "entities": {"loan_id": {"patterns": [r"(L\d+)"]}},
        "intents": [
            {
                "name": "renew",
                "rules": [{"keywords": ["renew"], "confidence": 0.95}],
                "route": "plan",
                "plan": "renew",
                "reply": "renewed",
            },
            {
                "name": "hello",
                "rules": [{"keywords": ["hello"], "confidence": 0.95}],
                "route": "reply",
                "reply": "hi",
            },
        ],
        "plans": {
            "renew": {
                "steps": [
                    {
                        "id": "s1",
                        "tool": "renew",
                        "args": {"loan_id": "$entities.loan_id"},
                        "facts": {"renewal": "result.renewal", "fines": "result.fines"},
                    },
                    {
                        "id": "s2",
                        "tool": "generate_reply",
                        "args": {"template": "note"},
                        "depends_on": ["s1"],
                    },
                ],
                "confirm": {"s1": "confirm_renew"},
                "on_failure": {"s1": "not_found"},
            }
        },
        "business_rules": [
            {"name": "no_fines", "before_tool": "renew", "require": "true", "refusal": "fined"}
        ],
        "templates": {
            "renewed": {"zh": "已续借 {renewal}", "en": "Renewed {renewal}"},
            "hi": {"zh": "你好 {loan_id}", "en": "Hello {loan_id}"},
            "confirm_renew": {"zh": "续借 {args.loan_id}（{tool}）？", "en": "Renew {loan_id}?"},
            "not_found": {"zh": "没有 {loan_id}", "en": "No loan {loan_id}"},
            "fined": {"zh": "罚款 {fines}", "en": "Fines: {fines}"},
            "note": {"zh": "单号 {renewal}", "en": "Number {renewal}"},
        }
        | changes,
    }


def build(**changes: Any) -> Agent:
    return Agent.build(parse_config(config(**changes)), [renew, generate_reply])


def refused(**changes: Any) -> str:
    with pytest.raises(ConfigInvalidError) as info:
        build(**changes)
    return info.value.message


def test_templates_over_entities_facts_and_a_prompts_own_values_load() -> None:
    build()


@pytest.mark.parametrize(
    ("template", "text", "says"),
    [
        ("renewed", "已续借 {renewal_id}", "template 'renewed' uses {renewal_id}"),
        ("fined", "罚款 {fine}", "template 'fined' uses {fine}"),
        ("confirm_renew", "续借 {nmae}", "template 'confirm_renew' uses {nmae}"),
        ("not_found", "没有 {loan}", "template 'not_found' uses {loan}"),
        ("note", "单号 {renewal.id.x}", None),  # a path into a known fact is its own business
        ("note", "单号 {renewl}", "template 'note' uses {renewl}"),
    ],
)
def test_a_name_no_entity_or_fact_has_is_refused(
    template: str, text: str, says: str | None
) -> None:
    changed = {template: {"zh": text, "en": "x"}}
    if says is None:
        build(**changed)
        return
    message = refused(**changed)
    assert says in message
    assert "which is no entity and no fact the plan publishes (facts: fines, renewal)" in message


def test_a_reply_route_may_use_only_entities() -> None:
    message = refused(hi={"zh": "你好 {renewal}", "en": "Hello"})
    assert "intent hello: reply template 'hi' uses {renewal}, which is no entity" in message


def test_each_variant_a_reply_step_may_render_is_checked() -> None:
    """``variant_fact`` renders ``<template>_<value>``: every such template is checked."""
    data = config(
        note_yes={"zh": "有 {renewal}", "en": "yes"},
        note_no={"zh": "无 {renewal_no}", "en": "no"},
    )
    data["plans"]["renew"]["steps"][1]["args"]["variant_fact"] = "fines"
    with pytest.raises(ConfigInvalidError) as info:
        Agent.build(parse_config(data), [renew, generate_reply])
    assert "template 'note_no' uses {renewal_no}" in info.value.message
    assert "note_yes" not in info.value.message


def refused_by_corral_run(tmp_path: Path, text: str, typo: str) -> str:
    """``corral run`` of the aftersales example with ``text`` replaced by ``typo``.

    Exit 2 and no run stored; the error's words, on one line.
    """
    from corral.cli.examples import LEFT_BEHIND
    from tests.conftest import AFTERSALES
    from tests.helpers import corral_cli

    desk = tmp_path / "desk"
    shutil.copytree(AFTERSALES, desk, ignore=LEFT_BEHIND)
    config_text = (desk / "agent.yaml").read_text(encoding="utf-8")
    assert text in config_text
    (desk / "agent.yaml").write_text(config_text.replace(text, typo), encoding="utf-8")
    done = corral_cli(tmp_path / "home", "run", str(desk), "订单 HD20240501 换新", ok=False)
    assert done.returncode == 2
    assert json.loads(corral_cli(tmp_path / "home", "runs", "--json").stdout) == []
    return " ".join(done.stderr.split())


def test_corral_run_refuses_the_example_with_a_misspelt_fact_before_any_run(
    tmp_path: Path,
) -> None:
    """Through the CLI, as the walkthrough met it: exit 2, CONFIG_INVALID, no run stored."""
    err = refused_by_corral_run(
        tmp_path, "换新单 {exchange_id} 已经建好了", "换新单 {exchange_no} 已经建好了"
    )
    assert "CONFIG_INVALID" in err and "uses {exchange_no}, which is no entity" in err


def test_an_intent_reply_is_not_checked_against_a_plan_that_writes_its_own() -> None:
    """Found by review: a plan whose steps publish ``reply`` never renders the intent's
    reply template, which may be written for the intent's other plan (``plan_rules``)."""
    data = config(renewed={"zh": "换货 {exchange_id}", "en": "Exchange {exchange_id}"})
    data["plans"]["renew"]["steps"][1]["facts"] = {"reply": "result.text"}
    Agent.build(parse_config(data), [renew, generate_reply])


def test_a_variant_reply_checks_only_the_templates_its_fact_can_name() -> None:
    """Found by review: every ``note_*`` template was checked, ``note_for_staff`` (used
    elsewhere) too; a number fact renders only ``note_yes`` or ``note_no``."""
    data = config(
        note_yes={"zh": "有 {renewal}", "en": "yes"},
        note_no={"zh": "无", "en": "no"},
        note_for_staff={"zh": "员工 {staff_name}", "en": "staff"},
    )
    data["plans"]["renew"]["steps"][1]["args"]["variant_fact"] = "fines"
    Agent.build(parse_config(data), [renew, generate_reply])


def test_a_date_range_entity_is_no_value_a_template_shows() -> None:
    """Found by review: ``{period.text}`` loaded, and every such reply handed off (a date
    range is no one value: ``values()`` leaves it out)."""
    data = config(hi={"zh": "报告 {period.text}", "en": "Report"})
    data["entities"]["period"] = {"kind": "date_range"}
    with pytest.raises(ConfigInvalidError, match=r"uses \{period\.text\}, which is no entity"):
        Agent.build(parse_config(data), [renew, generate_reply])


class Level(BaseModel):
    level: Literal[1, 2] | None
    state: Literal["open", "closed"] | None


@tool
def levels() -> Level:
    """A level that is a number, a state that may be none."""
    return Level(level=1, state=None)


def variant_agent(variant: str, templates: dict[str, Any], tools: list[Any]) -> Agent:
    data = config(**templates)
    data["plans"]["renew"]["steps"] = [
        {"id": "s1", "tool": "levels", "facts": {"level": "result.level", "state": "result.state"}},
        {
            "id": "s2",
            "tool": "generate_reply",
            "depends_on": ["s1"],
            "args": {"template": "note", "variant_fact": variant},
        },
    ]
    data["plans"]["renew"].pop("confirm")
    data["plans"]["renew"].pop("on_failure")
    data["business_rules"] = []
    data["intents"][0]["reply"] = None
    return Agent.build(parse_config(data), tools)


@pytest.mark.parametrize(
    ("variant", "checked", "unchecked"),
    [
        ("level", "note_yes", "note_1"),  # a number renders _yes/_no, never _1
        ("state", "note_no", "note_for_staff"),  # none renders _no
        ("state", "note_open", "note_1"),
    ],
)
def test_a_variant_reply_checks_what_generate_reply_renders(
    variant: str, checked: str, unchecked: str
) -> None:
    """Found by review: the variants were named ``_<value>`` for any Literal (``note_1``),
    and ``_no`` of an optional text was not checked; now as ``generate_reply`` picks."""
    typo = {"zh": "{typo}", "en": "x"}
    fine = {"zh": "好", "en": "ok"}
    names = {"note_yes", "note_no", "note_open", "note_closed", "note_1", "note_for_staff"}
    good = {name: fine for name in names}
    with pytest.raises(ConfigInvalidError, match=f"template '{checked}' uses"):
        variant_agent(variant, good | {checked: typo}, [levels, generate_reply])
    variant_agent(variant, good | {unchecked: typo}, [levels, generate_reply])


def test_a_vocabulary_entity_as_variant_checks_its_values_templates() -> None:
    data = config(note_printer={"zh": "打印机 {typo}", "en": "x"})
    data["entities"]["product"] = {"kind": "vocabulary", "vocabulary": {"打印机": "printer"}}
    data["plans"]["renew"]["steps"][1]["args"]["variant_fact"] = "product"
    with pytest.raises(ConfigInvalidError, match="template 'note_printer' uses"):
        Agent.build(parse_config(data), [renew, generate_reply])


def test_a_variant_reply_without_its_tool_is_one_problem_among_the_others() -> None:
    data = config()
    data["plans"]["renew"]["steps"][1]["args"]["variant_fact"] = "fines"
    with pytest.raises(ConfigInvalidError, match="unknown tool 'generate_reply'"):
        Agent.build(parse_config(data), [renew])


class Info(BaseModel):
    message: str | None = None


@tool
def info(loan_id: str) -> Info:
    """A reply that may be none."""
    return Info()


def test_an_intent_reply_is_checked_when_the_plans_reply_may_be_none() -> None:
    """Found by review: ``conclude`` renders the intent's reply when the ``reply`` fact is
    none; a plan whose reply is ``str | None`` does not excuse the template."""
    data = config(renewed={"zh": "{order_idd}", "en": "x"})
    data["plans"]["renew"] = {
        "steps": [
            {
                "id": "s1",
                "tool": "info",
                "args": {"loan_id": "$entities.loan_id"},
                "facts": {"reply": "result.message"},
            }
        ]
    }
    data["business_rules"] = []
    with pytest.raises(ConfigInvalidError, match=r"template 'renewed' uses \{order_idd\}"):
        Agent.build(parse_config(data), [info])


def test_a_free_text_variant_does_not_check_other_plans_templates() -> None:
    """Found by review: a text fact may name any ``note_*``; checking each against this
    plan's facts refused ``note_extra``, another plan's template, in a working agent."""
    data = config(note_extra={"zh": "{other_fact}", "en": "x"})
    data["plans"]["renew"]["steps"][1]["args"]["variant_fact"] = "renewal"
    Agent.build(parse_config(data), [renew, generate_reply])


async def test_a_confirmation_whose_value_is_missing_at_run_time_says_so() -> None:
    """A fact the plan publishes only after the step asks: the generic prompt is asked,
    and the run's log says which template failed and why (it used to say nothing, and
    its reply named the template it had not used)."""
    from corral import MemoryStore, Runtime
    from corral.contracts import EventType

    agent = build(confirm_renew={"zh": "续借？罚款 {fines}", "en": "Renew? Fines {fines}"})
    runtime = Runtime(agent, MemoryStore())
    summary = await runtime.start("renew L1")
    assert summary.status.value == "awaiting_confirm"
    events = runtime.store.load_events(summary.run_id)
    asked = next(e for e in events if e.type is EventType.CONFIRMATION_REQUESTED)
    assert "fines" in asked.data["template_problem"]
    assert "confirm_renew" in asked.data["template_problem"]
    reply = [e for e in events if e.type is EventType.REPLY][-1]
    assert reply.data["template"] == "confirm"
    assert reply.data["text"] == asked.data["prompt"]


async def test_a_confirmation_that_renders_carries_no_problem() -> None:
    from corral import MemoryStore, Runtime
    from corral.contracts import EventType

    runtime = Runtime(build(), MemoryStore())
    summary = await runtime.start("renew L1")
    events = runtime.store.load_events(summary.run_id)
    asked = next(e for e in events if e.type is EventType.CONFIRMATION_REQUESTED)
    assert "template_problem" not in asked.data
    assert asked.data["prompt"] == "Renew L1?"


@pytest.mark.parametrize(
    ("variant", "templates", "says"),
    [
        (None, {}, "step s2 renders template 'noet', which is missing"),
        ("fines", {"noet_yes": {"zh": "有", "en": "yes"}}, "renders template 'noet_no'"),
        ("renewal", {}, "renders template 'noet_<value of renewal>', which is missing"),
    ],
)
def test_a_reply_steps_missing_template_is_refused_at_load(
    variant: str | None, templates: dict[str, Any], says: str
) -> None:
    """Found by a walkthrough: ``{template: renewd}`` loaded, and every renewal wrote, then
    failed to render its reply and went to a person (a variant's missing template too).
    A free-text variant may name any ``noet_*``: with none at all it is a typo."""
    data = config(**templates)
    step = data["plans"]["renew"]["steps"][1]
    step["args"] = {"template": "noet"} | ({"variant_fact": variant} if variant else {})
    with pytest.raises(ConfigInvalidError) as info:
        Agent.build(parse_config(data), [renew, generate_reply])
    assert says in info.value.message


def test_corral_run_refuses_a_misspelt_reply_step_template_before_the_write(
    tmp_path: Path,
) -> None:
    """Through the CLI, as the walkthrough met it: exit 2, CONFIG_INVALID, nothing run."""
    old, typo = "args: {template: exchange_done}", "args: {template: exchange_dnoe}"
    err = refused_by_corral_run(tmp_path, old, typo)
    assert "CONFIG_INVALID" in err and "renders template 'exchange_dnoe', which is missing" in err


def test_a_reply_step_whose_template_is_a_reference_is_not_checked_by_name() -> None:
    """Review of 46179b6: ``template: $entities.product`` (one template per product) is
    chosen at run time; the check read the reference as a name and refused the agent."""
    data = config()
    data["plans"]["renew"]["steps"][1]["args"] = {"template": "$entities.loan_id"}
    Agent.build(parse_config(data), [renew, generate_reply])
