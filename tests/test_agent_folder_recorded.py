"""A run records its agent's folder as an absolute path: resumable from anywhere.

The defect: ``corral run examples/aftersales ...`` recorded ``examples/aftersales`` as
the user typed it, and ``corral resume RUN --approve`` from another working directory (an
operator's shell, a cron job) failed with "examples/aftersales has no agent.yaml", no hint.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from corral import Agent, MemoryStore, Runtime, load_agent
from corral.cli.examples import LEFT_BEHIND
from corral.store.sql import SqlStore
from tests.conftest import AFTERSALES
from tests.serving import EXCHANGE

ROOT = Path(__file__).resolve().parents[1]


def corral_in(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``corral ARGS --home HOME`` run from ``cwd``, as a user in that folder runs it."""
    return subprocess.run(
        [sys.executable, "-m", "corral", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src")},
        timeout=180,
    )


def test_a_run_started_from_a_relative_folder_is_resumed_from_another_directory(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    shutil.copytree(AFTERSALES, work / "desk", ignore=LEFT_BEHIND)
    home = tmp_path / "home"
    started = corral_in(work, home, "run", "desk", EXCHANGE, "--json")
    assert started.returncode == 0, started.stderr
    paused = json.loads(started.stdout)
    assert paused["status"] == "awaiting_confirm"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = corral_in(elsewhere, home, "resume", paused["run_id"], "--approve", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "finished"
    replayed = corral_in(elsewhere, home, "replay", paused["run_id"])
    assert replayed.returncode == 0, replayed.stderr


def test_a_run_that_recorded_a_relative_folder_says_to_pass_agent(tmp_path: Path) -> None:
    """Runs stored before the fix hold the folder as typed: the error says what to do."""
    home = tmp_path / "home"
    home.mkdir()
    desk = tmp_path / "desk"
    shutil.copytree(AFTERSALES, desk, ignore=LEFT_BEHIND)
    loaded = load_agent(desk, data_dir=home / "business")
    assert loaded.root == desk  # absolute already: tmp_path is
    relative = Agent.build(loaded.config, list(loaded.tools), deps=loaded.deps, root=Path("desk"))
    store = SqlStore.open(home / "corral.db")
    paused = asyncio.run(Runtime(relative, store).start(EXCHANGE))
    store.engine.dispose()
    done = corral_in(tmp_path / "home", home, "resume", paused.run_id, "--approve", "--json")
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "CONFIG_INVALID"
    assert "started with the agent folder desk" in error["message"]
    assert "pass --agent AGENT_DIR" in error["hint"]
    fixed = corral_in(
        tmp_path / "home", home, "resume", paused.run_id, "--approve", "--agent", str(desk)
    )
    assert fixed.returncode == 0, fixed.stderr


def test_the_folders_may_be_given_as_text(tmp_path: Path) -> None:
    """Found checking the stop by hand: ``load_agent("examples/orders", data_dir="/tmp/x")``
    failed in ``setup()`` with "'str' object has no attribute 'parent' ... fix the agent's
    tools.py"; ``agent_dir`` took a str, the other folders did not."""
    agent = load_agent(str(AFTERSALES), data_dir=str(tmp_path / "data"), cache_dir=str(tmp_path))
    summary = asyncio.run(Runtime(agent, MemoryStore()).start(EXCHANGE))
    assert summary.status.value == "awaiting_confirm"
    assert (tmp_path / "data").is_dir()
