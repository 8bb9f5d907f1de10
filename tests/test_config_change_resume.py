"""A config deployed while runs are paused: each resumes, and answers to every rule.

An earlier review found that adding a business rule on a new fact (the plan's lookup now
publishes ``archived``, a rule before the refund reads it) made every refund paused before
the deploy ``PLAN_INVALID`` on resume, approved or rejected: the stored plan never
publishes the fact, so it no longer validated (aftersales dropped such a rule in 2b4a81d
for this). It validates now, and the rule is judged all the same: it cannot be (its fact
is missing), so the refund it guards is not made (a review found that leaving the rule out
let every refund waiting for approval through unchecked). Each command is a fresh CLI
process on the home's SQLite store, as an operator's deploy between two requests would be.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import MemoryStore, RunStatus, Runtime, StepStatus, ToolPolicy, tool
from corral.testing import FixedEffects
from corral.tools.spec import ToolSpec
from tests.conftest import ORDERS
from tests.helpers import build_agent, corral_cli

REFUND = "我要退款 OD2611100003"  # 699 CNY left to refund, a recent (not archived) order
OTHER_REFUND = "东西有问题想退钱 OD2611200002"


class Cancelled(BaseModel):
    ref: str


ARCHIVED_RULE = """\
  - name: no_refund_of_an_archived_order
    before_tool: request_refund
    require: facts.archived == false
    refusal: refund_not_possible
"""
PUBLISHED_LOOKUP = "refundable: result.refundable_cny}"


def paused_refund(tmp_path: Path) -> tuple[Path, str]:
    """A copy of the orders agent and a refund of it paused for confirmation."""
    agent = tmp_path / "orders"
    shutil.copytree(ORDERS, agent)
    paused = _json(corral_cli(tmp_path / "home", "run", str(agent), REFUND, "--json"))
    assert paused["status"] == "awaiting_confirm"
    return agent, paused["run_id"]


def deploy(agent: Path, rules: str) -> None:
    """The lookup of the refund plan publishes ``archived`` too, and ``rules`` come first."""
    path = agent / "agent.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count(PUBLISHED_LOOKUP) == 1
    text = text.replace(
        PUBLISHED_LOOKUP, "refundable: result.refundable_cny, archived: result.archived}"
    )
    text = text.replace("business_rules:\n", "business_rules:\n" + rules, 1)
    path.write_text(text, encoding="utf-8")


def resume(tmp_path: Path, agent: Path, run_id: str, *flags: str) -> dict[str, Any]:
    args = ("resume", run_id, *flags, "--agent", str(agent), "--json")
    return _json(corral_cli(tmp_path / "home", *args))


def refunded(tmp_path: Path, agent: Path) -> float:
    with sqlite3.connect(tmp_path / "home" / "data" / agent.name / "orders.db") as db:
        query = "SELECT sum(amount_cny) FROM refunds WHERE order_id = 'OD2611100003'"
        return float(db.execute(query).fetchone()[0] or 0)


def stored_events(tmp_path: Path, run_id: str) -> str:
    """The run's stored event rows, as text."""
    with sqlite3.connect(tmp_path / "home" / "corral.db") as db:
        rows = db.execute("SELECT data FROM corral_events WHERE run_id = ?", (run_id,))
        return "\n".join(str(data) for (data,) in rows)


def _json(done: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_a_refund_paused_before_a_rule_on_a_new_fact_resumes_and_is_not_made(
    tmp_path: Path,
) -> None:
    agent, run_id = paused_refund(tmp_path)
    before = refunded(tmp_path, agent)
    deploy(agent, ARCHIVED_RULE)
    done = resume(tmp_path, agent, run_id, "--approve")
    assert done["status"] == "finished" and done["outcome"] == "refused", done
    assert refunded(tmp_path, agent) == before
    unjudged = "no_refund_of_an_archived_order: cannot be judged"
    assert unjudged in stored_events(tmp_path, run_id)
    # a run started after the deploy has the fact: the rule judges it, and it goes on
    fresh = _json(corral_cli(tmp_path / "home", "run", str(agent), OTHER_REFUND, "--json"))
    assert fresh["status"] == "awaiting_confirm"
    judged = "no_refund_of_an_archived_order: facts.archived == false is true"
    assert judged in stored_events(tmp_path, fresh["run_id"])


def test_one_paused_before_the_deploy_can_be_rejected(tmp_path: Path) -> None:
    agent, run_id = paused_refund(tmp_path)
    deploy(agent, ARCHIVED_RULE)
    before = refunded(tmp_path, agent)
    done = resume(tmp_path, agent, run_id, "--reject")
    # read as the person's no, not as a refusal by the rule that cannot be judged (which
    # came first): a declined step never runs, so no rule has to judge it (found by a
    # review: the reply told the person the refund was refused)
    assert done["status"] == "finished" and done["outcome"] == "cancelled", done
    steps = {s["id"]: (s["status"], s["error_code"]) for s in done["steps"]}
    assert ("skipped", "REJECTED_BY_USER") in steps.values(), steps
    assert "cannot be judged" not in stored_events(tmp_path, run_id)
    assert refunded(tmp_path, agent) == before


def test_a_new_rule_on_a_fact_the_paused_plan_publishes_still_refuses(tmp_path: Path) -> None:
    """A new rule on a fact the old plan does publish judges it as any run's."""
    agent, run_id = paused_refund(tmp_path)
    before = refunded(tmp_path, agent)
    small_only = """\
  - name: refunds_up_to_500
    before_tool: request_refund
    require: facts.refundable <= 500
    refusal: refund_not_possible
"""
    deploy(agent, ARCHIVED_RULE + small_only)
    done = resume(tmp_path, agent, run_id, "--approve")
    assert done["status"] == "finished" and done["outcome"] == "refused", done
    assert refunded(tmp_path, agent) == before


async def test_a_no_given_before_a_deploy_that_drops_the_approval_is_still_a_no() -> None:
    """A review: once the deploy dropped the tool's approval (and added a rule it breaks),
    the step declined before it was written on resume: the rules gate let it past as
    declined and the confirmation gate no longer asked about it."""
    entered: list[int] = []

    def make(confirm: bool) -> ToolSpec:
        @tool(policy=ToolPolicy(kind="write", requires_confirmation=confirm, idempotent=True))
        def cancel_order(amount: int) -> Cancelled:
            entered.append(amount)
            return Cancelled(ref="c1")

        return cancel_order

    steps = [{"id": "w", "tool": "cancel_order", "args": {"amount": 500}}]
    rules = [
        {
            "name": "small_only",
            "before_tool": "cancel_order",
            "require": "args.amount <= 100",
            "refusal": "too_much",
        }
    ]
    templates = {"too_much": {"zh": "金额过大", "en": "too much"}}
    store = MemoryStore()
    before = build_agent([make(True)], steps, templates=templates)
    paused = await Runtime(before, store, effects=FixedEffects()).start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    for rules_after in ([], rules):  # the deploy drops the approval, with or without a rule
        store_copy = MemoryStore()
        for run in store.list_runs():
            store_copy.save(run, store.load_events(run.run_id))
        after = build_agent([make(False)], steps, business_rules=rules_after, templates=templates)
        done = await Runtime(after, store_copy, effects=FixedEffects()).resume(
            paused.run_id, approve=False
        )
        assert done.status is RunStatus.FINISHED and done.outcome == "cancelled", done
        assert [(s.status, s.error_code) for s in done.steps] == [
            (StepStatus.SKIPPED, "REJECTED_BY_USER")
        ]
    assert entered == []
