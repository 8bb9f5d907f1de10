"""benchmarks/tracing_overhead.py keeps running: a smoke run, no speed asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra

import_extra("opentelemetry.sdk", REQUIRE_ALL)


def test_a_tiny_run_measures_every_mode_of_both_workloads() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "benchmarks" / "tracing_overhead.py")]
    command += ["--runs", "2", "--rounds", "1", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"dag", "demo"}
    for modes in result.values():
        assert set(modes) == {"off", "in-memory", "console"}
        assert all(cpu > 0 for cpu in modes.values())
