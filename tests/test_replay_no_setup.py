"""``corral replay`` runs no ``setup()``: it takes every tool result from the stored log.

The defect: replay loaded the agent as ``corral run`` does, so the ``setup(data_dir)`` of
its tools.py ran (and its teardown): a business database seeded, a service started, for
a command that calls no tool. Now replay loads the tools, gates and verifiers without it,
and the tools get empty deps, which no replayed call reaches: a replay that takes another
path reports the divergence instead of calling the tool.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from corral import load_agent
from tests.helpers import corral_cli
from tests.one_intent import one_intent

TOOLS = '''
from pathlib import Path

from corral import ToolContext, tool

HERE = Path(__file__).parent
MARKS = HERE / "marks.txt"


def setup(data_dir: Path):
    with MARKS.open("a") as marks:
        marks.write("open\\n")
    yield {"greeting": "hello"}
    with MARKS.open("a") as marks:
        marks.write("closed\\n")


@tool
def greet(ctx: ToolContext) -> str:
    """Say the greeting from deps."""
    return ctx.deps["greeting"]


@tool
def wave(ctx: ToolContext) -> str:
    """Wave, leaving a mark that it was called."""
    (HERE / "waved.txt").write_text("waved")
    return ctx.deps["greeting"]
'''


def agent_dir(tmp_path: Path, tool: str = "greet") -> Path:
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    config = one_intent("hi", steps=[{"id": "s1", "tool": tool, "args": {}}])
    (folder / "agent.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS, encoding="utf-8")
    return folder


def run_once(tmp_path: Path) -> tuple[Path, Path, str]:
    """The agent folder, the home, and the id of one finished run (its marks removed)."""
    folder = agent_dir(tmp_path)
    home = tmp_path / "home"
    done = corral_cli(home, "run", str(folder), "hi", "--json")
    assert '"status":"finished"' in done.stdout.replace(" ", "")
    marks = folder / "marks.txt"
    assert marks.read_text().split() == ["open", "closed"]  # a run does set up
    marks.unlink()
    run_id = done.stdout.split('"run_id":')[1].split('"')[1]
    return folder, home, run_id


def test_a_replay_runs_no_setup_and_no_teardown(tmp_path: Path) -> None:
    folder, home, run_id = run_once(tmp_path)
    replayed = corral_cli(home, "replay", run_id)
    assert "same path" in replayed.stdout
    assert not (folder / "marks.txt").exists()


def test_a_replay_that_takes_another_path_calls_no_tool(tmp_path: Path) -> None:
    folder, home, run_id = run_once(tmp_path)
    agent_dir(tmp_path, tool="wave")  # the plan now calls a tool the log never recorded
    replayed = corral_cli(home, "replay", run_id, ok=False)
    assert replayed.returncode == 1, replayed.stderr
    assert "diverged" in replayed.stdout
    assert "Traceback" not in replayed.stderr
    assert not (folder / "waved.txt").exists()  # answered from the log, never called
    assert not (folder / "marks.txt").exists()


def test_load_agent_without_setup_gives_empty_deps(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path)
    agent = load_agent(folder, data_dir=tmp_path / "data", setup=False)
    assert "greet" in agent.tools.names()
    assert dict(agent.deps) == {}
    asyncio.run(agent.aclose())
    assert not (folder / "marks.txt").exists()  # no setup, so no teardown either
    assert not (tmp_path / "data").exists()


def test_an_mcp_server_that_names_a_dep_still_gets_its_setup(tmp_path: Path) -> None:
    """Its server is started at load to list its tools, with names setup's deps supply."""
    folder = Path(__file__).resolve().parent / "agents" / "mcp_notes"
    agent = load_agent(folder, data_dir=tmp_path / "data", setup=False)
    try:
        assert "NOTES_DB" in agent.deps
    finally:
        asyncio.run(agent.aclose())
