"""Each example's eval suite, through the public Runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from corral import Agent, MemoryStore, Runtime, load_agent
from corral.testing import FixedEffects
from tests.conftest import ROOT

SUITE = yaml.safe_load((ROOT / "examples" / "aftersales" / "eval.yaml").read_text("utf-8"))


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Agent:
    return load_agent(ROOT / "examples" / "aftersales", data_dir=tmp_path_factory.mktemp("biz"))


@pytest.mark.parametrize("case", SUITE["cases"], ids=[c["name"] for c in SUITE["cases"]])
async def test_aftersales_eval_case(agent: Agent, case: dict[str, Any], tmp_path: Path) -> None:
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start(case["messages"][0])
    for message in case["messages"][1:]:
        summary = await runtime.resume(summary.run_id, answer=message)
    if case.get("approve") is not None:
        summary = await runtime.resume(summary.run_id, approve=case["approve"])
    expect = case["expect"]
    if "intent" in expect:
        assert summary.intent is not None and summary.intent.label == expect["intent"]
    assert summary.status.value == expect["status"]
    if "outcome" in expect:
        assert summary.outcome == expect["outcome"]
    if "reply_contains" in expect:
        assert expect["reply_contains"] in (summary.reply or "")
    if "tools" in expect:
        ran = [s.tool for s in summary.steps if s.attempts]
        assert ran == expect["tools"]
