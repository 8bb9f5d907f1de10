"""`corral eval --faults` as a user runs it: JSON interface, exit codes, baseline, Markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import AFTERSALES
from tests.helpers import corral_cli, write_agent

AGENT_YAML = """\
name: refunds
default_language: en
entities:
  order_id: {kind: pattern, patterns: ['\\b(A\\d+)\\b']}
intents:
  - name: refund
    rules: [{keywords: [refund], confidence: 0.95}]
    route: plan
    plan: refund
    requires: [order_id]
    reply: done
plans:
  refund:
    steps:
      - {id: s1, tool: refund, args: {order_id: $entities.order_id}}
templates:
  done: {zh: 好了, en: refunded}
"""

TOOLS_PY = """\
from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool


class Done(BaseModel):
    order_id: str


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def refund(order_id: str, ctx: ToolContext) -> Done:
    '''Refund an order; idempotent by key, but with no reconciler to look first.'''
    return Done(order_id=order_id)
"""

EVAL_YAML = """\
cases:
  - {tier: core, m: "refund A1", status: finished}
  - {tier: core, m: "refund A2", status: finished}
"""


def eval_json(home: Path, *args: str, ok: bool = True) -> tuple[int, dict[str, Any]]:
    done = corral_cli(home, "eval", *args, "--json", ok=ok)
    return done.returncode, json.loads(done.stdout)


def test_the_json_report_has_the_five_metrics_and_the_three_counts_and_is_reproducible(
    tmp_path: Path,
) -> None:
    args = (str(AFTERSALES), "--faults", "flaky-30", "--seed", "3")
    code, first = eval_json(tmp_path, *args)
    assert code == 0
    metrics = first["metrics"]
    assert set(metrics) >= {
        "task_success_rate",
        "partial_completion_rate",
        "recoverability",
        "verifiability",
        "cost",
    }
    assert set(metrics["cost"]) == {"tool_calls", "model_calls", "tokens", "money", "wall_s"}
    zero = first["must_be_zero"]
    assert set(zero) == {"duplicate_effects", "fabricated_outcomes", "invented_arguments"}
    assert all(isinstance(v, int) and v == 0 for v in zero.values())
    assert first["fault_profile"] == "flaky-30" and first["seed"] == 3
    assert first["faults"]["cases_with_faults"] > 0 and metrics["recoverability"] is not None
    _, again = eval_json(tmp_path, *args)
    assert again["faults"] == first["faults"] and again["results"] == first["results"]
    _, other = eval_json(tmp_path, str(AFTERSALES), "--faults", "flaky-30", "--seed", "4")
    assert other["faults"] != first["faults"]


LYING_RECONCILER_PY = """\
from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool


class Done(BaseModel):
    order_id: str


def find_refund(order_id: str, ctx: ToolContext) -> Done | None:
    '''Looks in the wrong place: never finds the refund that was made.'''
    return None


@tool(policy=ToolPolicy(kind="write"), reconcile=find_refund)
def refund(order_id: str, ctx: ToolContext) -> Done:
    '''Refund an order: not idempotent, each entry refunds again.'''
    return Done(order_id=order_id)
"""


def lost_answer(tmp_path: Path) -> Path:
    """A fault profile: the first refund acts, and its answer is lost."""
    profile = tmp_path / "lost-answer.yaml"
    profile.write_text("at: {refund: [ambiguous]}\n", encoding="utf-8")
    return profile


def test_a_duplicate_entry_fails_the_eval_though_every_tier_passes(tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "refunds", AGENT_YAML, LYING_RECONCILER_PY, EVAL_YAML)
    code, clean = eval_json(tmp_path, str(agent))
    assert code == 0 and clean["must_be_zero"]["duplicate_effects"] == 0
    profile = str(lost_answer(tmp_path))
    code, faulted = eval_json(tmp_path, str(agent), "--faults", profile, ok=False)
    # its reconciler found nothing, so the write was entered again: it refunded twice
    assert faulted["tiers"] == {"core": 1.0}  # the runs look fine
    assert faulted["must_be_zero"]["duplicate_effects"] == 2  # one per case, counted inside
    assert faulted["faults"]["idempotent_replays"] == 0
    assert code == 1


def test_an_idempotent_write_entered_again_with_its_key_is_a_replay_not_a_duplicate(
    tmp_path: Path,
) -> None:
    """``idempotent=True`` and no reconciler: retried blindly with the same key, it finds
    its first effect; the eval counts the replay apart and passes."""
    agent = write_agent(tmp_path / "refunds", AGENT_YAML, TOOLS_PY, EVAL_YAML)
    code, faulted = eval_json(tmp_path, str(agent), "--faults", str(lost_answer(tmp_path)))
    assert code == 0
    assert faulted["tiers"] == {"core": 1.0}
    assert faulted["must_be_zero"]["duplicate_effects"] == 0
    assert faulted["faults"]["idempotent_replays"] == 2  # one per case: entered twice, once


def test_baseline_lists_regressions_and_markdown_is_written(tmp_path: Path) -> None:
    agent = write_agent(tmp_path / "refunds", AGENT_YAML, TOOLS_PY, EVAL_YAML)
    _, before = eval_json(tmp_path, str(agent))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(before), encoding="utf-8")
    refused = tmp_path / "refused.yaml"
    refused.write_text("at: {refund: [permanent]}\n", encoding="utf-8")
    report = tmp_path / "report.md"
    code, after = eval_json(
        tmp_path,
        str(agent),
        "--faults",
        str(refused),
        "--baseline",
        str(baseline),
        "--markdown",
        str(report),
        ok=False,
    )
    assert code == 1
    changes = after["since_baseline"]
    assert changes["regressions"] == ["001 refund A1", "002 refund A2"]
    assert changes["fixes"] == [] and changes["new_failure_modes"]
    text = report.read_text(encoding="utf-8")
    assert "| core | 0.0 % |" in text and "| duplicate effects | 0 |" in text
    assert "regressions: 001 refund A1, 002 refund A2" in text
    bad = tmp_path / "not-a-report.json"
    bad.write_text("[]", encoding="utf-8")
    done = corral_cli(tmp_path, "eval", str(agent), "--baseline", str(bad), ok=False)
    assert done.returncode != 0 and "CONFIG_INVALID" in done.stdout + done.stderr


def test_an_unknown_profile_is_a_clear_error(tmp_path: Path) -> None:
    done = corral_cli(tmp_path, "eval", str(AFTERSALES), "--faults", "flaky-99", ok=False)
    assert done.returncode != 0
    assert "unknown fault profile 'flaky-99'" in done.stdout + done.stderr


def test_a_fault_profile_that_names_nothing_the_agent_has_is_refused(tmp_path: Path) -> None:
    """Found by a hostile review: ``only_tools: [get_ordr]`` or ``at: {model:plann: ...}``
    struck nothing, and the eval passed at 100 % with no fault injected."""
    agent = write_agent(tmp_path / "agent", AGENT_YAML, TOOLS_PY, EVAL_YAML)
    for profile, says in (
        ("tools: {transient: 1.0}\nonly_tools: [refnd]\n", "names tools the agent lacks"),
        ("at: {'model:plann': [cyclic_plan]}\n", "no layer asks a model as 'plann'"),
    ):
        path = tmp_path / "profile.yaml"
        path.write_text(profile, encoding="utf-8")
        done = corral_cli(tmp_path / "home", "eval", str(agent), "--faults", str(path), ok=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "CONFIG_INVALID" in done.stdout + done.stderr and says in done.stdout + done.stderr


def test_a_crash_in_a_read_before_anything_was_stored_is_followed_by_a_new_process(
    tmp_path: Path,
) -> None:
    """Found by a hostile review: a crash scripted on a read of a run that had stored
    nothing yet ended the eval with a traceback ("a run crashed but none is left
    unfinished in the store"); the client sends its message again, as after a real one."""
    from tests.conftest import ORDERS

    profile = tmp_path / "crash.yaml"
    profile.write_text("at: {get_order: [crash]}\n", encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text('cases:\n  - {m: "我的快递到哪了 OD2611200002"}\n', encoding="utf-8")
    code, report = eval_json(
        tmp_path / "home", str(ORDERS), "--suite", str(suite), "--faults", str(profile), ok=False
    )
    assert code == 0, report
    assert report["faults"]["injected"] == {"crash": 1} and report["pass_rate"] == 1.0


def test_a_crash_in_a_new_run_does_not_resume_an_earlier_paused_one(tmp_path: Path) -> None:
    """Review of 7307782: the crashed turn's new run had stored nothing, so the newest run
    not ended was the case's first one, paused for a confirmation; it was resumed with no
    input, and RUN_NOT_RESUMABLE aborted the eval."""
    from tests.conftest import ORDERS

    profile = tmp_path / "crash.yaml"
    profile.write_text("at: {get_logistics: [crash]}\n", encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    first = "我想改一下 OD2611250001 的收货地址，改到上海市静安区南京西路1号"
    suite.write_text(
        f'cases:\n  - {{m: "{first}", then: ["我的快递到哪了 OD2611200002"]}}\n', encoding="utf-8"
    )
    code, report = eval_json(
        tmp_path / "home", str(ORDERS), "--suite", str(suite), "--faults", str(profile), ok=False
    )
    assert code in (0, 1) and report["cases"] == 1, report
    assert report["faults"]["injected"] == {"crash": 1}


def test_faults_say_the_recorded_cases_they_cannot_strike(tmp_path: Path) -> None:
    """Found on main: ``--faults`` over a suite of recorded cases reported the profile as
    if it had struck them; a replay takes every tool result from its log, so none was."""
    home = tmp_path / "home"
    started = corral_cli(home, "run", str(AFTERSALES), "我想申请换新", "--json")
    run_id = json.loads(started.stdout)["run_id"]
    suite = tmp_path / "recorded.yaml"
    corral_cli(home, "record", run_id, "--suite", str(suite))
    args = ("eval", str(AFTERSALES), "--suite", str(suite), "--faults", "flaky-30")
    report = json.loads(corral_cli(home, *args, "--json").stdout)
    assert report["faults"]["replayed_unstruck"] == 1
    shown = corral_cli(home, *args).stdout
    assert "not in the 1 recorded cases" in shown
