"""benchmarks/overhead.py keeps running as the core changes: a smoke run, no speed asserted.

The other frameworks come from the ``bench`` extra, which the test environment does not
install; plain asyncio and corral need nothing else, and are what this runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def test_a_quick_run_measures_every_workload_for_plain_asyncio_and_corral() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--quick", "--json"]
    command += ["--only", "plain asyncio", "--only", "corral"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert list(result["medians"]) == ["plain asyncio", "corral"]
    for name in ("plain asyncio", "corral"):
        medians = result["medians"][name]
        for key in ("A.cpu_us", "A.rss_mb", "B.tasks_per_s", "C.cpu_us", "C.bytes"):
            assert medians[key] > 0, (name, key)
    # corral stores its events, so a run takes more room than the baseline's six rows
    assert result["medians"]["corral"]["C.bytes"] > result["medians"]["plain asyncio"]["C.bytes"]
    assert set(result["scaling_us_per_step"]) == {"5", "20", "50"}
    # the baseline's chains are measured in the same run, beside corral's
    assert list(result["scaling"]) == ["plain asyncio", "corral"]
    assert result["scaling"]["corral"] == result["scaling_us_per_step"]
    assert all(set(found) == {"5", "20", "50"} for found in result["scaling"].values())
    # and each one's fixed part, from its 1-step chain
    assert list(result["fixed_part_us"]) == ["plain asyncio", "corral"]


def test_an_unknown_workload_is_refused_with_its_name() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--child", "corral"]
    command += ["Z", "--tasks", "1"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "unknown workload Z" in done.stderr


def test_the_gc_table_of_instructions_py_has_a_row_per_framework_and_workload() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "benchmarks" / "instructions.py"), "--gc-only"]
    command += ["--only", "plain asyncio", "--only", "corral", "--tasks", "40"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ")]
    measured = {(row[0].strip(), row[1].strip()): row for row in rows[1:]}
    assert set(measured) == {(n, w) for n in ("plain asyncio", "corral") for w in ("A", "B")}
    for row in measured.values():
        cpu, gc_share = float(row[2].replace(",", "")), float(row[3].replace(",", ""))
        assert cpu > 0 and 0 <= gc_share <= cpu * 1.5, row


def test_the_cost_per_added_step_leaves_out_a_runs_fixed_part() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from overhead import added_step_costs, scaling_line
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    # a fixed 300 per run and 100 per step: per step by division, 160 / 115 / 106
    per_task = {5: 800.0, 20: 2300.0, 50: 5300.0}
    assert added_step_costs(per_task) == {(5, 20): 100.0, (20, 50): 100.0}
    line = scaling_line({"scaling_us_per_step": {"5": 160.0, "20": 115.0, "50": 106.0}})
    assert "5→20 steps: 100 µs, 20→50 steps: 100 µs (largest / smallest: +0 %)" in line


def test_the_scaling_line_shows_one_added_step_cost_and_survives_a_zero() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from overhead import scaling_line
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    two = scaling_line({"scaling_us_per_step": {"5": 160.0, "20": 115.0}})
    assert two.endswith("per added step: 5→20 steps: 100 µs")
    # 5 → 20 adds 100 per step, 20 → 50 adds nothing: no ratio over a zero
    flat = scaling_line({"scaling_us_per_step": {"5": 160.0, "20": 115.0, "50": 46.0}})
    assert flat.endswith("20→50 steps: 0.0 µs")


def test_the_scaling_lines_show_each_framework_measured_side_by_side() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from overhead import scaling_line
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    per_step = {"Burr": {"5": 55.0, "20": 43.0}, "corral": {"5": 68.0, "20": 47.0}, "x": {}}
    burr, corral = scaling_line({"scaling": per_step}).splitlines()
    # Burr: 275 then 860 per run, 39 per added step; corral 340 then 940, 40
    assert burr.startswith("Burr, CPU per step: 5 steps: 55 µs/step")
    assert burr.endswith("per added step: 5→20 steps: 39 µs")
    assert corral.startswith("corral, CPU per step: 5 steps: 68 µs/step")
    assert corral.endswith("per added step: 5→20 steps: 40 µs")


def test_the_fixed_part_is_the_one_step_chain_less_what_a_step_adds() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from overhead import fixed_line, fixed_parts
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    # Burr: 38 fixed and 40 per step; corral: 123 and 40; a framework without chains: none
    per_task = {"Burr": {1: 78.0, 5: 238.0}, "corral": {1: 163.0, 5: 323.0}, "x": {5: 9.0}}
    assert fixed_parts(per_task) == {"Burr": 38.0, "corral": 123.0}
    line = fixed_line({"fixed_part_us": fixed_parts(per_task)})
    assert line.endswith("step): Burr 38 µs, corral 123 µs")
    assert fixed_line({"scaling_us_per_step": {"5": 1.0}}) == ""  # a result from before it
