"""A stored run is driven and replayed only by the agent that started it.

Found on main: ``corral replay RUN --agent`` with another agent's folder "diverged"
(exit 1, the code of a regression) at the first event that agent handles differently,
and ``corral resume RUN --approve --agent`` with another agent failed with "no intent
named 'cancel'", or, had the two agents shared an intent name, would have run the other
agent's tools on the stored run. A recorded case of another agent's run failed as the
agent's regression. Each is now refused before anything runs, naming the run's agent.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus
from corral.errors import ConfigInvalidError, RunNotFoundError
from corral.runtime.replay import replay_run
from tests.conftest import AFTERSALES, ORDERS
from tests.helpers import corral_cli


def orders_run(home: Path, line: str) -> str:
    done = corral_cli(home, "run", str(ORDERS), line, "--json")
    return str(json.loads(done.stdout)["run_id"])


def test_replay_with_another_agent_is_refused_not_a_divergence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_id = orders_run(home, "OD2611250001 到哪了")
    done = corral_cli(home, "replay", run_id, "--agent", str(AFTERSALES), "--json", ok=False)
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "CONFIG_INVALID"
    assert "started by agent 'orders'" in error["message"]
    assert corral_cli(home, "replay", run_id).returncode == 0  # its own agent: same path


def test_resume_with_another_agent_is_refused_and_the_run_still_waits(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_id = orders_run(home, "OD2611250001 取消订单")
    done = corral_cli(
        home, "resume", run_id, "--approve", "--agent", str(AFTERSALES), "--json", ok=False
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "started by agent 'orders'" in json.loads(done.stdout)["error"]["message"]
    shown = corral_cli(home, "show", run_id, "--json")
    assert json.loads(shown.stdout)["status"] == "awaiting_confirm"


def test_a_runtime_resumes_only_its_own_agents_runs(tmp_path: Path) -> None:
    async def talk() -> None:
        store = MemoryStore()
        orders = Runtime(load_agent(ORDERS, data_dir=tmp_path), store)
        waiting = await orders.start("OD2611250001 取消订单")
        assert waiting.status is RunStatus.AWAITING_CONFIRM
        other = Runtime(load_agent(AFTERSALES, data_dir=tmp_path), store)
        with pytest.raises(RunNotFoundError, match="belongs to agent 'orders'"):
            await other.resume(waiting.run_id, approve=True)
        events = await orders.events(waiting.run_id)
        with pytest.raises(ConfigInvalidError, match="started by agent 'orders'"):
            await replay_run(other.agent, events)
        assert (await orders.summary(waiting.run_id)).status is RunStatus.AWAITING_CONFIRM

    asyncio.run(talk())


def test_an_eval_of_another_agents_recorded_run_is_a_broken_suite(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_id = orders_run(home, "OD2611250001 到哪了")
    agent = tmp_path / "aftersales"
    shutil.copytree(AFTERSALES, agent)
    suite = agent / "recorded.yaml"
    corral_cli(home, "record", run_id, "--suite", str(suite))
    done = corral_cli(home, "eval", str(agent), "--suite", str(suite), "--json", ok=False)
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "CONFIG_INVALID" and "is a run of agent 'orders'" in error["message"]
