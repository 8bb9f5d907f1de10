"""Gates and verifiers named in agent.yaml run wherever the folder is loaded.

Before, they could only be passed to ``Agent.build`` in Python: ``corral run``, ``serve``,
``worker`` and ``replay`` load the folder, so an agent's own checks silently did not run
there. Now ``gates:`` and ``verifiers:`` name objects in ``tools.py``; a name that is not
there, or is not a gate, fails the load, and a config that names them cannot be built
without them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral import load_agent, parse_config
from corral.agent import Agent
from corral.errors import ConfigInvalidError
from tests.helpers import corral_cli
from tests.test_config_robustness import AGENT_YAML, TOOLS, agent_dir, fails_at_load

CHECKS = '''

from corral import Proposal, Refuse, Verdict


class ClosedToday:
    """The user's own rule in code: no lookups today."""

    def check(self, proposal, run):
        if proposal.tool.name == "lookup":
            return Refuse("CLOSED_TODAY", "lookups are closed today")
        return proposal


class NeverEmpty:
    async def check(self, outcome, run):
        return Verdict(passed=False, check="success", reason="judged empty", code="EMPTY")


closed_today = ClosedToday()
never_empty = NeverEmpty()
'''


def folder_with(tmp_path: Path, declaration: str) -> Path:
    return agent_dir(tmp_path, AGENT_YAML + declaration, TOOLS + CHECKS)


def run_json(tmp_path: Path, folder: Path) -> dict[str, object]:
    done = corral_cli(tmp_path / "home", "run", str(folder), "go", "--json", ok=False)
    return dict(json.loads(done.stdout))


def test_a_gate_named_in_agent_yaml_runs_from_the_cli(tmp_path: Path) -> None:
    summary = run_json(tmp_path, folder_with(tmp_path, "gates: [closed_today]\n"))
    steps = summary["steps"]
    assert isinstance(steps, list)
    assert (steps[0]["status"], steps[0]["error_code"]) == ("failed", "CLOSED_TODAY")


def test_a_verifier_named_in_agent_yaml_runs_from_the_cli(tmp_path: Path) -> None:
    summary = run_json(tmp_path, folder_with(tmp_path, "verifiers: [never_empty]\n"))
    steps = summary["steps"]
    assert isinstance(steps, list)
    assert (steps[0]["status"], steps[0]["error_code"]) == ("failed", "EMPTY")


@pytest.mark.parametrize(
    ("declaration", "problem"),
    [
        ("gates: [closed_tody]\n", "gate 'closed_tody': tools.py defines no such name"),
        ("gates: [ClosedToday]\n", "gate 'ClosedToday': not a gate"),
        ("verifiers: [Proposal]\n", "verifier 'Proposal': not a verifier"),
    ],
)
def test_a_name_that_is_not_a_gate_in_tools_py_fails_the_load(
    tmp_path: Path, declaration: str, problem: str
) -> None:
    assert problem in fails_at_load(tmp_path, folder_with(tmp_path, declaration))


def test_a_config_that_names_gates_is_not_built_without_them(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, "gates: [closed_today]\n")
    loaded = load_agent(folder, data_dir=tmp_path / "data")
    assert type(loaded.gates[-1]).__name__ == "ClosedToday"
    with pytest.raises(ConfigInvalidError, match="names gates closed_today, which were not"):
        Agent.build(loaded.config, list(loaded.tools))
    assert parse_config({**loaded.config.model_dump(), "gates": []}).gates == []


def test_a_gate_named_twice_is_refused() -> None:
    with pytest.raises(ConfigInvalidError, match="named twice"):
        parse_config({**parse_config_dict(), "gates": ["closed_today", "closed_today"]})


def parse_config_dict() -> dict[str, object]:
    import yaml

    loaded = yaml.safe_load(AGENT_YAML)
    assert isinstance(loaded, dict)
    return loaded
