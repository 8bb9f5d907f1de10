"""benchmarks/reliability/run.py: its baseline can fail, and corral does not, on one slice.

A benchmark whose naive agent never duplicates nor fabricates proves nothing, so a tiny
slice (the first ticket of each tier of the triage suite, and the first after-sales case of
each tier, under ``flaky-30`` and ``crashy``, seed 0) must show the naive agent entering a
write twice or claiming an outcome that did not happen, while corral, on the very same
fault schedules, shows zero of each. ``--quick`` runs the same code on more cases; the
slice keeps this test to seconds. No speed is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "reliability" / "run.py"


def bench(*flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(SCRIPT), *flags]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    flags = ["--suite", "triage", "--suite", "aftersales", "--per-tier", "1", "--seed", "0"]
    done = bench(*flags, "--profile", "flaky-30", "--profile", "crashy", "--json")
    assert done.returncode == 0, done.stderr
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def test_every_row_has_the_interface_keys(rows: list[dict[str, Any]]) -> None:
    assert {(r["agent"], r["suite"], r["profile"]) for r in rows} == {
        (agent, suite, profile)
        for agent in ("corral", "naive")
        for suite in ("triage", "aftersales")
        for profile in ("flaky-30", "crashy")
    }
    for row in rows:
        assert {"agent", "suite", "fault_rate", "metrics", "must_be_zero"} <= set(row)
        assert row["fault_rate"] == (0.3 if row["profile"] == "flaky-30" else "crashy")
        assert set(row["metrics"]) == {
            "task_success_rate",
            "partial_completion_rate",
            "recoverability",
            "verifiability",
            "cost",
        }
        counts = row["must_be_zero"]
        assert set(counts) == {"duplicate_effects", "fabricated_outcomes", "invented_arguments"}
        assert all(isinstance(n, int) for n in counts.values())


def entered_again(row: dict[str, Any]) -> int:
    """Writes entered again for one key: duplicates, and replays of idempotent writes.

    The example tools are idempotent by key, so the puppet's second entries (with its
    stable key) are replays, which find the first effect: not duplicate effects.
    """
    return int(row["must_be_zero"]["duplicate_effects"] + row["faults"]["idempotent_replays"])


def test_the_naive_agent_duplicates_or_fabricates_where_corral_does_not(
    rows: list[dict[str, Any]],
) -> None:
    naive = [r for r in rows if r["agent"] == "naive"]
    harm = sum(entered_again(r) + r["must_be_zero"]["fabricated_outcomes"] for r in naive)
    assert harm > 0, naive
    # a crash after a write acted: the puppet starts over and enters that write again
    crashed = [r for r in naive if r["profile"] == "crashy"]
    assert sum(entered_again(r) for r in crashed) > 0
    for row in rows:
        if row["agent"] == "corral":
            assert row["must_be_zero"] == {
                "duplicate_effects": 0,
                "fabricated_outcomes": 0,
                "invented_arguments": 0,
            }, row
            assert row["tiers"]["core"] == 1.0, row


def test_both_agents_met_faults_on_the_same_schedule(rows: list[dict[str, Any]]) -> None:
    for suite in ("triage", "aftersales"):
        flaky = {r["agent"]: r for r in rows if r["suite"] == suite and r["profile"] == "flaky-30"}
        assert flaky["corral"]["faults"]["cases_with_faults"] > 0
        assert flaky["naive"]["faults"]["cases_with_faults"] > 0


def test_the_table_names_both_agents_side_by_side() -> None:
    done = bench("--suite", "aftersales", "--per-tier", "1", "--profile", "crashy", "--markdown")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("| aftersales")]
    assert [line.split(" | ")[1] for line in lines] == ["corral", "naive"]
    assert "total:" in done.stdout
