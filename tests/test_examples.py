"""Each example's eval suite through the public Runtime, held to the seed 003 tier bars."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import Agent, load_agent
from corral.testing.evaluation import load_suite, run_suite
from tests.conftest import ROOT

EXAMPLES = ["aftersales", "orders", "triage"]


@pytest.mark.parametrize("name", EXAMPLES)
async def test_example_eval_suite_meets_its_tiers(name: str, tmp_path: Path) -> None:
    folder = ROOT / "examples" / name
    counter = iter(range(10_000))

    def fresh_agent() -> Agent:
        data = tmp_path / f"data{next(counter)}"
        return load_agent(folder, data_dir=data, cache_dir=tmp_path / "cache")

    report = await run_suite(fresh_agent, load_suite(folder / "eval.yaml"))
    failures = report.as_json()["failures"]
    core = [f for f in failures if f["tier"] == "core"]
    assert core == [], core
    assert report.pass_rate("regular") >= 0.95, failures
    assert report.tiers_met()
