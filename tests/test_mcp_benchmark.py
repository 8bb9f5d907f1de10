"""benchmarks/mcp_tools.py keeps running: a smoke run, no speed asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra

import_extra("mcp", REQUIRE_ALL)


def test_a_tiny_run_measures_every_way() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "benchmarks" / "mcp_tools.py")]
    command += ["--calls", "3", "--rounds", "1", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for figure in ("wall_us", "cpu_us"):
        assert set(result[figure]) == {"bare", "connection", "tool call"}
        assert all(value > 0 for value in result[figure].values())
