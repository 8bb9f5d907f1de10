"""benchmarks/profile_fixed.py keeps running as the core changes: a smoke run, no speed asserted."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = str(ROOT / "benchmarks" / "profile_fixed.py")


def _run(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_it_measures_the_reply_route_and_the_chains_and_splits_off_the_fixed_part() -> None:
    lines = _run("--rounds", "1", "--tasks", "5").splitlines()
    names = [line.split("  ")[0].strip() for line in lines]
    assert names == [
        "reply route (0 steps)",
        "1-step chain",
        "5-step chain",
        "5-step DAG",
        "per step",
        "fixed (1-step - step)",
    ]
    assert all(line.rstrip().endswith(("µs per run", "µs")) for line in lines)


def test_a_profile_lists_functions_with_their_calls_per_run() -> None:
    lines = _run("--profile", "0", "--tasks", "5", "--top", "5").splitlines()
    assert lines[0].endswith("µs per run") and "calls per run" in lines[0]
    assert lines[1].split() == ["calls/run", "own", "µs", "cum", "µs", "function"]
    assert len(lines) == 2 + 5
